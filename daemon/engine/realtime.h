// Real-time pacing and the engine inbox (hybrid emulation).
//
// Emulated time T (integer ns from the replay's start) corresponds to the
// wall-clock instant start + T. In real-time mode the engine handles an event
// of time T no earlier than wall-clock start + T - lookahead; when it is late
// it never sleeps, it records the lag (how far behind the wall clock it runs).
//   best-effort: continues whatever the lag (the lag is a metric)
//   hard-limit:  fails with a clear error once the lag exceeds the limit
//
// EngineInbox is the one way other threads talk to a running engine. Contract:
//  - Post() may be called from any thread, any time, and never blocks on the
//    engine (a mutex held for a vector push).
//  - Only the engine thread drains it; events posted before Drain() are seen
//    by that Drain(), in posting order per posting thread.
//  - CaughtUp() may be read from any thread; MarkCaughtUp() belongs to the
//    engine thread.
//  - Injected times are emulated times (ns since the pacer's start); use
//    WallClockPacer::EmulatedFromRealtime to convert CLOCK_REALTIME stamps.
//  - An injected time earlier than the engine's current time is applied at
//    its own time: the engine may run ahead of the wall clock (lookahead), and
//    what a real rank did in the past can only affect ops that were waiting
//    for it, which the engine has not handled yet.
#ifndef PRISM_DAEMON_ENGINE_REALTIME_H_
#define PRISM_DAEMON_ENGINE_REALTIME_H_

#include <array>
#include <atomic>
#include <climits>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <string>
#include <variant>
#include <vector>

#include "absl/status/status.h"
#include "common/units.h"

namespace prism::engine {

// "Real rank `rank` reached communication op `op` of its program at emulated
// time `at`." The engine issues that op instance then: a real rank's
// communication ops wait for this, its compute ops do not (they are real: the
// engine sees only their ends). Compute ops still running on the op's stream
// end at `at` (the rank moved on). op == number of ops of the program means
// "finished the iteration": every compute op still running ends at `at`.
// One event per op instance, in program order per stream.
struct RankReachedOp {
  uint32_t rank = 0;
  uint32_t op = 0;
  Nanoseconds at;
};

// "Real rank `rank` finished communication op `op` (its oldest instance in
// flight) at `at`; its first transfer left at `started` (0: unknown)." A real
// rank's communication ops complete only through this: the network time they
// took is real, not modelled. For a send to a virtual rank, `at` is when its
// last byte left the wire.
struct RankCompletedOp {
  uint32_t rank = 0;
  uint32_t op = 0;
  Nanoseconds at;
  Nanoseconds started;
};

// Ends Run() at the next event boundary (Run returns Cancelled).
struct StopRequest {};

// "Nothing more will be posted" (a replay of recorded sessions): Run() plays
// every queued event, then ends instead of waiting for the real ranks. It
// returns OK if every rank finished, else Cancelled like a StopRequest.
struct EndOfInput {};

using InboxEvent = std::variant<RankReachedOp, RankCompletedOp, StopRequest, EndOfInput>;

class EngineInbox {
 public:
  EngineInbox() = default;
  EngineInbox(const EngineInbox&) = delete;
  EngineInbox& operator=(const EngineInbox&) = delete;

  // Any thread. Returns the event's number (1, 2, ... in posting order).
  uint64_t Post(InboxEvent event);

  // Engine thread. Cheap when nothing was posted (one relaxed atomic load).
  bool HasPending() const { return pending_.load(std::memory_order_acquire); }
  void Drain(std::vector<InboxEvent>* out);
  // Blocks until something is posted or `deadline` passes; true if pending.
  bool WaitUntil(std::chrono::steady_clock::time_point deadline);

  // Engine thread, with nothing drained left unhandled: every event of the
  // engine earlier than `before` has been handled (Max: all of them; the
  // engine waits for the real ranks). A Drain() withdraws it.
  void MarkCaughtUp(Nanoseconds before) { caught_up_before_.store(before.count(), std::memory_order_seq_cst); }
  // Any thread: whether the engine has applied event number `posted` (and
  // everything posted before it) and handled every event up to time `t`
  // included. Lets a reporter learn, without a round trip through the
  // engine's observer, what the engine made of its reports.
  bool CaughtUp(uint64_t posted, Nanoseconds t) const {
    return drained_.load(std::memory_order_seq_cst) >= posted &&
           caught_up_before_.load(std::memory_order_seq_cst) > t.count();
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<InboxEvent> events_;
  uint64_t posted_ = 0;  // guarded by mu_
  std::atomic<bool> pending_{false};
  std::atomic<uint64_t> drained_{0};
  std::atomic<int64_t> caught_up_before_{INT64_MIN};
};

enum class RealtimeMode { kOff, kBestEffort, kHardLimit };

// What the engine thread did while an event grew late, by the kind of step
// of its loop (WallClockPacer::StepDone): waiting (the wake-up came late:
// the host's scheduler, not prismd's work), granting NIC requests,
// applying the real ranks' reports, handling events, or inside the
// observers' calls (the hybrid scheduler, metrics, status; Simulate marks
// them when paced).
enum class EngineStep : uint8_t { kWaiting = 0, kGrants = 1, kReports = 2, kEvents = 3, kObservers = 4 };
inline constexpr size_t kEngineSteps = 5;

struct RealtimeOptions {
  RealtimeMode mode = RealtimeMode::kBestEffort;
  Nanoseconds lag_limit = FromMilliseconds(100);  // hard-limit only
  Nanoseconds lookahead;                          // how far ahead of the wall clock events may run
  // The last stretch before an event is due is spent polling the inbox and
  // the clock rather than sleeping: a timed sleep wakes tens of microseconds
  // late, and with no lookahead that is lag the real ranks see.
  Nanoseconds spin = FromMicroseconds(1000);
};

// Start() once before the engine runs; then WaitUntilDue/RecordLag belong to
// the engine thread, while Now(), EmulatedFromRealtime(), lag() and
// max_lag() may be called from any thread.
class WallClockPacer {
 public:
  explicit WallClockPacer(RealtimeOptions options) : options_(options) {}
  WallClockPacer(const WallClockPacer&) = delete;
  WallClockPacer& operator=(const WallClockPacer&) = delete;

