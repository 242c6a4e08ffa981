// Generated graphs are valid, share programs by pipeline stage, and their
// pipeline send/recv sequences match up without deadlock under rendezvous
// semantics (a send completes only when its receive is posted).
#include <catch2/catch.hpp>
#include <filesystem>
#include <map>
#include <set>

#include "graphgen/job_graph.h"
#include "graphgen/schedule.h"
#include "proto/graph_file.h"
#include "test/graphgen_test_util.h"

namespace pg = prism::graph;
using prism::graphgen::testing::GraphOf;
using prism::graphgen::testing::SlotOf;
using prism::graphgen::testing::SmallJobYaml;

namespace {

// Runs the "pp"-slot sends/recvs of stream 0 of every rank of `g`, posting a
// group's ops together; the n-th send from A to B matches the n-th receive on
// B from A. Returns the ranks that could not finish (empty = no deadlock) and
// fails on a byte mismatch.
std::set<uint32_t> StuckRanks(const pg::Graph& g) {
  struct P2P {
    bool send;
    uint32_t peer;  // global rank
    uint64_t bytes;
  };
  const uint32_t world = g.ranks_size();
  std::vector<std::vector<std::vector<P2P>>> units(world);  // rank -> units -> ops
  for (uint32_t r = 0; r < world; ++r) {
    const auto& rk = g.ranks(r);
    const auto& p = g.programs(rk.program());
    bool in_group = false;
    for (const auto& op : p.ops()) {
      if (op.stream() != 0) continue;
      if (op.has_group_start()) {
        in_group = true;
        units[r].emplace_back();
        continue;
      }
      if (op.has_group_end()) {
        in_group = false;
        continue;
      }
      if (!(op.has_send() || op.has_recv()) || SlotOf(p, op) != "pp") continue;
      const uint32_t slot = op.has_send() ? op.send().comm_slot() : op.recv().comm_slot();
      const auto& comm = g.communicators(rk.comm_slots(slot));
      const uint32_t peer = comm.members(op.has_send() ? op.send().peer() : op.recv().peer());
      if (!in_group) units[r].emplace_back();
      units[r].back().push_back({op.has_send(), peer, op.has_send() ? op.send().bytes() : op.recv().bytes()});
    }
  }
  // Posted messages per directed pair, in order.
  std::map<std::pair<uint32_t, uint32_t>, std::vector<uint64_t>> sent, received;
  std::vector<size_t> next(world, 0);
  std::vector<std::vector<std::pair<bool, size_t>>> posted(world);  // (send?, index in pair list)
  auto post = [&](uint32_t r) {
    posted[r].clear();
    for (const P2P& op : units[r][next[r]]) {
      auto& list = op.send ? sent[{r, op.peer}] : received[{op.peer, r}];
      posted[r].push_back({op.send, list.size()});
      list.push_back(op.bytes);
    }
  };
  for (uint32_t r = 0; r < world; ++r)
    if (!units[r].empty()) post(r);
  bool progress = true;
  while (progress) {
    progress = false;
    for (uint32_t r = 0; r < world; ++r) {
      if (next[r] >= units[r].size()) continue;
      bool done = true;
      const auto& unit = units[r][next[r]];
      for (size_t i = 0; i < unit.size(); ++i) {
        const auto& op = unit[i];
        const auto key = op.send ? std::make_pair(r, op.peer) : std::make_pair(op.peer, r);
        const auto& other = op.send ? received[key] : sent[key];
        const size_t index = posted[r][i].second;
        if (other.size() <= index) {
          done = false;
          break;
        }
        CHECK(other[index] == op.bytes);
      }
      if (!done) continue;
      progress = true;
      if (++next[r] < units[r].size()) post(r);
    }
  }
  std::set<uint32_t> stuck;
  for (uint32_t r = 0; r < world; ++r)
    if (next[r] < units[r].size()) stuck.insert(r);
  return stuck;
}

}  // namespace

TEST_CASE("example jobs generate valid graphs with one program per stage", "[graphgen][graph]") {
  for (const char* name : {"small-8", "small-16", "mixtral-8x7b-128", "llama3-70b-1024"}) {
    INFO(name);
    auto spec = prism::graphgen::ParseJobSpecFile(std::string(PRISM_EXAMPLES_DIR) + "/" + name + ".yaml");
    REQUIRE(spec.ok());
    auto g = prism::graphgen::GenerateJobGraph(*spec);
    REQUIRE(g.ok());
    const auto valid = pg::ValidateGraph(*g);
    INFO(valid.message());
    CHECK(valid.ok());
    CHECK(g->programs_size() == static_cast<int>(spec->parallel.pp));
    CHECK(g->ranks_size() == static_cast<int>(spec->parallel.world()));
    CHECK(StuckRanks(*g).empty());
  }
}

TEST_CASE("the GPT-3 example: 8192 ranks in 16 classes", "[graphgen][graph]") {
  auto spec = prism::graphgen::ParseJobSpecFile(std::string(PRISM_EXAMPLES_DIR) + "/gpt3-175b-8192.yaml");
  REQUIRE(spec.ok());
  CHECK(spec->parallel.microbatches() == 24);
  auto g = prism::graphgen::GenerateJobGraph(*spec);
  REQUIRE(g.ok());
  CHECK(pg::ValidateGraph(*g).ok());
  CHECK(g->ranks_size() == 8192);
  CHECK(g->programs_size() == 16);
  CHECK(g->cluster().nodes() == 1024);
  std::map<uint32_t, int> per_program;
  for (const auto& r : g->ranks()) ++per_program[r.program()];
  for (const auto& [p, n] : per_program) CHECK(n == 512);
}

