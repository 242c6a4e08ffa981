// Real-time pacing (best-effort, hard-limit) and the engine inbox.
#include <catch2/catch.hpp>

#include <chrono>
#include <thread>

#include "daemon/engine/network_model.h"
#include "daemon/engine/simulation.h"
#include "graphgen/fidelity_graph.h"
#include "test/daemon_test_graphs.h"

namespace g = prism::graph;

TEST_CASE("best-effort real-time replay runs no faster than the wall clock", "[daemon][realtime]") {
  // 5 x 20 ms of compute between small allreduces: >= 100 ms of emulated time.
  const g::Graph gr = prism::testing::CollectiveGraph(8, g::ALLREDUCE, 1024, g::ALGORITHM_RING, 5, 20'000'000);
  prism::engine::SimulationOptions o;
  o.realtime = prism::engine::RealtimeOptions();
  o.realtime->mode = prism::engine::RealtimeMode::kBestEffort;
  const auto t0 = std::chrono::steady_clock::now();
  auto r = prism::engine::Simulate(gr, o);
  const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  REQUIRE(r.ok());
  CHECK(wall >= r->report.emulated_end.seconds());
  CHECK(r->report.emulated_end.seconds() >= 0.1);
}

TEST_CASE("hard-limit real-time replay fails clearly once it lags past the limit", "[daemon][realtime]") {
  const g::Graph gr = prism::testing::CollectiveGraph(8, g::ALLREDUCE, 1024, g::ALGORITHM_RING, 5, 1000);
  prism::engine::SimulationOptions o;
  prism::engine::RealtimeOptions rt;
  rt.mode = prism::engine::RealtimeMode::kHardLimit;
  rt.lag_limit = prism::Nanoseconds(0);
  rt.lookahead = prism::Nanoseconds(-50'000'000);  // run 50 ms behind on purpose
  o.realtime = rt;
  auto r = prism::engine::Simulate(gr, o);
  REQUIRE_FALSE(r.ok());
  CHECK(absl::IsDeadlineExceeded(r.status()));
  CHECK(std::string(r.status().message()).find("behind the wall clock") != std::string::npos);
  rt.mode = prism::engine::RealtimeMode::kBestEffort;  // the same lag is tolerated
  o.realtime = rt;
  CHECK(prism::engine::Simulate(gr, o).ok());
}

namespace {

class CompletionLog : public prism::engine::EngineObserver {
 public:
  void OnRealRankOpComplete(uint32_t rank, uint32_t op, prism::Nanoseconds at) override {
    completions.push_back({rank, op, at.count()});
  }
  void OnMixedCollective(bool virtual_last) override { ++(virtual_last ? ended_by_virtual : ended_by_real); }
  std::vector<std::tuple<uint32_t, uint32_t, int64_t>> completions;
  int ended_by_real = 0, ended_by_virtual = 0;
};

// Two ranks on one node, compute 1 ms then an allreduce of 1 MiB; rank 0 real.
struct OneRealOfTwo {
  const g::Graph graph = prism::testing::CollectiveGraph(2, g::ALLREDUCE, 1 << 20, g::ALGORITHM_RING, 1, 1'000'000);
  prism::engine::EngineInbox inbox;
  CompletionLog log;
  prism::engine::SimulationOptions Options() {
    prism::engine::SimulationOptions o;
    o.real_ranks = {0};
    o.inbox = &inbox;
    o.observer = &log;
    return o;
  }
};

}  // namespace

TEST_CASE("a real rank's reports drive its collective and its virtual peer finishes with it",
          "[daemon][realtime]") {
  // Two ranks on one node: compute 1 ms, allreduce 1 MiB. Rank 0 is real: it
  // reaches the allreduce at 5 ms and finishes it at 7 ms (reported). The
  // virtual rank 1 finishes with it (a ring ends on every rank together), so
  // the iteration ends at 7 ms whatever the model says.
  OneRealOfTwo t;
  std::thread injector([&] {
    t.inbox.Post(prism::engine::RankReachedOp{0, 1, prism::FromMilliseconds(5)});
    std::this_thread::sleep_for(std::chrono::milliseconds(20));  // the engine must wait for it
    t.inbox.Post(prism::engine::RankCompletedOp{0, 1, prism::FromMilliseconds(7), prism::FromMicroseconds(5100)});
  });
  auto r = prism::engine::Simulate(t.graph, t.Options());
  injector.join();
  REQUIRE(r.ok());
  CHECK(r->report.mean_iteration.count() == 7'000'000);
  REQUIRE(t.log.completions.size() == 1);
  CHECK(t.log.completions[0] == std::make_tuple(0u, 1u, int64_t{7'000'000}));
  CHECK(t.log.ended_by_real == 1);
  CHECK(t.log.ended_by_virtual == 0);
}

