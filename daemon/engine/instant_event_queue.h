// The replay engine's pending events, grouped by instant. Pops in exactly
// the order of EventQueue (event_queue.h, the 4-ary heap): by (time, actor,
// op), keys unique. Single-threaded (owned by the engine thread).
//
// Why it is cheaper: the engine's events come in instants (the ranks of a
// pipeline stage run in step: dozens of events share one time), and are
// mostly pushed after the latest popped time ("last"). Such an event is
// appended, in O(1), to the list of its instant (found by a hash of its time,
// or at once when it is the instant of the previous push); the instants' times
// lie in a min-heap of their own, one entry per instant. When the current
// instant is used up, the earliest list becomes the current one and is sorted
// by (actor, op) once (not at all when it came in that order); each pop takes
// its next element. Every event is moved once, and the heap's work is per
// instant, not per event. An event pushed at the current time itself (rare)
// is inserted in place among those not yet popped.
//
// Events earlier than last (a paced run handles a real rank's report at its
// past time) go to an EventQueue of their own, which pops first: all of them
// lie before every other pending event.
#ifndef PRISM_DAEMON_ENGINE_INSTANT_EVENT_QUEUE_H_
#define PRISM_DAEMON_ENGINE_INSTANT_EVENT_QUEUE_H_

#include <algorithm>
#include <cstdint>
#include <functional>
#include <limits>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "daemon/engine/event_queue.h"

namespace prism::engine {

class InstantEventQueue {
 public:
  bool empty() const { return size_ == 0; }
  size_t size() const { return size_; }

  // Inlined into the engine's pushes (ReplayQueue::Push): one per event.
  // Takes the fields, not an Event: the likely append writes them into the
  // list in place. (An Event built on the stack and then copied whole is
  // read back by one wide load from several narrow stores, which the CPU
  // cannot forward from its store buffer: a stall on every push.)
  [[gnu::always_inline]] void Push(Nanoseconds time, uint32_t actor, uint32_t op, Nanoseconds issued) {
    ++size_;
    const int64_t t = time.count();
    if (t > last_) [[likely]] {
      if (t != cached_time_) [[unlikely]] Find(t);
      lists_[cached_].emplace_back(time, actor, op, issued);  // C++20: an aggregate built in place
      return;
    }
    PushNowOrPast(Event{time, actor, op, issued});
  }
  void Push(const Event& e) { Push(e.time, e.actor, e.op, e.issued); }

  // The minimum; the queue must not be empty. Not const: it may make the
  // earliest instant the current one (the minimum stays the same).
  const Event& top() {
    if (past_size_ != 0) [[unlikely]] return past_.top();
    if (next_ == now_size_) [[unlikely]] Refill();
    return now_[next_];
  }

  // Removes and returns the minimum; the queue must not be empty.
  Event Pop() {
    --size_;
    if (past_size_ != 0) [[unlikely]] {
      --past_size_;
      return past_.Pop();
    }
    if (next_ == now_size_) [[unlikely]] Refill();
    return now_[next_++];
  }

 private:
  // Equal times: (actor, op) decides.
  static uint64_t Order(const Event& e) { return uint64_t{e.actor} << 32 | e.op; }
  struct Before {
    bool operator()(const Event& a, const Event& b) const { return Order(a) < Order(b); }
  };

  // Push of an event at or before the current time (rare).
  void PushNowOrPast(const Event& e) {
    if (e.time.count() == last_) {  // at the current time: in place, after every earlier (actor, op)
      now_.insert(std::upper_bound(now_.begin() + static_cast<ptrdiff_t>(next_), now_.end(), e, Before{}), e);
      ++now_size_;
      return;
    }
    ++past_size_;
    past_.Push(e);
  }

  // Points cached_ at the list of instant `t` (after last_), making one.
  void Find(int64_t t) {
    const auto [it, added] = index_.try_emplace(t, 0u);
    if (added) {
      if (spare_.empty()) spare_.push_back(static_cast<uint32_t>(lists_.size())), lists_.emplace_back();
      it->second = spare_.back();
      spare_.pop_back();
      times_.push_back(t);
      std::push_heap(times_.begin(), times_.end(), std::greater<>{});
    }
    cached_time_ = t, cached_ = it->second;
  }

  // The current instant and past_ are used up; some instant is pending: the
  // earliest becomes the current one, sorted by (actor, op).
  void Refill() {
    std::pop_heap(times_.begin(), times_.end(), std::greater<>{});
    last_ = times_.back();
    times_.pop_back();
    const auto node = index_.extract(last_);
    const uint32_t list = node.mapped();
    now_.clear();
    now_.swap(lists_[list]);  // the list keeps the emptied vector's capacity
    spare_.push_back(list);
    next_ = 0;
    now_size_ = now_.size();
    if (cached_time_ == last_) cached_time_ = kNone;
    if (!InOrder(now_)) std::sort(now_.begin(), now_.end(), Before{});
  }

  // Whether `events` are by (actor, op) already (std::is_sorted, with each
  // key computed once).
  static bool InOrder(const std::vector<Event>& events) {
    uint64_t previous = 0;
    for (const Event& e : events) {
      const uint64_t key = Order(e);
      if (key < previous) return false;
      previous = key;
    }
    return true;
  }

  static constexpr int64_t kNone = std::numeric_limits<int64_t>::min();
  int64_t last_ = kNone;                    // the current instant's time (no push lies at kNone: never earlier)
  std::vector<Event> now_;                  // the current instant, by (actor, op); [next_, end) pending
  size_t next_ = 0;
  size_t now_size_ = 0;                     // now_.size(), kept (the hot checks need no division by sizeof(Event))
  std::vector<std::vector<Event>> lists_;   // pending instants' events, in push order; spare_ lists empty
  std::vector<uint32_t> spare_;
  absl::flat_hash_map<int64_t, uint32_t> index_;  // pending instant's time -> its list in lists_
  std::vector<int64_t> times_;              // min-heap of the pending instants' times
  int64_t cached_time_ = kNone;             // the instant of the latest push after last_, and its list
  uint32_t cached_ = 0;
  EventQueue past_;                         // events before last_ (paced runs' late reports)
  size_t past_size_ = 0;                    // past_.size(), kept as now_size_
  size_t size_ = 0;
};

}  // namespace prism::engine

#endif  // PRISM_DAEMON_ENGINE_INSTANT_EVENT_QUEUE_H_
