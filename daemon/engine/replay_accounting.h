// What a replay counts while it runs (ReplayStats' figures): per actor, its
// exposed communication (time with a communication op in flight and no
// compute) and the part of it with only pipeline send/recv in flight (the
// pipeline wait: the schedule's bubble, plus the activation transfers), its
// memory and peak, and when it finished each iteration; ops,
// bytes and time by op kind and communicator kind, weighted by the ranks an
// actor stands for; when every actor finished each iteration. The engine
// tells it when ops start and end; it decides nothing about timing.
//
// Thread-safety: none; the engine thread owns it. `world` must outlive it.
#ifndef PRISM_DAEMON_ENGINE_REPLAY_ACCOUNTING_H_
#define PRISM_DAEMON_ENGINE_REPLAY_ACCOUNTING_H_

#include <cstdint>
#include <optional>
#include <vector>

#include "common/units.h"
#include "daemon/engine/replay_stats.h"
#include "daemon/engine/world.h"

namespace prism::engine {

class ReplayAccounting {
 public:
  ReplayAccounting(const EngineWorld& world, uint64_t iterations);

  // `actor` issued `op` at `now` / `op`, issued at `issued`, ended at `now`.
  void Started(uint32_t actor, const OpInfo& op, Nanoseconds now);
  void Ended(uint32_t actor, const OpInfo& op, Nanoseconds issued, Nanoseconds now);
  // One instance of an op of `actor` in `iteration` is over (at `now`).
  // Returns the iteration when that made every actor finish it.
  std::optional<uint64_t> CountDone(uint32_t actor, uint64_t iteration, Nanoseconds now);

  // Whether `actor` has had no other communication in flight since
  // `started` (> 0) besides the one op it is ending now.
  bool CommunicatedAlone(uint32_t actor, Nanoseconds started) const;
  bool Finished() const;
  uint64_t iterations_done() const { return iterations_done_; }
  // Op instances over so far, and in the whole replay (progress).
  uint64_t ops_done() const { return ops_done_; }
  uint64_t ops_total() const { return ops_total_; }
  // The duration of `iteration` (from the end of the one before).
  Nanoseconds IterationTime(uint64_t iteration) const;

  ReplayStats& stats() { return stats_; }
  const ReplayStats& stats() const { return stats_; }
  // Copies the per-actor figures into stats() (after the run).
  const ReplayStats& Close();

 private:
  struct ActorTally {
    Nanoseconds last_change, exposed;
    Nanoseconds pipeline_wait;        // part of `exposed` with only pipeline send/recv in flight
    int64_t memory = 0, memory_peak = 0;  // bytes
    uint32_t computing = 0, communicating = 0;
    uint32_t pipeline_p2p = 0;        // of `communicating`: sends/recvs on a pipeline (pp) communicator
    Nanoseconds last_comm_done;       // when its latest communication op completed
    std::vector<uint32_t> iteration_left;  // per iteration: op instances not over yet
    uint64_t iterations_done = 0;
  };
  void Account(ActorTally& t, Nanoseconds now);
  bool IsPipelineP2P(const Actor& a, const OpInfo& op) const;

  const EngineWorld& world_;
  const uint64_t iterations_;
  std::vector<ActorTally> actors_;
  std::vector<uint64_t> iteration_actors_left_;
  uint64_t iterations_done_ = 0;
  uint64_t ops_done_ = 0, ops_total_ = 0;
  ReplayStats stats_;
};

}  // namespace prism::engine

#endif  // PRISM_DAEMON_ENGINE_REPLAY_ACCOUNTING_H_
