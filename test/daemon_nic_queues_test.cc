// The engine's NicModel::kQueues (the default): each member of a ring
// collective across nodes queues its share on its own transmit side, and
// the collective ends when the last share has landed.
#include <catch2/catch.hpp>

#include "daemon/engine/network_model.h"
#include "daemon/engine/simulation.h"
#include "graphgen/fidelity_graph.h"

namespace {

using prism::Bytes;
using prism::engine::CommShape;
using prism::engine::NicModel;
namespace g = prism::graph;

prism::graph::Graph Step(uint32_t dp, int64_t straggler, uint32_t iterations = 3) {
  prism::graphgen::FidelitySpec s;
  s.name = "queues";
  s.kind = "step";
  s.tp = 2, s.pp = 2, s.dp = dp;
  s.iterations = iterations, s.warmup = 0;
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

TEST_CASE("ring wire time: the ring formula without its latency terms", "[daemon][nic]") {
  prism::engine::LinkFigures l;
  l.nic_bw = prism::BitsPerSecond(2'500'000'000);
  l.nic_count = 1;
  l.nic_latency = prism::Nanoseconds(10'000);
  l.intra_bw = prism::BitsPerSecond(400'000'000'000);
  const prism::engine::NetworkModel m(l);
  CommShape four;
  four.ranks = four.nodes = 4;
  const Bytes s(16 << 20);
  // 16 MiB at 2.5 Gbit/s: 53687091.2 ns in all; 3/4 of it for an all-gather,
  // 6/4 for an all-reduce, rounded up.
  CHECK(m.RingWireTime(g::ALLGATHER, s, four).count() == 40'265'319);
  CHECK(m.RingWireTime(g::REDUCESCATTER, s, four).count() == 40'265'319);
  CHECK(m.RingWireTime(g::ALLREDUCE, s, four).count() == 80'530'637);
  CHECK(m.RingWireTime(g::BROADCAST, s, four).count() == 53'687'092);
  CHECK(m.CollectiveTime(g::ALLGATHER, g::ALGORITHM_RING, s, four).count() == 40'265'319 + 3 * 10'000);
  CHECK(m.CollectiveTime(g::ALLREDUCE, g::ALGORITHM_RING, s, four).count() == 80'530'637 + 6 * 10'000);
}

// The GPU host's ground truths of these steps (docs/timing.md, "Measured",
// session 20, nvidia-h200-x2): step-n8-2g5 402.8 ms, with rank 3 computing
// 1.2x as long 403.8 and 406.4 ms, step-n16-dp4-2g5 484.2 and 484.7 ms.
// The calendar made one member's busy NIC hold the others idle until a gap
// common to all: the straggler's 7 ms of compute became 40 ms.
TEST_CASE("engine, queues NIC model: the bench steps, and the straggler the calendar overstated", "[daemon][nic]") {
  const auto plain = Step(2, -1), straggler = Step(2, 3), dp4 = Step(4, -1);
  CHECK(Iteration(plain, NicModel::kQueues) == Approx(401'263'000).margin(100'000));
  CHECK(Iteration(plain, NicModel::kCalendar) == Approx(401'398'000).margin(100'000));
  CHECK(Iteration(straggler, NicModel::kQueues) == Approx(408'973'000).margin(100'000));
  CHECK(Iteration(straggler, NicModel::kCalendar) == Approx(442'082'000).margin(100'000));
  CHECK(Iteration(dp4, NicModel::kQueues) == Approx(481'819'000).margin(100'000));
  CHECK(Iteration(dp4, NicModel::kCalendar) == Approx(482'049'000).margin(100'000));
  // Deterministic, and the same with one actor per rank as per class.
  CHECK(Iteration(straggler, NicModel::kQueues, false) == Iteration(straggler, NicModel::kQueues));
  CHECK(Iteration(dp4, NicModel::kQueues, false) == Iteration(dp4, NicModel::kQueues));
  // The default.
  CHECK(Iteration(straggler, prism::engine::SimulationOptions{}.nic_model) == Iteration(straggler, NicModel::kQueues));
}
