// The progress thread of one real-peer comm: calls `step` until stopped;
// when `step` made no progress for `spin_ns`, sleeps in poll() on the fds
// `fill_poll` asks for plus the Waker's eventfd (100 ms cap).
//
// Lifetime: Start() once; Stop() joins (idempotent, also from the
// destructor). `step`/`fill_poll` run on the progress thread only.
#ifndef PRISM_PLUGIN_PROGRESS_THREAD_H_
#define PRISM_PLUGIN_PROGRESS_THREAD_H_

#include <poll.h>

#include <atomic>
#include <functional>
#include <thread>
#include <vector>

#include "plugin/waker.h"

namespace prism::plugin {

class ProgressThread {
 public:
  // Returns false when the comm is broken (the thread then exits).
  using StepFn = std::function<bool(bool* progressed)>;
  using FillPollFn = std::function<void(std::vector<pollfd>* fds)>;
  // True when work is queued for the thread (checked before sleeping).
  using HasInputFn = std::function<bool()>;

  ProgressThread() = default;
  ~ProgressThread() { Stop(); }
  ProgressThread(const ProgressThread&) = delete;
  ProgressThread& operator=(const ProgressThread&) = delete;

  void Start(int64_t spin_ns, StepFn step, FillPollFn fill_poll, HasInputFn has_input);
  void Stop();
  Waker& waker() { return waker_; }

 private:
  void Main(int64_t spin_ns);

  StepFn step_;
  FillPollFn fill_poll_;
  HasInputFn has_input_;
  Waker waker_;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

}  // namespace prism::plugin

#endif  // PRISM_PLUGIN_PROGRESS_THREAD_H_
