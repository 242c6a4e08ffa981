// The engine's NIC models (nic_scheduler.h NicModel): kQueues (the default:
// each member of a ring collective across nodes queues its share on its own
// transmit side), kCalendar, and kShared with daemon/engine/nic_sharing.h
// (transfers in flight share each NIC direction equally; hand-worked times).
#include <catch2/catch.hpp>

#include "daemon/engine/launch_order.h"
#include "daemon/engine/network_model.h"
#include "daemon/engine/nic_sharing.h"
#include "daemon/engine/simulation.h"
#include "graphgen/fidelity_graph.h"

using prism::engine::SharedNics;

namespace {
constexpr prism::Nanoseconds N(int64_t ns) { return prism::Nanoseconds(ns); }
}  // namespace

TEST_CASE("shared NICs: a transfer alone takes its own time", "[daemon][nic]") {
  SharedNics nics(2);
  const uint64_t id = nics.Start(N(100), N(10'000), {0});
  CHECK(nics.NextFinish() == N(10'100));
  CHECK(nics.FinishBy(N(10'099)).empty());
  CHECK(nics.FinishBy(N(10'100)) == std::vector<uint64_t>{id});
  CHECK(nics.in_flight() == 0);
  CHECK(nics.NextFinish() == prism::Nanoseconds::Max());
}

TEST_CASE("shared NICs: two transfers on one direction share it, and the work is conserved", "[daemon][nic]") {
  SharedNics nics(1);
  // 10 ms from 0; a 4 ms transfer joins at 2 ms. From 2 ms both run at half
  // speed: the second is done at 10 ms, when the first has 4 ms left alone:
  // it ends at 14 ms, as the two would have back to back.
  const uint64_t a = nics.Start(N(0), N(10'000'000), {0});
  CHECK(nics.NextFinish() == N(10'000'000));
  const uint64_t b = nics.Start(N(2'000'000), N(4'000'000), {0});
  CHECK(nics.NextFinish() == N(10'000'000));
  CHECK(nics.FinishBy(N(10'000'000)) == std::vector<uint64_t>{b});
  CHECK(nics.NextFinish() == N(14'000'000));
  CHECK(nics.FinishBy(N(14'000'000)) == std::vector<uint64_t>{a});
  // Three 1 ns transfers at once end together, 3 ns later.
  for (int i = 0; i < 3; ++i) nics.Start(N(20'000'000), N(1), {0});
  CHECK(nics.NextFinish() == N(20'000'003));
  CHECK(nics.FinishBy(N(20'000'003)).size() == 3);
}

TEST_CASE("shared NICs: a transfer over several directions moves at its busiest one's share", "[daemon][nic]") {
  SharedNics nics(3);
  nics.Start(N(0), N(6'000), {0});                     // alone on direction 0
  const uint64_t wide = nics.Start(N(0), N(6'000), {0, 1, 2});
  const uint64_t other = nics.Start(N(0), N(6'000), {2});
  // Directions 0 and 2 carry two transfers each: every transfer runs at half
  // speed and all three end at 12 us.
  CHECK(nics.NextFinish() == N(12'000));
  const auto done = nics.FinishBy(N(12'000));
  CHECK(done.size() == 3);
  CHECK(done[1] == wide);
  CHECK(done[2] == other);
}

namespace {

// The bench's TP2 PP2 DPn step at 2.5 Gbit/s (specs/step-n8-2g5.yaml), with
// rank `straggler` (-1: none) computing 1.2x as long.
prism::graph::Graph Step(uint32_t iterations, uint32_t dp = 2, int64_t straggler = -1) {
  prism::graphgen::FidelitySpec s;
  s.name = "nic-models";
  s.kind = "step";
  s.tp = 2, s.pp = 2, s.dp = dp;
  s.iterations = iterations, s.warmup = 0;
  s.fwd_us = 1500, s.bwd_us = 3000, s.optimizer_us = 1000;
  s.tp_bytes = 2 << 20, s.pp_bytes = 4 << 20, s.dp_bytes = 16 << 20;
  s.link_gbps = 2.5;
  s.straggler_rank = straggler;
  s.straggler_scale = straggler >= 0 ? 1.2 : 1.0;
  auto g = prism::graphgen::GenerateFidelityGraph(s);
  REQUIRE(g.ok());
  return *std::move(g);
}

int64_t Iteration(const prism::graph::Graph& g, prism::engine::NicModel model, bool use_classes = true,
                  bool launch_in_order = false) {
  prism::engine::SimulationOptions o;
  o.nic_model = model;
  o.nccl.launch_in_order = launch_in_order;
  o.use_classes = use_classes;
  auto r = prism::engine::Simulate(g, o);
  REQUIRE(r.ok());
  return r->report.mean_iteration.count();
}

}  // namespace

TEST_CASE("engine, shared NIC model: a step's TP all-reduces no longer wait behind whole DP transfers",
          "[daemon][nic]") {
  const prism::graph::Graph g = Step(3);
  const int64_t calendar = Iteration(g, prism::engine::NicModel::kCalendar, true);
  const int64_t shared = Iteration(g, prism::engine::NicModel::kShared, true);
  // bench/fidelity step-n8-2g5: 401.4 ms with the calendar (its GPU truths:
  // 404.8 ms), 377.6 ms shared: sharing lets the TP all-reduces overlap the
  // DP all-gather and reduce-scatter instead of queueing behind them.
  CHECK(calendar == Approx(401'397'881).margin(1'000));
  CHECK(shared == Approx(377'584'000).margin(100'000));
  // Deterministic, and the same with one actor per rank as per class.
  CHECK(Iteration(g, prism::engine::NicModel::kShared, false) == shared);
  // With --launch-order true stage 1's last gradient send waits for
  // the DP reduce-scatters issued before it to end, what the TP all-reduces
  // gained by sharing is lost there: the calendar's figure.
  CHECK(Iteration(g, prism::engine::NicModel::kShared, true, true) == calendar);
  // Hybrid runs refuse it (they use queues or the calendar).
  prism::engine::SimulationOptions o;
  o.nic_model = prism::engine::NicModel::kShared;
  o.real_ranks = {0};
  auto r = prism::engine::Simulate(g, o);
  REQUIRE_FALSE(r.ok());
  CHECK_THAT(std::string(r.status().message()), Catch::Contains("all-virtual worlds only"));
}

namespace {

namespace g = prism::graph;
using prism::engine::NicModel;

// One GPU per node, 2.5 Gbit/s + 10 us between nodes (the bench's links),
// 400 Gbit/s + 1 us inside one.
prism::engine::LinkFigures BenchLinks() {
  prism::engine::LinkFigures l;
  l.nic_bw = prism::BitsPerSecond(2'500'000'000);
  l.nic_count = 1;
  l.nic_latency = prism::Nanoseconds(10'000);
  l.intra_bw = prism::BitsPerSecond(400'000'000'000);
  l.intra_latency = prism::Nanoseconds(1'000);
  return l;
}

// Four ranks, one per node.
prism::engine::CommShape FourNodes() {
  prism::engine::CommShape four;
  four.ranks = four.nodes = 4;
  return four;
}

}  // namespace

// The bench's graphs leave each stream on its own: their truths' ranks
// launch in program order only while the driver's CUDA events surround
// every operation (docs/network-model.md, "Launch order"), so prismd follows
// the streams there by default: the step's iteration is the --launch-order
// false one.
TEST_CASE("fidelity graphs leave each stream on its own, as their truths run without the driver's events",
          "[daemon][nic][launch]") {
  const prism::graph::Graph g = Step(3);
  CHECK(g.job().attributes().find(prism::engine::kLaunchOrderAttribute) == g.job().attributes().end());
  const auto choice = prism::engine::ResolveLaunchOrder("graph", g.job());
  REQUIRE(choice.ok());
  CHECK_FALSE(choice->in_order);
  CHECK(Iteration(g, NicModel::kQueues, true, choice->in_order) == Iteration(g, NicModel::kQueues, true, false));
}

TEST_CASE("ring wire time: the ring formula without its latency terms", "[daemon][nic]") {
  const prism::engine::NetworkModel m(BenchLinks());
  const prism::engine::CommShape four = FourNodes();
  const prism::Bytes s(16 << 20);
  // 16 MiB at 2.5 Gbit/s: 53687091.2 ns in all; 3/4 of it for an all-gather,
  // 6/4 for an all-reduce, rounded up.
  CHECK(m.RingWireTime(g::ALLGATHER, s, four).count() == 40'265'319);
  CHECK(m.RingWireTime(g::REDUCESCATTER, s, four).count() == 40'265'319);
  CHECK(m.RingWireTime(g::ALLREDUCE, s, four).count() == 80'530'637);
  CHECK(m.RingWireTime(g::BROADCAST, s, four).count() == 53'687'092);
  // With its 3 or 6 hops of 10 us, the whole ring time.
  CHECK(m.CollectiveTime(g::ALLGATHER, g::ALGORITHM_RING, s, four).count() == 40'265'319 + 3 * 10'000);
  CHECK(m.CollectiveTime(g::ALLREDUCE, g::ALGORITHM_RING, s, four).count() == 80'530'637 + 6 * 10'000);
}

// A packed host's ring step turnaround (NcclBehaviour::step_turnaround,
// prismd --step-turnaround-us; docs/network-model.md): every step of a ring
// across nodes pays it on top of the link latency, bandwidth-bound or not;
// a ring inside one node and the default (0) do not.
TEST_CASE("a ring step's turnaround is paid once per step across nodes, not inside one", "[daemon][nic]") {
  prism::engine::NcclBehaviour packed;
  packed.step_turnaround = prism::Nanoseconds(225'000);
  const prism::engine::NetworkModel plain(BenchLinks()), host(BenchLinks(), packed);
  const prism::engine::CommShape four = FourNodes();
  const prism::Bytes s(16 << 20);
  // The wire as in "ring wire time" above; 3 or 6 steps of 10 + 225 us.
  CHECK(host.CollectiveTime(g::ALLGATHER, g::ALGORITHM_RING, s, four).count() == 40'265'319 + 3 * 235'000);
  CHECK(host.CollectiveTime(g::REDUCESCATTER, g::ALGORITHM_RING, s, four).count() == 40'265'319 + 3 * 235'000);
  CHECK(host.CollectiveTime(g::ALLREDUCE, g::ALGORITHM_RING, s, four).count() == 80'530'637 + 6 * 235'000);
  CHECK(plain.CollectiveTime(g::ALLREDUCE, g::ALGORITHM_RING, s, four).count() == 80'530'637 + 6 * 10'000);
  // A TP pair's 1 MiB all-reduce across two nodes: 2 steps, 3355443 ns of wire (1 MiB at 2.5 Gbit/s).
  prism::engine::CommShape two;
  two.ranks = two.nodes = 2;
  CHECK(host.CollectiveTime(g::ALLREDUCE, g::ALGORITHM_RING, prism::Bytes(1 << 20), two).count() ==
        3'355'444 + 2 * 235'000);
  // Inside one node: no turnaround.
  prism::engine::CommShape node;
  node.ranks = node.min_per_node = node.max_per_node = 4;
  CHECK(host.CollectiveTime(g::ALLREDUCE, g::ALGORITHM_RING, s, node) ==
        plain.CollectiveTime(g::ALLREDUCE, g::ALGORITHM_RING, s, node));
}

// The packed host's cost paid once per ring collective across nodes
// (NcclBehaviour::collective_turnaround, prismd --collective-turnaround-us):
// a ring of two and a ring of four pay the same, inside one node nothing.
TEST_CASE("a ring collective's turnaround is paid once across nodes, whatever the ring's length", "[daemon][nic]") {
  prism::engine::NcclBehaviour packed;
  packed.collective_turnaround = prism::Nanoseconds(450'000);
  const prism::engine::NetworkModel plain(BenchLinks()), host(BenchLinks(), packed);
  const prism::engine::CommShape four = FourNodes();
  const prism::Bytes s(16 << 20);
  CHECK(host.CollectiveTime(g::ALLGATHER, g::ALGORITHM_RING, s, four).count() == 40'265'319 + 3 * 10'000 + 450'000);
  CHECK(host.CollectiveTime(g::ALLREDUCE, g::ALGORITHM_RING, s, four).count() == 80'530'637 + 6 * 10'000 + 450'000);
  prism::engine::CommShape two;
  two.ranks = two.nodes = 2;
  CHECK(host.CollectiveTime(g::ALLREDUCE, g::ALGORITHM_RING, prism::Bytes(1 << 20), two).count() ==
        3'355'444 + 2 * 10'000 + 450'000);
  prism::engine::CommShape node;
  node.ranks = node.min_per_node = node.max_per_node = 4;
  CHECK(host.CollectiveTime(g::ALLREDUCE, g::ALGORITHM_RING, s, node) ==
        plain.CollectiveTime(g::ALLREDUCE, g::ALGORITHM_RING, s, node));
}

// The GPU host's ground truths of these steps (docs/timing.md, "Measured",
// 2026-12-01, commit f68dfe3, a host with two H200 GPUs): step-n8-2g5 402.8 ms, with rank 3 computing
// 1.2x as long 403.8 and 406.4 ms, step-n16-dp4-2g5 484.2 and 484.7 ms.
// The calendar made one member's busy NIC hold the others idle until a gap
// common to all: the straggler's 7 ms of compute became 40 ms.
TEST_CASE("engine, queues NIC model: the bench steps, and the straggler the calendar overstated",
          "[daemon][nic]") {
  const auto plain = Step(3), straggler = Step(3, 2, 3), dp4 = Step(3, 4);
  CHECK(Iteration(plain, NicModel::kQueues) == Approx(401'263'000).margin(100'000));
  CHECK(Iteration(plain, NicModel::kCalendar) == Approx(401'398'000).margin(100'000));
  CHECK(Iteration(straggler, NicModel::kQueues) == Approx(408'973'000).margin(100'000));
  CHECK(Iteration(straggler, NicModel::kCalendar) == Approx(442'082'000).margin(100'000));
  // Since 2026-12-04 a pipeline send goes between a DP ring's steps (its truth
  // without the driver's events: 474.3 ms at the one-GPU host's turnaround).
  CHECK(Iteration(dp4, NicModel::kQueues) == Approx(468'427'000).margin(100'000));
  CHECK(Iteration(dp4, NicModel::kCalendar) == Approx(482'049'000).margin(100'000));
  // Deterministic, and the same with one actor per rank as per class.
  const int64_t queued = Iteration(straggler, NicModel::kQueues);
  CHECK(Iteration(straggler, NicModel::kQueues, false) == queued);
  CHECK(Iteration(dp4, NicModel::kQueues, false) == Iteration(dp4, NicModel::kQueues));
  // The default.
  CHECK(Iteration(straggler, prism::engine::SimulationOptions{}.nic_model) == queued);
}

// --nic-model interleave (docs/network-model.md, "NIC serialisation"): the
// queues, but a ring share that finds its transmit side carrying a ring share
// of another communicator goes behind that share's step in progress, then
// shares the side. Behind a one-step ring (the DP2 all-gathers and
// reduce-scatters) it still waits for all of it: the TP2 PP2 DP2 step plays
// as under the queues; the DP4 step's TP all-reduces share its 3-step DP
// rings.
TEST_CASE("engine, interleave NIC model: the bench steps", "[daemon][nic]") {
  const auto plain = Step(3), straggler = Step(3, 2, 3), dp4 = Step(3, 4);
  // As the bench's graphs launch (in program order, their truths' way).
  const auto in_order = [](const prism::graph::Graph& g, NicModel m, bool classes = true) {
    return Iteration(g, m, classes, true);
  };
  CHECK(in_order(plain, NicModel::kInterleave) == in_order(plain, NicModel::kQueues));
  // Their truths (docs/timing.md): 403.8 and 406.4 ms (straggler), 484.2 ms
  // (DP4): the straggler's 0.6 ms closer, the DP4 step's 1.5 ms further.
  CHECK(in_order(straggler, NicModel::kQueues) == Approx(409'008'000).margin(100'000));
  CHECK(in_order(straggler, NicModel::kInterleave) == Approx(408'418'000).margin(100'000));
  CHECK(in_order(dp4, NicModel::kQueues) == Approx(481'879'000).margin(100'000));
  CHECK(in_order(dp4, NicModel::kInterleave) == Approx(480'359'000).margin(100'000));
  // Each stream on its own, the DP4 step's TP all-reduces overlap its DP
  // rings far more, and interleaved they no longer wait for them: 6% less.
  CHECK(Iteration(dp4, NicModel::kQueues) == Approx(468'427'000).margin(100'000));
  CHECK(Iteration(dp4, NicModel::kInterleave) == Approx(440'063'000).margin(100'000));
  // Deterministic, and the same with one actor per rank as per class.
  CHECK(in_order(straggler, NicModel::kInterleave, false) == in_order(straggler, NicModel::kInterleave));
  CHECK(Iteration(dp4, NicModel::kInterleave, false) == Iteration(dp4, NicModel::kInterleave));
}
