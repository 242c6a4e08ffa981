// The replay engine's future events, and when a paced run learned of them.
//
// The events lie in an InstantEventQueue (instant_event_queue.h: popped by
// (time, actor, op)). In a paced hybrid run the engine handles a real rank's
// report at the report's own, possibly past, time; an event that follows
// from it may then be due before the engine could know of it. Such an event
// is stamped with the pacer's time at its push ("learned late"), and its lag
// counts from that stamp (KnownAt), not from its own time. The stamps live
// beside the queue, not in every record: they are rare.
//
// Thread-safety: none; the engine thread owns it. The pacer (nullable) is not
// owned and must outlive the run.
#ifndef PRISM_DAEMON_ENGINE_REPLAY_QUEUE_H_
#define PRISM_DAEMON_ENGINE_REPLAY_QUEUE_H_

#include <cstdint>
#include <tuple>

#include "absl/container/flat_hash_map.h"
#include "common/units.h"
#include "daemon/engine/event_queue.h"
#include "daemon/engine/instant_event_queue.h"
#include "daemon/engine/realtime.h"

namespace prism::engine {

class ReplayQueue {
 public:
  // Paced runs only (nullptr: the queue never stamps).
  void SetPacer(const WallClockPacer* pacer) { pacer_ = pacer; }
  // Whether the engine is handling a real rank's report now: the events it
  // pushes meanwhile may be learned late.
  void SetHandlingReport(bool handling) { handling_report_ = handling; }

  // Inlined where the engine pushes (with InstantEventQueue::Push): most
  // events push one follow-up.
  [[gnu::always_inline]] void Push(Nanoseconds time, uint32_t actor, uint32_t op, Nanoseconds issued) {
    if (pacer_ != nullptr && (handling_report_ || handling_known_ > time)) [[unlikely]]
      StampIfLate(time, actor, op);
    queue_.Push(time, actor, op, issued);
  }

  bool empty() const { return queue_.empty(); }
  size_t size() const { return queue_.size(); }
  const Event& top() { return queue_.top(); }
  // Takes top() (and forgets its learned-late stamp). Until the next Pop,
  // the events pushed before the moment the engine learned of it are
  // stamped with that moment too (a virtual member's next collective,
  // reached at a real rank's reported end).
  Event Pop() {
    const Event e = queue_.Pop();
    handling_known_ = Nanoseconds(0);
    if (!late_known_.empty()) {
      handling_known_ = KnownAt(e);
      late_known_.erase({e.time.count(), e.actor, e.op});
    }
    return e;
  }

  // The emulated time the engine learned of queued event `e`: its time,
  // unless it followed from a report handled after that time.
  Nanoseconds KnownAt(const Event& e) const {
    if (late_known_.empty()) return e.time;
    const auto it = late_known_.find({e.time.count(), e.actor, e.op});
    return it == late_known_.end() ? e.time : it->second;
  }

 private:
  // Out of the hot path: only a paced run's report handling stamps.
  [[gnu::noinline, gnu::cold]] void StampIfLate(Nanoseconds time, uint32_t actor, uint32_t op) {
    const Nanoseconds known = Max(time, handling_report_ ? pacer_->Now() : handling_known_);
    if (known != time) late_known_[{time.count(), actor, op}] = known;  // keys are unique in the queue
  }

  InstantEventQueue queue_;
  absl::flat_hash_map<std::tuple<int64_t, uint32_t, uint32_t>, Nanoseconds> late_known_;
  const WallClockPacer* pacer_ = nullptr;
  bool handling_report_ = false;
  Nanoseconds handling_known_;  // when the engine learned of the event it handles (KnownAt)
};

}  // namespace prism::engine

#endif  // PRISM_DAEMON_ENGINE_REPLAY_QUEUE_H_
