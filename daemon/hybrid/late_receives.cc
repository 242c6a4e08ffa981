#include "daemon/hybrid/late_receives.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "daemon/server/metrics.h"
#include "prometheus/histogram.h"

namespace prism::daemon {

LateReceives::LateReceives(server::Metrics* metrics) {
  if (metrics == nullptr) return;
  auto& family = prometheus::BuildHistogram()
                     .Name("prism_hybrid_receive_late_seconds")
                     .Help("How much later than its schedule a receive from a virtual peer completed, by cause "
                           "(schedule: it waited for prismd's schedule; test: NCCL tested it after its time)")
                     .Register(*metrics->registry());
  const prometheus::Histogram::BucketBoundaries buckets = {0, 1e-5, 5e-5, 1e-4, 5e-4, 1e-3, 5e-3, 1e-2, 5e-2, 1e-1, 1};
  metric_[kSchedule] = &family.Add({{"cause", "schedule"}}, buckets);
  metric_[kTest] = &family.Add({{"cause", "test"}}, buckets);
}

void LateReceives::Add(const rpc::EventBatch& batch) {
  // The batch's receives and their sums first, without the lock (the engine
  // thread's OnIteration takes it).
  std::vector<Pending> mine;
  std::array<Sum, kCauses> sum{};
  int64_t earliest = 0, latest = 0;
  for (const rpc::Event& e : batch.events()) {
    if (!e.has_completed() || e.completed().late_ns() == 0) continue;
    const rpc::Completed& c = e.completed();
    const Cause cause = c.waited_for_schedule() ? kSchedule : kTest;
    if (metric_[cause] != nullptr) metric_[cause]->Observe(static_cast<double>(c.late_ns()) * 1e-9);
    const Pending p{static_cast<int64_t>(c.at_ns()), cause, Nanoseconds(static_cast<int64_t>(c.late_ns()))};
    earliest = mine.empty() ? p.at_ns : std::min(earliest, p.at_ns);
    latest = mine.empty() ? p.at_ns : std::max(latest, p.at_ns);
    ++sum[cause].receives;
    sum[cause].late += p.late;
    mine.push_back(p);
  }
  if (mine.empty()) return;
  std::lock_guard<std::mutex> lock(mu_);
  if (ends_.empty() || earliest > ends_.back()) {  // all after the last completed iteration: pending together
    pending_.insert(pending_.end(), mine.begin(), mine.end());
    for (size_t c = 0; c < kCauses; ++c) {
      pending_sum_[c].receives += sum[c].receives;
      pending_sum_[c].late += sum[c].late;
    }
    pending_latest_ = pending_.size() == mine.size() ? latest : std::max(pending_latest_, latest);
    return;
  }
  for (const Pending& p : mine) {
    // The first completed iteration whose end comes at or after the receive's time, else pending.
    const size_t i = static_cast<size_t>(std::lower_bound(ends_.begin(), ends_.end(), p.at_ns) - ends_.begin());
    Sum& s = i == ends_.size() ? pending_sum_[p.cause] : by_iteration_[i][p.cause];
    ++s.receives;
    s.late += p.late;
    if (i < ends_.size()) continue;
    pending_latest_ = pending_.empty() ? p.at_ns : std::max(pending_latest_, p.at_ns);
    pending_.push_back(p);
  }
}

void LateReceives::OnIteration(uint64_t index, Nanoseconds duration, int64_t end_realtime_ns) {
  std::lock_guard<std::mutex> lock(mu_);
  if (index != ends_.size()) return;  // iterations come in order, each once
  const int64_t end = std::max(end_realtime_ns, ends_.empty() ? end_realtime_ns : ends_.back());
  ends_.push_back(end);
  durations_.push_back(duration);
  std::array<Sum, kCauses>& sums = by_iteration_.emplace_back();
  if (pending_.empty() || pending_latest_ <= end) {  // every pending receive is this iteration's: at once
    sums = pending_sum_;
    pending_sum_ = {};
    pending_.clear();
    return;
  }
  scanned_ += pending_.size();  // some came after the end (a clock ahead of prismd's): one by one
  pending_sum_ = {};
  pending_latest_ = 0;
  std::erase_if(pending_, [&](const Pending& p) {
    Sum& s = p.at_ns > end ? pending_sum_[p.cause] : sums[p.cause];  // a later iteration's, or this one's
    ++s.receives;
    s.late += p.late;
    if (p.at_ns > end) pending_latest_ = std::max(pending_latest_, p.at_ns);
    return p.at_ns <= end;
  });
}

uint64_t LateReceives::scanned() const {
  std::lock_guard<std::mutex> lock(mu_);
  return scanned_;
}

LateReceives::Totals LateReceives::totals() const {
  std::lock_guard<std::mutex> lock(mu_);
  Totals t;
  for (size_t i = 0; i < ends_.size(); ++i) {  // completed iterations only
    std::array<Sum, kCauses>& into = i == 0 ? t.startup : t.steady;
    for (size_t c = 0; c < kCauses; ++c) {
      into[c].receives += by_iteration_[i][c].receives;
      into[c].late += by_iteration_[i][c].late;
    }
    if (i > 0) ++t.steady_iterations, t.steady_time += durations_[i];
  }
  return t;
}

std::string LateReceives::Line(const Totals& t) {
  auto ms = [](Nanoseconds d, uint64_t per) { return static_cast<double>(d.count()) * 1e-6 / std::max<uint64_t>(per, 1); };
  std::string out;
  if (t.steady_iterations > 0) {
    const double iteration_ms = ms(t.steady_time, t.steady_iterations);
    const double schedule_ms = ms(t.steady[kSchedule].late, t.steady_iterations);
    const double test_ms = ms(t.steady[kTest].late, t.steady_iterations);
    out = absl::StrFormat(
        "late receives in the %llu steady iterations (of %.1f ms): %.3f ms per iteration waiting for prismd's "
        "schedule (%.2f%%, %llu receives), %.3f ms after their time by NCCL's test() (%.2f%%, %llu receives)",
        static_cast<unsigned long long>(t.steady_iterations), iteration_ms, schedule_ms,
        iteration_ms > 0 ? 100.0 * schedule_ms / iteration_ms : 0.0,
        static_cast<unsigned long long>(t.steady[kSchedule].receives), test_ms,
        iteration_ms > 0 ? 100.0 * test_ms / iteration_ms : 0.0,
        static_cast<unsigned long long>(t.steady[kTest].receives));
  } else {
    out = "late receives: no steady iteration completed";
  }
  absl::StrAppendFormat(&out, "; start-up iteration: %.3f ms waiting for the schedule (%llu receives), %.3f ms by "
                        "test() (%llu)", ms(t.startup[kSchedule].late, 1),
                        static_cast<unsigned long long>(t.startup[kSchedule].receives), ms(t.startup[kTest].late, 1),
                        static_cast<unsigned long long>(t.startup[kTest].receives));
  return out;
}

}  // namespace prism::daemon
