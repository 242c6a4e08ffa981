// The engine's pending events: a binary min-heap ordered by (time, actor,
// op), so that equal-time events are handled in a fixed order and a replay is
// deterministic. Single-threaded (owned by the engine thread).
#ifndef PRISM_DAEMON_ENGINE_EVENT_QUEUE_H_
#define PRISM_DAEMON_ENGINE_EVENT_QUEUE_H_

#include <cstdint>
#include <vector>

namespace prism::engine {

struct Event {
  int64_t time;     // ns
  uint32_t actor;
  uint32_t op;      // op index; kReachFlag set: an injected "reached" marker
  int64_t issued;   // ns the op was issued (for durations)
};

inline constexpr uint32_t kReachFlag = 1u << 31;

class EventQueue {
 public:
  bool empty() const { return heap_.empty(); }
  size_t size() const { return heap_.size(); }
  const Event& top() const { return heap_.front(); }

  void Push(const Event& e) {
    heap_.push_back(e);
    size_t i = heap_.size() - 1;
    while (i > 0) {
      const size_t parent = (i - 1) / 2;
      if (!Less(heap_[i], heap_[parent])) break;
      std::swap(heap_[i], heap_[parent]);
      i = parent;
    }
  }

  Event Pop() {
    const Event out = heap_.front();
    const Event last = heap_.back();
    heap_.pop_back();
    const size_t n = heap_.size();
    if (n == 0) return out;
    size_t i = 0;
    for (;;) {  // sift the last element down from the root
      size_t child = 2 * i + 1;
      if (child >= n) break;
      if (child + 1 < n && Less(heap_[child + 1], heap_[child])) ++child;
      if (!Less(heap_[child], last)) break;
      heap_[i] = heap_[child];
      i = child;
    }
    heap_[i] = last;
    return out;
  }

  void Reserve(size_t n) { heap_.reserve(n); }

 private:
  static bool Less(const Event& a, const Event& b) {
    if (a.time != b.time) return a.time < b.time;
    if (a.actor != b.actor) return a.actor < b.actor;
    return a.op < b.op;
  }
  std::vector<Event> heap_;
};

}  // namespace prism::engine

#endif  // PRISM_DAEMON_ENGINE_EVENT_QUEUE_H_