  // Emulated time 0 := now.
  void Start();
  // Emulated time 0 := CLOCK_REALTIME instant `start` (nanoseconds since the
  // epoch: a replay of a recording made by a pacer started then). Now() stays
  // consistent with it.
  void StartAtRealtime(Nanoseconds start);

  // Waits until event time `t` is due (sleeping, then polling for the last
  // RealtimeOptions::spin). Returns false when the wait was cut short
  // because the inbox has events (the caller drains and retries).
  bool WaitUntilDue(Nanoseconds t, EngineInbox* inbox);

  // Called when the event at `t` is handled: updates the lag; in hard-limit
  // mode returns DeadlineExceeded once the lag exceeds the limit. An event
  // late by more than kLateStep is charged to the kind of step that took
  // most of the time since `t` (LagHistogram::late_by_step).
  absl::Status RecordLag(Nanoseconds t);
  static constexpr Nanoseconds kLateStep = FromMicroseconds(50);

  // Engine thread: the step of the engine's loop that began when the
  // previous one ended ends now (WaitUntilDue marks its own wait).
  void StepDone(EngineStep kind);

  // Engine thread, once before its first wait: its timed sleeps end when
  // asked (Linux timer slack 1 ns instead of a thread's default 50 us, which
  // a sleep may overrun; the poll before an event, RealtimeOptions::spin, is
  // then all left for the host's scheduler). No effect elsewhere.
  static void TightenTimers();

  // Emulated time now (wall clock minus start).
  Nanoseconds Now() const;
  Nanoseconds EmulatedFromRealtime(uint64_t realtime_ns) const;
  // CLOCK_REALTIME nanoseconds of emulated time `t` (>= 0).
  uint64_t RealtimeFromEmulated(Nanoseconds t) const;

  Nanoseconds lag() const { return Nanoseconds(lag_ns_.load(std::memory_order_relaxed)); }
  Nanoseconds max_lag() const { return Nanoseconds(max_lag_ns_.load(std::memory_order_relaxed)); }
  const RealtimeOptions& options() const { return options_; }

  // Every recorded lag, counted in buckets of upper bound kLagBounds[i]
  // (the last bucket is everything above). Any thread; a snapshot.
  static constexpr Nanoseconds kLagBounds[] = {
      FromMicroseconds(1),   FromMicroseconds(2),   FromMicroseconds(5),   FromMicroseconds(10),
      FromMicroseconds(20),  FromMicroseconds(50),  FromMicroseconds(100), FromMicroseconds(200),
      FromMicroseconds(500), FromMilliseconds(1),   FromMilliseconds(2),   FromMilliseconds(5),
      FromMilliseconds(10),  FromMilliseconds(100), FromSeconds(1)};
  static constexpr size_t kLagBuckets = sizeof(kLagBounds) / sizeof(kLagBounds[0]) + 1;
  struct LagHistogram {
    std::array<uint64_t, kLagBuckets> counts{};
    uint64_t total = 0;
    double sum_s = 0;
    // Events late by more than kLateStep, by what the engine thread did
    // most of that time (EngineStep).
    std::array<uint64_t, kEngineSteps> late_by_step{};
    // Upper bound of the bucket holding quantile q in (0, 1]; 0 when empty,
    // Nanoseconds::Max() in the last (unbounded) bucket.
    Nanoseconds QuantileUpper(double q) const;
    // The events recorded after `earlier`, a snapshot of the same pacer
    // (the steady iterations: Lags() less its snapshot at the first
    // iteration's end).
    LagHistogram Since(const LagHistogram& earlier) const;
    // "N over 50 us: W waking, G NIC grants, R reports, E events, O observers" (late_by_step).
    std::string LateSteps() const;
  };
  LagHistogram Lags() const;

 private:
  RealtimeOptions options_;
  std::chrono::steady_clock::time_point start_;
  Nanoseconds start_realtime_;       // CLOCK_REALTIME instant of emulated time 0
  std::atomic<int64_t> lag_ns_{0};
  std::atomic<int64_t> max_lag_ns_{0};
  std::array<std::atomic<uint64_t>, kLagBuckets> lag_counts_{};
  std::atomic<int64_t> lag_sum_ns_{0};
  std::array<std::atomic<uint64_t>, kEngineSteps> late_by_step_{};
  // The engine thread's last steps (Now() at their start and end).
  struct StepSpan {
    int64_t begin_ns = 0, end_ns = 0;
    EngineStep kind = EngineStep::kWaiting;
  };
  static constexpr size_t kStepSpans = 64;
  std::array<StepSpan, kStepSpans> steps_{};
  size_t steps_done_ = 0;
  int64_t step_begin_ns_ = 0;
};

// Parses "best-effort" / "hard-limit".
absl::Status ParseRealtimeMode(const std::string& text, RealtimeMode* mode);

}  // namespace prism::engine

#endif  // PRISM_DAEMON_ENGINE_REALTIME_H_
