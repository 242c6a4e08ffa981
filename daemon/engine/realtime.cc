#include "daemon/engine/realtime.h"

#include <algorithm>
#include <ctime>
#include <string>
#include <thread>

#ifdef __linux__
#include <sys/prctl.h>
#endif

#include "absl/strings/str_cat.h"

namespace prism::engine {

uint64_t EngineInbox::Post(InboxEvent event) {
  uint64_t number = 0;
  {
    std::lock_guard<std::mutex> lock(mu_);
    events_.push_back(std::move(event));
    number = ++posted_;
    pending_.store(true, std::memory_order_release);
  }
  cv_.notify_one();
  return number;
}

void EngineInbox::Drain(std::vector<InboxEvent>* out) {
  std::lock_guard<std::mutex> lock(mu_);
  for (auto& e : events_) out->push_back(std::move(e));
  events_.clear();
  pending_.store(false, std::memory_order_release);
  // What was drained is not handled yet: withdraw the mark, then count it.
  caught_up_before_.store(INT64_MIN, std::memory_order_seq_cst);
  drained_.store(posted_, std::memory_order_seq_cst);
}

bool EngineInbox::WaitUntil(std::chrono::steady_clock::time_point deadline) {
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait_until(lock, deadline, [&] { return !events_.empty(); });
  return !events_.empty();
}

void WallClockPacer::Start() {
  start_ = std::chrono::steady_clock::now();
  step_begin_ns_ = 0;
  timespec ts{};
  clock_gettime(CLOCK_REALTIME, &ts);
  start_realtime_ = FromSeconds(ts.tv_sec) + Nanoseconds(ts.tv_nsec);
}

void WallClockPacer::StartAtRealtime(Nanoseconds start) {
  Start();
  const Nanoseconds since = start_realtime_ - start;
  start_ -= std::chrono::nanoseconds(since.count());
  start_realtime_ = start;
}

Nanoseconds WallClockPacer::Now() const {
  return Nanoseconds(std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - start_)
                         .count());
}

Nanoseconds WallClockPacer::EmulatedFromRealtime(uint64_t realtime_ns) const {
  return Nanoseconds(static_cast<int64_t>(realtime_ns)) - start_realtime_;
}

uint64_t WallClockPacer::RealtimeFromEmulated(Nanoseconds t) const {
  return static_cast<uint64_t>(std::max<int64_t>(0, (start_realtime_ + t).count()));
}

WallClockPacer::LagHistogram WallClockPacer::Lags() const {
  LagHistogram h;
  for (size_t i = 0; i < kLagBuckets; ++i) {
    h.counts[i] = lag_counts_[i].load(std::memory_order_relaxed);
    h.total += h.counts[i];
  }
  h.sum_s = static_cast<double>(lag_sum_ns_.load(std::memory_order_relaxed)) * 1e-9;
  for (size_t i = 0; i < kEngineSteps; ++i) h.late_by_step[i] = late_by_step_[i].load(std::memory_order_relaxed);
  return h;
}

Nanoseconds WallClockPacer::LagHistogram::QuantileUpper(double q) const {
  if (total == 0) return Nanoseconds(0);
  const double want = q * static_cast<double>(total);
  uint64_t seen = 0;
  for (size_t i = 0; i < kLagBuckets; ++i) {
    seen += counts[i];
    if (static_cast<double>(seen) >= want)
      return i < kLagBuckets - 1 ? kLagBounds[i] : Nanoseconds::Max();
  }
  return Nanoseconds::Max();
}

WallClockPacer::LagHistogram WallClockPacer::LagHistogram::Since(const LagHistogram& earlier) const {
  LagHistogram d;
  for (size_t i = 0; i < kLagBuckets; ++i) d.counts[i] = counts[i] - std::min(counts[i], earlier.counts[i]);
  d.total = total - std::min(total, earlier.total);
  d.sum_s = std::max(0.0, sum_s - earlier.sum_s);
  for (size_t i = 0; i < kEngineSteps; ++i)
    d.late_by_step[i] = late_by_step[i] - std::min(late_by_step[i], earlier.late_by_step[i]);
  return d;
}

std::string WallClockPacer::LagHistogram::LateSteps() const {
  uint64_t n = 0;
  for (uint64_t c : late_by_step) n += c;
  return absl::StrCat(n, " over ", kLateStep.count() / 1000, " us: ", late_by_step[0], " waking, ", late_by_step[1],
                      " NIC grants, ", late_by_step[2], " reports, ", late_by_step[3], " events, ",
                      late_by_step[4], " observers");
}

bool WallClockPacer::WaitUntilDue(Nanoseconds t, EngineInbox* inbox) {
  if (inbox != nullptr) inbox->MarkCaughtUp(t);  // the engine handles events in time order
  const Nanoseconds due = t - options_.lookahead;
  if (Now() >= due) return true;  // no wait: the step goes on
  const auto deadline = start_ + std::chrono::nanoseconds(due.count());
  const auto wake = deadline - std::chrono::nanoseconds(options_.spin.count());
  bool reached = true;
  if (inbox == nullptr) {
    std::this_thread::sleep_until(wake);
  } else if (std::chrono::steady_clock::now() < wake && inbox->WaitUntil(wake)) {
    reached = false;
  }
  while (reached && std::chrono::steady_clock::now() < deadline) {  // the last stretch: poll
    if (inbox != nullptr && inbox->HasPending()) reached = false;
    else std::this_thread::yield();
  }
  StepDone(EngineStep::kWaiting);
  return reached;
}

void WallClockPacer::TightenTimers() {
#ifdef __linux__
  prctl(PR_SET_TIMERSLACK, 1UL, 0UL, 0UL, 0UL);
#endif
}

void WallClockPacer::StepDone(EngineStep kind) {
  const int64_t now = Now().count();
  steps_[steps_done_++ % kStepSpans] = StepSpan{step_begin_ns_, now, kind};
  step_begin_ns_ = now;
}

absl::Status WallClockPacer::RecordLag(Nanoseconds t) {
  const int64_t lag = std::max<int64_t>(0, (Now() - t).count());
  lag_ns_.store(lag, std::memory_order_relaxed);
  size_t bucket = 0;
  while (bucket < kLagBuckets - 1 && lag > kLagBounds[bucket].count()) ++bucket;
  lag_counts_[bucket].fetch_add(1, std::memory_order_relaxed);
  lag_sum_ns_.fetch_add(lag, std::memory_order_relaxed);
  if (lag > kLateStep.count()) {  // what the engine thread did since the event's time, by kind of step
    const int64_t from = t.count();
    std::array<int64_t, kEngineSteps> took{};
    took[static_cast<size_t>(EngineStep::kEvents)] = std::max<int64_t>(0, lag - std::max<int64_t>(0, step_begin_ns_ - from));  // this step so far
    for (size_t i = 0; i < kStepSpans && i < steps_done_; ++i) {
      const StepSpan& s = steps_[(steps_done_ - 1 - i) % kStepSpans];
      if (s.end_ns <= from) break;
      took[static_cast<size_t>(s.kind)] += s.end_ns - std::max(s.begin_ns, from);
    }
    const size_t most = static_cast<size_t>(std::max_element(took.begin(), took.end()) - took.begin());
    late_by_step_[most].fetch_add(1, std::memory_order_relaxed);
  }
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
