// Recorded GPU-host sessions replayed against the engine (CI's check of the
// timing logic without a GPU): the real ranks' recorded operation events must
// give the schedules prismd sent them on the GPU host. A change to how the
// engine or the hybrid scheduler times virtual ranks fails here; if the
// change is intended, record again on the GPU host (bench/fidelity/run-gpu.sh
// keeps sessions.rec per hybrid run) and regenerate the fixture:
//   PRISM_HYBRID_FIXTURE_SRC=.../sessions.rec build/test/hybrid_tests "[replay]"
// (writes test/fixtures/hybrid/<name>.rec with the operation events only).
#include <catch2/catch.hpp>

#include <cstdlib>
#include <set>
#include <string>

#include "daemon/hybrid/hybrid_run.h"
#include "daemon/hybrid/hybrid_scheduler.h"
#include "daemon/hybrid/session_replay.h"
#include "graphgen/fidelity_graph.h"
#include "graphgen/job_graph.h"
#include "graphgen/job_spec.h"
#include "test/graphgen_test_util.h"

namespace d = prism::daemon;

namespace {

// The recorded schedules, with the link that recordings made before
// 2026-12-03 gave a communicator whose members all share one node (the NIC
// share) replaced by the node's link, which the scheduler gives it since.
std::vector<d::SessionSchedule> WithSameNodeLinks(const d::Recording& rec, const prism::graph::Graph& graph) {
  const auto o = d::HybridSchedulerOptions::ForCluster(graph.cluster());
  std::set<uint64_t> one_node;
  for (const d::RecordedLine& l : rec.lines)
    if (l.kind == d::RecordedLine::kCommunicator && o.same_node.OneNode(l.comm.members))
      one_node.insert(l.comm.comm_hash);
  std::vector<d::SessionSchedule> schedules = d::RecordedSchedules(rec);
  for (d::SessionSchedule& s : schedules) {
    if (one_node.count(s.schedule.key().comm_hash()) == 0) continue;
    s.schedule.set_link_bits_per_second(o.same_node.bandwidth.count());
    s.schedule.set_link_latency_ns(static_cast<uint64_t>(o.same_node.latency.count()));
  }
  return schedules;
}

const std::string kFixtures = PRISM_HYBRID_FIXTURES;

prism::graph::Graph FixtureGraph(const std::string& spec) {
  auto s = prism::graphgen::ParseFidelitySpecFile(kFixtures + "/" + spec);
  REQUIRE(s.ok());
  auto g = prism::graphgen::GenerateFidelityGraph(*s);
  REQUIRE(g.ok());
  return *std::move(g);
}

d::Recording FixtureRecording(const std::string& name) {
  const std::string path = kFixtures + "/" + name;
  if (const char* src = std::getenv("PRISM_HYBRID_FIXTURE_SRC")) {
    auto full = d::ReadRecording(src);
    REQUIRE(full.ok());
    REQUIRE(d::WriteRecording(d::KeepOperationEvents(*full), path).ok());
  }
  auto rec = d::ReadRecording(path);
  INFO(rec.status().message());
  REQUIRE(rec.ok());
  return *std::move(rec);
}

// The model the fixtures' runs had (2026-11-30 to 2026-12-01): virtual
// sends ended with their receives, before the send completion at the
// connection's buffers (docs/network-model.md, "Send completion"), the
// start-up iteration's measurements calibrated, and a collective across nodes
// calibrated only when its real rank started after the model's end of it
// (docs/timing.md, "Calibration").
prism::engine::NcclBehaviour RecordedModel() {
  prism::engine::NcclBehaviour nccl;
  nccl.p2p_buffer = prism::Bytes(0);
  nccl.startup_calibrates = true;
  nccl.own_hold_unclean = true;  // no TP or DP collective across nodes calibrated then
  nccl.p2p_between_ring_steps = false;  // a pipeline send waited for a whole DP share then
  return nccl;
}

// Replays a causal run's recording (prismd --lookahead-ms 0) and checks that
// it gives all `schedules` of the live run to the nanosecond, with every one
// of `ops` real-rank operations matched and no divergence.
void CheckReplaysExactly(const std::string& recording, const std::string& spec, size_t schedules, uint64_t ops) {
  const d::Recording rec = FixtureRecording(recording);
  const auto recorded = d::RecordedSchedules(rec);
  REQUIRE(recorded.size() == schedules);
  auto replay = d::ReplaySessions(FixtureGraph(spec), rec, {}, RecordedModel());
  INFO(replay.status().message());
  REQUIRE(replay.ok());
  CHECK(replay->ops_matched == ops);
  CHECK(replay->ops_unmatched == 0);
  CHECK(replay->divergences == 0);
  const auto diff = d::CompareSchedules(recorded, replay->schedules, /*tolerance_ns=*/0);
  CHECK(diff.size() == 0);
  for (size_t i = 0; i < diff.size() && i < 5; ++i) UNSCOPED_INFO(diff[i]);
}

}  // namespace

