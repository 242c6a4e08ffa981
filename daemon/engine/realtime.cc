#include "daemon/engine/realtime.h"

#include <ctime>
#include <string>
#include <thread>

#include "absl/strings/str_cat.h"

namespace prism::engine {

void EngineInbox::Post(InboxEvent event) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    events_.push_back(std::move(event));
    pending_.store(true, std::memory_order_release);
  }
  cv_.notify_one();
}

void EngineInbox::Drain(std::vector<InboxEvent>* out) {
  std::lock_guard<std::mutex> lock(mu_);
  for (auto& e : events_) out->push_back(std::move(e));
  events_.clear();
  pending_.store(false, std::memory_order_release);
}

bool EngineInbox::WaitUntil(std::chrono::steady_clock::time_point deadline) {
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait_until(lock, deadline, [&] { return !events_.empty(); });
  return !events_.empty();
}

void WallClockPacer::Start() {
  start_ = std::chrono::steady_clock::now();
  timespec ts{};
  clock_gettime(CLOCK_REALTIME, &ts);
  start_realtime_ns_ = static_cast<int64_t>(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}

Nanoseconds WallClockPacer::Now() const {
  return Nanoseconds(std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - start_)
                         .count());
}

Nanoseconds WallClockPacer::EmulatedFromRealtime(uint64_t realtime_ns) const {
  return Nanoseconds(static_cast<int64_t>(realtime_ns) - start_realtime_ns_);
}

bool WallClockPacer::WaitUntilDue(Nanoseconds t, EngineInbox* inbox) {
  const Nanoseconds due = t - options_.lookahead;
  if (Now() >= due) return true;
  const auto deadline = start_ + std::chrono::nanoseconds(due.count());
  if (inbox == nullptr) {
    std::this_thread::sleep_until(deadline);
    return true;
  }
  if (inbox->WaitUntil(deadline)) return false;
  return Now() >= due;
}

absl::Status WallClockPacer::RecordLag(Nanoseconds t) {
  const int64_t lag = std::max<int64_t>(0, (Now() - t).count());
  lag_ns_.store(lag, std::memory_order_relaxed);
  if (lag > max_lag_ns_.load(std::memory_order_relaxed)) max_lag_ns_.store(lag, std::memory_order_relaxed);
  if (options_.mode == RealtimeMode::kHardLimit && lag > options_.lag_limit.count())
    return absl::DeadlineExceededError(absl::StrCat(
        "real-time replay fell ", lag / 1000, " us behind the wall clock (limit ", options_.lag_limit.count() / 1000,
        " us, --realtime hard-limit): the graph is too heavy to replay in real time on this machine; use "
        "--realtime best-effort or fewer ranks"));
  return absl::OkStatus();
}

absl::Status ParseRealtimeMode(const std::string& text, RealtimeMode* mode) {
  if (text == "best-effort") *mode = RealtimeMode::kBestEffort;
  else if (text == "hard-limit") *mode = RealtimeMode::kHardLimit;
  else if (text == "off") *mode = RealtimeMode::kOff;
  else
    return absl::InvalidArgumentError(
        absl::StrCat("--realtime ", text, " is not a mode; use best-effort or hard-limit"));
  return absl::OkStatus();
}

}  // namespace prism::engine
