// Late receives of the real ranks from virtual peers (Completed.late_ns of
// the plugin's events): how much later than its computed time each one
// completed, by cause and by the engine's iteration it fell in, for
// prism_hybrid_receive_late_seconds and prismd's exit line.
//
// Causes: "schedule" (the receive waited for prismd: a test() found its
// operation's schedule missing or held, Completed.waited_for_schedule) and
// "test" (the schedule was there: NCCL tested the request only that much
// after its time; the same wait a real network's completion has).
// Iterations: a receive belongs to the iteration whose end (the engine's
// OnIteration, at the wall clock) comes after its time (Completed.at_ns);
// iteration 0 is the start-up (communicators, first NCCL calls), the
// others are steady; receives after the last iteration ended are in none.
//
// Thread-safety: Add from any thread (the session threads), OnIteration
// from the engine thread, totals() from any; one mutex, taken once per
// event batch and held for no per-receive work that can be done outside it
// (the histogram, the batch's own sums).
//
// Cost on the engine thread: OnIteration is O(1) when every receive not yet
// in an iteration came at or before the iteration's end (the live case: a
// receive is reported after it completed, and the end is taken at the wall
// clock), whatever their number (about 57,000 receives per iteration for
// one real rank at 8192 ranks, twice that for two: one by one, 0.1-0.15 ms
// of the engine's time at every iteration's end). Only receives stamped
// after the end (another host's clock) are looked at one by one.
#ifndef PRISM_DAEMON_HYBRID_LATE_RECEIVES_H_
#define PRISM_DAEMON_HYBRID_LATE_RECEIVES_H_

#include <array>
#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

#include "common/units.h"
#include "proto/prism_service.pb.h"

namespace prometheus {
class Histogram;
}

namespace prism::server {
class Metrics;
}

namespace prism::daemon {

class LateReceives {
 public:
  enum Cause : uint8_t { kSchedule = 0, kTest = 1 };
  static constexpr size_t kCauses = 2;

  // Registers prism_hybrid_receive_late_seconds{cause} in `metrics` (null: none).
  explicit LateReceives(server::Metrics* metrics);

  // The receives of one event batch (other events are skipped).
  void Add(const rpc::EventBatch& batch);
  // The engine completed iteration `index` (0-based), which took `duration`;
  // `end_realtime_ns`: now, CLOCK_REALTIME.
  void OnIteration(uint64_t index, Nanoseconds duration, int64_t end_realtime_ns);

  struct Sum {
    uint64_t receives = 0;  // late ones (late_ns > 0)
    Nanoseconds late;
  };
  struct Totals {
    std::array<Sum, kCauses> startup;  // iteration 0
    std::array<Sum, kCauses> steady;   // iterations 1 .. steady_iterations
    uint64_t steady_iterations = 0;
    Nanoseconds steady_time;           // their engine durations together
  };
  Totals totals() const;
  // "late receives in steady iterations (N): X ms per iteration (P% of the
  // iteration) waiting for prismd's schedule over R receives, Y ms by
  // NCCL's test() after the time; start-up iteration: ..."
  static std::string Line(const Totals& t);
  // How many receives OnIteration had to look at one by one so far (those
  // not yet in an iteration when one of them came after its end).
  uint64_t scanned() const;

 private:
  mutable std::mutex mu_;
  std::vector<int64_t> ends_;                             // per completed iteration, CLOCK_REALTIME
  std::vector<Nanoseconds> durations_;
  std::vector<std::array<Sum, kCauses>> by_iteration_;    // per completed iteration
  struct Pending {
    int64_t at_ns = 0;
    Cause cause = kSchedule;
    Nanoseconds late;
  };
  std::vector<Pending> pending_;  // after the last completed iteration's end: its iteration not known yet
  std::array<Sum, kCauses> pending_sum_{};  // of pending_
  int64_t pending_latest_ = 0;    // the latest at_ns in pending_ (when not empty)
  uint64_t scanned_ = 0;
  std::array<prometheus::Histogram*, kCauses> metric_{};  // owned by the registry
};

}  // namespace prism::daemon

#endif  // PRISM_DAEMON_HYBRID_LATE_RECEIVES_H_
