// When prismd answers a real rank's ring collective whose virtual members the
// engine has not seen arrive yet (docs/timing.md, MIRROR and the ring hold).
//
// A hold keeps the ring's receives from virtual peers until the members'
// schedule comes, so it must only go to a ring whose members are late. The
// engine cannot know that while the members still wait for the real rank
// itself: NCCL reports a collective when it is enqueued, and the members of
// back-to-back rings (the DP all-gathers, every ring after one the real rank
// is in) reach ring k only when the engine applies the real rank's report
// that ring k-1 ended, which comes after ring k's start. A hold then made
// every such ring wait for the report's trip and the engine's schedule: at
// 8192 ranks a few hundred microseconds at the start of each 2047-step ring.
//
// So a ring's answer waits until none of its rank's earlier operations is
// in flight (their reports are in), and then until the engine has handled
// everything up to the ring's start (EngineInbox::CaughtUp); only a ring
// whose members have still not arrived gets the hold. RingAnswers keeps the
// first half: which rings wait, and which have no earlier operation left.
//
// Except behind an all-reduce whose report of its end lags NCCL's kernel
// (AllReduceEndLagsKernel): the GPU is past it, and runs the next ring, long
// before the report comes. A ring that waited for that report had neither
// schedule nor hold meanwhile, and the plugin took its members to be on
// time: at 8192 ranks train_gpt.py's 4-byte gradient-norm all-reduce ended
// on the GPU over 100 ms before its report, and the real rank's DP
// all-gathers after it ran before their virtual members had started them
// (docs/timing.md, "train_gpt.py at 8192: one real rank against the TP
// pair"). Such an all-reduce does not hold back the answers of later rings.
//
// Not thread-safe: HybridScheduler calls it under its own mutex.
#ifndef PRISM_DAEMON_HYBRID_RING_ANSWERS_H_
#define PRISM_DAEMON_HYBRID_RING_ANSWERS_H_

#include <cstddef>
#include <cstdint>
#include <map>
#include <set>
#include <utility>
#include <vector>

#include "common/units.h"

namespace prism::daemon {

class RingAnswers {
 public:
  using Ring = std::pair<uint32_t, uint64_t>;  // (graph communicator, call), as HybridScheduler's Slot

  // A matched operation of real rank `rank` started; returns its order
  // (increasing per rank), which Finished() and Defer() take. `gates`:
  // rings the rank starts after it wait for its report of its end before
  // they are answered (false: an all-reduce AllReduceEndLagsKernel names).
  uint64_t Started(uint32_t rank, bool gates);
  // It ended at `end` (emulated; the engine learns it from the same report).
  void Finished(uint32_t rank, uint64_t order, Nanoseconds end);

  // Ring `ring` of `rank` (order `order`, started at `at`) needs an answer.
  void Defer(uint32_t rank, uint64_t order, Ring ring, Nanoseconds at);

  struct Due {
    uint32_t rank = 0;
    Ring ring;
    // The engine must have handled every event up to here before the ring
    // is answered: its start, or the end of an earlier operation of its rank
    // if later (a ring enqueued early starts when the stream reaches it).
    Nanoseconds through;
  };
  // The deferred rings of which no earlier operation of their rank is in
  // flight, removed from here.
  std::vector<Due> TakeAnswerable();

  size_t deferred() const;

  // True when NCCL's kernel of an all-reduce of `bytes` over `comm_size`
  // ranks may end long before the operation's last receive completes: with
  // fewer bytes than ranks some ring chunks are empty whatever the element
  // size, and an LL step whose chunk is empty waits for nothing, while the
  // plugin completes each receive at its step's time in the model.
  static bool AllReduceEndLagsKernel(uint64_t bytes, int32_t comm_size);

 private:
  struct Deferred {
    uint64_t order = 0;
    Ring ring;
    Nanoseconds at;
  };
  struct Rank {
    uint64_t next_order = 0;
    std::set<uint64_t> in_flight;
    Nanoseconds last_end;
    std::vector<Deferred> deferred;  // in order
  };
  std::map<uint32_t, Rank> ranks_;
};

}  // namespace prism::daemon

#endif  // PRISM_DAEMON_HYBRID_RING_ANSWERS_H_
