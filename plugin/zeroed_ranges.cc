#include "plugin/zeroed_ranges.h"

#include <algorithm>
#include <cstring>
#include <iterator>

namespace prism::plugin {
namespace {

uintptr_t Addr(const char* p) { return reinterpret_cast<uintptr_t>(p); }

}  // namespace

bool ZeroedRanges::Covers(const char* p, uint64_t n) const {
  if (n == 0) return true;
  const uintptr_t lo = Addr(p), hi = lo + n;
  auto it = ranges_.upper_bound(lo);
  if (it == ranges_.begin()) return false;
  --it;  // the last range starting at or before lo
  return it->second >= hi;
}

std::vector<std::pair<uint64_t, uint64_t>> ZeroedRanges::Gaps(const char* p, uint64_t n) const {
  std::vector<std::pair<uint64_t, uint64_t>> gaps;
  if (n == 0) return gaps;
  const uintptr_t lo = Addr(p), hi = lo + n;
  uintptr_t cursor = lo;  // bytes of [lo, cursor) are zero or already a gap
  auto it = ranges_.upper_bound(lo);
  if (it != ranges_.begin() && std::prev(it)->second > lo) cursor = std::prev(it)->second;
  for (; it != ranges_.end() && it->first < hi && cursor < hi; ++it) {
    if (it->first > cursor) gaps.emplace_back(cursor - lo, it->first - cursor);
    cursor = std::max(cursor, it->second);
  }
  if (cursor < hi) gaps.emplace_back(cursor - lo, hi - cursor);
  return gaps;
}

void ZeroedRanges::Remember(const char* p, uint64_t n) {
  if (n == 0) return;
  const uintptr_t lo = Addr(p), hi = lo + n;
  uintptr_t start = lo, end = hi;  // the merged range
  auto it = ranges_.upper_bound(lo);
  if (it != ranges_.begin() && std::prev(it)->second >= lo) {  // overlaps or touches [lo, hi) from below
    --it;
    start = it->first;
  }
  while (it != ranges_.end() && it->first <= hi) {  // every range overlapping or touching: merged
    end = std::max(end, it->second);
    it = ranges_.erase(it);
  }
  ranges_.emplace(start, end);
}

uint64_t ZeroedRanges::Zero(char* p, uint64_t n) {
  uint64_t written = 0;
  for (const auto& [offset, length] : Gaps(p, n)) {
    std::memset(p + offset, 0, length);
    written += length;
  }
  Remember(p, n);
  return written;
}

void ZeroedRanges::Written(const char* p, uint64_t n) {
  if (n == 0 || ranges_.empty()) return;
  const uintptr_t lo = Addr(p), hi = lo + n;
  auto it = ranges_.upper_bound(lo);
  if (it != ranges_.begin()) {
    auto prev = std::prev(it);
    if (prev->second > lo) {  // starts at or below lo, reaches into [lo, hi)
      const uintptr_t prev_end = prev->second;
      if (prev->first < lo) prev->second = lo;
      else ranges_.erase(prev);
      if (prev_end > hi) {  // the part above hi stays zero; nothing else can start inside
        ranges_.emplace(hi, prev_end);
        return;
      }
    }
  }
  while (it != ranges_.end() && it->first < hi) {
    const uintptr_t end = it->second;
    it = ranges_.erase(it);
    if (end > hi) {
      ranges_.emplace(hi, end);
      break;
    }
  }
}

}  // namespace prism::plugin
