// Chakra execution traces: export and import (graphgen/chakra_et.h,
// docs/chakra.md). Round trips on job graphs, the Chakra form of what is
// written (dependencies spelled out, global ranks on send/recv), traces from
// elsewhere (no NAME.prism.json), and bad trace sets.
#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include "google/protobuf/util/message_differencer.h"
#include "graphgen/chakra_et.h"
#include "graphgen/chakra_mapping.h"
#include "graphgen/cli.h"
#include "graphgen/collective_graph.h"
#include "proto/graph_file.h"
#include "test/graphgen_test_util.h"

namespace {

namespace pg = prism::graph;
namespace chakra = prism::graphgen::chakra;
using prism::graphgen::testing::GraphOf;
using prism::graphgen::testing::SmallJobYaml;
using prism::graphgen::testing::TempPath;

std::string FreshFolder(const std::string& name) {
  const auto dir = std::filesystem::path(TempPath("chakra")).parent_path() / name;
  std::filesystem::remove_all(dir);
  return dir.string();
}

pg::Graph JobFileGraph(const std::string& file) {
  std::ifstream in(std::string(PRISM_EXAMPLES_DIR) + "/" + file);
  std::stringstream text;
  text << in.rdbuf();
  return GraphOf(text.str());
}

pg::Graph RoundTrip(const pg::Graph& g, const std::string& dir) {
  REQUIRE(chakra::WriteTraceSet(g, dir, "prism").ok());
  auto back = chakra::ReadTraceSet(dir, "prism");
  INFO(back.status().message());
  REQUIRE(back.ok());
  return *back;
}

// Chakra's file layout: varint32 length, message; GlobalMetadata first.
std::vector<ChakraProtoMsg::Node> NodesOf(const std::string& bytes) {
  std::vector<ChakraProtoMsg::Node> nodes;
  size_t pos = 0;
  bool meta = true;
  while (pos < bytes.size()) {
    uint64_t size = 0;
    for (int shift = 0;; shift += 7) {
      const auto b = static_cast<unsigned char>(bytes[pos++]);
      size |= static_cast<uint64_t>(b & 0x7F) << shift;
      if (!(b & 0x80)) break;
    }
    if (!meta) REQUIRE(nodes.emplace_back().ParseFromArray(bytes.data() + pos, static_cast<int>(size)));
    meta = false;
    pos += size;
  }
  return nodes;
}

const ChakraProtoMsg::AttributeProto* AttrOf(const ChakraProtoMsg::Node& n, const std::string& name) {
  for (const auto& a : n.attr())
    if (a.name() == name) return &a;
  return nullptr;
}

std::string Delimited(const google::protobuf::Message& m) {
  const std::string bytes = m.SerializeAsString();
  REQUIRE(bytes.size() < 128);
  return std::string(1, static_cast<char>(bytes.size())) + bytes;
}

void WriteBytes(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary) << bytes;
}

}  // namespace

TEST_CASE("chakra: export then import gives back the job graph of examples/train-gpt-8.yaml, field for field") {
  const pg::Graph g = JobFileGraph("train-gpt-8.yaml");
  const pg::Graph back = RoundTrip(g, FreshFolder("chakra-train-gpt-8"));
  google::protobuf::util::MessageDifferencer diff;
  std::string report;
  diff.ReportDifferencesToString(&report);
  CHECK(diff.Compare(g, back));
  INFO(report);
  CHECK(report.empty());
  // and exporting the imported graph writes the same traces, byte for byte
  for (uint32_t r = 0; r < 8; ++r) CHECK(*chakra::EncodeRankTrace(back, r) == *chakra::EncodeRankTrace(g, r));
}

TEST_CASE("chakra: round trips keep ops, sizes and dependencies with CP rings, interleaving, SP and DDP") {
  const std::vector<std::string> parallels = {
      "{tp: 2, pp: 2, cp: 2, dp: 1, global_batch: 4}",
      "{tp: 2, pp: 2, vpp: 2, dp: 2, global_batch: 8, sequence_parallel: true}",
      "{tp: 1, pp: 4, dp: 2, global_batch: 8, schedule: gpipe, distributed_optimizer: false}"};
  for (const std::string& parallel : parallels) {
    INFO(parallel);
    const pg::Graph g = GraphOf(SmallJobYaml(parallel));
    CHECK(google::protobuf::util::MessageDifferencer::Equals(g, RoundTrip(g, FreshFolder("chakra-job"))));
  }
  prism::graphgen::CollectiveJob sendrecv;
  sendrecv.op = "sendrecv";
  sendrecv.bytes = 1 << 20;
  sendrecv.ranks = 4;
  auto g = prism::graphgen::GenerateCollectiveGraph(sendrecv);
  REQUIRE(g.ok());
  CHECK(google::protobuf::util::MessageDifferencer::Equals(*g, RoundTrip(*g, FreshFolder("chakra-sendrecv"))));
}