TEST_CASE("a recorded N=4 sweep (1 real rank, H200) replays to the schedules prismd sent", "[hybrid][replay]") {
  // sweep-smoke: all_reduce and send/recv at 1, 16 and 64 MiB, 4 ranks, real
  // rank 0, 10 Gbit/s + 10 us (bench/fidelity on the GPU host, 2026-11-30, commit b4f1839).
  const d::Recording rec = FixtureRecording("sweep-smoke-hybrid1.rec");
  const auto recorded = d::RecordedSchedules(rec);
  REQUIRE(recorded.size() == 42);  // 21 all-reduces (MIRROR) + 21 receives from a virtual sender (STREAM)
  auto replay = d::ReplaySessions(FixtureGraph("sweep-smoke.yaml"), rec, {}, RecordedModel());
  INFO(replay.status().message());
  REQUIRE(replay.ok());
  CHECK(replay->engine_finished);
  CHECK(replay->ops_matched == 63);
  CHECK(replay->ops_unmatched == 0);
  CHECK(replay->divergences == 0);
  const auto diff = d::CompareSchedules(recorded, replay->schedules, /*tolerance_ns=*/0);
  for (const std::string& line : diff) UNSCOPED_INFO(line);
  CHECK(diff.empty());
}

TEST_CASE("the replay comparison names a schedule that moved", "[hybrid][replay]") {
  const d::Recording rec = FixtureRecording("sweep-smoke-hybrid1.rec");
  auto replay = d::ReplaySessions(FixtureGraph("sweep-smoke.yaml"), rec);
  REQUIRE(replay.ok());
  REQUIRE(!replay->schedules.empty());
  auto moved = replay->schedules;
  moved[3].schedule.set_ready_ns(moved[3].schedule.ready_ns() + 1000);
  const auto diff = d::CompareSchedules(replay->schedules, moved, 0);
  REQUIRE(diff.size() == 1);
  CHECK(diff[0].find("ready moved by 1000 ns") != std::string::npos);
  CHECK(d::CompareSchedules(replay->schedules, moved, 1000).empty());
  moved.pop_back();
  CHECK(d::CompareSchedules(replay->schedules, moved, 1000).size() == 1);
}

TEST_CASE("a recorded start of an N=8 synthetic step (1 real rank, H200) replays to the same schedules",
          "[hybrid][replay]") {
  // step-smoke: TP2 PP2 DP2 with compute, real rank 0; the recording ends in
  // the first iteration (that run hit an NCCL error in shared p2p comms, since
  // avoided with NCCL_NET_SHARED_COMMS=0), so the engine stops at its end.
  const d::Recording rec = FixtureRecording("step-smoke-hybrid1.rec");
  const auto recorded = d::RecordedSchedules(rec);
  REQUIRE(recorded.size() == 5);
  auto replay = d::ReplaySessions(FixtureGraph("step-smoke.yaml"), rec, {}, RecordedModel());
  INFO(replay.status().message());
  REQUIRE(replay.ok());
  CHECK_FALSE(replay->engine_finished);
  CHECK(replay->ops_unmatched == 0);
  const auto diff = d::CompareSchedules(recorded, replay->schedules, /*tolerance_ns=*/0);
  for (const std::string& line : diff) UNSCOPED_INFO(line);
  CHECK(diff.empty());
}

TEST_CASE("a whole causal N=8 step run (1 real rank, H200, lookahead 0) replays to all its schedules",
          "[hybrid][replay]") {
  // bench/fidelity step-n8 (TP2 PP2 DP2, 30 iterations), real rank 0,
  // prismd --lookahead-ms 0, queued NICs (2026-12-01, commit f68dfe3, two GPUs): every report
  // reached the engine before the events it could delay, so the plain
  // replay gives the live run's schedules, all 720 of them. Lost with a
  // lookahead (the engine then handles reports after events they precede).
  CheckReplaysExactly("step-n8-hybrid1-causal.rec", "step-n8.yaml", 720, 840);
}

