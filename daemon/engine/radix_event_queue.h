// The replay engine's pending events: a radix heap over the events' times.
// Pops in exactly the order of EventQueue (event_queue.h, the 4-ary heap):
// by (time, actor, op), keys unique. Single-threaded (owned by the engine
// thread).
//
// Why it is cheaper: the engine's events are mostly pushed at or after the
// latest popped time ("last"). Such an event goes, in O(1), into the bucket
// named by the highest bit in which its time differs from last; a pop takes
// from bucket 0 (time == last), and when that is empty moves the lowest
// non-empty bucket down around its minimum. Each event moves down at most 64
// times (a few, in practice), in sequential passes over short arrays instead
// of a sift through a tree. Bucket 0 is sorted by (actor, op) when it is
// filled (the rare event pushed at the current time is inserted in place), so
// that equal-time events pop in the same order as from the 4-ary heap, each
// pop taking the last element.
//
// Events earlier than last (a paced run handles a real rank's report at its
// past time) go to an EventQueue of their own, which pops first: all of them
// lie before every event in the buckets.
#ifndef PRISM_DAEMON_ENGINE_RADIX_EVENT_QUEUE_H_
#define PRISM_DAEMON_ENGINE_RADIX_EVENT_QUEUE_H_

#include <algorithm>
#include <array>
#include <bit>
#include <cstdint>
#include <vector>

#include "daemon/engine/event_queue.h"

namespace prism::engine {

class RadixEventQueue {
 public:
  bool empty() const { return size_ == 0; }
  size_t size() const { return size_; }

  void Push(const Event& e) {
    ++size_;
    const uint64_t k = Key(e.time);
    if (k < last_) {
      past_.Push(e);
      return;
    }
    const int b = BucketOf(k ^ last_);
    if (b == 0) {  // at the current time: in place, before every later (actor, op)
      now_.insert(std::upper_bound(now_.begin(), now_.end(), e, Later{}), e);
      return;
    }
    buckets_[b].push_back(e);
    nonempty_ |= uint64_t{1} << (b - 1);
  }

  // The minimum; the queue must not be empty. Not const: it may move events
  // down to bucket 0 (the minimum stays the same).
  const Event& top() {
    if (!past_.empty()) return past_.top();
    if (now_.empty()) Refill();
    return now_.back();
  }

  // An event that will likely pop after the minimum has, when one is at hand
  // without moving events (for prefetching); null when none is.
  const Event* NextHint() const {
    if (!past_.empty()) return nullptr;
    if (!now_.empty()) return &now_.back();
    if (nonempty_ == 0) return nullptr;
    const std::vector<Event>& lowest = buckets_[std::countr_zero(nonempty_) + 1];
    return lowest.size() == 1 ? &lowest.front() : nullptr;
  }

  // Removes and returns the minimum; the queue must not be empty.
  Event Pop() {
    --size_;
    if (!past_.empty()) return past_.Pop();
    if (now_.empty()) Refill();
    const Event e = now_.back();
    now_.pop_back();
    return e;
  }

 private:
  // Times in an order-preserving unsigned form (negative times sort first).
  static uint64_t Key(Nanoseconds t) { return static_cast<uint64_t>(t.count()) ^ (uint64_t{1} << 63); }
  // 0 when equal, else 1 + the index of the highest differing bit (1..64).
  static int BucketOf(uint64_t diff) { return std::bit_width(diff); }
  // Bucket 0's order: equal times, so (actor, op) decides; sorted by "later"
  // first, the earliest is at the back.
  struct Later {
    bool operator()(const Event& a, const Event& b) const {
      return (uint64_t{a.actor} << 32 | a.op) > (uint64_t{b.actor} << 32 | b.op);
    }
  };

  // Bucket 0 and past_ are empty, some bucket is not: its minimum becomes
  // last_ and its events move to lower buckets (all lie below it now).
  void Refill() {
    const int i = std::countr_zero(nonempty_) + 1;
    std::vector<Event>& from = buckets_[i];
    uint64_t least = Key(from.front().time);
    for (const Event& e : from) least = std::min(least, Key(e.time));
    last_ = least;
    for (const Event& e : from) {
      const int b = BucketOf(Key(e.time) ^ last_);
      if (b == 0) {
        now_.push_back(e);
      } else {
        buckets_[b].push_back(e);
        nonempty_ |= uint64_t{1} << (b - 1);
      }
    }
    from.clear();
    nonempty_ &= ~(uint64_t{1} << (i - 1));
    std::sort(now_.begin(), now_.end(), Later{});
  }

  uint64_t last_ = 0;                          // Key of the latest minimum taken from the buckets
  std::vector<Event> now_;                     // bucket 0: time == last_, by (actor, op), earliest last
  std::array<std::vector<Event>, 65> buckets_; // [b]: highest differing bit from last_ is b - 1 (b >= 1)
  uint64_t nonempty_ = 0;                      // bit b - 1: buckets_[b] holds events
  EventQueue past_;                            // events before last_ (paced runs' late reports)
  size_t size_ = 0;
};

}  // namespace prism::engine

#endif  // PRISM_DAEMON_ENGINE_RADIX_EVENT_QUEUE_H_
