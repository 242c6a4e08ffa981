// One instance of a collective in the replay engine: the j-th call on a
// communicator, which matches the j-th call of every member. It collects its
// members' arrivals (each member's op waits in `waiters` for the end), and
// in hybrid runs its real members' reports. Plain value; the engine thread
// owns every instance (ReplayEngine while members arrive, MixedCollectives
// while a finished-arriving instance waits for real reports).
#ifndef PRISM_DAEMON_ENGINE_COLLECTIVE_INSTANCE_H_
#define PRISM_DAEMON_ENGINE_COLLECTIVE_INSTANCE_H_

#include <cstdint>
#include <vector>

#include "common/units.h"

namespace prism::engine {

struct CollectiveInstance {
  // A member's op waiting for the instance to end, issued at `issued`.
  struct Waiter {
    uint32_t actor, op;
    Nanoseconds issued;
  };
  uint32_t arrived = 0, virtual_arrived = 0;
  Nanoseconds last, last_virtual;      // latest arrival (all members / virtual ones)
  uint32_t first_actor = 0, first_op = 0;
  std::vector<Waiter> waiters;
  uint32_t real_left = 0;              // real members that have not finished it
  Nanoseconds real_done, real_started;
  // No real member had other communication in flight while it ran: its
  // real duration is the collective's own (MixedCollectives).
  bool real_alone = true;
  // A member reached it in its first iteration, where NCCL still connects
  // and warms up (a real rank's first DP all-reduce took 39.6 ms where later
  // ones took 9 ms, docs/timing.md): its real duration calibrates nothing.
  bool startup = false;
  // Every virtual member's NIC was free of other traffic when the last
  // member arrived (MixedCollectives::AllArrived, before this instance's own
  // hold): a real duration is then not stretched by their other transfers.
  bool virtual_nics_free = false;
  // The model's time for it (set when every member arrived, in hybrid runs):
  // what a measurement of it is held against (calibration.h).
  Nanoseconds model;
};

}  // namespace prism::engine

#endif  // PRISM_DAEMON_ENGINE_COLLECTIVE_INSTANCE_H_