TEST_CASE("a real rank that finishes a collective before its virtual peer arrives waits for it",
          "[daemon][realtime]") {
  // As above, but rank 0 reports the allreduce done at 0.5 ms, before the
  // virtual rank 1 has finished its 1 ms of compute: the collective (and
  // the iteration) ends when rank 1 arrives, and the observer hears that a
  // virtual member set the end (prism_hybrid_mixed_collectives_total).
  OneRealOfTwo t;
  t.inbox.Post(prism::engine::RankReachedOp{0, 1, prism::FromMicroseconds(200)});
  t.inbox.Post(prism::engine::RankCompletedOp{0, 1, prism::FromMicroseconds(500), prism::FromMicroseconds(210)});
  auto r = prism::engine::Simulate(t.graph, t.Options());
  REQUIRE(r.ok());
  CHECK(r->report.mean_iteration.count() == 1'000'000);
  CHECK(t.log.ended_by_real == 0);
  CHECK(t.log.ended_by_virtual == 1);
}

TEST_CASE("inbox rejects events for virtual ranks and a stop request ends the run", "[daemon][realtime]") {
  const g::Graph gr = prism::testing::CollectiveGraph(2, g::ALLREDUCE, 1 << 20, g::ALGORITHM_RING, 1, 1'000'000);
  prism::engine::EngineInbox inbox;
  prism::engine::SimulationOptions o;
  o.real_ranks = {0};
  o.inbox = &inbox;
  inbox.Post(prism::engine::RankReachedOp{1, 0, prism::Nanoseconds(0)});
  auto bad = prism::engine::Simulate(gr, o);
  REQUIRE_FALSE(bad.ok());
  CHECK(std::string(bad.status().message()).find("not real") != std::string::npos);
  inbox.Post(prism::engine::StopRequest{});
  auto stopped = prism::engine::Simulate(gr, o);
  REQUIRE_FALSE(stopped.ok());
  CHECK(absl::IsCancelled(stopped.status()));
}

// A paced hybrid run handles a real rank's report at its own stamp, which can
// lie behind events the engine already handled. A virtual rank's grouped
// send/recv then completes out of order: its send to the real rank (timed by
// the model) was handled first, the receive from the real rank (its report
// came late, stamped early) second. The group, and what follows it, ends at
// the later of the two, not at the time of the last one handled.
TEST_CASE("a group whose members complete out of order ends at the later completion", "[daemon][realtime]") {
  prism::graphgen::FidelitySpec spec;
  spec.name = "out-of-order";
  spec.kind = "sweep";
  spec.world = 2;
  spec.ops = {"sendrecv"};
  spec.sizes = {1 << 20};
  spec.iterations = 2;  // two send/recv pairs, back to back
  spec.warmup = 0;
  auto graph = prism::graphgen::GenerateFidelityGraph(spec);
  REQUIRE(graph.ok());
  const g::Program& p0 = graph->programs(static_cast<int>(graph->ranks(0).program()));
  uint32_t send = UINT32_MAX, recv = UINT32_MAX;
  for (int k = 0; k < p0.ops_size(); ++k) {
    if (p0.ops(k).has_send() && send == UINT32_MAX) send = static_cast<uint32_t>(k);
    if (p0.ops(k).has_recv() && recv == UINT32_MAX) recv = static_cast<uint32_t>(k);
  }
  REQUIRE(send != UINT32_MAX);
  REQUIRE(recv != UINT32_MAX);
  prism::engine::EngineInbox inbox;
  prism::engine::SimulationOptions o;
  o.nccl.p2p_buffer = prism::Bytes(0);  // the virtual send ends with its transfer, as when the case was found
  o.real_ranks = {0};
  o.inbox = &inbox;
  o.trace_ranks = {1};
  o.use_classes = false;
  o.report_when_stopped = true;
  std::thread injector([&] {
    // The engine has handled virtual rank 1's first send (about 849 us at
    // 10 Gbit/s) and waits for rank 0; then rank 0's first pair arrives,
    // stamped early: its send left at 100 us.
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    inbox.Post(prism::engine::RankReachedOp{0, send, prism::Nanoseconds(0)});
    inbox.Post(prism::engine::RankReachedOp{0, recv, prism::Nanoseconds(0)});
    inbox.Post(prism::engine::RankCompletedOp{0, send, prism::FromMicroseconds(100), prism::Nanoseconds(0)});
    inbox.Post(prism::engine::RankCompletedOp{0, recv, prism::FromMicroseconds(900), prism::Nanoseconds(0)});
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    inbox.Post(prism::engine::StopRequest{});
  });
  auto r = prism::engine::Simulate(*graph, o);
  injector.join();
  REQUIRE(r.ok());
  REQUIRE(r->trace != nullptr);
  // Rank 1's sends, in completion order: the second starts when the first
  // pair is over, i.e. not before the first send's end.
  std::vector<std::pair<int64_t, int64_t>> sends;
  const g::Program& p1 = graph->programs(static_cast<int>(graph->ranks(1).program()));
  for (const auto& op : r->trace->ops())
    if (p1.ops(static_cast<int>(op.op)).has_send()) sends.push_back({op.start.count(), op.end.count()});
  REQUIRE(sends.size() == 2);
  CHECK(sends[0].second > 800'000);
  CHECK(sends[1].first >= sends[0].second);
}

TEST_CASE("the inbox tells a reporter once the engine applied its report and handled every event up to a time",
          "[daemon][realtime]") {
  prism::engine::EngineInbox inbox;
  const uint64_t first = inbox.Post(prism::engine::RankReachedOp{0, 1, prism::FromMicroseconds(100)});
  const uint64_t second = inbox.Post(prism::engine::RankReachedOp{0, 2, prism::FromMicroseconds(200)});
  CHECK(second == first + 1);
  CHECK_FALSE(inbox.CaughtUp(first, prism::FromMicroseconds(100)));  // not drained
  std::vector<prism::engine::InboxEvent> drained;
  inbox.Drain(&drained);
  CHECK_FALSE(inbox.CaughtUp(first, prism::FromMicroseconds(100)));  // drained, not handled
  inbox.MarkCaughtUp(prism::FromMicroseconds(300));                 // the next event is at 300 us
  CHECK(inbox.CaughtUp(second, prism::FromMicroseconds(299)));
  CHECK_FALSE(inbox.CaughtUp(second, prism::FromMicroseconds(300)));  // the event at 300 us is not handled
  const uint64_t third = inbox.Post(prism::engine::RankReachedOp{0, 3, prism::FromMicroseconds(250)});
  CHECK_FALSE(inbox.CaughtUp(third, prism::FromMicroseconds(250)));
  inbox.Drain(&drained);  // withdraws the mark: what it drained may precede it
  CHECK_FALSE(inbox.CaughtUp(third, prism::FromMicroseconds(0)));
  inbox.MarkCaughtUp(prism::Nanoseconds::Max());  // nothing left: the engine waits for the real ranks
  CHECK(inbox.CaughtUp(third, prism::FromSeconds(1000)));
}

namespace {

// Real rank 0 and virtual rank 1 of `graph`, the engine paced (lookahead 0)
// on its own thread; the test posts rank 0's reports.
struct PacedOneReal {
  explicit PacedOneReal(const g::Graph& graph) : graph(graph) {
    pacer.Start();
    prism::engine::SimulationOptions o;
    o.real_ranks = {0};
    o.inbox = &inbox;
    o.pacer = &pacer;
    o.report_when_stopped = true;
    engine = std::thread([this, o] { result = prism::engine::Simulate(this->graph, o); });
  }
  // Waits (up to 10 s) until the engine applied inbox event `posted` and
  // played every event up to `t`.
  bool WaitCaughtUp(uint64_t posted, prism::Nanoseconds t) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (!inbox.CaughtUp(posted, t) && std::chrono::steady_clock::now() < deadline)
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    return inbox.CaughtUp(posted, t);
  }
  absl::Status Stop() {
    inbox.Post(prism::engine::StopRequest{});
    engine.join();
    return result.status();
  }

  const g::Graph graph;
  prism::engine::EngineInbox inbox;
  prism::engine::WallClockPacer pacer{prism::engine::RealtimeOptions{}};
  absl::StatusOr<prism::engine::SimulationResult> result = absl::UnknownError("not run");
  std::thread engine;
};

}  // namespace

