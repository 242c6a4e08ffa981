// Capture recordings and their extrapolation to the full graph
// (graphgen/capture_recording.h, graphgen/extrapolate.h, docs/capture.md).
// Stand-in for a GPU capture: the recordings are the real ranks' view of the
// graph a job file gives (RecordingFromGraph), written and parsed back in the
// recording format; their extrapolation must give that graph again.
#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "google/protobuf/util/message_differencer.h"
#include "graphgen/capture_recording.h"
#include "graphgen/cli.h"
#include "graphgen/extrapolate.h"
#include "graphgen/job_spec.h"
#include "proto/graph_file.h"
#include "test/graphgen_test_util.h"

namespace {

namespace pg = prism::graph;
using prism::graphgen::Extrapolate;
using prism::graphgen::ExtrapolationOptions;
using prism::graphgen::Recording;
using prism::graphgen::testing::GraphOf;
using prism::graphgen::testing::SpecOf;

std::string ExampleText(const std::string& file) {
  std::ifstream in(std::string(PRISM_EXAMPLES_DIR) + "/" + file);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// Rank `rank`'s recording of `g`, through the file format.
Recording Recorded(const pg::Graph& g, uint32_t rank) {
  auto rec = prism::graphgen::RecordingFromGraph(g, rank);
  REQUIRE(rec.ok());
  auto parsed = prism::graphgen::ParseRecording(prism::graphgen::EncodeRecording(*rec), "rank.capture.jsonl");
  INFO(parsed.status().message());
  REQUIRE(parsed.ok());
  return *parsed;
}

std::vector<Recording> RecordedRanks(const pg::Graph& g, const std::vector<uint32_t>& ranks) {
  std::vector<Recording> out;
  for (uint32_t r : ranks) out.push_back(Recorded(g, r));
  return out;
}

// The graph without what a capture cannot know (job name and attributes, the parallel layout).
pg::Graph Comparable(pg::Graph g) {
  g.clear_job();
  g.clear_layout();
  g.clear_format_version();
  return g;
}

void CheckSameGraph(const pg::Graph& expected, const pg::Graph& got) {
  google::protobuf::util::MessageDifferencer diff;
  std::string report;
  diff.ReportDifferencesToString(&report);
  const bool same = diff.Compare(Comparable(expected), Comparable(got));
  INFO(report.substr(0, 2000));
  CHECK(same);
}

// The job file's graph, and the extrapolation of `slice`'s recordings of it
// (with the job file's cluster); REQUIREs that both succeed.
std::pair<pg::Graph, prism::graphgen::Extrapolation> JobAndExtrapolation(const std::string& yaml,
                                                                         const std::vector<uint32_t>& slice) {
  const pg::Graph job = GraphOf(yaml);
  ExtrapolationOptions options;
  options.cluster = SpecOf(yaml).cluster;
  auto x = Extrapolate(RecordedRanks(job, slice), options);
  INFO(x.status().message());
  REQUIRE(x.ok());
  return {job, *x};
}

}  // namespace

TEST_CASE("capture: extrapolating ranks 0 and 512 of train-gpt-1024 gives the job file's graph, op for op") {
  const auto [job, extrapolation] = JobAndExtrapolation(ExampleText("train-gpt-1024.yaml"), {0, 512});
  const auto* x = &extrapolation;
  REQUIRE(pg::ValidateGraph(x->graph).ok());
  CheckSameGraph(job, x->graph);
  // op for op, rank by rank, said plainly too
  for (uint32_t r : {0u, 1u, 511u, 512u, 777u, 1023u}) {
    const auto& a = job.programs(static_cast<int>(job.ranks(static_cast<int>(r)).program()));
    const auto& b = x->graph.programs(static_cast<int>(x->graph.ranks(static_cast<int>(r)).program()));
    REQUIRE(a.ops_size() == b.ops_size());
    for (int i = 0; i < a.ops_size(); ++i) CHECK(google::protobuf::util::MessageDifferencer::Equals(a.ops(i), b.ops(i)));
  }
  CHECK(x->Summary() ==
        "measured: ranks 0, 512 (2 of 1024)\n"
        "pp-stage-0: 512 ranks (0-511), 511 extrapolated from rank 0 (measured: 0)\n"
        "pp-stage-1: 512 ranks (512-1023), 511 extrapolated from rank 512 (measured: 512)\n");
  CHECK(x->graph.job().attributes().at("capture.measured") == "0,512");
  CHECK(x->graph.job().attributes().at("capture.pp-stage-1") == "512 ranks (512-1023) from rank 512");
}

TEST_CASE("capture: Megatron's groups, interleaving, SP, DDP and a rank per stage give the job graph back") {
  for (const std::string parallel : {"{tp: 2, pp: 2, dp: 2, global_batch: 8}",
                                     "{tp: 2, pp: 2, vpp: 2, dp: 2, global_batch: 8, sequence_parallel: true}",
                                     "{tp: 2, pp: 4, dp: 2, global_batch: 16, distributed_optimizer: false}"}) {
    INFO(parallel);
    const std::string yaml = prism::graphgen::testing::SmallJobYaml(parallel);
    const pg::Graph plain = GraphOf(yaml);
    const uint32_t pp = plain.layout().pp(), per_stage = plain.ranks_size() / pp;
    std::vector<uint32_t> slice;
    for (uint32_t s = 0; s < pp; ++s) slice.push_back(s * per_stage);
    const auto [job, x] = JobAndExtrapolation(yaml, slice);
    CheckSameGraph(job, x.graph);
  }
}

TEST_CASE("capture: a role without a recorded rank is refused, naming its ranks and one to add") {
  const pg::Graph job = GraphOf(ExampleText("train-gpt-1024.yaml"));
  auto x = Extrapolate(RecordedRanks(job, {0, 1, 2}), {});
  REQUIRE(!x.ok());
  const std::string m(x.status().message());
  INFO(m);
  CHECK(m.find("no recorded rank has the role of ranks 512-1023") != std::string::npos);
  CHECK(m.find("e.g. rank 512") != std::string::npos);
}

TEST_CASE("capture: two recorded ranks of one role whose programs differ are refused, naming the op") {
  const pg::Graph job = GraphOf(ExampleText("train-gpt-1024.yaml"));
  std::vector<Recording> recs = RecordedRanks(job, {0, 2, 512});
  int changed = -1;
  for (size_t i = 0; i < recs[1].ops.size() && changed < 0; ++i)
    if (recs[1].ops[i].has_collective()) {
      recs[1].ops[i].mutable_collective()->set_bytes(recs[1].ops[i].collective().bytes() + 2);
      changed = static_cast<int>(i);
    }
  auto x = Extrapolate(recs, {});
  REQUIRE(!x.ok());
  const std::string m(x.status().message());
  INFO(m);
  CHECK(m.find("ranks 0 and 2 are of one role") != std::string::npos);
  CHECK(m.find("differ at op " + std::to_string(changed)) != std::string::npos);
  CHECK(m.find("does not establish the program's symmetry") != std::string::npos);
}

TEST_CASE("capture: compute of a role is the mean of its recorded ranks, memory that of the lowest") {
  const pg::Graph job = GraphOf(ExampleText("train-gpt-1024.yaml"));
  std::vector<Recording> recs = RecordedRanks(job, {0, 2, 512});
  for (pg::Op& op : recs[1].ops)
    if (op.has_compute()) op.mutable_compute()->set_duration_ns(op.compute().duration_ns() * 3);
  recs[1].header.set_static_memory_bytes(1);
  auto x = Extrapolate(recs, {});
  REQUIRE(x.ok());
  const pg::Program& stage0 = x->graph.programs(0);
  const pg::Program& original = job.programs(0);
  for (int i = 0; i < stage0.ops_size(); ++i)
    if (stage0.ops(i).has_compute())
      CHECK(stage0.ops(i).compute().duration_ns() == original.ops(i).compute().duration_ns() * 2);
  CHECK(stage0.static_memory_bytes() == original.static_memory_bytes());
  CHECK(x->roles[0].measured == std::vector<uint32_t>{0, 2});
  CHECK(x->Summary().find("pp-stage-0: 512 ranks (0-511), 510 extrapolated from rank 0 (measured: 0, 2)") !=
        std::string::npos);
}

TEST_CASE("capture: recordings that disagree on the world or the communicators are refused") {
  const pg::Graph job = GraphOf(ExampleText("train-gpt-1024.yaml"));
  std::vector<Recording> recs = RecordedRanks(job, {0, 512});
  recs[1].comms[3].set_members(0, 1000);
  auto x = Extrapolate(recs, {});
  REQUIRE(!x.ok());
  CHECK(std::string(x.status().message()).find("recorded communicator 3 differently") != std::string::npos);
  recs = RecordedRanks(job, {0, 512});
  recs[1].header.set_world_size(2048);
  x = Extrapolate(recs, {});
  REQUIRE(!x.ok());
  CHECK(std::string(x.status().message()).find("world sizes 1024 and 2048") != std::string::npos);
}

TEST_CASE("capture: malformed recordings are refused with the file and line") {
  const std::string header =
      R"({"header":{"format":"prism-capture/1","rank":1,"world_size":4}})" "\n";
  const std::string comm = R"({"comm":{"id":0,"members":[0,1,2,3],"init":{}}})" "\n";
  auto expect = [](const std::string& text, const std::string& what) {
    auto r = prism::graphgen::ParseRecording(text, "r.jsonl");
    REQUIRE(!r.ok());
    INFO(r.status().message());
    CHECK(std::string(r.status().message()).find(what) != std::string::npos);
  };
  expect(R"({"header":{"format":"prism-capture/9","rank":0,"world_size":4}})", "r.jsonl:1: format");
  expect(header + R"({"comm":{"id":0,"members":[0,9]}})", "r.jsonl:2: comm 0: member 9");
  expect(header + comm + R"({"op":{"collective":{"comm_slot":1,"kind":"ALLREDUCE","bytes":4}}})",
         "r.jsonl:3: comm 1 is not recorded");
  expect(header + comm + R"({"op":{"send":{"comm_slot":0,"peer":4,"bytes":4}}})",
         "peer 4 is not an absolute rank");
  expect(header + comm + R"({"op":{"stream":0,"deps":[0],"compute":{"duration_ns":5}}})",
         "dep 0 is not an earlier op");
  expect(header + comm + "{not json}\n", "r.jsonl:3: not a capture line");
  {  // the input's bytes are not replayed in the error
    auto r = prism::graphgen::ParseRecording(header + comm + R"({"op" {"compute":{"secret-label-text":5}}})" "\n",
                                             "r.jsonl");
    REQUIRE(!r.ok());
    INFO(r.status().message());
    CHECK(std::string(r.status().message()).find("not a capture line") != std::string::npos);
    CHECK(std::string(r.status().message()).find('\n') == std::string::npos);
    CHECK(std::string(r.status().message()).find("{\"op\"") == std::string::npos);
  }
  expect(comm, "a comm line belongs after the header");
  const std::string startup = R"({"startup_op":{"collective":{"comm_slot":0,"kind":"ALLGATHER","bytes":8}}})" "\n";
  const std::string op = R"({"op":{"compute":{"duration_ns":5}}})" "\n";
  expect(header + comm + op + startup, "r.jsonl:4: a startup_op line belongs after the header and before the ops");
  expect(header + comm + R"({"startup_op":{"compute":{"duration_ns":5}}})", "a startup_op is a collective without deps");
  expect(header + comm + R"({"startup_op":{"collective":{"comm_slot":1,"kind":"ALLREDUCE","bytes":4}}})",
         "comm 1 is not recorded");
  auto ok = prism::graphgen::ParseRecording(header + comm + startup + op, "r.jsonl");
  REQUIRE(ok.ok());
  CHECK(ok->startup_ops.size() == 1);
  CHECK(ok->ops.size() == 1);
  // Written back, the start-up comes before the ops and reads the same.
  auto again = prism::graphgen::ParseRecording(prism::graphgen::EncodeRecording(*ok), "again.jsonl");
  REQUIRE(again.ok());
  CHECK(again->startup_ops.size() == 1);
  CHECK(again->startup_ops[0].collective().kind() == prism::graph::ALLGATHER);
}

TEST_CASE("capture: any rank of each role will do: ranks 3 and 600 of train-gpt-1024 give the same graph") {
  const auto [job, extrapolation] = JobAndExtrapolation(ExampleText("train-gpt-1024.yaml"), {600, 3});
  const auto* x = &extrapolation;
  CheckSameGraph(job, x->graph);
  CHECK(x->Summary().find("pp-stage-0: 512 ranks (0-511), 511 extrapolated from rank 3 (measured: 3)") !=
        std::string::npos);
}

TEST_CASE("capture: prism-graphgen capture-from-graph and extrapolate") {
  const std::string job_file = std::string(PRISM_EXAMPLES_DIR) + "/train-gpt-1024.yaml";
  const std::string graph = prism::graphgen::testing::TempPath("capture-cli.graph");
  const std::string dir = prism::graphgen::testing::TempPath("capture-cli");
  const std::string out_graph = prism::graphgen::testing::TempPath("capture-cli-x.graph");
  std::filesystem::remove_all(dir);
  std::ostringstream out, err;
  using prism::graphgen::RunGraphgenCli;
  REQUIRE(RunGraphgenCli({"prism-graphgen", "job", job_file, "-o", graph}, out, err) == 0);
  REQUIRE(RunGraphgenCli({"prism-graphgen", "capture-from-graph", graph, "--ranks", "0,512", "-o", dir}, out, err) ==
          0);
  CHECK(std::filesystem::exists(dir + "/rank-512.capture.jsonl"));
  std::ostringstream xout;
  REQUIRE(RunGraphgenCli({"prism-graphgen", "extrapolate", dir, "--cluster", job_file, "-o", out_graph}, xout, err) ==
          0);
  CHECK(xout.str().find("measured: ranks 0, 512 (2 of 1024)") != std::string::npos);
  auto a = pg::ReadGraphFile(graph), b = pg::ReadGraphFile(out_graph);
  REQUIRE(a.ok());
  REQUIRE(b.ok());
  CheckSameGraph(*a, *b);
  std::ostringstream err2;
  CHECK(RunGraphgenCli({"prism-graphgen", "extrapolate", dir + "/rank-0.capture.jsonl", "-o", out_graph}, out, err2) ==
        2);
  CHECK(err2.str().find("e.g. rank 512") != std::string::npos);
  // --cluster naming a graph: its cluster as it is; one of another world size is refused
  REQUIRE(RunGraphgenCli({"prism-graphgen", "extrapolate", dir, "--cluster", graph, "-o", out_graph}, out, err) == 0);
  auto c = pg::ReadGraphFile(out_graph);
  REQUIRE(c.ok());
  CheckSameGraph(*a, *c);
  const std::string small = prism::graphgen::testing::TempPath("capture-cli-8.graph");
  REQUIRE(RunGraphgenCli({"prism-graphgen", "job", std::string(PRISM_EXAMPLES_DIR) + "/train-gpt-8.yaml", "-o", small},
                         out, err) == 0);
  std::ostringstream err3;
  CHECK(RunGraphgenCli({"prism-graphgen", "extrapolate", dir, "--cluster", small, "-o", out_graph}, out, err3) == 2);
  CHECK(err3.str().find("the recordings' 1024 ranks need 1024") != std::string::npos);
}

TEST_CASE("capture: GPT-3 175B at 8192 ranks (Megatron's groups, TP8 PP16 DP64) from one rank per stage") {
  std::vector<uint32_t> slice;
  for (uint32_t s = 0; s < 16; ++s) slice.push_back(s * 512 + 3 * s);  // any tensor/data position per stage
  const auto [job, x] = JobAndExtrapolation(ExampleText("gpt3-175b-8192.yaml"), slice);
  CHECK(x.graph.programs_size() == 16);
  CheckSameGraph(job, x.graph);
}
