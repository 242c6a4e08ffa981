// Lets a producer wake a progress thread that sleeps in poll(): the thread
// announces it is about to sleep, re-checks its inputs, then polls the
// eventfd among its sockets. Producers call Wake() after publishing work; it
// costs a write() only when the thread really sleeps.
#ifndef PRISM_PLUGIN_WAKER_H_
#define PRISM_PLUGIN_WAKER_H_

#include <sys/eventfd.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>

namespace prism::plugin {

class Waker {
 public:
  Waker() : fd_(eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC)) {}
  ~Waker() {
    if (fd_ >= 0) close(fd_);
  }
  Waker(const Waker&) = delete;
  Waker& operator=(const Waker&) = delete;

  bool ok() const { return fd_ >= 0; }
  int fd() const { return fd_; }

  // Progress thread: before re-checking inputs and sleeping.
  void PrepareSleep() { sleeping_.store(true, std::memory_order_seq_cst); }
  // Progress thread: after waking (drains the counter).
  void AfterSleep() {
    sleeping_.store(false, std::memory_order_relaxed);
    uint64_t v;
    while (read(fd_, &v, sizeof(v)) == sizeof(v)) {
    }
  }
  // Any thread, after publishing work. The fence orders the publication (a
  // release store, e.g. SpscRing::Push) before the load of sleeping_: without
  // it the store may be delayed past the load (store-load reordering), the
  // thread re-checks, sees nothing and sleeps while the producer sees it
  // awake: a lost wake-up, up to the poll cap late.
  void Wake() {
    std::atomic_thread_fence(std::memory_order_seq_cst);
    if (sleeping_.load(std::memory_order_seq_cst)) {
      uint64_t one = 1;
      ssize_t r = write(fd_, &one, sizeof(one));
      (void)r;
    }
  }

 private:
  int fd_;
  std::atomic<bool> sleeping_{false};
};

}  // namespace prism::plugin

#endif  // PRISM_PLUGIN_WAKER_H_
