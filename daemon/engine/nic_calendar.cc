#include "daemon/engine/nic_calendar.h"

#include <algorithm>

namespace prism::engine {

int64_t NicCalendar::NextFree(int64_t t, int64_t duration) const {
  for (const auto& [start, end] : busy_) {
    if (end <= t) continue;
    if (start >= t + duration) break;  // the gap before this reservation holds it
    t = end;
  }
  return t;
}

void NicCalendar::Reserve(int64_t start, int64_t end, int64_t now) {
  busy_.erase(busy_.begin(), std::find_if(busy_.begin(), busy_.end(),
                                          [now](const auto& b) { return b.second > now; }));
  if (end <= start) return;
  latest_end_ = std::max(latest_end_, end);
  // The reservations [start, end) touches merge with it.
  auto first = std::lower_bound(busy_.begin(), busy_.end(), start,
                                [](const auto& b, int64_t s) { return b.second < s; });
  auto last = first;
  while (last != busy_.end() && last->first <= end) {
    start = std::min(start, last->first);
    end = std::max(end, last->second);
    ++last;
  }
  first = busy_.erase(first, last);
  busy_.insert(first, {start, end});
}

}  // namespace prism::engine
