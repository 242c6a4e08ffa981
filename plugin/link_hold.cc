#include "plugin/link_hold.h"

#include <algorithm>
#include <cinttypes>
#include <cstdio>

namespace prism::plugin {

void DelayHistogram::Record(int64_t delay_ns) {
  const int64_t d = std::max<int64_t>(0, delay_ns);
  size_t b = 0;
  while (b < kUpperUs.size() && d > kUpperUs[b] * 1000) ++b;
  buckets_[b].fetch_add(1, std::memory_order_relaxed);
  int64_t seen = max_ns_.load(std::memory_order_relaxed);
  while (d > seen && !max_ns_.compare_exchange_weak(seen, d, std::memory_order_relaxed)) {
  }
}

uint64_t DelayHistogram::count() const {
  uint64_t n = 0;
  for (const auto& b : buckets_) n += b.load(std::memory_order_relaxed);
  return n;
}

uint64_t DelayHistogram::CountAbove(int64_t us) const {
  uint64_t n = 0;
  for (size_t b = 0; b < buckets_.size(); ++b) {
    // Bucket b holds (kUpperUs[b-1], kUpperUs[b]]; the last one is unbounded.
    const int64_t lower = b == 0 ? -1 : kUpperUs[b - 1];
    if (lower >= us) n += buckets_[b].load(std::memory_order_relaxed);
  }
  return n;
}

int64_t DelayHistogram::QuantileUpperUs(double q) const {
  const uint64_t n = count();
  if (n == 0) return -1;
  const auto rank = static_cast<uint64_t>(std::max(1.0, q * static_cast<double>(n) + 0.5));
  uint64_t seen = 0;
  for (size_t b = 0; b < buckets_.size(); ++b) {
    seen += buckets_[b].load(std::memory_order_relaxed);
    if (seen >= rank) return b < kUpperUs.size() ? kUpperUs[b] : INT64_MAX;
  }
  return INT64_MAX;
}

void LinkHoldStats::RecordLanded(int64_t now_ns, int64_t deliver_ns, int64_t posted_ns) {
  if (deliver_ns > 0) landed_.Record(now_ns - std::max(deliver_ns, posted_ns));
}

void LinkHoldStats::RecordSeen(int64_t late_ns) { seen_.Record(late_ns); }

void LinkHoldStats::RecordMatched(int64_t now_ns, int64_t deliver_ns, int64_t posted_ns) {
  if (deliver_ns > 0) matched_.Record(now_ns - std::max(deliver_ns, posted_ns));
}

namespace {
std::string Bound(int64_t us) {
  return us == INT64_MAX ? std::string(">10000") : "<=" + std::to_string(us);
}
}  // namespace

std::string LinkHoldStats::Summary() const {
  const uint64_t n = landed_.count();
  if (n == 0) return "";
  const uint64_t late = landed_.CountAbove(0);
  char line[512];
  std::snprintf(line, sizeof(line),
                "shaped receives: %" PRIu64 "; bytes landed after the modelled delivery (or the posting, if later): %" PRIu64
                " (%.1f%%), p50 %s us, p99 %s us, max %.1f us; test() saw them p50 %s us, p99 %s us later"
                "; headers read after it: %" PRIu64 ", max %.1f us",
                n, late, 100.0 * static_cast<double>(late) / static_cast<double>(n),
                Bound(landed_.QuantileUpperUs(0.5)).c_str(), Bound(landed_.QuantileUpperUs(0.99)).c_str(),
                static_cast<double>(landed_.max_ns()) / 1e3, Bound(seen_.QuantileUpperUs(0.5)).c_str(),
                Bound(seen_.QuantileUpperUs(0.99)).c_str(), matched_.CountAbove(0),
                static_cast<double>(matched_.max_ns()) / 1e3);
  return line;
}

std::string LinkHoldStats::UnheldWarning() const {
  const uint64_t n = landed_.count();
  const uint64_t late = landed_.CountAbove(kUnheldLateUs);
  if (n == 0 || late * kUnheldShare < n) return "";
  char line[640];
  std::snprintf(line, sizeof(line),
                "warning: the shaped links to this process's real peers did not hold the modelled link: %" PRIu64
                " of %" PRIu64 " receives (%.1f%%) landed over %" PRId64
                " us after their modelled delivery (max %.1f us). This host moves bytes between its real ranks "
                "slower than the graph's link, so their exchanges, and what waits for them, run slower than on the "
                "target. Put fewer real ranks on one host, or model a slower link; PRISM_LINK_REPORT=1 prints the "
                "figures (docs/plugin.md, \"Link shaping\").",
                late, n, 100.0 * static_cast<double>(late) / static_cast<double>(n), kUnheldLateUs,
                static_cast<double>(landed_.max_ns()) / 1e3);
  return line;
}

}  // namespace prism::plugin
