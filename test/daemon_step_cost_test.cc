// NCCL's per-step cost and algorithm choice in the model (network_model.h,
// nccl_tuning.h): hand-worked ring times at 2048 members, the link model left
// as it was when no step cost is given, NCCL_ALGO's syntax, and what prismd
// prints.
#include <catch2/catch.hpp>

#include "daemon/engine/nccl_tuning.h"
#include "daemon/engine/network_model.h"

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
