// NICs shared among the transfers in flight: the engine's alternative to
// NIC calendars (nic_calendar.h), which give a transfer each NIC direction it
// needs alone for its whole duration. NCCL interleaves the chunks of
// concurrent operations on a NIC instead, so here every transfer in flight on
// a direction gets an equal share of it, and one that needs several
// directions (a collective holds every member's transmit and receive) moves
// at the smallest of its shares. A transfer's work is the time it would take
// alone; it is counted in picoseconds so that shares divide it without
// losing time.
//
// Used by `prismd --simulate --nic-model shared` (EngineOptions::nic_model);
// docs/network-model.md, "NIC serialisation".
//
// Thread-safety: none; the engine thread owns it.
#ifndef PRISM_DAEMON_ENGINE_NIC_SHARING_H_
#define PRISM_DAEMON_ENGINE_NIC_SHARING_H_

#include <cstddef>
#include <cstdint>
#include <vector>

#include "common/units.h"

namespace prism::engine {

class SharedNics {
 public:
  // `directions`: how many NIC directions there are (ids 0 .. directions-1).
  explicit SharedNics(size_t directions) : load_(directions, 0) {}
  SharedNics(const SharedNics&) = delete;
  SharedNics& operator=(const SharedNics&) = delete;

  // A transfer that would take `alone_ns` (> 0) on `directions` (distinct
  // ids, at least one) starts at `now` (not before any earlier call's now).
  // Returns its id (ids count up from 0).
  uint64_t Start(Nanoseconds now, Nanoseconds alone, const std::vector<uint32_t>& directions);

  // When the first transfer in flight finishes if nothing else starts;
  // Nanoseconds::Max() when none is in flight.
  Nanoseconds NextFinish() const;

  // Moves to `now` (not before any earlier call's now) and removes the
  // transfers finished by then; returns their ids in start order.
  std::vector<uint64_t> FinishBy(Nanoseconds now);

  size_t in_flight() const { return flows_.size(); }

 private:
  struct Flow {
    uint64_t id;
    int64_t remaining_ps;          // work left, at full speed
    std::vector<uint32_t> directions;
    int64_t share = 1;             // transfers on its busiest direction
  };
  void Advance(Nanoseconds now);
  void Reshare();

  std::vector<uint32_t> load_;     // transfers in flight per direction
  std::vector<Flow> flows_;        // in start order
  Nanoseconds last_;
  uint64_t next_id_ = 0;
};

}  // namespace prism::engine

#endif  // PRISM_DAEMON_ENGINE_NIC_SHARING_H_
