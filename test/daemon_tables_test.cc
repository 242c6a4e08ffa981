// A job held as format 2's tables (what prismd --simulate reads, tables
// kept; format 3's rules are read into them) replays exactly as the same
// job held as records: report, every
// traced rank's timeline, with classes and without.
#include <catch2/catch.hpp>

#include <string>

#include "daemon/engine/simulation.h"
#include "graphgen/job_graph.h"
#include "graphgen/job_spec.h"
#include "nlohmann/json.hpp"
#include "proto/graph_file.h"
#include "proto/graph_topology.h"

namespace {

namespace g = prism::graph;

g::Graph Job(const std::string& example, prism::graphgen::JobGraphForm form) {
  auto spec = prism::graphgen::ParseJobSpecFile(std::string(PRISM_EXAMPLES_DIR) + "/" + example + ".yaml");
  REQUIRE(spec.ok());
  auto graph = prism::graphgen::GenerateJobGraph(*spec, form);
  REQUIRE(graph.ok());
  return std::move(*graph);
}

// The report without wall-clock figures, and the trace of `ranks`.
std::pair<std::string, std::string> Replay(const g::Graph& graph, bool classes, std::vector<uint32_t> ranks) {
  prism::engine::SimulationOptions o;
  o.use_classes = classes;
  o.trace_ranks = std::move(ranks);
  auto r = prism::engine::Simulate(graph, o);
  INFO((r.ok() ? "" : std::string(r.status().message())));
  REQUIRE(r.ok());
  auto j = nlohmann::json::parse(r->report.ToJson(false));
  j.erase("replay");
  return {j.dump(), r->TraceJson(graph)};
}

}  // namespace

TEST_CASE("a job's tables replay exactly as its records", "[daemon][tables]") {
  for (const char* example : {"small-16", "mixtral-8x7b-128"}) {
    INFO(example);
    const g::Graph tables = Job(example, prism::graphgen::JobGraphForm::kTables);
    const g::Graph records = Job(example, prism::graphgen::JobGraphForm::kRecords);
    REQUIRE(tables.has_rank_table());
    REQUIRE(tables.ranks_size() == 0);
    REQUIRE(g::RankCount(tables) == static_cast<uint32_t>(records.ranks_size()));
    const std::vector<uint32_t> traced = {0, 1, g::RankCount(tables) - 1};
    for (bool classes : {true, false}) {
      INFO("classes " << classes);
      const auto a = Replay(tables, classes, traced), b = Replay(records, classes, traced);
      CHECK(a.first == b.first);
      CHECK(a.second == b.second);
    }
  }
}

TEST_CASE("prismd's read keeps a written job's tables and replays them", "[daemon][tables]") {
  // Format 2 (tables as written) and format 3 (rules, expanded into tables on the read).
  for (auto form : {prism::graphgen::JobGraphForm::kTables, prism::graphgen::JobGraphForm::kRules}) {
    INFO("form " << static_cast<int>(form));
    const auto bytes = g::EncodeGraph(Job("small-8", form));
    REQUIRE(bytes.ok());
    auto kept = g::DecodeGraph(*bytes, "<memory>", {.keep_tables = true});
    auto expanded = g::DecodeGraph(*bytes);
    REQUIRE(kept.ok());
    REQUIRE(expanded.ok());
    CHECK(kept->has_communicator_table());
    CHECK(expanded->communicators_size() > 0);
    CHECK(Replay(*kept, true, {0, 7}) == Replay(*expanded, true, {0, 7}));
    CHECK(Replay(*kept, false, {0, 7}) == Replay(*expanded, false, {0, 7}));
  }
}
