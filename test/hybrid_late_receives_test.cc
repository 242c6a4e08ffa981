// LateReceives (daemon/hybrid/late_receives.h): the real ranks' late
// receives by cause, the start-up iteration apart from the steady ones.
#include <catch2/catch.hpp>

#include <time.h>
#ifdef __linux__
#include <sys/prctl.h>
#endif

#include <chrono>
#include <string>

#include "daemon/engine/simulation.h"
#include "daemon/hybrid/late_receives.h"
#include "daemon/hybrid/session_replay.h"
#include "test/daemon_test_graphs.h"

namespace prism::daemon {
namespace {

void AddReceive(rpc::EventBatch* b, int64_t at_ns, uint64_t late_ns, bool waited) {
  rpc::Completed* c = b->add_events()->mutable_completed();
  c->set_at_ns(static_cast<uint64_t>(at_ns));
  c->set_late_ns(late_ns);
  c->set_waited_for_schedule(waited);
}

int64_t RealtimeNs() {
  timespec ts{};
  clock_gettime(CLOCK_REALTIME, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

}  // namespace

TEST_CASE("late receives: the start-up iteration apart, steady ones by cause, per completed iteration",
          "[hybrid][late]") {
  LateReceives late(nullptr);
  rpc::EventBatch b;
  AddReceive(&b, 100, 8'000'000, true);  // start-up: a schedule 8 ms late
  AddReceive(&b, 200, 1'000, false);
  b.add_events()->mutable_posted();       // not a receive's completion: skipped
  late.Add(b);
  late.OnIteration(0, FromMilliseconds(1000), 1'000);
  b.Clear();
  AddReceive(&b, 1'500, 2'000, false);    // iteration 1: NCCL's test() 2 us after
  AddReceive(&b, 1'600, 30'000, true);    // a held ring, 30 us
  AddReceive(&b, 1'700, 0, true);         // on time: not late
  late.Add(b);
  late.OnIteration(1, FromMilliseconds(100), 2'000);
  b.Clear();
  AddReceive(&b, 2'500, 4'000, false);    // iteration 2
  AddReceive(&b, 3'500, 99'000'000, true);  // after the last completed iteration: in none yet
  late.Add(b);
  late.OnIteration(2, FromMilliseconds(300), 3'000);
  late.OnIteration(2, FromMilliseconds(300), 3'000);  // told twice: once
  const LateReceives::Totals t = late.totals();
  CHECK(t.startup[LateReceives::kSchedule].receives == 1);
  CHECK(t.startup[LateReceives::kSchedule].late == Nanoseconds(8'000'000));
  CHECK(t.startup[LateReceives::kTest].late == Nanoseconds(1'000));
  CHECK(t.steady_iterations == 2);
  CHECK(t.steady_time == FromMilliseconds(400));
  CHECK(t.steady[LateReceives::kSchedule].receives == 1);
  CHECK(t.steady[LateReceives::kSchedule].late == Nanoseconds(30'000));
  CHECK(t.steady[LateReceives::kTest].receives == 2);
  CHECK(t.steady[LateReceives::kTest].late == Nanoseconds(6'000));
  const std::string line = LateReceives::Line(t);
  // 30 us over 2 iterations of 200 ms: 0.015 ms, 0.01%.
  CHECK(line.find("2 steady iterations (of 200.0 ms): 0.015 ms per iteration waiting for prismd's schedule "
                  "(0.01%, 1 receives), 0.003 ms") != std::string::npos);
  CHECK(line.find("start-up iteration: 8.000 ms waiting for the schedule (1 receives)") != std::string::npos);
}

TEST_CASE("late receives: an iteration's end moves the receives before it at once, not one by one",
          "[hybrid][late]") {
  // The engine thread calls OnIteration; at 8192 ranks one real rank has
  // about 57,000 late receives per iteration, two real ranks twice that.
  LateReceives late(nullptr);
  rpc::EventBatch b;
  for (int i = 0; i < 5000; ++i) AddReceive(&b, 100 + i, 1'000, i % 10 == 0);
  late.Add(b);
  late.OnIteration(0, FromMilliseconds(10), 10'000);
  b.Clear();
  for (int i = 0; i < 20000; ++i) AddReceive(&b, 10'001 + i, 500, false);
  late.Add(b);
  b.Clear();
  AddReceive(&b, 30'500, 7'000, true);
  late.Add(b);
  late.OnIteration(1, FromMilliseconds(10), 40'000);
  CHECK(late.scanned() == 0);
  LateReceives::Totals t = late.totals();
  CHECK(t.startup[LateReceives::kSchedule].receives == 500);
  CHECK(t.startup[LateReceives::kTest].receives == 4500);
  CHECK(t.steady[LateReceives::kTest].receives == 20000);
  CHECK(t.steady[LateReceives::kTest].late == Nanoseconds(10'000'000));
  CHECK(t.steady[LateReceives::kSchedule].late == Nanoseconds(7'000));
  // A receive stamped after the end it is reported before (a clock ahead of
  // prismd's) keeps its own iteration: then the pending ones are looked at.
  b.Clear();
  AddReceive(&b, 45'000, 1'000, false);
  AddReceive(&b, 55'000, 3'000, false);  // after the next end
  late.Add(b);
  late.OnIteration(2, FromMilliseconds(10), 50'000);
  CHECK(late.scanned() == 2);
  late.OnIteration(3, FromMilliseconds(10), 60'000);
  CHECK(late.scanned() == 2);  // the one left came before this end
  t = late.totals();
  CHECK(t.steady[LateReceives::kTest].receives == 20002);
  CHECK(t.steady[LateReceives::kTest].late == Nanoseconds(10'004'000));
}

TEST_CASE("late receives: before a steady iteration completed the line says so", "[hybrid][late]") {
  LateReceives late(nullptr);
  CHECK(LateReceives::Line(late.totals()).rfind("late receives: no steady iteration completed", 0) == 0);
}

TEST_CASE("engine lag: the steady iterations' histogram is the pacer's less its snapshot at the first "
          "iteration's end", "[hybrid][late]") {
  using H = engine::WallClockPacer::LagHistogram;
  H earlier, now;
  earlier.counts[0] = 90, earlier.counts[5] = 10, earlier.total = 100, earlier.sum_s = 1.0;
  now.counts[0] = 190, now.counts[5] = 10, now.counts[8] = 1, now.total = 201, now.sum_s = 1.5;
  const H d = now.Since(earlier);
  CHECK(d.total == 101);
  CHECK(d.counts[0] == 100);
  CHECK(d.counts[5] == 0);
  CHECK(d.counts[8] == 1);
  CHECK(d.sum_s == Approx(0.5));
  CHECK(d.QuantileUpper(0.99) == engine::WallClockPacer::kLagBounds[0]);  // the start-up's tail is gone
  CHECK(now.QuantileUpper(0.99) == engine::WallClockPacer::kLagBounds[5]);

  // A paced replay (as prismd) snapshots it when the engine's first iteration ends.
  graph::Graph graph = testing::CollectiveGraph(8, graph::ALLREDUCE, 1 << 20, graph::ALGORITHM_RING, 4, 1'000'000);
  (*graph.mutable_job()->mutable_attributes())["iterations"] = "3";
  auto rec = ModelRecording(graph, {0}, RealtimeNs());
  REQUIRE(rec.ok());
  auto r = ReplaySessionsPaced(graph, *rec);
  REQUIRE(r.ok());
  REQUIRE(r->steady_lags.has_value());
  CHECK(r->steady_lags->total > 0);
  CHECK(r->steady_lags->total < r->lags.total);
#ifdef __linux__
  // The paced engine ran on this thread: its timed sleeps end when asked
  // (timer slack 1 ns, not the 50 us default: WallClockPacer::TightenTimers).
  CHECK(prctl(PR_GET_TIMERSLACK, 0UL, 0UL, 0UL, 0UL) == 1);
#endif
}

TEST_CASE("engine lag: a late event is charged to the engine step that took most of its lateness",
          "[hybrid][late]") {
  using engine::EngineStep;
  engine::WallClockPacer pacer(engine::RealtimeOptions{});
  pacer.Start();
  auto spin = [&](Nanoseconds d) {
    const Nanoseconds until = pacer.Now() + d;
    while (pacer.Now() < until) {
    }
  };
  pacer.StepDone(EngineStep::kReports);  // before the event's time: not its cause
  const Nanoseconds t = pacer.Now();
  spin(FromMicroseconds(40));
  pacer.StepDone(EngineStep::kEvents);
  spin(FromMilliseconds(5));  // long against a preemption of the 40 us step (CI under load)
  pacer.StepDone(EngineStep::kGrants);  // most of the lateness
  REQUIRE(pacer.RecordLag(t).ok());
  REQUIRE(pacer.RecordLag(pacer.Now() + FromSeconds(1)).ok());  // not late: no cause
  engine::WallClockPacer::LagHistogram h = pacer.Lags();
  CHECK(h.late_by_step[static_cast<size_t>(EngineStep::kGrants)] == 1);
  CHECK(h.late_by_step[static_cast<size_t>(EngineStep::kEvents)] == 0);
  CHECK(h.late_by_step[static_cast<size_t>(EngineStep::kReports)] == 0);
  CHECK(h.LateSteps() == "1 over 50 us: 0 waking, 1 NIC grants, 0 reports, 0 events, 0 observers");
  const engine::WallClockPacer::LagHistogram before = h;
  const Nanoseconds t2 = pacer.Now();
  spin(FromMilliseconds(5));
  pacer.StepDone(EngineStep::kReports);
  REQUIRE(pacer.RecordLag(t2).ok());
  h = pacer.Lags();
  CHECK(h.late_by_step[static_cast<size_t>(EngineStep::kReports)] == 1);
  CHECK(h.Since(before).LateSteps() == "1 over 50 us: 0 waking, 0 NIC grants, 1 reports, 0 events, 0 observers");
}

TEST_CASE("engine lag: an event late behind a slow observer call is charged to the observers",
          "[hybrid][late]") {
  struct SlowAtIterationEnd : engine::EngineObserver {
    void OnIteration(uint64_t, Nanoseconds) override {
      const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(20);
      while (std::chrono::steady_clock::now() < until) {
      }
    }
  } slow;
  graph::Graph graph = testing::CollectiveGraph(8, graph::ALLREDUCE, 1 << 20, graph::ALGORITHM_RING, 4, 1'000'000);
  engine::WallClockPacer pacer(engine::RealtimeOptions{});
  pacer.Start();
  engine::SimulationOptions o;
  o.iterations = 3;
  o.pacer = &pacer;
  o.observer = &slow;
  REQUIRE(engine::Simulate(graph, o).ok());
  const engine::WallClockPacer::LagHistogram h = pacer.Lags();
  INFO(h.LateSteps());
  CHECK(h.late_by_step[static_cast<size_t>(engine::EngineStep::kObservers)] >= 1);
}

}  // namespace prism::daemon
