// The hybrid path plugin -> session -> engine -> session -> plugin without
// sockets: a real rank's reported NCCL operations drive the engine, and the
// engine's virtual peers come back as operation schedules (docs/timing.md).
#include <catch2/catch.hpp>

#include <unistd.h>

#include <filesystem>
#include <string>
#include <thread>

#include "graphgen/fidelity_graph.h"
#include "daemon/engine/tree_pipeline.h"
#include "absl/strings/str_cat.h"
#include "daemon/hybrid/hybrid_run.h"
#include "daemon/hybrid/session_recorder.h"
#include "daemon/hybrid/session_replay.h"
#include "test/daemon_test_graphs.h"
#include "test/hybrid_harness.h"

namespace g = prism::graph;
using prism::testing::AddFinished;
using prism::testing::AddStarted;
using prism::testing::CollectiveGraph;
using prism::testing::HybridHarness;
using prism::testing::Key;
using prism::testing::RealtimeNow;

namespace {

g::Graph SweepGraph(const std::vector<std::string>& ops, uint32_t world, uint32_t reps) {
  prism::graphgen::FidelitySpec s;
  s.name = "t";
  s.kind = "sweep";
  s.world = world;
  s.ops = ops;
  s.sizes = {1 << 20};
  s.iterations = reps;
  s.warmup = 0;
  s.link_gbps = 10;
  s.link_latency_us = 10;
  return *prism::graphgen::GenerateFidelityGraph(s);
}

constexpr uint64_t kWorldHash = 0xabcdef;

// Real rank 0 of 4 runs the world's first all-reduce: it starts, gets its
// schedule and finishes.
void RunFirstAllReduce(HybridHarness& h) {
  h.Communicator(kWorldHash, 0, {0, 1, 2, 3});
  const int64_t t = RealtimeNow();
  prism::rpc::EventBatch first;
  AddStarted(&first, 1, Key(kWorldHash, prism::rpc::OP_ALL_REDUCE, 0), 0, 4, 1 << 20, t);
  h.Feed(1, first);
  REQUIRE(h.WaitSchedule(Key(kWorldHash, prism::rpc::OP_ALL_REDUCE, 0), std::chrono::seconds(5)).has_value());
  prism::rpc::EventBatch done;
  AddFinished(&done, 1, t + 100'000, t + 2'000'000);
  h.Feed(1, done);
}

}  // namespace

TEST_CASE("a real rank's all-reduces get MIRROR schedules once the virtual members arrived", "[hybrid]") {
  HybridHarness h(SweepGraph({"allreduce"}, 4, 3), {0});
  h.Communicator(kWorldHash, 0, {0, 1, 2, 3});
  for (uint64_t seq = 0; seq < 3; ++seq) {
    prism::rpc::EventBatch b;
    const int64_t t = RealtimeNow();
    AddStarted(&b, seq + 1, Key(kWorldHash, prism::rpc::OP_ALL_REDUCE, seq), 0, 4, 1 << 20, t);
    h.Feed(1, b);
    auto s = h.WaitSchedule(Key(kWorldHash, prism::rpc::OP_ALL_REDUCE, seq), std::chrono::seconds(5));
    if (!s) {
      auto r = h.Stop();
      const std::string why = r.ok() ? std::string("engine ok") : std::string(r.status().message());
      FAIL(why);
    }
    CHECK(s->mode() == prism::rpc::OpSchedule::MIRROR);
    CHECK(s->ready_ns() > 0);
    prism::rpc::EventBatch f;
    AddFinished(&f, seq + 1, t + 100'000, t + 2'000'000);
    h.Feed(1, f);
  }
  auto r = h.Stop();
  REQUIRE(r.ok());
  CHECK(h.scheduler().counters().ops_matched == 3);
  CHECK(h.scheduler().counters().ops_unmatched == 0);
}

namespace {

// Real rank 0 of 4 starts one `kind` collective (`algorithm` in the graph;
// NCCL's name `nccl_algo` in its report, as the plugin passes it on) ahead of
// its members, who compute 50 ms before it while the real rank's compute is
// real and took no time: it must get a hold at once, then the members'
// schedule in `mode` replacing it.
void CheckEarlyStartHeld(g::CollectiveKind kind, g::Algorithm algorithm, prism::rpc::OpKind op, uint64_t bytes,
                         const std::string& nccl_algo, prism::rpc::OpSchedule::Mode mode) {
  HybridHarness h(CollectiveGraph(4, kind, 1 << 20, algorithm, 1, 50'000'000), {0}, prism::FromMilliseconds(20),
                  prism::Nanoseconds(0), false, prism::FromSeconds(5));
  h.Communicator(kWorldHash, 0, {0, 1, 2, 3});
  const prism::rpc::OpKey key = Key(kWorldHash, op, 0);
  prism::rpc::EventBatch b;
  AddStarted(&b, 1, key, 0, 4, bytes, RealtimeNow(), /*ring=*/nccl_algo == "RING");
  prism::rpc::OpStarted* started = b.mutable_events(0)->mutable_op_started();
  if (nccl_algo != "RING") started->set_algorithm(prism::rpc::OP_ALGO_OTHER);  // the plugin's for PAT
  started->set_algo_name(nccl_algo);
  started->set_proto_name("SIMPLE");
  h.Feed(1, b);
  const auto held = h.WaitSchedule(key, std::chrono::milliseconds(0), /*holds=*/true);
  REQUIRE(held.has_value());
  CHECK(held->hold());
  CHECK(held->mode() == prism::rpc::OpSchedule::MIRROR);
  CHECK(h.scheduler().counters().holds == 1);
  // The members arrive: their schedule replaces the hold.
  const auto s = h.WaitSchedule(key, std::chrono::seconds(5));
  REQUIRE(s.has_value());
  CHECK_FALSE(s->hold());
  CHECK(s->mode() == mode);
  CHECK(s->ready_ns() > 0);
  REQUIRE(h.Stop().ok());
}

}  // namespace

TEST_CASE("a ring whose virtual members are still computing when the real rank starts it gets a hold, then their "
          "schedule", "[hybrid]") {
  CheckEarlyStartHeld(g::ALLREDUCE, g::ALGORITHM_DEFAULT, prism::rpc::OP_ALL_REDUCE, 1 << 20, "RING",
                      prism::rpc::OpSchedule::MIRROR);
}

// The same for NCCL's PAT (issue 22): the plugin times a PAT receive from
// the members' arrival (PAT's floor), so an early one waits for their
// schedule as a ring does. Before 2026-12-02 a PAT operation got no hold and
// its receives, resolved before the schedule came, took late members as on
// time.
TEST_CASE("a PAT all-gather whose virtual members are still computing when the real rank starts it gets a hold, "
          "then their schedule", "[hybrid]") {
  CheckEarlyStartHeld(g::ALLGATHER, g::ALGORITHM_PAT, prism::rpc::OP_ALL_GATHER, (1 << 20) / 4, "PAT",
                      prism::rpc::OpSchedule::STREAM);
}

// StopPushing: prismd tears its session service (the sink) down before the
// scheduler, so once it returns the pusher must call no sink, though the
// members' schedule comes due after it.
TEST_CASE("after StopPushing the scheduler's pusher hands no schedule to the sink", "[hybrid]") {
  HybridHarness h(CollectiveGraph(4, g::ALLREDUCE, 1 << 20, g::ALGORITHM_DEFAULT, 1, 50'000'000), {0},
                  prism::FromMilliseconds(20), prism::Nanoseconds(0), false, prism::FromSeconds(5));
  h.Communicator(kWorldHash, 0, {0, 1, 2, 3});
  const prism::rpc::OpKey key = Key(kWorldHash, prism::rpc::OP_ALL_REDUCE, 0);
  prism::rpc::EventBatch b;
  AddStarted(&b, 1, key, 0, 4, 1 << 20, RealtimeNow());
  h.Feed(1, b);
  REQUIRE(h.WaitSchedule(key, std::chrono::milliseconds(0), /*holds=*/true).has_value());  // the reply's hold
  h.scheduler().StopPushing();
  h.scheduler().StopPushing();  // idempotent
  // The members arrive 50 ms in; their schedule would be pushed.
  CHECK_FALSE(h.WaitSchedule(key, std::chrono::milliseconds(300)).has_value());
  h.scheduler().Flush();  // returns: nothing will push
  REQUIRE(h.Stop().ok());
}

namespace {

// The newest schedule for `key` that is (`forecast`) or is not a forecast
// (OpSchedule.after), waiting up to `timeout`.
std::optional<prism::rpc::OpSchedule> WaitKind(HybridHarness& h, const prism::rpc::OpKey& key, bool forecast,
                                               std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  do {
    const std::vector<prism::rpc::OpSchedule> all = h.AllSchedules();
    for (auto it = all.rbegin(); it != all.rend(); ++it)
      if (it->key().seq() == key.seq() && it->key().kind() == key.kind() && !it->hold() &&
          it->has_after() == forecast)
        return *it;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  } while (std::chrono::steady_clock::now() < deadline);
  return std::nullopt;
}

}  // namespace

TEST_CASE("a ring the real rank enqueues before its previous one ended is not held: its members wait for the real "
          "rank, and their schedule follows its end", "[hybrid]") {
  HybridHarness h(SweepGraph({"allreduce"}, 4, 2), {0}, prism::FromMilliseconds(20), prism::Nanoseconds(0), false,
                  prism::FromSeconds(5));
  h.Communicator(kWorldHash, 0, {0, 1, 2, 3});
  const prism::rpc::OpKey first = Key(kWorldHash, prism::rpc::OP_ALL_REDUCE, 0);
  const prism::rpc::OpKey second = Key(kWorldHash, prism::rpc::OP_ALL_REDUCE, 1);
  prism::rpc::EventBatch b;
  const int64_t t = RealtimeNow();
  AddStarted(&b, 1, first, 0, 4, 1 << 20, t);
  h.Feed(1, b);
  REQUIRE(h.WaitSchedule(first, std::chrono::seconds(5)).has_value());
  // NCCL enqueues the second all-reduce before the first has ended: its
  // virtual members cannot be there yet, but only because they wait for the
  // real rank's end of the first. They are not late: no hold (before
  // 2026-12-02 it got one, and every ring after another waited for the
  // report of the first's end and the engine's schedule).
  prism::rpc::EventBatch b2;
  AddStarted(&b2, 2, second, 0, 4, 1 << 20, RealtimeNow());
  h.Feed(1, b2);
  // Since 2026-12-02 the engine forecasts it instead: nothing lies between
  // the two, so the members reach the second when the first ends
  // (OpSchedule.after; "a ring whose virtual members only compute ..." below).
  const auto early = h.WaitSchedule(second, std::chrono::milliseconds(50), /*holds=*/true);
  CHECK((!early || (!early->hold() && early->has_after())));
  // The first ends: the members reach the second, and their schedule comes.
  prism::rpc::EventBatch f;
  AddFinished(&f, 1, t + 100'000, RealtimeNow());
  h.Feed(1, f);
  const auto s = WaitKind(h, second, /*forecast=*/false, std::chrono::seconds(5));
  REQUIRE(s.has_value());
  CHECK_FALSE(s->hold());
  CHECK(s->ready_ns() > 0);
  CHECK(h.scheduler().counters().holds == 0);
  REQUIRE(h.Stop().ok());
}

namespace {

constexpr uint64_t kDpHash = 0xd0d0;

// Real rank 0 of 8 starts the world's gradient-norm all-reduce of
// `norm_bytes` (NormThenGatherGraph: the members compute 50 ms after it,
// then all-gather 8 MiB in the even ranks' group) and, before its report of
// that all-reduce's end, the all-gather. Returns whether the all-gather got
// its hold before that report; then the all-reduce ends and the members'
// schedule must replace whatever it had.
bool GatherHeldBeforeNormEnds(uint64_t norm_bytes) {
  HybridHarness h(prism::testing::NormThenGatherGraph(8, norm_bytes, 50'000'000, 8 << 20), {0},
                  prism::FromMilliseconds(20), prism::Nanoseconds(0), false, prism::FromSeconds(5));
  h.Communicator(kWorldHash, 0, {0, 1, 2, 3, 4, 5, 6, 7});
  h.Communicator(kDpHash, 1, {0, 2, 4, 6});
  const prism::rpc::OpKey norm = Key(kWorldHash, prism::rpc::OP_ALL_REDUCE, 0);
  const prism::rpc::OpKey gather = Key(kDpHash, prism::rpc::OP_ALL_GATHER, 0);
  const int64_t t = RealtimeNow();
  prism::rpc::EventBatch b;
  AddStarted(&b, 1, norm, 0, 8, norm_bytes, t);
  h.Feed(1, b);
  REQUIRE(h.WaitSchedule(norm, std::chrono::seconds(5)).has_value());
  prism::rpc::EventBatch b2;
  AddStarted(&b2, 2, gather, 0, 4, (8 << 20) / 4, RealtimeNow());
  h.Feed(1, b2);
  const auto early = h.WaitSchedule(gather, std::chrono::milliseconds(50), /*holds=*/true);
  const bool held = early.has_value() && early->hold();
  CHECK((!early || early->hold()));  // no schedule while the members still wait for the norm's end
  prism::rpc::EventBatch f;
  AddFinished(&f, 1, t + 100'000, RealtimeNow());
  h.Feed(1, f);
  const auto s = h.WaitSchedule(gather, std::chrono::seconds(5));
  REQUIRE(s.has_value());
  CHECK_FALSE(s->hold());
  CHECK(s->ready_ns() > 0);
  CHECK(h.scheduler().counters().divergences == 0);
  REQUIRE(h.Stop().ok());
  return held;
}

}  // namespace

// A 4-byte all-reduce over 8 ranks leaves ring chunks empty: NCCL's kernel
// ends long before the plugin completes its last receive (at 8192 ranks
// train_gpt.py's gradient norm, over 100 ms), and the GPU runs the DP
// all-gather after it meanwhile. Until 2026-12-03 that all-gather's answer
// waited for the all-reduce's report: no hold, and the plugin took its
// members, still in the norm in the engine, to be on time. A full-sized
// all-reduce still holds back the answer (its kernel ends with its receives).
TEST_CASE("a ring the real rank starts behind an all-reduce with empty chunks gets its hold before that all-reduce's "
          "report, not after", "[hybrid]") {
  CHECK(GatherHeldBeforeNormEnds(4));
  CHECK_FALSE(GatherHeldBeforeNormEnds(1 << 20));
}

namespace {

// TP2: real rank 0 and virtual rank 1, kCompute of compute before each of
// three 1 MiB all-reduces; `first` and `second` are the first two.
struct Tp2Ring {
  static constexpr int64_t kCompute = 5'000'000;
  Tp2Ring()
      : h(CollectiveGraph(2, g::ALLREDUCE, 1 << 20, g::ALGORITHM_DEFAULT, 3, kCompute), {0}, prism::Nanoseconds(0)) {
    h.Communicator(kWorldHash, 0, {0, 1});
  }
  HybridHarness h;
  const prism::rpc::OpKey first = Key(kWorldHash, prism::rpc::OP_ALL_REDUCE, 0);
  const prism::rpc::OpKey second = Key(kWorldHash, prism::rpc::OP_ALL_REDUCE, 1);
};

}  // namespace

TEST_CASE("a ring whose virtual members only compute after the real rank's previous ring gets a forecast from that "
          "ring's end before it ends: no hold, no wait for the report", "[hybrid][forecast]") {
  // Rank 1 reaches all-reduce 1 at max(its arrival at all-reduce 0, rank
  // 0's end of it) + 5 ms: the engine says so as soon as all-reduce 0 has
  // all its members, long before rank 0 reports its end.
  Tp2Ring ring;
  HybridHarness& h = ring.h;
  const prism::rpc::OpKey& first = ring.first;
  const prism::rpc::OpKey& second = ring.second;
  constexpr int64_t kCompute = Tp2Ring::kCompute;
  prism::rpc::EventBatch b;
  AddStarted(&b, 1, first, 0, 2, 1 << 20, RealtimeNow());
  h.Feed(1, b);
  const auto s0 = h.WaitSchedule(first, std::chrono::seconds(5));
  REQUIRE(s0.has_value());
  // The host enqueues the second all-reduce while the first runs.
  prism::rpc::EventBatch b2;
  AddStarted(&b2, 2, second, 0, 2, 1 << 20, RealtimeNow());
  h.Feed(1, b2);
  const auto f = WaitKind(h, second, /*forecast=*/true, std::chrono::seconds(2));
  REQUIRE(f.has_value());  // before the first has ended
  CHECK(f->mode() == prism::rpc::OpSchedule::MIRROR);
  CHECK(f->after().seq() == 0);
  CHECK(f->after().kind() == prism::rpc::OP_ALL_REDUCE);
  CHECK(f->after().comm_hash() == kWorldHash);
  CHECK(f->after_delay_ns() == static_cast<uint64_t>(kCompute));
  // Not before the members' arrival at the first + 5 ms (later when the
  // real rank reached the first after them: the engine issued it then).
  CHECK(f->ready_ns() >= s0->ready_ns() + kCompute);
  const uint64_t holds = h.scheduler().counters().holds;
  // The first ends: the members' own schedule follows at their arrival, at
  // the time the forecast gave; the second is never held.
  const int64_t end = RealtimeNow();
  prism::rpc::EventBatch done;
  AddFinished(&done, 1, end - 100'000, end);
  h.Feed(1, done);
  const auto plain = WaitKind(h, second, /*forecast=*/false, std::chrono::seconds(5));
  REQUIRE(plain.has_value());
  CHECK(plain->ready_ns() == std::max<uint64_t>(f->ready_ns(), static_cast<uint64_t>(end) + f->after_delay_ns()));
  CHECK(h.scheduler().counters().holds == holds);
  CHECK(h.scheduler().counters().forecasts >= 1);
  CHECK(h.scheduler().counters().forecast_misses == 0);
  REQUIRE(h.Stop().ok());
}

TEST_CASE("a ring the real rank finished before its virtual members arrived still forecasts the next ring: its "
          "schedule leaves when they arrive, the compute between ahead of its time", "[hybrid][forecast]") {
  // Rank 0 runs all-reduce 0 on its own floor and reports its end long
  // before virtual rank 1 has done its 5 ms of compute. When rank 1
  // arrives, the engine knows both ends: it forecasts all-reduce 1 then
  // (arrival + 5 ms), not when rank 1 reaches it (before 2026-12-03 it did
  // not: a Megatron-core TP all-reduce whose real member ran ahead got its
  // schedule after the time it gives, 30-60 us median in paced replays).
  Tp2Ring ring;
  HybridHarness& h = ring.h;
  const prism::rpc::OpKey& first = ring.first;
  const prism::rpc::OpKey& second = ring.second;
  constexpr int64_t kCompute = Tp2Ring::kCompute;
  const int64_t t = RealtimeNow();
  prism::rpc::EventBatch b;
  AddStarted(&b, 1, first, 0, 2, 1 << 20, t);
  AddFinished(&b, 1, t + 50'000, t + 100'000);
  AddStarted(&b, 2, second, 0, 2, 1 << 20, t + 200'000);
  h.Feed(1, b);
  const auto f = WaitKind(h, second, /*forecast=*/true, std::chrono::seconds(2));
  REQUIRE(f.has_value());
  CHECK(f->after().seq() == 0);
  const auto plain = WaitKind(h, second, /*forecast=*/false, std::chrono::seconds(5));
  REQUIRE(plain.has_value());
  // The plugin's reading of the forecast (its end of all-reduce 0: t + 100 us) is the engine's time.
  CHECK(std::max<uint64_t>(f->ready_ns(), static_cast<uint64_t>(t + 100'000) + f->after_delay_ns()) ==
        plain->ready_ns());
  const auto s0 = h.WaitSchedule(first, std::chrono::seconds(1));
  REQUIRE(s0.has_value());
  CHECK(plain->ready_ns() == s0->ready_ns() + kCompute);  // rank 1's arrival at 0, then its compute
  CHECK(h.scheduler().counters().forecast_misses == 0);
  REQUIRE(h.Stop().ok());
}

namespace {

// Ranks 0 (real), 1 and 2 on one node. Rank 0: an all-reduce X on {0, 2},
// then M on {0, 1}, 5 ms of compute, N on {0, 1}; rank 1: M, 5 ms, N;
// rank 2: X.
g::Graph AnchorGraph() {
  g::Graph g;
  g.mutable_job()->set_name("anchor-test");
  g.mutable_job()->set_world_size(3);
  g::Cluster* cl = g.mutable_cluster();
  cl->set_gpus_per_node(8), cl->set_nodes(1);
  cl->mutable_nic()->set_count(8), cl->mutable_nic()->set_bandwidth_bps(400'000'000'000ull);
  cl->mutable_nic()->set_latency_ns(5'000);
  cl->mutable_intra_node()->set_bandwidth_bps(3'600'000'000'000ull), cl->mutable_intra_node()->set_latency_ns(1'000);
  const std::vector<std::vector<uint32_t>> members = {{0, 2}, {0, 1}};
  for (uint32_t c = 0; c < 2; ++c) {
    g::Communicator* comm = g.add_communicators();
    comm->set_id(c), comm->set_kind(c == 0 ? g::COMM_KIND_DP : g::COMM_KIND_TP), comm->set_name(c == 0 ? "a" : "b");
    comm->mutable_init();
    for (uint32_t m : members[c]) comm->add_members(m);
  }
  auto all_reduce = [](g::Program* p, uint32_t slot) {
    g::Op* op = p->add_ops();
    op->mutable_collective()->set_comm_slot(slot), op->mutable_collective()->set_kind(g::ALLREDUCE);
    op->mutable_collective()->set_bytes(1 << 20), op->mutable_collective()->set_dtype(g::BF16);
  };
  auto compute = [](g::Program* p) {
    g::Op* op = p->add_ops();
    op->mutable_compute()->set_duration_ns(5'000'000), op->mutable_compute()->set_label("compute");
  };
  const std::vector<std::vector<uint32_t>> slots = {{0, 1}, {1}, {0}};  // communicators per program's slot
  for (uint32_t r = 0; r < 3; ++r) {
    g::Program* p = g.add_programs();
    p->set_id(r), p->set_name(absl::StrCat("p", r)), p->set_streams(1);
    for (uint32_t c : slots[r]) p->add_comm_slot_names(c == 0 ? "a" : "b");
    if (r == 0) all_reduce(p, 0);
    if (r < 2) all_reduce(p, r == 0 ? 1 : 0), compute(p), all_reduce(p, r == 0 ? 1 : 0);
    if (r == 2) all_reduce(p, 0);
    g::Rank* rk = g.add_ranks();
    rk->set_rank(r), rk->set_program(r), rk->set_node(0), rk->set_local_gpu(r);
    for (uint32_t c : slots[r]) rk->add_comm_slots(c);
  }
  return g;
}

void SleepUntilRealtime(int64_t t) {
  while (RealtimeNow() < t) std::this_thread::sleep_for(std::chrono::microseconds(100));
}

}  // namespace

TEST_CASE("a forecast runs from the real member's issue too: the engine completes its ring no earlier than it "
          "issued it, after the rank's earlier operation ended", "[hybrid][forecast]") {
  HybridHarness h(AnchorGraph(), {0}, prism::Nanoseconds(0));
  constexpr uint64_t kHashA = 0xa, kHashB = 0xb;
  h.Communicator(kHashA, 0, {0, 2});
  h.Communicator(kHashB, 1, {0, 1});
  const prism::rpc::OpKey x = Key(kHashA, prism::rpc::OP_ALL_REDUCE, 0);
  const prism::rpc::OpKey m = Key(kHashB, prism::rpc::OP_ALL_REDUCE, 0);
  const prism::rpc::OpKey n = Key(kHashB, prism::rpc::OP_ALL_REDUCE, 1);
  const int64_t t0 = RealtimeNow();
  prism::rpc::EventBatch started;  // the host enqueues all three
  AddStarted(&started, 1, x, 0, 2, 1 << 20, t0);
  AddStarted(&started, 2, m, 0, 2, 1 << 20, t0);
  AddStarted(&started, 3, n, 0, 2, 1 << 20, t0);
  h.Feed(1, started);
  // M's report comes first (its transfers ended at t0 + 1 ms), X's after:
  // X ended at t0 + 2 ms. The engine issues the rank's M only then, and
  // its virtual member 1 (there since the start) ends M at t0 + 2 ms.
  SleepUntilRealtime(t0 + 1'500'000);
  prism::rpc::EventBatch m_done;
  AddFinished(&m_done, 2, t0 + 500'000, t0 + 1'000'000);
  h.Feed(1, m_done);
  SleepUntilRealtime(t0 + 3'000'000);
  prism::rpc::EventBatch x_done;
  AddFinished(&x_done, 1, t0 + 100'000, t0 + 2'000'000);
  h.Feed(1, x_done);
  const auto f = WaitKind(h, n, /*forecast=*/true, std::chrono::seconds(2));
  REQUIRE(f.has_value());
  const auto plain = WaitKind(h, n, /*forecast=*/false, std::chrono::seconds(5));
  REQUIRE(plain.has_value());
  CHECK(plain->ready_ns() == static_cast<uint64_t>(t0 + 7'000'000));  // t0 + 2 ms + 5 ms of compute
  // What the plugin makes of the forecast with its own end of M (t0 + 1 ms).
  CHECK(std::max<uint64_t>(f->ready_ns(), static_cast<uint64_t>(t0 + 1'000'000) + f->after_delay_ns()) ==
        plain->ready_ns());
  CHECK(h.scheduler().counters().forecast_misses == 0);
  REQUIRE(h.Stop().ok());
}

TEST_CASE("MIRROR schedules carry prismd's NCCL step cost (the ring's lockstep in the plugin), STREAM ones none",
          "[hybrid]") {
  HybridHarness h(SweepGraph({"allreduce"}, 4, 1), {0}, prism::FromMilliseconds(20), prism::Nanoseconds(12'500));
  h.Communicator(kWorldHash, 0, {0, 1, 2, 3});
  prism::rpc::EventBatch b;
  AddStarted(&b, 1, Key(kWorldHash, prism::rpc::OP_ALL_REDUCE, 0), 0, 4, 1 << 20, RealtimeNow());
  h.Feed(1, b);
  auto s = h.WaitSchedule(Key(kWorldHash, prism::rpc::OP_ALL_REDUCE, 0), std::chrono::seconds(5));
  REQUIRE(s.has_value());
  CHECK(s->mode() == prism::rpc::OpSchedule::MIRROR);
  CHECK(s->step_cost_ns() == 12'500);
  // An operation the graph lacks is on time, and a ring still carries it.
  prism::rpc::EventBatch u;
  AddStarted(&u, 2, Key(0x1234, prism::rpc::OP_ALL_REDUCE, 0), 0, 4, 1 << 20, RealtimeNow());
  h.Feed(1, u);
  auto unmatched = h.WaitSchedule(Key(0x1234, prism::rpc::OP_ALL_REDUCE, 0), std::chrono::seconds(5));
  REQUIRE(unmatched.has_value());
  CHECK(unmatched->unmatched());
  CHECK(unmatched->step_cost_ns() == 12'500);
  REQUIRE(h.Stop().ok());
}

TEST_CASE("after all-reduces, a virtual sender's send to the real rank becomes a STREAM schedule", "[hybrid]") {
  HybridHarness h(SweepGraph({"allreduce", "sendrecv"}, 4, 2), {0});
  h.Communicator(kWorldHash, 0, {0, 1, 2, 3});
  uint64_t id = 1;
  for (uint64_t seq = 0; seq < 2; ++seq) {
    prism::rpc::EventBatch b;
    const int64_t t = RealtimeNow();
    AddStarted(&b, id, Key(kWorldHash, prism::rpc::OP_ALL_REDUCE, seq), 0, 4, 1 << 20, t);
    AddFinished(&b, id, t + 100'000, t + 1'000'000);
    ++id;
    h.Feed(1, b);
  }
  for (uint64_t seq = 0; seq < 2; ++seq) {
    prism::rpc::EventBatch b;
    const int64_t t = RealtimeNow();
    AddStarted(&b, id, Key(kWorldHash, prism::rpc::OP_SEND, seq, 1), 0, 4, 1 << 20, t, false);
    AddStarted(&b, id + 1, Key(kWorldHash, prism::rpc::OP_RECV, seq, 3), 0, 4, 1 << 20, t, false);
    h.Feed(1, b);
    auto s = h.WaitSchedule(Key(kWorldHash, prism::rpc::OP_RECV, seq, 3), std::chrono::seconds(5));
    INFO("receive " << seq);
    REQUIRE(s.has_value());
    CHECK(s->mode() == prism::rpc::OpSchedule::STREAM);
    CHECK(s->ready_ns() > 0);
    prism::rpc::EventBatch f;
    AddFinished(&f, id, t + 10'000, t + 900'000);
    AddFinished(&f, id + 1, 0, t + 950'000);
    h.Feed(1, f);
    id += 2;
  }
  auto r = h.Stop();
  REQUIRE(r.ok());
  CHECK(h.scheduler().counters().ops_unmatched == 0);
}

// The plugin waits for a schedule of every operation with virtual peers (a
// ring too: its virtual members may still be computing), so an operation
// prismd cannot match must still get one, "on time", beside the divergence.
TEST_CASE("a ring the graph lacks, or on an unknown communicator, gets an on-time MIRROR schedule",
          "[hybrid]") {
  HybridHarness h(SweepGraph({"allreduce"}, 4, 1), {0});
  h.Communicator(kWorldHash, 0, {0, 1, 2, 3});
  constexpr uint64_t kUnknownHash = 0x5eed;
  prism::rpc::EventBatch b;
  const int64_t t = RealtimeNow();
  AddStarted(&b, 1, Key(kWorldHash, prism::rpc::OP_ALL_GATHER, 0), 0, 4, 1 << 20, t);  // the graph has none
  AddStarted(&b, 2, Key(kUnknownHash, prism::rpc::OP_ALL_REDUCE, 0), 0, 4, 1 << 20, t);
  h.Feed(1, b);
  for (const uint64_t hash : {kWorldHash, kUnknownHash}) {
    INFO("communicator " << hash);
    auto s = h.WaitSchedule(Key(hash, hash == kWorldHash ? prism::rpc::OP_ALL_GATHER : prism::rpc::OP_ALL_REDUCE, 0),
                            std::chrono::seconds(5));
    REQUIRE(s.has_value());
    CHECK(s->mode() == prism::rpc::OpSchedule::MIRROR);
    CHECK(s->unmatched());
    CHECK(static_cast<int64_t>(s->ready_ns()) == t);
  }
  auto r = h.Stop();
  CHECK(h.scheduler().counters().ops_unmatched == 2);
  CHECK(h.scheduler().counters().divergences == 2);
}

// A captured graph keeps the program's repeating iteration and leaves out
// its start-up (pytorch/examples' DDP program under prism capture on the GPU
// host, 2026-12-03: its start-up all-gather and broadcasts stopped the run on
// the captured graph). The divergence says so, and what lets them through,
// for operations before the rank's first matched one only, and only on a
// captured graph.
TEST_CASE("a captured graph's divergence before the first matched operation names the start-up it leaves out",
          "[hybrid]") {
  for (const bool captured : {true, false}) {
    INFO("captured " << captured);
    prism::graph::Graph g = SweepGraph({"allreduce"}, 4, 2);
    if (captured) g.mutable_job()->set_generator("prism-graphgen extrapolate");
    HybridHarness h(g, {0});
    h.Communicator(kWorldHash, 0, {0, 1, 2, 3});
    prism::rpc::EventBatch startup;  // DDP's parameter check: an all-gather the captured iteration lacks
    AddStarted(&startup, 1, Key(kWorldHash, prism::rpc::OP_ALL_GATHER, 0), 0, 4, 32, RealtimeNow());
    h.Feed(1, startup);
    REQUIRE(h.WaitSchedule(Key(kWorldHash, prism::rpc::OP_ALL_GATHER, 0), std::chrono::seconds(5)).has_value());
    const std::optional<std::string> reason = h.divergences().Tick().stop_reason;
    REQUIRE(reason.has_value());
    CHECK(reason->find("ALL_GATHER") != std::string::npos);
    const bool named = reason->find("captured from the program") != std::string::npos &&
                       reason->find("--on-divergence follow") != std::string::npos;
    CHECK(named == captured);
  }
  // After a matched operation, a missing one is the program's divergence, not its start-up.
  prism::graph::Graph g = SweepGraph({"allreduce"}, 4, 2);
  g.mutable_job()->set_generator("prism-graphgen extrapolate");
  HybridHarness h(g, {0});
  RunFirstAllReduce(h);
  prism::rpc::EventBatch later;
  AddStarted(&later, 2, Key(kWorldHash, prism::rpc::OP_BROADCAST, 0), 0, 4, 32, RealtimeNow());
  h.Feed(1, later);
  REQUIRE(h.WaitSchedule(Key(kWorldHash, prism::rpc::OP_BROADCAST, 0), std::chrono::seconds(5)).has_value());
  const std::optional<std::string> reason = h.divergences().Tick().stop_reason;
  REQUIRE(reason.has_value());
  CHECK(reason->find("BROADCAST") != std::string::npos);
  CHECK(reason->find("captured from the program") == std::string::npos);
}

// A captured graph that keeps the program's start-up (Program.startup_ops):
// the real rank's start-up collectives get on-time schedules with no
// divergence, and its iterations' collectives of the same kind are numbered
// after them.
TEST_CASE("a graph's start-up collectives are let through on time, and the iterations match after them", "[hybrid]") {
  prism::graph::Graph g = SweepGraph({"allreduce"}, 4, 2);
  g.mutable_job()->set_generator("prism-graphgen extrapolate");
  for (prism::graph::Program& p : *g.mutable_programs())
    for (prism::graph::CollectiveKind kind : {prism::graph::ALLGATHER, prism::graph::ALLREDUCE}) {
      prism::graph::Op* op = p.add_startup_ops();
      op->mutable_collective()->set_kind(kind);
      op->mutable_collective()->set_bytes(32);
    }
  HybridHarness h(g, {0});
  h.Communicator(kWorldHash, 0, {0, 1, 2, 3});
  const int64_t t = RealtimeNow();
  prism::rpc::EventBatch startup;
  AddStarted(&startup, 1, Key(kWorldHash, prism::rpc::OP_ALL_GATHER, 0), 0, 4, 32, t);
  AddStarted(&startup, 2, Key(kWorldHash, prism::rpc::OP_ALL_REDUCE, 0), 0, 4, 32, t);
  h.Feed(1, startup);
  for (auto kind : {prism::rpc::OP_ALL_GATHER, prism::rpc::OP_ALL_REDUCE}) {
    auto s = h.WaitSchedule(Key(kWorldHash, kind, 0), std::chrono::seconds(5));
    REQUIRE(s.has_value());
    CHECK_FALSE(s->unmatched());
  }
  prism::rpc::EventBatch first;  // NCCL's ALL_REDUCE #1: the graph's first iteration
  AddStarted(&first, 3, Key(kWorldHash, prism::rpc::OP_ALL_REDUCE, 1), 0, 4, 1 << 20, RealtimeNow());
  h.Feed(1, first);
  REQUIRE(h.WaitSchedule(Key(kWorldHash, prism::rpc::OP_ALL_REDUCE, 1), std::chrono::seconds(5)).has_value());
  const auto c = h.scheduler().counters();
  CHECK(c.ops_startup == 2);
  CHECK(c.ops_matched == 1);
  CHECK(c.divergences == 0);
  CHECK_FALSE(h.divergences().Tick().stop_reason.has_value());
}

// A training that runs more iterations than prismd replays (prism run
// without --iterations on a graph that said 1, before hybrid runs replayed
// 1000): its next operation's virtual peers never come, since the replay is
// over. It must be a divergence naming the flag, with an on-time schedule,
// not a silent wait (seen on the GPU host with Megatron, 2026-12-02).
TEST_CASE("a real rank's operation past the iterations prismd replays is a divergence, not a wait", "[hybrid]") {
  HybridHarness h(SweepGraph({"allreduce"}, 4, 1), {0});
  RunFirstAllReduce(h);
  prism::rpc::EventBatch second;  // iteration 1 of a 1-iteration replay
  AddStarted(&second, 2, Key(kWorldHash, prism::rpc::OP_ALL_REDUCE, 1), 0, 4, 1 << 20, RealtimeNow());
  h.Feed(1, second);
  auto s = h.WaitSchedule(Key(kWorldHash, prism::rpc::OP_ALL_REDUCE, 1), std::chrono::seconds(5));
  REQUIRE(s.has_value());
  CHECK(s->unmatched());
  CHECK(h.scheduler().counters().ops_matched == 1);
  CHECK(h.scheduler().counters().divergences == 1);
}

// The real rank starts an operation the graph has, but not the one the
// replay waits for (its receive before the all-reduce that precedes it): the
// receive waits for a virtual sender the engine cannot play, the engine waits
// for the real rank's all-reduce. Neither moves; prismd must say what each
// side waits for (on the GPU host such a wait was silent until killed).
TEST_CASE("a stall names what the real rank is in and what the replay waits for", "[hybrid][stall]") {
  HybridHarness h(SweepGraph({"allreduce", "sendrecv"}, 4, 1), {0});
  h.Communicator(kWorldHash, 0, {0, 1, 2, 3});
  prism::rpc::EventBatch b;
  AddStarted(&b, 1, Key(kWorldHash, prism::rpc::OP_RECV, 0, 3), 0, 4, 1 << 20, RealtimeNow(), false);
  h.Feed(1, b);
  std::optional<std::string> stall;
  for (int i = 0; i < 200 && !stall; ++i) {  // the engine says it waits after kAwaitReportAfter
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    stall = h.scheduler().StallReport(prism::FromMilliseconds(200));
  }
  REQUIRE(stall.has_value());
  INFO(*stall);
  CHECK_THAT(*stall, Catch::Contains("real rank 0 is in RECV #0 with comm rank 3 on comm0"));
  CHECK_THAT(*stall, Catch::Contains("iteration 0"));
  CHECK_THAT(*stall, Catch::Contains("the replay waits for it to start op 0 ("));
  // The receive ends (the rank is out of NCCL): no stall any more.
  prism::rpc::EventBatch f;
  AddFinished(&f, 1, 0, RealtimeNow());
  h.Feed(1, f);
  CHECK_FALSE(h.scheduler().StallReport(prism::Nanoseconds(0)).has_value());
}

TEST_CASE("no stall while the real rank is outside NCCL, however long the replay waits for it", "[hybrid][stall]") {
  HybridHarness h(SweepGraph({"allreduce", "sendrecv"}, 4, 1), {0});
  RunFirstAllReduce(h);
  // The engine now waits for the rank's send, which a long compute may delay.
  std::this_thread::sleep_for(2 * prism::engine::kAwaitReportAfter);
  CHECK_FALSE(h.scheduler().StallReport(prism::Nanoseconds(0)).has_value());
}

// Two real ranks, one still starting up (no operation yet): it may yet
// start what the replay waits for, so the other's wait is no stall.
TEST_CASE("no stall while another real rank has not started an operation yet", "[hybrid][stall]") {
  HybridHarness h(SweepGraph({"allreduce", "sendrecv"}, 4, 1), {0, 2});
  h.Communicator(kWorldHash, 0, {0, 1, 2, 3});
  prism::rpc::EventBatch b;
  AddStarted(&b, 1, Key(kWorldHash, prism::rpc::OP_RECV, 0, 3), 0, 4, 1 << 20, RealtimeNow(), false);
  h.Feed(1, b);
  std::this_thread::sleep_for(2 * prism::engine::kAwaitReportAfter);
  CHECK_FALSE(h.scheduler().StallReport(prism::Nanoseconds(0)).has_value());
}

// An operation whose schedule was sent waits for nothing prismd owes: its
// end is the real rank's (a long kernel before it on its stream, say).
TEST_CASE("no stall while the real rank's operation has its schedule, however long it lasts", "[hybrid][stall]") {
  HybridHarness h(SweepGraph({"allreduce", "sendrecv"}, 4, 1), {0});
  h.Communicator(kWorldHash, 0, {0, 1, 2, 3});
  prism::rpc::EventBatch b;
  AddStarted(&b, 1, Key(kWorldHash, prism::rpc::OP_ALL_REDUCE, 0), 0, 4, 1 << 20, RealtimeNow());
  h.Feed(1, b);
  REQUIRE(h.WaitSchedule(Key(kWorldHash, prism::rpc::OP_ALL_REDUCE, 0), std::chrono::seconds(5)).has_value());
  std::this_thread::sleep_for(2 * prism::engine::kAwaitReportAfter);  // the engine waits for its end
  CHECK_FALSE(h.scheduler().StallReport(prism::Nanoseconds(0)).has_value());
}

TEST_CASE("a hybrid run replays the graph's iterations or 1000, whichever is more, unless --iterations says",
          "[hybrid]") {
  prism::graph::Graph g = SweepGraph({"allreduce"}, 4, 1);
  (*g.mutable_job()->mutable_attributes())["iterations"] = "1";
  CHECK(prism::daemon::HybridIterations(g, 0) == prism::daemon::kHybridIterations);
  CHECK(prism::daemon::HybridIterations(g, 12) == 12);
  (*g.mutable_job()->mutable_attributes())["iterations"] = "5000";
  CHECK(prism::daemon::HybridIterations(g, 0) == 5000);
}

// Two real ranks with a communicator of their own (a TP pair both real):
// prismd's bootstrap never sees it, so its members come from the ranks'
// reports. Its operations must be matched (the engine follows the real
// ranks through them), with no divergence and no schedule.
TEST_CASE("a communicator of real ranks only is learned from their reports and matched", "[hybrid]") {
  HybridHarness h(SweepGraph({"allreduce"}, 2, 2), {0, 1});
  h.OpenSession(1, 0);
  h.OpenSession(2, 1);
  constexpr uint64_t kPairHash = 0x7a1e;
  for (uint64_t seq = 0; seq < 2; ++seq) {
    const int64_t t = RealtimeNow();
    prism::rpc::EventBatch a, b;
    AddStarted(&a, 10 + seq, Key(kPairHash, prism::rpc::OP_ALL_REDUCE, seq), 0, 2, 1 << 20, t);
    AddFinished(&a, 10 + seq, t + 10'000, t + 1'000'000);
    h.Feed(1, a);
    if (seq == 0) {  // rank 1 has not reported yet: nothing matched, nothing diverged
      CHECK(h.scheduler().counters().ops_matched == 0);
      CHECK(h.scheduler().counters().divergences == 0);
    }
    AddStarted(&b, 20 + seq, Key(kPairHash, prism::rpc::OP_ALL_REDUCE, seq), 1, 2, 1 << 20, t);
    AddFinished(&b, 20 + seq, t + 10'000, t + 1'000'000);
    h.Feed(2, b);
  }
  const auto c = h.scheduler().counters();
  CHECK(c.ops_matched == 4);
  CHECK(c.ops_finished == 4);
  CHECK(c.ops_unmatched == 0);
  CHECK(c.divergences == 0);
  CHECK(h.AllSchedules().empty());
  CHECK(h.scheduler().StuckReceives(prism::Nanoseconds(0)).empty());
}

TEST_CASE("without the session's rank, an unknown communicator stays a divergence", "[hybrid]") {
  HybridHarness h(SweepGraph({"allreduce"}, 2, 1), {0, 1});
  h.OpenSession(3, -1);  // RANK unset
  prism::rpc::EventBatch a;
  AddStarted(&a, 1, Key(0x7a1e, prism::rpc::OP_ALL_REDUCE, 0), 0, 2, 1 << 20, RealtimeNow());
  h.Feed(3, a);
  CHECK(h.scheduler().counters().divergences == 1);
  CHECK(h.scheduler().counters().ops_unmatched == 1);
}

TEST_CASE("a tree all-reduce's virtual senders stream at half the link (double binary tree), a ring's at the link",
          "[hybrid]") {
  HybridHarness h(SweepGraph({"allreduce"}, 4, 2), {0});
  h.Communicator(kWorldHash, 0, {0, 1, 2, 3});
  const uint64_t link = 10'000'000'000ull;  // the graph's NIC
  for (uint64_t seq = 0; seq < 2; ++seq) {
    const bool tree = seq == 1;
    prism::rpc::EventBatch b;
    const int64_t t = RealtimeNow();
    AddStarted(&b, seq + 1, Key(kWorldHash, prism::rpc::OP_ALL_REDUCE, seq), 0, 4, 1 << 20, t);
    if (tree) b.mutable_events(0)->mutable_op_started()->set_algorithm(prism::rpc::OP_ALGO_TREE);
    h.Feed(1, b);
    auto s = h.WaitSchedule(Key(kWorldHash, prism::rpc::OP_ALL_REDUCE, seq), std::chrono::seconds(5));
    REQUIRE(s);
    CHECK(s->mode() == (tree ? prism::rpc::OpSchedule::STREAM : prism::rpc::OpSchedule::MIRROR));
    CHECK(s->link_bits_per_second() == (tree ? link / 2 : link));
    prism::rpc::EventBatch f;
    AddFinished(&f, seq + 1, t + 100'000, t + 2'000'000);
    h.Feed(1, f);
  }
  REQUIRE(h.Stop().ok());
}

TEST_CASE("fewer NICs than GPUs: the real rank's schedule carries the per-GPU share the engine times with",
          "[hybrid][nic]") {
  g::Graph graph = SweepGraph({"allreduce"}, 4, 1);
  graph.mutable_cluster()->set_gpus_per_node(2);  // one 10 Gbit/s NIC for two GPUs; one rank per node
  const prism::engine::LinkFigures links = prism::engine::NetworkModel::LinkFiguresFromCluster(graph.cluster());
  REQUIRE(links.GpuNicShare() == prism::BitsPerSecond(5'000'000'000ull));
  CHECK(prism::daemon::HybridSchedulerOptions::ForCluster(graph.cluster()).link_bandwidth == links.GpuNicShare());
  HybridHarness h(graph, {0});
  h.Communicator(kWorldHash, 0, {0, 1, 2, 3});
  prism::rpc::EventBatch b;
  const int64_t t = RealtimeNow();
  AddStarted(&b, 1, Key(kWorldHash, prism::rpc::OP_ALL_REDUCE, 0), 0, 4, 1 << 20, t);
  h.Feed(1, b);
  auto s = h.WaitSchedule(Key(kWorldHash, prism::rpc::OP_ALL_REDUCE, 0), std::chrono::seconds(5));
  REQUIRE(s);
  CHECK(s->mode() == prism::rpc::OpSchedule::MIRROR);
  CHECK(s->link_bits_per_second() == 5'000'000'000ull);  // the share, not the NIC's 10 Gbit/s
  prism::rpc::EventBatch f;
  AddFinished(&f, 1, t + 100'000, t + 2'000'000);
  h.Feed(1, f);
  REQUIRE(h.Stop().ok());
}

TEST_CASE("a communicator inside one node: the real rank's schedule carries the node's link, as the engine times it",
          "[hybrid][nic]") {
  g::Graph graph = SweepGraph({"allreduce"}, 4, 1);
  graph.mutable_cluster()->set_gpus_per_node(2);  // ranks 0,1 on node 0; 2,3 on node 1
  graph.mutable_cluster()->mutable_intra_node()->set_bandwidth_bps(3'600'000'000'000ull);
  graph.mutable_cluster()->mutable_intra_node()->set_latency_ns(1'500);
  HybridHarness h(graph, {0});
  constexpr uint64_t kPairHash = 0x7a1;
  h.Communicator(kWorldHash, 0, {0, 1, 2, 3});
  h.Communicator(kPairHash, -1, {0, 1});
  prism::rpc::EventBatch b;
  const int64_t t = RealtimeNow();
  AddStarted(&b, 1, Key(kPairHash, prism::rpc::OP_ALL_REDUCE, 0), 0, 2, 1 << 20, t);
  AddStarted(&b, 1, Key(kWorldHash, prism::rpc::OP_ALL_REDUCE, 0), 0, 4, 1 << 20, t);
  h.Feed(1, b);
  auto pair = h.WaitSchedule(Key(kPairHash, prism::rpc::OP_ALL_REDUCE, 0), std::chrono::seconds(5));
  auto world = h.WaitSchedule(Key(kWorldHash, prism::rpc::OP_ALL_REDUCE, 0), std::chrono::seconds(5));
  REQUIRE(pair);
  REQUIRE(world);
  CHECK(pair->link_bits_per_second() == 3'600'000'000'000ull);
  CHECK(pair->link_latency_ns() == 1'500);
  const prism::engine::LinkFigures links = prism::engine::NetworkModel::LinkFiguresFromCluster(graph.cluster());
  CHECK(world->link_bits_per_second() == links.GpuNicShare().count());  // spans nodes: the NIC share
  CHECK(world->link_latency_ns() == static_cast<uint64_t>(links.nic_latency.count()));
  REQUIRE(h.Stop().ok());
}

TEST_CASE("a Simple tree all-reduce's virtual senders stream what NCCL's double binary tree delivers to the real rank",
          "[hybrid][tree]") {
  HybridHarness h(SweepGraph({"allreduce"}, 8, 1), {0});
  h.Communicator(kWorldHash, 0, {0, 1, 2, 3, 4, 5, 6, 7});
  const prism::engine::TreeAllReduce op{8, 2, prism::Bytes(1 << 20), prism::engine::kNcclSimpleStepBytes,
                                        prism::BitsPerSecond(10'000'000'000ull), prism::Nanoseconds(10'000)};
  const auto a = prism::engine::PlayTreeAllReduce(op, 0);
  REQUIRE(a.has_value());
  const auto stream = prism::engine::StreamOf(*a, op.latency);
  REQUIRE(stream.has_value());
  prism::rpc::EventBatch b;
  const int64_t t = RealtimeNow();
  AddStarted(&b, 1, Key(kWorldHash, prism::rpc::OP_ALL_REDUCE, 0), 0, 8, 1 << 20, t);
  auto* started = b.mutable_events(0)->mutable_op_started();
  started->set_algorithm(prism::rpc::OP_ALGO_TREE);
  started->set_proto_name("SIMPLE");
  h.Feed(1, b);
  auto s = h.WaitSchedule(Key(kWorldHash, prism::rpc::OP_ALL_REDUCE, 0), std::chrono::seconds(5));
  REQUIRE(s);
  CHECK(s->mode() == prism::rpc::OpSchedule::STREAM);
  CHECK(s->link_bits_per_second() == stream->rate.count());
  CHECK(s->link_bits_per_second() != 5'000'000'000ull);  // not the half-link rule
  prism::rpc::EventBatch f;
  AddFinished(&f, 1, t + 100'000, t + 2'000'000);
  h.Feed(1, f);
  REQUIRE(h.Stop().ok());
}

TEST_CASE("a session recording keeps every batch and every schedule sent, replies and pushes, with its session",
          "[hybrid]") {
  // Since 2026-12-02 schedules are recorded outside the scheduler's lock (a
  // reply after it is built, a push by the pusher thread), so that the
  // engine thread never waits for the recording's file.
  const std::string path = absl::StrCat(std::filesystem::temp_directory_path().string(), "/prism-hybrid-rec-",
                                        getpid(), ".jsonl");
  auto recorder = prism::daemon::SessionRecorder::Open(path, RealtimeNow(), 0, {0}, "t");
  REQUIRE(recorder.ok());
  {
    HybridHarness h(SweepGraph({"allreduce"}, 4, 2), {0}, prism::FromMilliseconds(20), prism::Nanoseconds(0), false,
                    prism::FromSeconds(5), recorder->get());
    h.Communicator(kWorldHash, 0, {0, 1, 2, 3});
    int batches = 0;
    for (uint64_t seq = 0; seq < 2; ++seq) {
      const prism::rpc::OpKey key = Key(kWorldHash, prism::rpc::OP_ALL_REDUCE, seq);
      const int64_t t = RealtimeNow();
      prism::rpc::EventBatch b;
      AddStarted(&b, seq + 1, key, 0, 4, 1 << 20, t);
      h.Feed(1, b), ++batches;
      REQUIRE(WaitKind(h, key, /*forecast=*/false, std::chrono::seconds(5)).has_value());
      prism::rpc::EventBatch m;  // per-message events only
      m.add_events()->mutable_completed()->set_conn_id(7);
      h.Feed(1, m), ++batches;
      prism::rpc::EventBatch f;
      AddFinished(&f, seq + 1, t + 100'000, RealtimeNow());
      h.Feed(1, f), ++batches;
    }
    h.scheduler().Flush();
    std::vector<prism::rpc::OpSchedule> sent;
    for (const auto& s : h.AllSchedules())
      if (!s.hold() && !s.has_after()) sent.push_back(s);  // forecasts are recorded, but read apart
    REQUIRE(h.Stop().ok());
    recorder->reset();  // closes the file
    auto rec = prism::daemon::ReadRecording(path);
    REQUIRE(rec.ok());
    int events = 0;
    for (const auto& line : rec->lines) events += line.kind == prism::daemon::RecordedLine::kEvents ? 1 : 0;
    CHECK(events == batches);
    const auto recorded = prism::daemon::RecordedSchedules(*rec);
    REQUIRE(recorded.size() == sent.size());
    for (size_t i = 0; i < sent.size(); ++i) {
      CHECK(recorded[i].session == 1);
      CHECK(recorded[i].schedule.key().seq() == sent[i].key().seq());
      CHECK(recorded[i].schedule.ready_ns() == sent[i].ready_ns());
    }
  }
  std::filesystem::remove(path);
}
