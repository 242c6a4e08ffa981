// A bounded lock-free single-producer single-consumer ring. The producer is
// NCCL's proxy thread (isend/irecv), the consumer a comm's progress thread.
// Exactly one thread may call Push and exactly one (other) thread Pop.
#ifndef PRISM_PLUGIN_SPSC_RING_H_
#define PRISM_PLUGIN_SPSC_RING_H_

#include <array>
#include <atomic>
#include <cstddef>

namespace prism::plugin {

template <typename T, size_t kCapacity>
class SpscRing {
  static_assert((kCapacity & (kCapacity - 1)) == 0, "capacity must be a power of two");

 public:
  // False when full (the item is not taken).
  bool Push(const T& item) {
    const size_t tail = tail_.load(std::memory_order_relaxed);
    if (tail - head_.load(std::memory_order_acquire) == kCapacity) return false;
    slots_[tail & (kCapacity - 1)] = item;
    tail_.store(tail + 1, std::memory_order_release);
    return true;
  }

  // False when empty.
  bool Pop(T* item) {
    const size_t head = head_.load(std::memory_order_relaxed);
    if (head == tail_.load(std::memory_order_acquire)) return false;
    *item = slots_[head & (kCapacity - 1)];
    head_.store(head + 1, std::memory_order_release);
    return true;
  }

  bool Empty() const {
    return head_.load(std::memory_order_acquire) == tail_.load(std::memory_order_acquire);
  }

 private:
  std::array<T, kCapacity> slots_{};
  alignas(64) std::atomic<size_t> head_{0};
  alignas(64) std::atomic<size_t> tail_{0};
};

}  // namespace prism::plugin

#endif  // PRISM_PLUGIN_SPSC_RING_H_
