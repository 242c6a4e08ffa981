// NetworkModel::RingSteps and the engine's NicModel::kSteps: a collective
// holds its members' NICs one ring step at a time, and transfers that asked
// during a step go before its next one.
#include <catch2/catch.hpp>

#include "daemon/engine/network_model.h"
#include "daemon/engine/simulation.h"
#include "graphgen/fidelity_graph.h"

namespace {

using prism::Bytes;
using prism::engine::CommShape;
using prism::engine::NicModel;
namespace g = prism::graph;

CommShape AcrossNodes(uint32_t ranks) {
  CommShape s;
  s.ranks = s.nodes = ranks;
  return s;
}

prism::engine::NetworkModel Model() {
  prism::engine::LinkFigures l;
  l.nic_bw = prism::BitsPerSecond(2'500'000'000);
  l.nic_count = 1;
  l.nic_latency = prism::Nanoseconds(10'000);
  l.intra_bw = prism::BitsPerSecond(400'000'000'000);
  return prism::engine::NetworkModel(l);
}

constexpr uint64_t kMiB = 1 << 20;

}  // namespace

TEST_CASE("ring steps: every member sends one chunk per channel a step", "[daemon][nic]") {
  const auto m = Model();
  const auto steps = [&](g::CollectiveKind kind, uint64_t bytes, uint32_t ranks) {
    return m.RingSteps(kind, g::ALGORITHM_RING, Bytes(bytes), AcrossNodes(ranks));
  };
  // 2 MiB all-reduce on 2 ranks: 512 KiB chunks (a loop's share) on 2
  // channels; 2 MiB on the wire per member: its reduce-scatter step, then its
  // all-gather step.
  CHECK(steps(g::ALLREDUCE, 2 * kMiB, 2) == 2);
  // 16 MiB all-gather: full 2 MiB chunks; 8 MiB sent per member on 2 ranks,
  // 12 MiB on 4.
  CHECK(steps(g::ALLGATHER, 16 * kMiB, 2) == 2);
  CHECK(steps(g::ALLGATHER, 16 * kMiB, 4) == 3);
  CHECK(steps(g::REDUCESCATTER, 16 * kMiB, 4) == 3);
  // 1 MiB all-reduce on 8: 64 KiB chunks, 1.75 MiB per member: 14 steps.
  CHECK(steps(g::ALLREDUCE, kMiB, 8) == 14);
  // Broadcast sends the whole buffer once: 8 MiB in 4 MiB steps.
  CHECK(steps(g::BROADCAST, 8 * kMiB, 4) == 2);
  // Large operations are merged into kMaxRingSteps.
  CHECK(steps(g::ALLREDUCE, 1024 * kMiB, 8) == prism::engine::kMaxRingSteps);
  // One step: inside a node, a tree, all-to-all, a barrier.
  CommShape one_node;
  one_node.ranks = one_node.max_per_node = one_node.min_per_node = 4;
  CHECK(m.RingSteps(g::ALLGATHER, g::ALGORITHM_RING, Bytes(16 * kMiB), one_node) == 1);
  CHECK(m.RingSteps(g::ALLREDUCE, g::ALGORITHM_TREE, Bytes(16 * kMiB), AcrossNodes(4)) == 1);
  CHECK(m.RingSteps(g::ALLTOALL, g::ALGORITHM_DEFAULT, Bytes(16 * kMiB), AcrossNodes(4)) == 1);
  CHECK(m.RingSteps(g::BARRIER, g::ALGORITHM_DEFAULT, Bytes(0), AcrossNodes(4)) == 1);
}

namespace {

prism::graph::Graph Step(uint32_t dp, int64_t straggler) {
  prism::graphgen::FidelitySpec s;
  s.name = "steps";
  s.kind = "step";
  s.tp = 2, s.pp = 2, s.dp = dp;
  s.iterations = 3, s.warmup = 0;
  s.fwd_us = 1500, s.bwd_us = 3000, s.optimizer_us = 1000;
  s.tp_bytes = 2 << 20, s.pp_bytes = 4 << 20, s.dp_bytes = 16 << 20;
  s.link_gbps = 2.5;
  s.straggler_rank = straggler;
  s.straggler_scale = straggler >= 0 ? 1.2 : 1.0;
  auto graph = prism::graphgen::GenerateFidelityGraph(s);
  REQUIRE(graph.ok());
  return *std::move(graph);
}

int64_t Iteration(const prism::graph::Graph& graph, NicModel model, bool use_classes = true) {
  prism::engine::SimulationOptions o;
  o.nic_model = model;
  o.use_classes = use_classes;
  auto r = prism::engine::Simulate(graph, o);
  REQUIRE(r.ok());
  return r->report.mean_iteration.count();
}

}  // namespace

// The figures the GPU host's truths judge (docs/timing.md, "Measured",
// session 20; nvidia-h200-x2 truths): step-n8-2g5 402.8 ms, its straggler
// 403.8 ms, step-n16-dp4-2g5 484.7 ms. Steps take 10 ms off the straggler's
// 40 ms excess but put the DP4 step 6% under its truth: the calendar stays
// the default.
TEST_CASE("engine, steps NIC model: the bench steps against the calendar", "[daemon][nic]") {
  const auto plain = Step(2, -1), straggler = Step(2, 3), dp4 = Step(4, -1);
  // Without a straggler nothing waits between another transfer's steps.
  CHECK(Iteration(plain, NicModel::kSteps) == Iteration(plain, NicModel::kCalendar));
  CHECK(Iteration(plain, NicModel::kSteps) == Approx(401'397'881).margin(1'000));
  // The straggler's TP all-reduces go between the DP reduce-scatter's steps.
  CHECK(Iteration(straggler, NicModel::kCalendar) == Approx(442'082'000).margin(100'000));
  CHECK(Iteration(straggler, NicModel::kSteps) == Approx(431'991'000).margin(100'000));
  CHECK(Iteration(dp4, NicModel::kCalendar) == Approx(482'049'000).margin(100'000));
  CHECK(Iteration(dp4, NicModel::kSteps) == Approx(455'185'000).margin(100'000));
  // Deterministic, and the same with one actor per rank as per class.
  CHECK(Iteration(straggler, NicModel::kSteps, false) == Iteration(straggler, NicModel::kSteps));
  CHECK(Iteration(dp4, NicModel::kSteps, false) == Iteration(dp4, NicModel::kSteps));
  // Hybrid runs keep the calendar.
  prism::engine::SimulationOptions o;
  o.nic_model = NicModel::kSteps;
  o.real_ranks = {0};
  auto r = prism::engine::Simulate(plain, o);
  REQUIRE_FALSE(r.ok());
  CHECK_THAT(std::string(r.status().message()), Catch::Contains("all-virtual worlds only"));
}