TEST_CASE("chakra: every order a program implies is a data dependency, and a send names its receiver's rank") {
  const pg::Graph g = JobFileGraph("train-gpt-8.yaml");
  const pg::Program& p = g.programs(static_cast<int>(g.ranks(0).program()));
  const std::vector<ChakraProtoMsg::Node> nodes = NodesOf(*chakra::EncodeRankTrace(g, 0));
  REQUIRE(nodes.size() == static_cast<size_t>(p.ops_size()));
  std::map<uint32_t, uint32_t> last_on_stream;
  std::optional<uint32_t> open_group;
  size_t sends = 0;
  for (int i = 0; i < p.ops_size(); ++i) {
    const pg::Op& op = p.ops(i);
    const auto& deps = nodes[static_cast<size_t>(i)].data_deps();
    const std::set<uint64_t> dep_set(deps.begin(), deps.end());
    CHECK(nodes[static_cast<size_t>(i)].id() == static_cast<uint64_t>(i));
    for (uint32_t d : op.deps()) CHECK(dep_set.count(d) == 1);
    if (op.has_group_start()) open_group = i;
    if (open_group && !op.has_group_start() && !op.has_group_end()) CHECK(dep_set.count(*open_group) == 1);
    if (!open_group && last_on_stream.count(op.stream())) CHECK(dep_set.count(last_on_stream[op.stream()]) == 1);
    if (op.has_group_end()) open_group.reset();
    if (!open_group) last_on_stream[op.stream()] = static_cast<uint32_t>(i);
    if (op.has_send()) {
      ++sends;
      // rank 0 is stage 0; its pipeline peer is rank 4 (TP2 PP2 DP2: rank = tp + 2*dp + 4*pp)
      CHECK(AttrOf(nodes[static_cast<size_t>(i)], "comm_src")->int32_val() == 0);
      CHECK(AttrOf(nodes[static_cast<size_t>(i)], "comm_dst")->int32_val() == 4);
      CHECK(AttrOf(nodes[static_cast<size_t>(i)], "comm_size")->int64_val() == static_cast<int64_t>(op.send().bytes()));
    }
  }
  CHECK(sends > 0);
}

TEST_CASE("chakra: a trace set from elsewhere (no NAME.prism.json) is read with its groups and default cluster") {
  const std::string dir = FreshFolder("chakra-foreign");
  std::filesystem::create_directories(dir);
  // Three ranks: compute 3 us; on ranks 0 and 1 then an all-reduce of 1 KiB on
  // group "7" = {0, 1}, then rank 0 sends 64 bytes to rank 1.
  for (int r = 0; r < 3; ++r) {
    ChakraProtoMsg::GlobalMetadata meta;
    meta.set_version("1.0.0");
    std::string bytes = Delimited(meta);
    ChakraProtoMsg::Node comp, coll, p2p;
    comp.set_id(10);
    comp.set_type(ChakraProtoMsg::COMP_NODE);
    comp.set_duration_micros(3);
    coll.set_id(11);
    coll.set_type(ChakraProtoMsg::COMM_COLL_NODE);
    coll.add_data_deps(10);
    auto* a = coll.add_attr();
    a->set_name("comm_type"), a->set_int64_val(ChakraProtoMsg::ALL_REDUCE);
    a = coll.add_attr();
    a->set_name("comm_size"), a->set_int64_val(1024);
    a = coll.add_attr();
    a->set_name("pg_name"), a->set_string_val("7");
    p2p.set_id(12);
    p2p.set_type(r == 0 ? ChakraProtoMsg::COMM_SEND_NODE : ChakraProtoMsg::COMM_RECV_NODE);
    p2p.add_data_deps(11);
    a = p2p.add_attr();
    a->set_name("comm_size"), a->set_int64_val(64);
    a = p2p.add_attr();
    a->set_name(r == 0 ? "comm_dst" : "comm_src"), a->set_int32_val(1 - r);
    if (r == 2) {
      WriteBytes(dir + "/t.2.et", bytes + Delimited(comp));
      continue;
    }
    // written out of order: the issue order comes from the dependencies
    WriteBytes(dir + "/t." + std::to_string(r) + ".et", bytes + Delimited(p2p) + Delimited(comp) + Delimited(coll));
  }
  WriteBytes(dir + "/t.comm_groups.json", R"({"7": [0, 1]})");
  auto name = chakra::FindTraceSetName(dir);
  REQUIRE(name.ok());
  CHECK(*name == "t");
  auto g = chakra::ReadTraceSet(dir, "t");
  INFO(g.status().message());
  REQUIRE(g.ok());
  CHECK(g->ranks_size() == 3);
  CHECK(g->programs_size() == 3);  // a sender, a receiver, a rank that only computes
  const pg::Program& p0 = g->programs(static_cast<int>(g->ranks(0).program()));
  REQUIRE(p0.ops_size() == 3);
  CHECK(p0.ops(0).compute().duration_ns() == 3000);
  CHECK(p0.ops(1).collective().kind() == pg::ALLREDUCE);
  CHECK(p0.ops(1).collective().bytes() == 1024);
  CHECK(g->communicators(static_cast<int>(g->ranks(0).comm_slots(static_cast<int>(p0.ops(1).collective().comm_slot()))))
            .name() == "pg[7]");
  CHECK(p0.ops(2).send().peer() == 1);
  CHECK(p0.ops(2).send().bytes() == 64);
  CHECK(p0.ops(2).deps_size() == 0);  // the dependency on op 1 is the stream's order
}

