// The engine's schedules for a real rank's collectives checked against
// closed forms (docs/timing.md): deterministic replays (daemon/hybrid/
// session_replay.h) of event streams written here, on graphs whose virtual
// ranks' timing follows from the real rank's reports by hand.
//
// Graph: N ranks, one program: (compute C, collective) x K on the world
// communicator, rank 0 real. A virtual member reaches collective k when its
// compute after collective k-1 ends; collective k-1 ends for the virtual
// members when the real rank reported its end (mixed collectives finish at
// the real members' completion). So the virtual members arrive at
//   ready_0 = start + C,   ready_k = end_{k-1} + C,
// whatever the real rank's own start times (a late or early real rank).
#include <catch2/catch.hpp>

#include <map>

#include "daemon/engine/network_model.h"
#include "daemon/hybrid/session_replay.h"
#include "proto/graph_file.h"
#include "test/daemon_test_graphs.h"
#include "test/hybrid_harness.h"

namespace d = prism::daemon;
namespace g = prism::graph;
using prism::testing::AddFinished;
using prism::testing::AddStarted;
using prism::testing::Key;

namespace {

constexpr uint64_t kWorldHash = 0x1234;
constexpr int64_t kStart = 1'800'000'000'000'000'000;  // the recording's CLOCK_REALTIME origin
constexpr int64_t kCompute = 2'000'000;                // C
constexpr uint64_t kBytes = 1 << 20;

struct RealOp {
  int64_t start, end;  // the real rank's reported times, ns after kStart
};

d::Recording Stream(uint32_t ranks, prism::rpc::OpKind kind, bool ring, const std::vector<RealOp>& ops) {
  d::Recording rec;
  rec.start_realtime_ns = kStart;
  rec.real_ranks = {0};
  d::RecordedLine comm;
  comm.kind = d::RecordedLine::kCommunicator;
  comm.comm.comm_hash = kWorldHash;
  comm.comm.graph_comm = 0;
  comm.comm.name = "world";
  for (uint32_t r = 0; r < ranks; ++r) comm.comm.members.push_back(r);
  rec.lines.push_back(comm);
  for (size_t k = 0; k < ops.size(); ++k) {
    d::RecordedLine line;
    line.kind = d::RecordedLine::kEvents;
    line.session = 1;
    const uint64_t op_id = k + 1;
    AddStarted(&line.events, op_id, Key(kWorldHash, kind, k), 0, static_cast<int32_t>(ranks), kBytes,
               kStart + ops[k].start, ring);
    AddFinished(&line.events, op_id, kStart + ops[k].start + 1000, kStart + ops[k].end);
    rec.lines.push_back(line);
  }
  return rec;
}

// A real rank late by 0.3 ms, then 0.5 ms, then early (its compute is shorter than C).
const std::vector<RealOp> kRealOps = {
    {kCompute + 300'000, kCompute + 1'800'000},
    {kCompute + 1'800'000 + kCompute + 500'000, kCompute + 1'800'000 + kCompute + 1'700'000},
    {kCompute + 1'800'000 + kCompute + 1'700'000 + 1'000'000, kCompute + 1'800'000 + kCompute + 1'700'000 + 2'200'000},
};

void CheckClosedForm(const d::SessionReplayResult& r, prism::rpc::OpSchedule::Mode mode) {
  REQUIRE(r.schedules.size() == kRealOps.size());
  CHECK(r.engine_finished);
  CHECK(r.ops_unmatched == 0);
  for (size_t k = 0; k < kRealOps.size(); ++k) {
    INFO("collective " << k);
    const prism::rpc::OpSchedule& s = r.schedules[k].schedule;
    CHECK(s.key().seq() == k);
    CHECK(s.mode() == mode);
    const int64_t ready = (k == 0 ? 0 : kRealOps[k - 1].end) + kCompute;
    CHECK(static_cast<int64_t>(s.ready_ns()) - kStart == ready);
  }
}

}  // namespace

TEST_CASE("ring all-reduce: virtual members arrive at the real rank's previous end plus their compute (MIRROR)",
          "[hybrid][closed-form]") {
  const g::Graph graph =
      prism::testing::CollectiveGraph(4, g::ALLREDUCE, kBytes, g::ALGORITHM_RING, 3, kCompute);
  auto r = d::ReplaySessions(graph, Stream(4, prism::rpc::OP_ALL_REDUCE, /*ring=*/true, kRealOps));
  INFO(r.status().message());
  REQUIRE(r.ok());
  CheckClosedForm(*r, prism::rpc::OpSchedule::MIRROR);
}

TEST_CASE("tree all-reduce: the same arrival, as a STREAM schedule (a tree is not a mirror of the real rank)",
          "[hybrid][closed-form]") {
  prism::testing::ClusterSpec one_gpu_nodes;  // a tree runs across nodes (inside one, the node's link times it)
  one_gpu_nodes.gpus_per_node = one_gpu_nodes.nics_per_node = 1;
  const g::Graph graph =
      prism::testing::CollectiveGraph(8, g::ALLREDUCE, kBytes, g::ALGORITHM_TREE, 3, kCompute, one_gpu_nodes);
  d::Recording rec = Stream(8, prism::rpc::OP_ALL_REDUCE, /*ring=*/false, kRealOps);
  for (d::RecordedLine& line : rec.lines) {  // NCCL reports the tree it ran
    for (prism::rpc::Event& e : *line.events.mutable_events()) {
      if (e.has_op_started()) e.mutable_op_started()->set_algorithm(prism::rpc::OP_ALGO_TREE);
    }
  }
  auto r = d::ReplaySessions(graph, rec);
  INFO(r.status().message());
  REQUIRE(r.ok());
  CheckClosedForm(*r, prism::rpc::OpSchedule::STREAM);
  // Each virtual sender feeds the real rank at half its NIC (double binary tree).
  for (const auto& s : r->schedules) {
    CHECK(s.schedule.link_bits_per_second() == graph.cluster().nic().bandwidth_bps() / 2);
  }
}

TEST_CASE("ring all-gather at 8 ranks follows the same closed form", "[hybrid][closed-form]") {
  const g::Graph graph =
      prism::testing::CollectiveGraph(8, g::ALLGATHER, kBytes * 8, g::ALGORITHM_RING, 3, kCompute);
  auto r = d::ReplaySessions(graph, Stream(8, prism::rpc::OP_ALL_GATHER, /*ring=*/true, kRealOps));
  INFO(r.status().message());
  REQUIRE(r.ok());
  CheckClosedForm(*r, prism::rpc::OpSchedule::MIRROR);
}

// Hand-worked (issue 27, item 12): a virtual rank on another node sends two
// messages of B = 1 MiB to the real rank in one group. Its NIC carries the
// first for the wire time only, p2p(B) - hop latency = 2^23 bits / 100 Gb/s
// = 83,887 ns (rounded up), so the second leaves then: the real receives'
// schedules start at 0 and at 83,887 ns (not 88,887 with the 5 us latency).
TEST_CASE("a virtual sender's grouped sends to the real rank follow each other by wire time, not latency",
          "[hybrid][closed-form]") {
  g::Graph graph;
  graph.mutable_job()->set_name("p2p");
  auto* cl = graph.mutable_cluster();
  cl->set_nodes(2);
  cl->set_gpus_per_node(1);
  cl->mutable_nic()->set_count(1);
  cl->mutable_nic()->set_bandwidth_bps(100'000'000'000ull);
  cl->mutable_nic()->set_latency_ns(5'000);
  cl->mutable_intra_node()->set_bandwidth_bps(800'000'000'000ull);
  cl->mutable_intra_node()->set_latency_ns(500);
  auto* world = graph.add_communicators();
  world->set_id(0);
  world->set_name("world");
  world->set_kind(g::COMM_KIND_WORLD);
  world->add_members(0);
  world->add_members(1);
  for (uint32_t r = 0; r < 2; ++r) {
    auto* p = graph.add_programs();
    p->set_id(r);
    p->set_streams(1);
    p->add_comm_slot_names("world");
    p->add_ops()->mutable_group_start();
    for (int i = 0; i < 2; ++i) {
      if (r == 0) {
        auto* recv = p->add_ops()->mutable_recv();
        recv->set_peer(1), recv->set_bytes(kBytes);
      } else {
        auto* send = p->add_ops()->mutable_send();
        send->set_peer(0), send->set_bytes(kBytes);
      }
    }
    p->add_ops()->mutable_group_end();
    auto* rank = graph.add_ranks();
    rank->set_rank(r), rank->set_program(r), rank->set_node(r), rank->add_comm_slots(0);
  }
  REQUIRE(g::ValidateGraph(graph).ok());
  d::Recording rec = Stream(2, prism::rpc::OP_ALL_REDUCE, true, {});
  d::RecordedLine line;
  line.kind = d::RecordedLine::kEvents;
  line.session = 1;
  for (uint64_t seq = 0; seq < 2; ++seq) {
    AddStarted(&line.events, seq + 1, Key(kWorldHash, prism::rpc::OP_RECV, seq, 1), 0, 2, kBytes, kStart, false);
  }
  rec.lines.push_back(line);
  auto r = d::ReplaySessions(graph, rec);
  INFO(r.status().message());
  REQUIRE(r.ok());
  const prism::engine::NetworkModel model(prism::engine::NetworkModel::LinkFiguresFromCluster(graph.cluster()));
  const int64_t wire = model.PointToPointTime(prism::Bytes(kBytes), false).count() - 5'000;
  std::map<uint64_t, int64_t> ready;
  for (const auto& s : r->schedules) {
    ready[s.schedule.key().seq()] = static_cast<int64_t>(s.schedule.ready_ns()) - kStart;
  }
  REQUIRE(ready.size() == 2);
  CHECK(ready[0] == 0);
  CHECK(wire == 83'887);
  CHECK(ready[1] == wire);
}

TEST_CASE("a late virtual rank (prismd --late): the real rank's collective is ready that much later, once",
          "[hybrid][closed-form][late]") {
  const g::Graph graph =
      prism::testing::CollectiveGraph(4, g::ALLREDUCE, kBytes, g::ALGORITHM_RING, 3, kCompute);
  const prism::Nanoseconds late_by = prism::FromMicroseconds(700);
  // Rank 2's first compute of iteration 0 (before collective 0) lasts 0.7 ms longer.
  auto r = d::ReplaySessions(graph, Stream(4, prism::rpc::OP_ALL_REDUCE, /*ring=*/true, kRealOps), {},
                             prism::engine::NcclBehaviour(), prism::engine::NicModel::kQueues,
                             {{2, 0, late_by}});
  INFO(r.status().message());
  REQUIRE(r.ok());
  REQUIRE(r->schedules.size() == kRealOps.size());
  for (size_t k = 0; k < kRealOps.size(); ++k) {
    INFO("collective " << k);
    const int64_t ready = (k == 0 ? late_by.count() : kRealOps[k - 1].end) + kCompute;
    CHECK(static_cast<int64_t>(r->schedules[k].schedule.ready_ns()) - kStart == ready);
  }
  // A real rank cannot be late this way: it is late in its own program.
  auto refused = d::ReplaySessions(graph, Stream(4, prism::rpc::OP_ALL_REDUCE, true, kRealOps), {},
                                   prism::engine::NcclBehaviour(), prism::engine::NicModel::kQueues,
                                   {{0, 0, late_by}});
  REQUIRE_FALSE(refused.ok());
  CHECK(std::string(refused.status().message()).find("rank 0 is a real rank") != std::string::npos);
}
