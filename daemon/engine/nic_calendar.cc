#include "daemon/engine/nic_calendar.h"

#include <algorithm>

namespace prism::engine {

Nanoseconds NicCalendar::NextFree(Nanoseconds t, Nanoseconds duration) const {
  // Ends are sorted too (disjoint intervals): skip those over by t.
  auto it = std::upper_bound(busy_.begin(), busy_.end(), t,
                             [](Nanoseconds v, const auto& b) { return v < b.second; });
  for (; it != busy_.end(); ++it) {
    if (it->first >= t + duration) break;  // the gap before this reservation holds it
    t = it->second;
  }
  return t;
}

void NicCalendar::Reserve(Nanoseconds start, Nanoseconds end, Nanoseconds forget_before) {
  busy_.erase(busy_.begin(), std::find_if(busy_.begin(), busy_.end(),
                                          [forget_before](const auto& b) { return b.second > forget_before; }));
  if (end <= start) return;
  latest_end_ = Max(latest_end_, end);
  // The reservations [start, end) touches merge with it.
  auto first = std::lower_bound(busy_.begin(), busy_.end(), start,
                                [](const auto& b, Nanoseconds s) { return b.second < s; });
  auto last = first;
  while (last != busy_.end() && last->first <= end) {
    start = Min(start, last->first);
    end = Max(end, last->second);
    ++last;
  }
  first = busy_.erase(first, last);
  busy_.insert(first, {start, end});
}

}  // namespace prism::engine
