// When one direction of one NIC is busy: the replay engine's reservations of
// a rank's transmit or receive side, as a few disjoint [start, end) intervals
// of emulated time (nanoseconds).
//
// Why intervals rather than one "busy until" instant: a transfer that is
// ready now but waits for a *peer's* NIC reserves this NIC only from the
// peer's free time on. With a single busy-until, a second transfer that is
// ready now and could finish before then would queue behind it, and the
// outcome would depend on which of two simultaneous events the engine
// handled first (seen as a DP reduce-scatter starting late on one rank and
// holding back that rank's TP all-reduce, +19% on a TP2 PP2 DP2 step). With
// intervals the second transfer takes the gap (backfilling), as a real NIC
// would carry it while the first one's peer is still busy.
//
// Thread-safety: none; the engine thread owns every calendar.
#ifndef PRISM_DAEMON_ENGINE_NIC_CALENDAR_H_
#define PRISM_DAEMON_ENGINE_NIC_CALENDAR_H_

#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <utility>
#include <vector>

#include "common/units.h"

namespace prism::engine {

class NicCalendar {
 public:
  // The earliest instant >= `t` from which this direction is free for
  // `duration` (> 0) nanoseconds. O(1) when the first reservation that
  // ends after `t` is among the last few, else O(log n) to find it; then one
  // step per reservation it must skip.
  Nanoseconds NextFree(Nanoseconds t, Nanoseconds duration) const;

  // Marks [start, end) busy, merged with the reservations it touches; nothing
  // when end <= start. Reservations that ended at or before `forget_before`
  // are dropped first: the caller promises no later request starts before it.
  void Reserve(Nanoseconds start, Nanoseconds end, Nanoseconds forget_before);

  // The latest end of any reservation ever made (0 when none).
  Nanoseconds LatestEnd() const { return latest_end_; }

  // Reservations held now (for tests).
  size_t size() const { return busy_.size() - head_; }

 private:
  // Disjoint, sorted by start; those before head_ are forgotten.
  std::vector<std::pair<Nanoseconds, Nanoseconds>> busy_;
  size_t head_ = 0;
  Nanoseconds head_end_;    // busy_[head_].second while head_ < busy_.size() (read without its line)
  Nanoseconds latest_end_;
};

// The earliest start >= `ready` at which every calendar of `calendars` is
// free for `duration` nanoseconds (ready itself when duration <= 0).
template <typename Calendars>
Nanoseconds EarliestCommonStart(const Calendars& calendars, Nanoseconds ready, Nanoseconds duration) {
  if (duration <= Nanoseconds(0)) return ready;
  Nanoseconds t = ready;
  for (bool moved = true; moved;) {
    moved = false;
    for (const NicCalendar* c : calendars) {
      const Nanoseconds next = c->NextFree(t, duration);
      if (next != t) t = next, moved = true;
    }
  }
  return t;
}

inline Nanoseconds EarliestCommonStart(std::initializer_list<const NicCalendar*> calendars, Nanoseconds ready,
                                       Nanoseconds duration) {
  return EarliestCommonStart<std::initializer_list<const NicCalendar*>>(calendars, ready, duration);
}

}  // namespace prism::engine

#endif  // PRISM_DAEMON_ENGINE_NIC_CALENDAR_H_