TEST_CASE("chakra: bad trace sets are refused naming the file and the fix") {
  const pg::Graph g = JobFileGraph("train-gpt-8.yaml");
  const std::string dir = FreshFolder("chakra-bad");
  REQUIRE(chakra::WriteTraceSet(g, dir, "prism").ok());
  auto again = chakra::WriteTraceSet(g, dir, "prism");
  CHECK(absl::IsAlreadyExists(again));
  CHECK(std::string(again.message()).find("already exists") != std::string::npos);
  CHECK(!chakra::WriteTraceSet(g, FreshFolder("chakra-badname"), "../x").ok());

  SECTION("a truncated trace") {
    const std::string file = dir + "/prism.3.et";
    std::filesystem::resize_file(file, std::filesystem::file_size(file) - 5);
    auto r = chakra::ReadTraceSet(dir, "prism");
    REQUIRE(!r.ok());
    CHECK(std::string(r.status().message()).find("prism.3.et") != std::string::npos);
  }
  SECTION("a cycle of dependencies") {
    ChakraProtoMsg::GlobalMetadata meta;
    ChakraProtoMsg::Node a, b;
    a.set_id(1), a.set_type(ChakraProtoMsg::COMP_NODE), a.add_data_deps(2);
    b.set_id(2), b.set_type(ChakraProtoMsg::COMP_NODE), b.add_data_deps(1);
    WriteBytes(dir + "/prism.2.et", Delimited(meta) + Delimited(a) + Delimited(b));
    auto r = chakra::ReadTraceSet(dir, "prism");
    REQUIRE(!r.ok());
    CHECK(std::string(r.status().message()).find("prism.2.et: its data_deps form a cycle") != std::string::npos);
  }
  SECTION("a rank that differs from the others of its program") {
    std::filesystem::copy_file(dir + "/prism.4.et", dir + "/prism.1.et",
                               std::filesystem::copy_options::overwrite_existing);
    auto r = chakra::ReadTraceSet(dir, "prism");
    REQUIRE(!r.ok());
    INFO(r.status().message());
    CHECK(std::string(r.status().message()).find("prism.1.et") != std::string::npos);
  }
  SECTION("a process group the groups file does not hold") {
    WriteBytes(dir + "/prism.comm_groups.json", R"({"0": [0,1,2,3,4,5,6,7]})");
    auto r = chakra::ReadTraceSet(dir, "prism");
    REQUIRE(!r.ok());
    CHECK(std::string(r.status().message()).find("is not in NAME.comm_groups.json") != std::string::npos);
  }
}

TEST_CASE("chakra: prism-graphgen chakra-export and chakra-import") {
  const std::string graph = TempPath("chakra-cli.graph"), back = TempPath("chakra-cli-back.graph");
  const std::string dir = FreshFolder("chakra-cli");
  std::ostringstream out, err;
  REQUIRE(prism::graphgen::RunGraphgenCli({"prism-graphgen", "job", std::string(PRISM_EXAMPLES_DIR) + "/small-8.yaml",
                                           "-o", graph}, out, err) == 0);
  CHECK(prism::graphgen::RunGraphgenCli({"prism-graphgen", "chakra-export", graph, "-o", dir, "--name", "s8"}, out,
                                        err) == 0);
  CHECK(std::filesystem::exists(dir + "/s8.7.et"));
  CHECK(prism::graphgen::RunGraphgenCli({"prism-graphgen", "chakra-import", dir, "-o", back}, out, err) == 0);
  auto a = pg::ReadGraphFile(graph), b = pg::ReadGraphFile(back);
  REQUIRE(a.ok());
  REQUIRE(b.ok());
  CHECK(google::protobuf::util::MessageDifferencer::Equals(*a, *b));
  std::ostringstream err2;
  CHECK(prism::graphgen::RunGraphgenCli({"prism-graphgen", "chakra-export", graph, "-o", dir}, out, err2) == 1);
  CHECK(err2.str().find("already exists") != std::string::npos);
}
