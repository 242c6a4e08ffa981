// NCCL's per-step cost and algorithm choice in the model (network_model.h,
// nccl_tuning.h): hand-worked ring times at 2048 members, the link model left
// as it was when no step cost is given, NCCL_ALGO's syntax, and what prismd
// prints.
#include <catch2/catch.hpp>

#include "daemon/engine/nccl_tuning.h"
#include "daemon/engine/network_model.h"
#include "plugin/arrival.h"

namespace {

using prism::Bytes;
using prism::Nanoseconds;
using prism::engine::CommShape;
using prism::engine::LinkFigures;
using prism::engine::NcclBehaviour;
using prism::engine::NetworkModel;

// One GPU per node, one 10 Gbit/s NIC of 10 us: the 8192-rank train_gpt job's cluster.
LinkFigures TenGig() {
  LinkFigures l;
  l.intra_bw = prism::BitsPerSecond(900'000'000'000);
  l.intra_latency = Nanoseconds(1000);
  l.nic_bw = prism::BitsPerSecond(10'000'000'000);
  l.nic_count = 1;
  l.gpus_per_node = 1;
  l.nic_latency = Nanoseconds(10'000);
  return l;
}

CommShape Spread(uint32_t ranks) { return CommShape{ranks, ranks, 1, 1}; }

}  // namespace

TEST_CASE("a long ring of small chunks pays the link latency and NCCL's step cost once per step",
          "[daemon][network][step_cost]") {
  // All-gather of 6146 B per member over a DP ring of 2048 (the 8192-rank
  // train_gpt job's parameter all-gather): 2047 steps of 6146 B. At 10 Gbit/s
  // one step's chunk is on the wire 4916.8 ns, rounded up over the whole
  // ring: W = ceil(2047 * 6146 * 8 / 10) ns = 10,064,690 ns. A step's first
  // slice (half the step, 2458 ns with W / 2047 = 4916 ns) goes on one step
  // latency after it arrived: 2047 * (2458 + 10,000 + 12,500) + (4916 - 2458)
  // = 51,091,484 ns. Without the step cost the link bound W + 2047 * 10,000
  // = 30,534,690 ns wins.
  const Bytes size(6146ull * 2048);
  NcclBehaviour with_cost;
  with_cost.step_cost = Nanoseconds(12'500);
  const NetworkModel costed(TenGig(), with_cost);
  const NetworkModel link_only(TenGig());
  CHECK(costed.RingWireTime(prism::graph::ALLGATHER, size, Spread(2048)) == Nanoseconds(10'064'690));
  CHECK(costed.CollectiveTime(prism::graph::ALLGATHER, prism::graph::ALGORITHM_RING, size, Spread(2048)) ==
        Nanoseconds(51'091'484));
  CHECK(link_only.CollectiveTime(prism::graph::ALLGATHER, prism::graph::ALGORITHM_RING, size, Spread(2048)) ==
        Nanoseconds(30'534'690));
  CHECK(costed.step_cost() == Nanoseconds(12'500));
}

TEST_CASE("a bandwidth-bound ring does not pay the step cost: its steps overlap the wire",
          "[daemon][network][step_cost]") {
  // 64 MiB all-reduce over 8 nodes: 14 steps of 8 MiB at 10 Gbit/s (6.7 ms
  // each) hide a 12.5 us step cost entirely; the time is the link model's.
  NcclBehaviour with_cost;
  with_cost.step_cost = Nanoseconds(12'500);
  const NetworkModel costed(TenGig(), with_cost);
  const NetworkModel link_only(TenGig());
  for (uint64_t mib : {1, 16, 64}) {
    const Bytes size(mib << 20);
    for (auto kind : {prism::graph::ALLREDUCE, prism::graph::ALLGATHER, prism::graph::REDUCESCATTER}) {
      CHECK(costed.CollectiveTime(kind, prism::graph::ALGORITHM_RING, size, Spread(8)) ==
            link_only.CollectiveTime(kind, prism::graph::ALGORITHM_RING, size, Spread(8)));
    }
  }
}

TEST_CASE("RingStepBound: slices of a step overlap all but the first", "[daemon][network][step_cost]") {
  // 3 steps of 1000 ns wire in 2 slices, 100 ns per step: 3 * (500 + 100) + 500.
  CHECK(prism::engine::RingStepBound(Nanoseconds(3000), Nanoseconds(100), 3, 2) == Nanoseconds(2300));
  // One slice: every step waits for its whole chunk.
  CHECK(prism::engine::RingStepBound(Nanoseconds(3000), Nanoseconds(100), 3, 1) == Nanoseconds(3300));
  CHECK(prism::engine::RingStepBound(Nanoseconds(3000), Nanoseconds(100), 0, 2) == Nanoseconds(0));
}

TEST_CASE("NCCL_ALGO=Ring keeps the model's all-reduces on the ring", "[daemon][network][nccl_algo]") {
  // A 4-byte all-reduce over 8192 nodes (a gradient norm): the model's own
  // choice is the tree; a job run with NCCL_ALGO=Ring plays the ring.
  const Bytes four(4);
  const NetworkModel free_choice(TenGig());
  CHECK(free_choice.Choose(prism::graph::ALLREDUCE, four, Spread(8192)) == prism::graph::ALGORITHM_TREE);
  auto ring_only = prism::engine::ParseNcclAlgo("Ring");
  REQUIRE(ring_only.ok());
  NcclBehaviour ring;
  ring.ring = ring_only->ring;
  ring.tree = ring_only->tree;
  const NetworkModel forced(TenGig(), ring);
  CHECK(forced.Choose(prism::graph::ALLREDUCE, four, Spread(8192)) == prism::graph::ALGORITHM_RING);
  // NCCL_ALGO=Tree: an all-reduce across nodes takes the tree even where the ring is faster.
  NcclBehaviour tree;  // NCCL_ALGO=Tree
  tree.ring = false;
  tree.pat = false;
  const NetworkModel tree_only(TenGig(), tree);
  CHECK(free_choice.Choose(prism::graph::ALLREDUCE, Bytes(64ull << 20), Spread(8)) == prism::graph::ALGORITHM_RING);
  CHECK(tree_only.Choose(prism::graph::ALLREDUCE, Bytes(64ull << 20), Spread(8)) == prism::graph::ALGORITHM_TREE);
  CHECK(tree_only.Choose(prism::graph::ALLGATHER, Bytes(1ull << 30), Spread(2)) == prism::graph::ALGORITHM_RING);
}

TEST_CASE("NCCL_ALGO is parsed as NCCL reads it", "[daemon][nccl_algo]") {
  using prism::engine::ParseNcclAlgo;
  auto a = ParseNcclAlgo("");
  REQUIRE(a.ok());
  CHECK((a->ring && a->tree));
  a = ParseNcclAlgo("ring");
  REQUIRE(a.ok());
  CHECK((a->ring && !a->tree));
  a = ParseNcclAlgo("^Tree");
  REQUIRE(a.ok());
  CHECK((a->ring && !a->tree));
  a = ParseNcclAlgo("Tree, Ring,PAT");
  REQUIRE(a.ok());
  CHECK((a->ring && a->tree && a->pat));
  a = ParseNcclAlgo("Ring,NVLS");
  REQUIRE(a.ok());
  CHECK((a->ring && !a->tree && !a->pat));
  a = ParseNcclAlgo("^PAT");
  REQUIRE(a.ok());
  CHECK((a->ring && a->tree && !a->pat));
  auto bad = ParseNcclAlgo("Rign");
  REQUIRE(!bad.ok());
  CHECK(bad.status().message().find("unknown algorithm \"Rign\"") != std::string::npos);
  auto none = ParseNcclAlgo("^Ring,Tree,PAT");
  REQUIRE(!none.ok());
  CHECK(none.status().message().find("leaves none of Ring, Tree and PAT") != std::string::npos);
  a = ParseNcclAlgo("PAT");  // the model plays PAT (pat_play.h)
  REQUIRE(a.ok());
  CHECK((!a->ring && !a->tree && a->pat));
}

TEST_CASE("the default step cost is the measured NCCL 2.28.9 Simple ring figure", "[daemon][step_cost]") {
  const prism::engine::StepCost c = prism::engine::DefaultNcclStepCost();
  CHECK(c.cost == Nanoseconds(12'500));
  CHECK(c.measured.find("NCCL 2.28.9 Simple ring") != std::string::npos);
  // Another release or protocol gets the closest measured figure, and says so.
  const prism::engine::StepCost other =
      prism::engine::NcclStepCost(23007, prism::engine::NcclProtocol::kLL, prism::graph::ALGORITHM_TREE);
  CHECK(other.cost == Nanoseconds(12'500));
  CHECK(other.measured.find("standing in") != std::string::npos);
}

// The hybrid's lockstep floor (plugin/arrival.h) against --simulate's ring
// time (NetworkModel::CollectiveTime) for the same operation: a latency-bound
// ring whose real rank's own NCCL is faster than the model's step (it sends a
// step every 2 us), so the floor alone paces its receives from the virtual
// predecessor. The ring's members arrived at t0; the real rank's first send
// went out one step cost later (ring_start = t0 + c: it paid its own c
// before it). The last step's receive then completes the model's ring time
// after t0, and each step's receive one model step (W/(h k) + L + c) after
// the previous one; for Simple (two transfers a step) and LL (one) alike.
TEST_CASE("the hybrid's lockstep floor of a latency-bound ring is --simulate's ring time",
          "[daemon][network][step_cost][lockstep]") {
  using prism::plugin::ArrivalForm;
  using prism::plugin::ArrivalInput;
  using prism::plugin::ResolveArrival;
  using prism::plugin::RingStepOfMessage;
  using prism::plugin::RingStepWireOf;
  constexpr int64_t kT0 = 1'000'000'000;
  const Nanoseconds c(12'500);
  NcclBehaviour with_cost;
  with_cost.step_cost = c;
  const NetworkModel model(TenGig(), with_cost);
  struct Case {
    prism::graph::CollectiveKind kind;
    uint64_t bytes;  // NCCL's count * datatype size (per rank for all-gather, reduce-scatter)
    uint32_t n;
  };
  // TorchTitan FSDP2's world rings: all-gathers of 4612 B per member,
  // reduce-scatters of 9224 B, all-reduces of 228 B (2(n-1) steps).
  for (const Case& op : {Case{prism::graph::ALLGATHER, 4612, 1024}, Case{prism::graph::REDUCESCATTER, 9224, 1024},
                         Case{prism::graph::ALLREDUCE, 228, 1024}, Case{prism::graph::ALLGATHER, 4612, 8192}}) {
    const bool all_reduce = op.kind == prism::graph::ALLREDUCE;
    const uint64_t steps = all_reduce ? 2 * (op.n - 1) : op.n - 1;
    const Bytes size(all_reduce ? op.bytes : op.bytes * op.n);  // the graph's: output (AG), input (RS)
    const Nanoseconds simulate =
        model.CollectiveTime(op.kind, prism::graph::ALGORITHM_RING, size, Spread(op.n));
    const Nanoseconds step_wire = RingStepWireOf(all_reduce, op.bytes, op.n, TenGig().nic_bw);
    if (op.kind == prism::graph::ALLGATHER && op.n == 1024) {
      // W = ceil(1023 * 4612 * 8 / 10) ns = 3,774,442 ns, W/h = 3689 ns, a
      // slice 1844 ns: 1023 * (1844 + 10,000 + 12,500) + (3689 - 1844).
      CHECK(step_wire == Nanoseconds(3689));
      CHECK(simulate == Nanoseconds(1023 * (1844 + 10'000 + 12'500) + (3689 - 1844)));
    }
    CHECK(step_wire == prism::RingStepWire(model.RingWireTime(op.kind, size, Spread(op.n)), steps));
    for (const bool simple : {true, false}) {
      CAPTURE(op.kind, op.n, simple);
      const uint32_t per_step = simple ? prism::plugin::kRingSlicesPerSimpleStep : 1;
      auto floor_of = [&](uint32_t message) {
        ArrivalInput in;
        in.form = ArrivalForm::kMirror;
        in.bytes = Bytes(simple ? op.bytes / 2 : 2 * op.bytes);
        in.ready = Nanoseconds(kT0);
        in.own_send_done = Nanoseconds(kT0 + c.count() + 2'000 * (message / per_step));
        in.link = {TenGig().nic_bw, TenGig().nic_latency};
        in.ring_start = Nanoseconds(kT0) + c;
        in.ring_step = RingStepOfMessage(simple, message);
        in.step_cost = c;
        in.step_wire = step_wire;
        return ResolveArrival(in, Nanoseconds(0)).done - Nanoseconds(kT0);
      };
      const uint32_t last = static_cast<uint32_t>(steps * per_step - 1);
      CHECK(floor_of(last) == simulate);
      const Nanoseconds model_step = Nanoseconds(step_wire.count() / 2) + TenGig().nic_latency + c;
      CHECK(floor_of(last) - floor_of(last - per_step) == model_step);
      CHECK(floor_of(per_step) - floor_of(0) == model_step);
    }
  }
}