TEST_CASE("pipeline send/recv never deadlocks, for every schedule", "[graphgen][graph]") {
  for (const char* parallel : {
           "{pp: 2, dp: 1, global_batch: 4}",
           "{pp: 4, dp: 1, global_batch: 8}",
           "{pp: 4, dp: 1, global_batch: 2}",
           "{pp: 4, dp: 1, global_batch: 8, schedule: gpipe}",
           "{pp: 2, vpp: 2, dp: 1, global_batch: 4}",
           "{pp: 2, vpp: 4, dp: 1, global_batch: 2}",
           "{pp: 4, vpp: 2, dp: 1, global_batch: 8}",
           "{pp: 4, vpp: 2, dp: 1, global_batch: 4}",
           "{tp: 2, pp: 2, vpp: 2, cp: 2, dp: 2, global_batch: 8, sequence_parallel: true}",
       }) {
    INFO(parallel);
    const auto g = GraphOf(SmallJobYaml(parallel));
    CHECK(pg::ValidateGraph(g).ok());
    CHECK(StuckRanks(g).empty());
  }
}

TEST_CASE("schedules run every pass once, backward after forward", "[graphgen][schedule]") {
  using prism::graphgen::Schedule;
  struct Case {
    Schedule s;
    uint32_t pp, vpp, m;
  };
  for (const Case& c : {Case{Schedule::kGPipe, 4, 1, 6}, Case{Schedule::kOneFOneB, 4, 1, 6},
                        Case{Schedule::kOneFOneB, 4, 1, 2}, Case{Schedule::kInterleavedOneFOneB, 4, 2, 8},
                        Case{Schedule::kInterleavedOneFOneB, 2, 3, 4}}) {
    for (uint32_t stage = 0; stage < c.pp; ++stage) {
      const auto steps = prism::graphgen::StageSchedule(c.s, c.pp, c.vpp, stage, c.m);
      CHECK(steps.size() == 2u * c.m * c.vpp);
      std::set<std::tuple<bool, uint32_t, uint32_t>> seen;
      for (const auto& st : steps) {
        CHECK(seen.insert({st.forward, st.chunk, st.microbatch}).second);
        if (!st.forward) CHECK(seen.count({true, st.chunk, st.microbatch}) == 1);
      }
    }
  }
  // 1F1B: stage s runs pp - s - 1 warmup forwards before its first backward.
  const auto s0 = prism::graphgen::StageSchedule(Schedule::kOneFOneB, 4, 1, 0, 8);
  CHECK(s0[0].forward);
  CHECK(s0[3].forward);
  CHECK_FALSE(s0[4].forward);
  const auto last = prism::graphgen::StageSchedule(Schedule::kOneFOneB, 4, 1, 3, 8);
  CHECK(last[0].forward);
  CHECK_FALSE(last[1].forward);
}

// parallel.launch_order: program writes the graph's nccl_launch_order (prismd
// follows it, daemon/engine/launch_order.h); the default writes nothing, so
// job graphs keep each stream on its own; anything else is refused.
TEST_CASE("parallel.launch_order: program says so in the graph, streams (the default) adds nothing",
          "[graphgen][graph]") {
  using prism::graphgen::testing::GraphOf;
  using prism::graphgen::testing::SmallJobYaml;
  const auto plain = GraphOf(SmallJobYaml("{tp: 2, pp: 2, dp: 2}"));
  CHECK(plain.job().attributes().count("nccl_launch_order") == 0);
  CHECK(GraphOf(SmallJobYaml("{tp: 2, pp: 2, dp: 2, launch_order: streams}")).job().attributes().count(
            "nccl_launch_order") == 0);
  const auto ordered = GraphOf(SmallJobYaml("{tp: 2, pp: 2, dp: 2, launch_order: program}"));
  CHECK(ordered.job().attributes().at("nccl_launch_order") == "program");
  const auto bad = prism::graphgen::ParseJobSpec(SmallJobYaml("{tp: 2, pp: 2, dp: 2, launch_order: fifo}"));
  REQUIRE_FALSE(bad.ok());
  CHECK_THAT(std::string(bad.status().message()), Catch::Contains("must be streams or program"));
}


TEST_CASE("cluster.nccl_step_cost_us: the graph carries NCCL's ring step cost, with its source", "[graphgen][graph]") {
  using prism::graphgen::testing::GraphOf;
  using prism::graphgen::testing::kValidJobYaml;
  const std::string nvlink = "nvlink: {gbps: 3600, latency_us: 1}";
  auto with = [&](const std::string& line) {
    std::string yaml = kValidJobYaml;
    return yaml.replace(yaml.find(nvlink), nvlink.size(), nvlink + "\n  nccl_step_cost_us: " + line);
  };
  CHECK(GraphOf(kValidJobYaml).cluster().nccl_step_costs_size() == 0);  // none: prismd's table decides

  const auto simple = GraphOf(with("14.35"));
  REQUIRE(simple.cluster().nccl_step_costs_size() == 1);
  const auto& e = simple.cluster().nccl_step_costs(0);
  CHECK(e.protocol() == "SIMPLE");
  CHECK(e.algorithm() == prism::graph::ALGORITHM_RING);
  CHECK(e.cost_ns() == 14350);
  CHECK_THAT(e.source(), Catch::Contains("job file"));

  const auto both = GraphOf(with("{ll: 13.5, simple: 0}"));
  REQUIRE(both.cluster().nccl_step_costs_size() == 2);
  std::map<std::string, uint64_t> by_protocol;
  for (const auto& c : both.cluster().nccl_step_costs()) by_protocol[c.protocol()] = c.cost_ns();
  CHECK(by_protocol == std::map<std::string, uint64_t>{{"LL", 13500}, {"SIMPLE", 0}});
}
