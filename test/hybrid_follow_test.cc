// prismd --follow (docs/capture.md): no program of the real ranks, so every
// operation a real rank issues with virtual peers gets an on-time schedule,
// and none is a divergence.
#include <catch2/catch.hpp>

#include "daemon/hybrid/follow_graph.h"
#include "graphgen/fidelity_graph.h"
#include "test/hybrid_harness.h"

namespace g = prism::graph;
using prism::testing::AddStarted;
using prism::testing::HybridHarness;
using prism::testing::Key;
using prism::testing::RealtimeNow;

namespace {

g::Graph WorldOf(uint32_t world) {
  prism::graphgen::FidelitySpec s;
  s.name = "w";
  s.kind = "sweep";
  s.world = world;
  s.ops = {"allreduce"};
  s.sizes = {1 << 20};
  s.iterations = 1;
  s.warmup = 0;
  s.link_gbps = 10;
  s.link_latency_us = 10;
  return *prism::graphgen::GenerateFidelityGraph(s);
}

}  // namespace

TEST_CASE("follow: the graph keeps only the world and the cluster", "[hybrid][follow]") {
  const g::Graph full = WorldOf(8);
  auto f = prism::daemon::FollowGraph(full);
  REQUIRE(f.ok());
  CHECK(f->ranks_size() == 8);
  CHECK(f->communicators_size() == 1);
  CHECK(f->programs_size() == 1);
  CHECK(f->cluster().nic().bandwidth_bps() == full.cluster().nic().bandwidth_bps());
  g::Graph no_world = full;
  no_world.mutable_communicators(0)->mutable_members()->RemoveLast();
  auto refused = prism::daemon::FollowGraph(no_world);
  REQUIRE_FALSE(refused.ok());
  CHECK(std::string(refused.status().message()).find("must be the world") != std::string::npos);
}

TEST_CASE("follow: every operation with virtual peers is on time, none a divergence", "[hybrid][follow]") {
  HybridHarness h(*prism::daemon::FollowGraph(WorldOf(8)), {0}, prism::FromMilliseconds(20), prism::Nanoseconds(0),
                  /*follow=*/true);
  constexpr uint64_t kWorld = 0xabc, kTp = 0xdef;
  h.Communicator(kWorld, 0, {0, 1, 2, 3, 4, 5, 6, 7});
  h.Communicator(kTp, 1, {0, 1, 2, 3});  // a group the bootstrap followed (no graph communicator)
  prism::rpc::EventBatch b;
  const int64_t t = RealtimeNow();
  AddStarted(&b, 1, Key(kTp, prism::rpc::OP_ALL_REDUCE, 0), 0, 4, 1 << 20, t);
  AddStarted(&b, 2, Key(kWorld, prism::rpc::OP_ALL_GATHER, 0), 0, 8, 8 << 20, t);
  AddStarted(&b, 3, Key(kWorld, prism::rpc::OP_RECV, 0, 4), 0, 8, 1 << 20, t, false);
  h.Feed(1, b);
  for (const auto& key : {Key(kTp, prism::rpc::OP_ALL_REDUCE, 0), Key(kWorld, prism::rpc::OP_ALL_GATHER, 0),
                          Key(kWorld, prism::rpc::OP_RECV, 0, 4)}) {
    auto s = h.WaitSchedule(key, std::chrono::seconds(5));
    REQUIRE(s.has_value());
    CHECK(s->unmatched());
    CHECK(static_cast<int64_t>(s->ready_ns()) >= t);
  }
  auto r = h.Stop();
  CHECK(h.scheduler().counters().ops_unmatched == 3);
  CHECK(h.scheduler().counters().divergences == 0);
}
