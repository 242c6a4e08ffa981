// prism-graphgen inspect: the JSON form holds the fields docs/inspect-json.md
// documents, with values that agree with the graph.
#include <catch2/catch.hpp>
#include <filesystem>
#include <sstream>

#include "graphgen/cli.h"
#include "graphgen/collective_graph.h"
#include "graphgen/inspect.h"
#include "proto/graph_file.h"
#include "test/graphgen_test_util.h"

namespace pg = prism::graph;
using nlohmann::json;
using prism::graphgen::testing::GraphOf;
using prism::graphgen::testing::SmallJobYaml;

TEST_CASE("inspect JSON has the documented fields", "[graphgen][inspect]") {
  const auto g = GraphOf(SmallJobYaml("{tp: 2, pp: 2, dp: 2, global_batch: 8}"));
  const json s = prism::graphgen::InspectGraph(g, true);
  CHECK(s.at("schema") == prism::graphgen::kInspectSchema);
  for (const char* k : {"job", "ranks", "nodes", "gpus_per_node", "layout", "iterations", "communicators",
                        "classes"})
    CHECK(s.contains(k));
  for (const char* k : {"name", "generator", "model", "description", "world_size", "attributes"})
    CHECK(s.at("job").contains(k));
  for (const char* k : {"tp", "pp", "dp", "cp", "ep", "vpp", "micro_batch", "global_batch", "schedule",
                        "sequence_parallel", "distributed_optimizer", "order"})
    CHECK(s.at("layout").contains(k));
  CHECK(s.at("ranks") == 8);
  CHECK(s.at("nic").at("bandwidth_bps") == g.cluster().nic().bandwidth_bps());
  CHECK(s.at("nic").at("latency_ns") == g.cluster().nic().latency_ns());
  CHECK(s.at("nic").at("count") == g.cluster().nic().count());
  CHECK(s.at("communicators").at("count") == g.communicators_size());

  uint64_t listed = 0;
  for (const json& k : s.at("communicators").at("by_kind")) {
    for (const char* f : {"kind", "count", "sizes", "total_members", "groups"}) CHECK(k.contains(f));
    CHECK(k.at("groups").size() == k.at("count").get<size_t>());
    for (const json& c : k.at("groups")) {
      for (const char* f : {"id", "name", "members", "creation"}) CHECK(c.contains(f));
      const auto& comm = g.communicators(c.at("id").get<int>());
      CHECK(c.at("members").get<std::vector<uint32_t>>() ==
            std::vector<uint32_t>(comm.members().begin(), comm.members().end()));
    }
    listed += k.at("count").get<uint64_t>();
  }
  CHECK(listed == static_cast<uint64_t>(g.communicators_size()));

  uint64_t ranks = 0;
  REQUIRE(s.at("classes").size() == 2);
  for (const json& c : s.at("classes")) {
    for (const char* f : {"program", "name", "ranks", "first_rank", "streams", "comm_slots", "op_counts",
                          "compute_ns_per_iteration", "bytes_per_iteration", "bytes_per_iteration_by_slot", "memory"})
      CHECK(c.contains(f));
    for (const char* f : {"total", "compute", "collective", "send", "recv", "group_start", "group_end"})
      CHECK(c.at("op_counts").contains(f));
    for (const char* f : {"static_bytes", "peak_activation_bytes", "peak_bytes"}) CHECK(c.at("memory").contains(f));
    const auto& p = g.programs(c.at("program").get<int>());
    CHECK(c.at("op_counts").at("total") == p.ops_size());
    CHECK(c.at("memory").at("static_bytes") == p.static_memory_bytes());
    CHECK(c.at("memory").at("peak_bytes").get<uint64_t>() >
          c.at("memory").at("static_bytes").get<uint64_t>());
    // Per-slot bytes add up to per-kind bytes.
    uint64_t by_kind = 0, by_slot = 0;
    for (const auto& [k, v] : c.at("bytes_per_iteration").items()) by_kind += v.get<uint64_t>();
    for (const auto& [slot, m] : c.at("bytes_per_iteration_by_slot").items())
      for (const auto& [k, v] : m.items()) by_slot += v.get<uint64_t>();
    CHECK(by_kind == by_slot);
    CHECK(by_kind > 0);
    ranks += c.at("ranks").get<uint64_t>();
  }
  CHECK(ranks == 8);
  // Without members: no group lists.
  const json brief = prism::graphgen::InspectGraph(g, false);
  CHECK_FALSE(brief.at("communicators").at("by_kind").at(0).contains("groups"));
  CHECK(prism::graphgen::FormatInspectText(brief).find("classes: 2 programs") != std::string::npos);
}

TEST_CASE("inspect reports bytes per iteration and the iteration count", "[graphgen][inspect]") {
  prism::graphgen::CollectiveJob job;
  job.op = "allgather";
  job.bytes = 64 << 20;
  job.ranks = 16;
  job.iterations = 5;
  auto g = prism::graphgen::GenerateCollectiveGraph(job);
  REQUIRE(g.ok());
  const json s = prism::graphgen::InspectGraph(*g, false);
  CHECK(s.at("iterations") == 5);
  CHECK(s.at("classes").at(0).at("bytes_per_iteration").at("allgather") == 64u << 20);
  CHECK(s.at("classes").at(0).at("ranks") == 16);
}

TEST_CASE("inspect CLI: text and JSON from a file, and a bad file exits 2", "[graphgen][inspect]") {
  const std::string path = prism::graphgen::testing::TempPath("inspect.graph");
  REQUIRE(pg::WriteGraphFile(GraphOf(SmallJobYaml("{tp: 2, pp: 2, dp: 2}")), path).ok());
  std::ostringstream o, e;
  REQUIRE(prism::graphgen::RunGraphgenCli({"prism-graphgen", "inspect", path, "--json"}, o, e) == 0);
  const json s = json::parse(o.str());
  CHECK(s.at("ranks") == 8);
  std::ostringstream t;
  REQUIRE(prism::graphgen::RunGraphgenCli({"prism-graphgen", "inspect", path}, t, e) == 0);
  CHECK(t.str().find("ranks: 8") != std::string::npos);
  CHECK(prism::graphgen::RunGraphgenCli({"prism-graphgen", "inspect", "/nonexistent.graph"}, o, e) ==
        prism::graphgen::kExitBadInput);
}
