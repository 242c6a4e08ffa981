// Compute measured from recorded GPU-host sessions (daemon/hybrid/session_capture.h)
// and the capture recordings it makes, extrapolated (docs/capture.md). The
// recordings are test/fixtures/hybrid/'s: the synthetic step of
// bench/fidelity (fwd 1.5 ms, bwd 3 ms per layer and microbatch on the GPU),
// TP2 PP2 DP2, run on the GPU host with real ranks among virtual ones.
#include <catch2/catch.hpp>
#include <string>

#include "daemon/hybrid/session_capture.h"
#include "graphgen/capture_recording.h"
#include "graphgen/extrapolate.h"
#include "graphgen/fidelity_graph.h"
#include "proto/graph_file.h"

namespace {

namespace pg = prism::graph;
const std::string kFixtures = PRISM_HYBRID_FIXTURES;

pg::Graph SpecGraph(const std::string& spec) {
  auto s = prism::graphgen::ParseFidelitySpecFile(kFixtures + "/" + spec);
  REQUIRE(s.ok());
  auto g = prism::graphgen::GenerateFidelityGraph(*s);
  REQUIRE(g.ok());
  return *g;
}

std::vector<prism::daemon::MeasuredRank> Measure(const pg::Graph& g, const std::string& rec) {
  auto recording = prism::daemon::ReadRecording(kFixtures + "/" + rec);
  REQUIRE(recording.ok());
  auto measured = prism::daemon::MeasureCompute(g, *recording, 1);
  INFO(measured.status().message());
  REQUIRE(measured.ok());
  return *measured;
}

const pg::Program& ProgramOf(const pg::Graph& g, uint32_t rank) {
  return g.programs(static_cast<int>(g.ranks(static_cast<int>(rank)).program()));
}

}  // namespace

TEST_CASE("session capture: a real rank's compute between its NCCL operations, from a GPU-host recording") {
  const pg::Graph g = SpecGraph("step-n8.yaml");
  const auto measured = Measure(g, "step-n8-hybrid1-causal.rec");
  REQUIRE(measured.size() == 1);
  const prism::daemon::MeasuredRank& m = measured[0];
  CHECK(m.rank == 0);
  CHECK(m.iterations == 30);
  CHECK(m.matched_ops == 840);
  CHECK(m.unmatched_ops == 0);
  const pg::Program& p = ProgramOf(g, 0);
  size_t measured_ops = 0;
  for (int i = 0; i < p.ops_size(); ++i) {
    if (!p.ops(i).has_compute() || !m.compute_ns[static_cast<size_t>(i)]) continue;
    ++measured_ops;
    const uint64_t graph_ns = p.ops(i).compute().duration_ns(), got = *m.compute_ns[static_cast<size_t>(i)];
    INFO(p.ops(i).compute().label() << ": measured " << got << " ns, the spec " << graph_ns);
    // the GPU-side compute the spec asks for, plus what the launch and the
    // kernels around it add (at most 10%)
    CHECK(got >= graph_ns);
    CHECK(got <= graph_ns + graph_ns / 10);
  }
  CHECK(measured_ops == 12);  // of 18: the zero-length start, the optimizer, and what follows a send keep the graph's
  for (int i = 0; i < p.ops_size(); ++i)
    if (p.ops(i).has_compute() && p.ops(i).compute().label() == "optimizer")
      CHECK(!m.compute_ns[static_cast<size_t>(i)]);
}

TEST_CASE("session capture: two real ranks, one per stage, give recordings that extrapolate to the step's graph") {
  const pg::Graph g = SpecGraph("step-n8-2g5.yaml");
  const auto measured = Measure(g, "step-n8-2g5-hybrid2-shim.rec");
  REQUIRE(measured.size() == 2);
  std::vector<prism::graphgen::Recording> recordings;
  for (const prism::daemon::MeasuredRank& m : measured) {
    auto rec = prism::graphgen::RecordingFromGraph(g, m.rank);
    REQUIRE(rec.ok());
    for (size_t i = 0; i < rec->ops.size(); ++i)
      if (m.compute_ns[i]) rec->ops[i].mutable_compute()->set_duration_ns(*m.compute_ns[i]);
    recordings.push_back(*rec);
  }
  auto x = prism::graphgen::Extrapolate(recordings, {});
  INFO(x.status().message());
  REQUIRE(x.ok());
  REQUIRE(pg::ValidateGraph(x->graph).ok());
  CHECK(x->graph.programs_size() == 2);
  for (uint32_t r = 0; r < 8; ++r) {
    const pg::Program& a = ProgramOf(g, r);
    const pg::Program& b = ProgramOf(x->graph, r);
    REQUIRE(a.ops_size() == b.ops_size());
    const auto& m = measured[r < 4 ? 0 : 1];
    for (int i = 0; i < a.ops_size(); ++i) {
      if (!a.ops(i).has_compute()) {
        CHECK(a.ops(i).SerializeAsString() == b.ops(i).SerializeAsString());
        continue;
      }
      const auto want = m.compute_ns[static_cast<size_t>(i)];
      CHECK(b.ops(i).compute().duration_ns() == want.value_or(a.ops(i).compute().duration_ns()));
    }
  }
}

TEST_CASE("session capture: a recording of another graph is refused") {
  const pg::Graph other = SpecGraph("step-n8-2g5.yaml");
  auto recording = prism::daemon::ReadRecording(kFixtures + "/step-n8-hybrid1-causal.rec");
  REQUIRE(recording.ok());
  auto measured = prism::daemon::MeasureCompute(other, *recording, 1);
  REQUIRE(!measured.ok());
  CHECK(std::string(measured.status().message()).find("give the graph the run used") != std::string::npos);
  pg::Graph renamed = SpecGraph("step-n8.yaml");
  renamed.mutable_communicators(1)->set_name("not-tp");
  measured = prism::daemon::MeasureCompute(renamed, *recording, 1);
  REQUIRE(!measured.ok());
  CHECK(std::string(measured.status().message()).find("is not communicator 1 of the graph") != std::string::npos);
}
