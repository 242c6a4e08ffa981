#include "daemon/net/event_loop.h"

#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"

namespace prism::net {

EventLoop::~EventLoop() {
  if (epoll_fd_ >= 0) close(epoll_fd_);
  if (wake_fd_ >= 0) close(wake_fd_);
}

absl::Status EventLoop::Init() {
  epoll_fd_ = epoll_create1(EPOLL_CLOEXEC);
  wake_fd_ = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (epoll_fd_ < 0 || wake_fd_ < 0) {
    return absl::InternalError(absl::StrCat("epoll/eventfd: ", std::strerror(errno)));
  }
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.ptr = nullptr;  // nullptr = the wake fd
  if (epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, wake_fd_, &ev) != 0) {
    return absl::InternalError(absl::StrCat("epoll_ctl: ", std::strerror(errno)));
  }
  return absl::OkStatus();
}

absl::Status EventLoop::Control(int op, const char* what, int fd, uint32_t events, IoHandler* handler) {
  epoll_event ev{};
  ev.events = events;
  ev.data.ptr = handler;
  if (epoll_ctl(epoll_fd_, op, fd, &ev) != 0) {
    return absl::InternalError(absl::StrCat("epoll_ctl ", what, " fd ", fd, ": ", std::strerror(errno)));
  }
  return absl::OkStatus();
}

absl::Status EventLoop::Add(int fd, uint32_t events, IoHandler* handler) {
  return Control(EPOLL_CTL_ADD, "add", fd, events, handler);
}

absl::Status EventLoop::Modify(int fd, uint32_t events, IoHandler* handler) {
  return Control(EPOLL_CTL_MOD, "mod", fd, events, handler);
}

void EventLoop::Remove(int fd) { epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, fd, nullptr); }

EventLoop::TimerId EventLoop::AddTimer(std::chrono::nanoseconds delay, std::function<void()> fn) {
  const TimerId id = next_timer_++;
  timers_.emplace(Clock::now() + delay, std::make_pair(id, std::move(fn)));
  return id;
}

void EventLoop::CancelTimer(TimerId id) {
  for (auto it = timers_.begin(); it != timers_.end(); ++it) {
    if (it->second.first == id) {
      timers_.erase(it);
      return;
    }
  }
}

void EventLoop::RunOnce(std::chrono::milliseconds max_wait) {
  int timeout_ms = static_cast<int>(max_wait.count());
  if (!timers_.empty()) {
    const auto until = std::chrono::duration_cast<std::chrono::milliseconds>(
        timers_.begin()->first - Clock::now());
    timeout_ms = std::max<int>(0, std::min<int>(timeout_ms, static_cast<int>(until.count()) + 1));
  }
  epoll_event events[256];
  const int n = epoll_wait(epoll_fd_, events, 256, timeout_ms);
  for (int i = 0; i < n; ++i) {
    auto* h = static_cast<IoHandler*>(events[i].data.ptr);
    if (h == nullptr) {
      uint64_t v;
      while (read(wake_fd_, &v, sizeof(v)) > 0) {
      }
      woken_.store(true);
      std::vector<std::function<void()>> posted;
      {
        std::lock_guard<std::mutex> lock(posted_mu_);
        posted.swap(posted_);
      }
      for (auto& fn : posted) fn();
      continue;
    }
    h->OnIo(events[i].events);
  }
  const auto now = Clock::now();
  while (!timers_.empty() && timers_.begin()->first <= now) {
    auto fn = std::move(timers_.begin()->second.second);
    timers_.erase(timers_.begin());
    fn();
  }
}

void EventLoop::Run(const std::function<void()>& on_wake) {
  while (!stop_.load()) {
    RunOnce(std::chrono::milliseconds(100));
    if (woken_.exchange(false) && on_wake) on_wake();
  }
}

void EventLoop::Wake() {
  const uint64_t one = 1;
  [[maybe_unused]] ssize_t r = write(wake_fd_, &one, sizeof(one));
}

void EventLoop::Post(std::function<void()> fn) {
  {
    std::lock_guard<std::mutex> lock(posted_mu_);
    posted_.push_back(std::move(fn));
  }
  Wake();
}

void EventLoop::Stop() {
  stop_.store(true);
  Wake();
}

}  // namespace prism::net
