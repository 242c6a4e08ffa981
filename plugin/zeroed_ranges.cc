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

uint64_t ZeroedRanges::Zero(char* p, uint64_t n) {
  if (n == 0) return 0;
  const uintptr_t lo = Addr(p), hi = lo + n;
  uintptr_t start = lo, end = hi;  // the merged range
  uint64_t written = 0;
  uintptr_t cursor = lo;           // bytes below it are zero
  auto it = ranges_.upper_bound(lo);
  if (it != ranges_.begin()) {
    auto prev = std::prev(it);
    if (prev->second >= lo) {      // overlaps or touches [lo, hi) from below
      start = prev->first;
      cursor = std::max(cursor, prev->second);
      end = std::max(end, prev->second);
      it = ranges_.erase(prev);
    }
  }
  while (it != ranges_.end() && it->first <= hi) {  // overlaps or touches from above
    if (it->first > cursor) {
      std::memset(p + (cursor - lo), 0, it->first - cursor);
      written += it->first - cursor;
    }
    cursor = std::max(cursor, it->second);
    end = std::max(end, it->second);
    it = ranges_.erase(it);
  }
  if (cursor < hi) {
    std::memset(p + (cursor - lo), 0, hi - cursor);
    written += hi - cursor;
  }
  ranges_.emplace(start, end);
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
