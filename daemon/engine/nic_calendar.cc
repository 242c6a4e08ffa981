#include "daemon/engine/nic_calendar.h"

#include <algorithm>

namespace prism::engine {
namespace {

// The first reservation of [begin, end) for which `before` is false
// (`before` holds for a prefix: the reservations' ends are sorted too). The
// engine asks about times near its latest reservations: the last few are
// tried first, so that a calendar costs its last cache line rather than a
// binary search's.
template <typename It, typename Before>
It FromBack(It begin, It end, Before before) {
  auto it = end;
  for (int i = 0; i < 4 && it != begin; ++i, --it)
    if (before(*(it - 1))) return it;
  return std::partition_point(begin, it, before);
}

}  // namespace

Nanoseconds NicCalendar::NextFree(Nanoseconds t, Nanoseconds duration) const {
  if (latest_end_ <= t) return t;  // free since its last reservation (the last one held ends there)
  // Skip the reservations over by t.
  auto it = FromBack(busy_.begin() + head_, busy_.end(), [t](const auto& b) { return b.second <= t; });
  for (; it != busy_.end(); ++it) {
    if (it->first >= t + duration) break;  // the gap before this reservation holds it
    t = it->second;
  }
  return t;
}

void NicCalendar::Reserve(Nanoseconds start, Nanoseconds end, Nanoseconds forget_before) {
  if (head_ < busy_.size() && head_end_ <= forget_before) {
    // Forgotten by moving the head; the vector is compacted once most of it is forgotten.
    head_ = std::find_if(busy_.begin() + head_, busy_.end(),
                         [forget_before](const auto& b) { return b.second > forget_before; }) - busy_.begin();
    if (head_ < busy_.size()) head_end_ = busy_[head_].second;
    if (2 * head_ >= busy_.size()) busy_.erase(busy_.begin(), busy_.begin() + head_), head_ = 0;
  }
  if (end <= start) return;
  const bool after_all = latest_end_ < start;  // every reservation ended before it: appended
  latest_end_ = Max(latest_end_, end);
  // The reservations [start, end) touches merge with it.
  auto first = after_all ? busy_.end()
                         : FromBack(busy_.begin() + head_, busy_.end(), [start](const auto& b) { return b.second < start; });
  auto last = first;
  while (last != busy_.end() && last->first <= end) {
    start = Min(start, last->first);
    end = Max(end, last->second);
    ++last;
  }
  first = busy_.erase(first, last);
  if (first == busy_.begin() + head_) head_end_ = end;
  busy_.insert(first, {start, end});
}

}  // namespace prism::engine
