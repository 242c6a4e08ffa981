// A first-in first-out list in one vector, popped at a head index (emptied
// once all are popped, so that it keeps its capacity): a queue's few
// entries lie together, where std::deque spreads them over blocks, and the
// i-th entry from the head is one addition away. Pushing may move the
// entries (as a vector's growth does): references into it last until the
// next push or pop. Plain value; thread-compatible.
#ifndef PRISM_DAEMON_ENGINE_FIFO_H_
#define PRISM_DAEMON_ENGINE_FIFO_H_

#include <cstddef>
#include <utility>
#include <vector>

namespace prism::engine {

template <typename T>
class Fifo {
 public:
  bool empty() const { return head_ == end_; }
  size_t size() const { return end_ - head_; }
  T& front() { return items_[head_]; }
  T& back() { return items_.back(); }
  // The i-th entry from the head (i < size()).
  T& operator[](size_t i) { return items_[head_ + i]; }
  const T& operator[](size_t i) const { return items_[head_ + i]; }
  template <typename... A>
  void emplace_back(A&&... a) {
    items_.emplace_back(std::forward<A>(a)...);
    ++end_;
  }
  void push_back(const T& v) {
    items_.push_back(v);
    ++end_;
  }
  void pop_front() {
    if (++head_ == end_) {
      items_.clear(), head_ = 0, end_ = 0;
    } else if (head_ >= 32 && 2 * head_ >= end_) {  // never drained: drop the popped half
      items_.erase(items_.begin(), items_.begin() + head_), end_ -= head_, head_ = 0;
    }
  }
  typename std::vector<T>::iterator begin() { return items_.begin() + head_; }
  typename std::vector<T>::iterator end() { return items_.end(); }

 private:
  std::vector<T> items_;
  size_t head_ = 0;
  size_t end_ = 0;  // items_.size(), kept: a vector's size() divides by sizeof(T)
};

}  // namespace prism::engine

#endif  // PRISM_DAEMON_ENGINE_FIFO_H_
