// The real-rank bridge for collectives (hybrid mode, docs/timing.md): the
// instances real ranks take part in, and the calibration their clean
// measurements give all-virtual instances.
//
// Real members finish a mixed instance for real: once every member has
// arrived (AllArrived) it waits for the real members' reports
// (RealMemberDone); the virtual members then finish at
// max(last real end, last virtual arrival), and their NICs stay busy until
// then. When the real duration is a clean measurement of the collective --
// not in a member's first iteration (NCCL connecting and warming up), the
// real members started after the virtual ones were all there, had no
// other communication in flight meanwhile (DP traffic overlapping a TP
// all-reduce shares the NIC), and no virtual member's NIC was still busy
// with other traffic -- all-virtual instances of the same kind, size and
// shape take it from then on (Calibrated). A measurement stretched by other
// traffic would slow every all-virtual instance (the hybrid self-check,
// test/hybrid_self_check_test.cc, catches that).
//
// It pushes the virtual members' completions into the engine's queue, counts
// late virtual members and calibrated instances in the run's stats, and
// tells the observer; the real members' own completions stay with the engine
// (their reports complete them).
//
// Thread-safety: none; the engine thread owns it. `world`, `nics`, `queue`
// and `stats` must outlive it; the observer (nullable, not owned) must
// outlive the run.
#ifndef PRISM_DAEMON_ENGINE_MIXED_COLLECTIVES_H_
#define PRISM_DAEMON_ENGINE_MIXED_COLLECTIVES_H_

#include <cstdint>
#include <optional>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "common/units.h"
#include "daemon/engine/calibration.h"
#include "daemon/engine/collective_instance.h"
#include "daemon/engine/engine_observer.h"
#include "daemon/engine/engine_world.h"
#include "daemon/engine/nic_scheduler.h"
#include "daemon/engine/replay_queue.h"
#include "daemon/engine/replay_stats.h"

namespace prism::engine {

class MixedCollectives {
 public:
  // `nccl` (outlives it): which measurements calibrate (NcclBehaviour::
  // calibrate, and the older engines' rules startup_calibrates and
  // own_hold_unclean, for replaying recordings made with them).
  MixedCollectives(const EngineWorld& world, NicScheduler& nics, ReplayQueue& queue, ReplayStats& stats,
                   const NcclBehaviour& nccl)
      : world_(world), nics_(nics), queue_(queue), stats_(stats), nccl_(nccl) {}
  MixedCollectives(const MixedCollectives&) = delete;
  MixedCollectives& operator=(const MixedCollectives&) = delete;

  void SetObserver(EngineObserver* observer) { observer_ = observer; }

  // An all-virtual instance of `op` on a communicator of `shape`, which the
  // model times `model`: the duration a real measurement gives it, if any
  // (counted as calibrated; Calibration::Find).
  std::optional<Nanoseconds> Calibrated(const OpInfo& op, const CommShape& shape, Nanoseconds model);

  // Every member of instance `call` of `comm` (which has real members) has
  // arrived, at the engine's instant `now` (`horizon`: the furthest time
  // handled): it finishes now if every real member reported, else waits.
  // Called before the instance's own hold of its members' NICs is granted
  // (NicScheduler::HoldCollective at the same instant), so that whether
  // they carried other traffic is read without it.
  void AllArrived(uint32_t comm, uint64_t call, CollectiveInstance&& in, Nanoseconds now, Nanoseconds horizon);
  // A real member of instance `call` of `comm` reported its end `at` and
  // first send `started`; `alone`: it had no other communication in flight
  // meanwhile. `arriving` is the instance when some member has not arrived
  // yet (the engine's), else null: the waiting one is looked up, and
  // finishes with its last real report.
  void RealMemberDone(uint32_t comm, uint64_t call, CollectiveInstance* arriving, Nanoseconds at,
                      Nanoseconds started, bool alone, Nanoseconds now, Nanoseconds horizon);

 private:
  void Finish(const CollectiveInstance& in, Nanoseconds now, Nanoseconds horizon);
  // Whether the real members' duration of `in` (from `start`) is a clean
  // measurement of the collective (docs/timing.md, "Calibration").
  bool Clean(const CollectiveInstance& in, uint32_t comm, Nanoseconds start) const;

  const EngineWorld& world_;
  NicScheduler& nics_;
  ReplayQueue& queue_;
  ReplayStats& stats_;
  EngineObserver* observer_ = nullptr;
  const NcclBehaviour& nccl_;
  // Instances whose members all arrived, waiting for real members' reports; key (comm, call).
  absl::flat_hash_map<std::pair<uint32_t, uint64_t>, CollectiveInstance> awaiting_;
  Calibration calibration_;
};

}  // namespace prism::engine

#endif  // PRISM_DAEMON_ENGINE_MIXED_COLLECTIVES_H_
