// The replay engine's event record, and a 4-ary min-heap of them ordered by
// (time, actor, op), so that equal-time events are handled in a fixed order
// and a replay is deterministic. The engine's own queue is InstantEventQueue
// (instant_event_queue.h), which pops in this heap's order and keeps one of
// these for events earlier than its latest pop; bench/engine_rate_bench's
// yardstick is this heap. Single-threaded (owned by one thread).
//
// An Event is 24 bytes: what the heap compares and the op's issue time. A
// paced run's rare "learned late" stamp lives beside the heap, in the
// engine's queue (ReplayQueue, replay_queue.h), not in every record.
#ifndef PRISM_DAEMON_ENGINE_EVENT_QUEUE_H_
#define PRISM_DAEMON_ENGINE_EVENT_QUEUE_H_

#include <cstdint>
#include <vector>

#include "common/units.h"

namespace prism::engine {

struct Event {
  Nanoseconds time;
  uint32_t actor;
  uint32_t op;      // op index; kReachFlag / kCompleteFlag: an injected real-rank report;
                    // kWakeFlag: stream index whose next op waits for a later completion;
                    // kFlowFlag: shared NIC transfers to finish (generation)
  Nanoseconds issued;  // when the op was issued (for durations)
};
static_assert(sizeof(Event) == 24, "the heap's record: keep it small");

inline constexpr uint32_t kReachFlag = 1u << 31;
inline constexpr uint32_t kCompleteFlag = 1u << 30;
inline constexpr uint32_t kWakeFlag = 1u << 29;
// NicModel::kShared: shared transfers may have finished; the low bits are a
// generation (only the latest scheduled one counts). Its actor is kNoActor.
inline constexpr uint32_t kFlowFlag = 1u << 28;
inline constexpr uint32_t kFlowGenerationMask = kFlowFlag - 1;
inline constexpr uint32_t kNoActor = ~0u;

class EventQueue {
 public:
  bool empty() const { return heap_.size() == static_cast<size_t>(hole_); }
  size_t size() const { return heap_.size() - hole_; }
  const Event& top() const { return heap_.front(); }

  // A 4-ary heap: half the depth of a binary heap, children on one cache line.
  // Keys (time, actor, op) are unique, so the pop order is fully determined.
  void Push(const Event& e) {
    if (hole_) {  // the popped root's slot is still free: sift the new event down
      hole_ = false;
      SiftDown(e);
      return;
    }
    heap_.push_back(e);
    size_t i = heap_.size() - 1;
    while (i > 0) {
      const size_t parent = (i - 1) / kArity;
      if (!Less(e, heap_[parent])) break;
      heap_[i] = heap_[parent];
      i = parent;
    }
    heap_[i] = e;
  }

  // Pops the minimum in two steps so that the handler's first Push can reuse
  // the root (one sift instead of two): BeginPop() returns the minimum, the
  // caller handles it (pushing follow-ups), then calls EndPop().
  Event BeginPop() {
    hole_ = true;
    return heap_.front();
  }
  void EndPop() {
    if (!hole_) return;
    hole_ = false;
    const Event last = heap_.back();
    heap_.pop_back();
    if (!heap_.empty()) SiftDown(last);
  }

  Event Pop() {
    const Event out = BeginPop();
    EndPop();
    return out;
  }

  void Reserve(size_t n) { heap_.reserve(n); }

 private:
  // Places `e` at the root and restores the heap order below it.
  void SiftDown(const Event& e) {
    const size_t n = heap_.size();
    size_t i = 0;
    for (;;) {
      const size_t first = kArity * i + 1;
      if (first >= n) break;
      size_t best = first;
      const size_t end = first + kArity < n ? first + kArity : n;
      for (size_t c = first + 1; c < end; ++c)
        if (Less(heap_[c], heap_[best])) best = c;
      if (!Less(heap_[best], e)) break;
      heap_[i] = heap_[best];
      i = best;
    }
    heap_[i] = e;
  }

  static constexpr size_t kArity = 4;
  bool hole_ = false;
  static bool Less(const Event& a, const Event& b) {
    if (a.time != b.time) return a.time < b.time;
    return (uint64_t{a.actor} << 32 | a.op) < (uint64_t{b.actor} << 32 | b.op);
  }
  std::vector<Event> heap_;
};

}  // namespace prism::engine

#endif  // PRISM_DAEMON_ENGINE_EVENT_QUEUE_H_