TEST_CASE("a paced engine marks the inbox caught up to its next event, and to the end when it waits for the real "
          "ranks", "[daemon][realtime]") {
  // An all-reduce after 5 ms of compute: once the virtual rank arrived, the
  // engine waits for the real rank with nothing left to play.
  PacedOneReal t(prism::testing::CollectiveGraph(2, g::ALLREDUCE, 1024, g::ALGORITHM_RING, 1, 5'000'000));
  const uint64_t reached = t.inbox.Post(prism::engine::RankReachedOp{0, 1, prism::FromMicroseconds(1)});
  CHECK(t.WaitCaughtUp(reached, prism::FromMilliseconds(5)));
  CHECK(t.pacer.Now() >= prism::FromMilliseconds(5));  // never ahead of the wall clock (lookahead 0)
  REQUIRE(t.Stop().ok());
}

TEST_CASE("events that follow a late report, at any depth, count their lag from when the engine learned of it",
          "[daemon][realtime]") {
  // Compute 1 us, all-reduce, compute 1 us, all-reduce. Rank 0's report
  // that the first all-reduce ended at 3 us comes 100 ms late. Rank 1's end
  // of it follows from the report (counted from then since 2026-12-01), and
  // so do its 1 us of compute after it and its arrival at the second
  // all-reduce (counted from 3 us before 2026-12-02: the report's trip as
  // engine lag).
  PacedOneReal t(prism::testing::CollectiveGraph(2, g::ALLREDUCE, 1024, g::ALGORITHM_RING, 2, 1000));
  t.inbox.Post(prism::engine::RankReachedOp{0, 1, prism::FromMicroseconds(1)});
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  const uint64_t done =
      t.inbox.Post(prism::engine::RankCompletedOp{0, 1, prism::FromMicroseconds(3), prism::FromMicroseconds(1)});
  CHECK(t.WaitCaughtUp(done, prism::FromMicroseconds(10)));
  REQUIRE(t.Stop().ok());
  CHECK(t.pacer.Lags().total >= 3);
  CHECK(t.pacer.max_lag() < prism::FromMilliseconds(50));  // not the report's 100 ms
}
