#include "daemon/engine/nic_calendar.h"

#include <algorithm>

namespace prism::engine {
namespace {

using Busy = std::vector<std::pair<Nanoseconds, Nanoseconds>>;

// The first reservation for which `before` is false (`before` holds for a
// prefix: the reservations' ends are sorted too). The engine asks about
// times near its latest reservations: the last few are tried first, so that
// a calendar costs its last cache line rather than a binary search's.
template <typename Before>
Busy::const_iterator FromBack(const Busy& busy, Before before) {
  auto it = busy.end();
  for (int i = 0; i < 4 && it != busy.begin(); ++i, --it)
    if (before(*(it - 1))) return it;
  return std::partition_point(busy.begin(), it, before);
}

}  // namespace

Nanoseconds NicCalendar::NextFree(Nanoseconds t, Nanoseconds duration) const {
  // Skip the reservations over by t.
  auto it = FromBack(busy_, [t](const auto& b) { return b.second <= t; });
  for (; it != busy_.end(); ++it) {
    if (it->first >= t + duration) break;  // the gap before this reservation holds it
    t = it->second;
  }
  return t;
}

void NicCalendar::Reserve(Nanoseconds start, Nanoseconds end, Nanoseconds forget_before) {
  if (!busy_.empty() && first_end_ <= forget_before) {
    busy_.erase(busy_.begin(), std::find_if(busy_.begin(), busy_.end(),
                                            [forget_before](const auto& b) { return b.second > forget_before; }));
    if (!busy_.empty()) first_end_ = busy_.front().second;
  }
  if (end <= start) return;
  latest_end_ = Max(latest_end_, end);
  // The reservations [start, end) touches merge with it.
  auto first = busy_.begin() + (FromBack(busy_, [start](const auto& b) { return b.second < start; }) - busy_.cbegin());
  auto last = first;
  while (last != busy_.end() && last->first <= end) {
    start = Min(start, last->first);
    end = Max(end, last->second);
    ++last;
  }
  first = busy_.erase(first, last);
  if (first == busy_.begin()) first_end_ = end;
  busy_.insert(first, {start, end});
}

}  // namespace prism::engine