TEST_CASE("the accepted N=8 step run (2.5 Gbit/s, yield shim, 1 real rank) replays to all its schedules",
          "[hybrid][replay]") {
  // bench/fidelity step-n8-2g5 (TP2 PP2 DP2 at 2.5 Gbit/s + 10 us, 30
  // iterations), real rank 0, YIELD_SLEEP_US=20, queued NICs (2026-12-01, commit f68dfe3,
  // two GPUs): -0.12% against its ground truth (worst iteration
  // 0.85%). A change in the engine's timing of these schedules fails here.
  CheckReplaysExactly("step-n8-2g5-hybrid1-shim.rec", "step-n8-2g5.yaml", 720, 840);
}

TEST_CASE("the accepted N=8 step run with two real ranks (0 and 4) replays to all its schedules",
          "[hybrid][replay]") {
  // As above, real ranks 0 and 4 (2026-12-01, commit f68dfe3, two GPUs): -0.16% / -0.17%
  // against the ground truth. Two sessions' reports feed one engine.
  CheckReplaysExactly("step-n8-2g5-hybrid2-shim.rec", "step-n8-2g5.yaml", 1200, 1680);
}

TEST_CASE("the N=8 collective sweep at 2.5 Gbit/s (1 real rank) replays to all its schedules", "[hybrid][replay]") {
  // bench/fidelity sweep-n8-2g5 (all-reduce, all-gather, reduce-scatter,
  // send/recv, 1..256 MiB), real rank 0, YIELD_SLEEP_US=20 (2026-12-01,
  // commit 38ec962): within 0.4% of its ground truth from 4 MiB.
  CheckReplaysExactly("sweep-n8-2g5-hybrid1-shim.rec", "sweep-n8-2g5.yaml", 260, 325);
}

TEST_CASE("the N=8 and N=16 tree all-reduce runs (2.5 Gbit/s, 1 real rank) replay to all their schedules",
          "[hybrid][replay][tree]") {
  // bench/fidelity sweep-n8-tree-2g5 and sweep-n16-tree-2g5 (NCCL_ALGO=Tree,
  // 16 and 64 MiB), real rank 0, TREE/SIMPLE on 2 channels (2026-12-01,
  // commit 0325366): STREAM schedules from the played tree with its 8-chunk window,
  // within 1.3% of the ground truths. A change in the play fails here.
  CheckReplaysExactly("sweep-n8-tree-2g5-hybrid1.rec", "sweep-n8-tree-2g5.yaml", 20, 20);
  CheckReplaysExactly("sweep-n16-tree-2g5-hybrid1.rec", "sweep-n16-tree-2g5.yaml", 20, 20);
}

TEST_CASE("the N=16 step on TP2 PP2 DP4 (2.5 Gbit/s, yield shim, 1 real rank) replays to all its schedules",
          "[hybrid][replay]") {
  // bench/fidelity step-n16-dp4-2g5 (25 iterations after 5), real rank 0,
  // queued NICs (2026-12-01, commit f68dfe3, two GPUs): -0.28% against its ground truth.
  CheckReplaysExactly("step-n16-dp4-2g5-hybrid1-shim.rec", "step-n16-dp4-2g5.yaml", 720, 840);
}

TEST_CASE("the N=16 TP2 PP2 DP4 step with its real rank 20 ms late in iteration 10 replays to all its schedules",
          "[hybrid][replay]") {
  // As above, rank 0 computing 20 ms longer in iteration 10 (2026-12-01,
  // commit f68dfe3): that iteration took 502.722 ms in the hybrid against 503.653 ms
  // in the ground truth (-0.18%). With the NIC calendar (commit 0325366) it took
  // 38 ms more than a plain iteration against the truth's 17-20 ms: a TP
  // all-reduce of rank 0's DP peers waited for a gap common to both its
  // members' NICs, behind the whole late DP all-gather.
  CheckReplaysExactly("step-n16-dp4-2g5-hybrid1-late-shim.rec", "step-n16-dp4-2g5.yaml", 720, 840);
}

namespace {

prism::graph::Graph MegatronJobGraph(const std::string& job) {
  return prism::graphgen::testing::GraphOfFile(std::string(PRISM_EXAMPLES_DIR) + "/megatron/" + job);
}

uint64_t CommOps(const prism::graph::Graph& g, uint32_t rank) {
  const auto& program = g.programs(static_cast<int>(g.ranks(static_cast<int>(rank)).program()));
  uint64_t n = 0;
  for (const auto& op : program.ops()) n += op.has_collective() || op.has_send() || op.has_recv();
  return n;
}

}  // namespace

