#include "plugin/progress_thread.h"

#include <sched.h>
#include <time.h>

namespace prism::plugin {
namespace {
int64_t MonoNs() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return int64_t{ts.tv_sec} * 1000000000 + ts.tv_nsec;
}
}  // namespace

void ProgressThread::Start(int64_t spin_ns, StepFn step, FillPollFn fill_poll,
                           HasInputFn has_input) {
  step_ = std::move(step);
  fill_poll_ = std::move(fill_poll);
  has_input_ = std::move(has_input);
  thread_ = std::thread([this, spin_ns] { Main(spin_ns); });
}

void ProgressThread::Stop() {
  if (!thread_.joinable()) return;
  stop_.store(true, std::memory_order_release);
  uint64_t one = 1;
  ssize_t r = write(waker_.fd(), &one, sizeof(one));
  (void)r;
  thread_.join();
}

void ProgressThread::Main(int64_t spin_ns) {
  std::vector<pollfd> fds;
  int64_t idle_since = -1;
  while (!stop_.load(std::memory_order_acquire)) {
    bool progressed = false;
    if (!step_(&progressed)) return;
    if (progressed) {
      idle_since = -1;
      continue;
    }
    const int64_t now = MonoNs();
    if (idle_since < 0) idle_since = now;
    if (now - idle_since < spin_ns) {
      sched_yield();  // other threads (NCCL's proxy, peers) may need this core
      continue;
    }
    waker_.PrepareSleep();
    if (has_input_() || stop_.load(std::memory_order_acquire)) {
      waker_.AfterSleep();
      continue;
    }
    fds.clear();
    fds.push_back(pollfd{waker_.fd(), POLLIN, 0});
    fill_poll_(&fds);
    poll(fds.data(), fds.size(), 100);
    waker_.AfterSleep();
    idle_since = -1;
  }
}

}  // namespace prism::plugin
