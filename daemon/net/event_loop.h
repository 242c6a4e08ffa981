// A minimal epoll event loop: one thread calls Run() and owns every handler;
// Wake()/Stop()/Post() are the only calls other threads may make.
#ifndef PRISM_DAEMON_NET_EVENT_LOOP_H_
#define PRISM_DAEMON_NET_EVENT_LOOP_H_

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <vector>

#include "absl/status/status.h"

namespace prism::net {

class IoHandler {
 public:
  virtual ~IoHandler() = default;
  virtual void OnIo(uint32_t epoll_events) = 0;
};

class EventLoop {
 public:
  using Clock = std::chrono::steady_clock;
  using TimerId = uint64_t;

  EventLoop() = default;
  ~EventLoop();
  EventLoop(const EventLoop&) = delete;
  EventLoop& operator=(const EventLoop&) = delete;

  absl::Status Init();
  // Registration (loop thread only). `handler` must outlive its registration.
  absl::Status Add(int fd, uint32_t events, IoHandler* handler);
  absl::Status Modify(int fd, uint32_t events, IoHandler* handler);
  void Remove(int fd);

  TimerId AddTimer(std::chrono::nanoseconds delay, std::function<void()> fn);
  void CancelTimer(TimerId id);

  // Runs until Stop(); `on_wake` runs on the loop thread after every Wake().
  void Run(const std::function<void()>& on_wake);
  // Runs ready events and due timers once, waiting at most `max_wait`.
  void RunOnce(std::chrono::milliseconds max_wait);
  void Wake();   // any thread
  void Stop();   // any thread
  // Runs `fn` on the loop thread soon (any thread; FIFO).
  void Post(std::function<void()> fn);
  bool stopping() const { return stop_.load(); }

 private:
  // epoll_ctl(op) of `fd`; the error names `what` ("add", "mod") and the fd.
  absl::Status Control(int op, const char* what, int fd, uint32_t events, IoHandler* handler);

  int epoll_fd_ = -1;
  int wake_fd_ = -1;
  std::atomic<bool> stop_{false};
  std::atomic<bool> woken_{false};
  TimerId next_timer_ = 1;
  std::multimap<Clock::time_point, std::pair<TimerId, std::function<void()>>> timers_;
  std::mutex posted_mu_;
  std::vector<std::function<void()>> posted_;
};

}  // namespace prism::net

#endif  // PRISM_DAEMON_NET_EVENT_LOOP_H_