// examples/megatron's job graph (Megatron-core's groups, Gloo groups, its
// buckets) says one iteration, as every job graph does; the program runs
// many. The real ranks' reports as the model plays them for 3 iterations (a
// stand-in for scripts/gpu/run-mcore.sh's recordings of train_mcore.py)
// must replay against that graph with every operation of every iteration
// matched: the recording says how many iterations prismd replayed.
TEST_CASE("Megatron-core's job graph: 3 iterations of real-rank reports replay with every operation matched",
          "[hybrid][replay][megatron]") {
  const prism::graph::Graph graph = MegatronJobGraph("gpt-8.yaml");
  prism::graph::Graph three = graph;
  (*three.mutable_job()->mutable_attributes())["iterations"] = "3";
  for (const std::vector<uint32_t>& real : {std::vector<uint32_t>{0}, {4}, {0, 4}}) {
    INFO("real ranks " << real.front() << (real.size() > 1 ? "+4" : ""));
    auto rec = d::ModelRecording(three, real, 1'700'000'000'000'000'000);
    REQUIRE(rec.ok());
    CHECK(rec->iterations == 3);
    auto replay = d::ReplaySessions(graph, *rec);
    INFO(replay.status().message());
    REQUIRE(replay.ok());
    uint64_t ops = 0;
    for (uint32_t r : real) ops += 3 * CommOps(graph, r);
    CHECK(replay->ops_matched == ops);
    CHECK(replay->ops_unmatched == 0);
    CHECK(replay->divergences == 0);
    // The engine replays the recording's 3 iterations; the last one's
    // trailing compute (the optimizer step) ends only when the rank's next
    // operation starts, which the recording never reports, so 2 complete.
    CHECK(replay->iteration_times.size() == 2);
  }
}

// scripts/gpu/run-mcore.sh on the GPU host (one H200, 2026-12-02, Megatron-LM
// d98e8a64dd, PyTorch 2.11, prism run of examples/megatron/train_mcore.py
// --iterations 12, Gloo groups on, lazy; 12 iterations, clean exit, 0
// divergences): the recorded operation events of real rank 0 (stage 0) and
// real rank 512 (stage 1) of 1024 replay against the job graph of
// examples/megatron/gpt-1024.yaml with every operation matched.
// The recordings predate the header's "iterations"; the live prismd replayed
// HybridIterations of that graph (1000).
TEST_CASE("Megatron-core at 1024 ranks on the GPU host (stage 0 and stage 1): the recorded run replays matched",
          "[hybrid][replay][megatron]") {
  const prism::graph::Graph graph = MegatronJobGraph("gpt-1024.yaml");
  for (const auto& [name, ops] : {std::pair<std::string, uint64_t>{"mcore-1024-r0-lazy.rec", 924},
                                  std::pair<std::string, uint64_t>{"mcore-1024-r512-lazy.rec", 1068}}) {
    INFO(name);
    d::Recording rec = FixtureRecording(name);
    if (rec.iterations == 0) rec.iterations = d::HybridIterations(graph, 0);
    const uint32_t rank = rec.real_ranks.at(0);
    CHECK(ops == 12 * CommOps(graph, rank));
    auto replay = d::ReplaySessions(graph, rec, {}, RecordedModel());  // recorded before send completion at the buffers
    INFO(replay.status().message());
    REQUIRE(replay.ok());
    CHECK(replay->ops_matched == ops);
    CHECK(replay->ops_unmatched == 0);
    CHECK(replay->divergences == 0);
    CHECK(replay->iteration_times.size() == 11);  // the 12th's trailing compute ends after the recording
    // The live engine ran behind the wall clock at times (prismd.log: engine
    // lag max 15.9 ms and 17.0 ms), handling some reports after events they should have
    // delayed; the unpaced replay applies each at its time. So 60 of r0's 876
    // schedules (21 of r512's 1020) moved, none by 3 ms or more.
    const auto diff = d::CompareSchedules(WithSameNodeLinks(rec, graph), replay->schedules, /*tolerance_ns=*/3'000'000);
    for (size_t i = 0; i < diff.size() && i < 5; ++i) UNSCOPED_INFO(diff[i]);
    CHECK(diff.empty());
  }
}
