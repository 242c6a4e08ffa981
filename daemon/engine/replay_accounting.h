// What a replay counts while it runs (ReplayStats' figures): per actor, its
// exposed communication (time with a communication op in flight and no
// compute) and the part of it with only pipeline send/recv in flight (the
// pipeline wait: the schedule's bubble, plus the activation transfers), its
// memory and peak, and when it finished each iteration; ops,
// bytes and time by op kind and communicator kind, weighted by the ranks an
// actor stands for; when every actor finished each iteration. The engine
// tells it when ops start and end; it decides nothing about timing.
//
// Thread-safety: none; the engine thread owns it. It copies what it needs of `world`.
#ifndef PRISM_DAEMON_ENGINE_REPLAY_ACCOUNTING_H_
#define PRISM_DAEMON_ENGINE_REPLAY_ACCOUNTING_H_

#include <algorithm>
#include <array>
#include <cstdint>
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
  // Returns whether that made every actor finish `iteration` (a bool, not
  // the iteration: an optional returned through the event loop went
  // through the stack).
  bool CountDone(uint32_t actor, uint64_t iteration, Nanoseconds now);

  // Whether `actor` has had no other communication in flight since
  // `started` (> 0) besides the one op it is ending now. `held`: of its ops
  // in flight, those that have sent nothing yet because they wait for a
  // dependency (ReplayEngine::CommHeldByDeps); they do not count.
  bool CommunicatedAlone(uint32_t actor, Nanoseconds started, uint32_t held = 0) const;
  bool Finished() const;
  uint64_t iterations_done() const { return iterations_done_; }
  // Op instances over so far, and in the whole replay (progress).
  uint64_t ops_done() const { return ops_done_; }
  uint64_t ops_total() const { return ops_total_; }
  // The duration of `iteration` (from the end of the one before).
  Nanoseconds IterationTime(uint64_t iteration) const;

  ReplayStats& stats() { return stats_; }
  const ReplayStats& stats() const { return stats_; }
  // Copies the per-actor figures and compute_ns into stats() and sums by_op
  // and by_comm (after the run).
  const ReplayStats& Close();

 private:
  // What every op start and end of an actor updates: one cache line.
  struct alignas(64) ActorTally {
    Nanoseconds last_change, exposed;
    Nanoseconds pipeline_wait;        // part of `exposed` with only pipeline send/recv in flight
    int64_t memory = 0, memory_peak = 0;  // bytes
    Nanoseconds last_comm_done;       // when its latest communication op completed
    uint32_t computing = 0, communicating = 0;
    uint32_t pipeline_p2p = 0;        // of `communicating`: sends/recvs on a pipeline (pp) communicator
  };
  static_assert(sizeof(ActorTally) == 64, "one cache line per actor");
  void Account(ActorTally& t, Nanoseconds now);
  // A sum of non-negative values in 128 bits, kept as two words: GCC's
  // __int128 additions in the event loop went through the stack. The same
  // value as an __int128 sum (value()).
  struct WideSum {
    uint64_t lo = 0, hi = 0;
    void Add(uint64_t v) {
      lo += v;
      hi += lo < v ? 1 : 0;  // the carry out of the low word
    }
    void Add(unsigned __int128 v) {
      const unsigned __int128 sum = (static_cast<unsigned __int128>(hi) << 64 | lo) + v;
      lo = static_cast<uint64_t>(sum), hi = static_cast<uint64_t>(sum >> 64);
    }
    __int128 value() const { return static_cast<__int128>(static_cast<unsigned __int128>(hi) << 64 | lo); }
  };
  // sum += w * v; without a multiplication for an actor of one rank.
  static void AddWeighted(WideSum& sum, uint64_t w, uint64_t v) {
    if (w == 1) sum.Add(v);
    else sum.Add(static_cast<unsigned __int128>(w) * v);
  }
  // A (op kind, communicator kind) row of by_op/by_comm while the run goes.
  struct Totals {
    WideSum time_ns, ops, bytes;
  };
  static bool IsCommOp(OpKind k) { return k == OpKind::kCollective || k == OpKind::kSend || k == OpKind::kRecv; }
  // The kind of the communicator behind `actor`'s comm slot `slot`.
  graph::CommKind SlotKind(uint32_t actor, uint32_t slot) const {
    return static_cast<graph::CommKind>(slot_kind_[slot_base_[actor] + slot]);
  }

  const uint64_t iterations_;
  std::vector<ActorTally> actors_;
  std::vector<uint64_t> weight_;               // per actor: ranks it stands for
  std::vector<uint32_t> slot_base_;            // per actor: its slots' offset in slot_kind_
  std::vector<uint8_t> slot_kind_;             // per actor's comm slot: graph::CommKind
  std::vector<uint32_t> iteration_left_;       // [actor * iterations_ + i]: op instances of iteration i not over
  std::vector<uint64_t> actor_iterations_done_;  // per actor
  std::vector<uint64_t> iteration_actors_left_;
  // Per (op kind, communicator kind): one row updated per op end; Close()
  // sums them into stats_.by_op and stats_.by_comm.
  std::array<Totals, kOpKinds * kCommKinds> by_pair_{};
  WideSum compute_ns_;                         // stats_.compute_ns, set by Close()
  uint64_t iterations_done_ = 0;
  uint64_t ops_done_ = 0, ops_total_ = 0;
  ReplayStats stats_;
};

// The per-op calls below run for every event: defined here so that the
// engine's loop can inline them.

// Real ranks' reports may arrive out of the engine's time order: never count
// a negative span.
inline void ReplayAccounting::Account(ActorTally& t, Nanoseconds now) {
  if (t.communicating > 0 && t.computing == 0 && now > t.last_change) {
    t.exposed += now - t.last_change;
    if (t.pipeline_p2p == t.communicating) t.pipeline_wait += now - t.last_change;
  }
  t.last_change = Max(t.last_change, now);
}

inline void ReplayAccounting::Started(uint32_t actor, const OpInfo& op, Nanoseconds now) {
  ActorTally& t = actors_[actor];
  Account(t, now);
  if (op.kind == OpKind::kCompute) {
    ++t.computing;
    t.memory += op.memory_delta;
    t.memory_peak = std::max(t.memory_peak, t.memory);
  } else if (IsCommOp(op.kind)) {
    ++t.communicating;
    if (op.kind != OpKind::kCollective && SlotKind(actor, op.slot) == graph::COMM_KIND_PP) ++t.pipeline_p2p;
  }
}

inline void ReplayAccounting::Ended(uint32_t actor, const OpInfo& op, Nanoseconds issued, Nanoseconds now) {
  ActorTally& t = actors_[actor];
  Account(t, now);
  const uint64_t w = weight_[actor];
  const auto took = static_cast<uint64_t>(std::max<int64_t>(0, (now - issued).count()));
  if (op.kind == OpKind::kCompute) {
    --t.computing;
    AddWeighted(compute_ns_, w, took);
    return;
  }
  if (!IsCommOp(op.kind)) return;
  --t.communicating;
  const graph::CommKind comm_kind = SlotKind(actor, op.slot);
  if (op.kind != OpKind::kCollective && comm_kind == graph::COMM_KIND_PP) --t.pipeline_p2p;
  t.last_comm_done = Max(t.last_comm_done, now);
  const int kind = op.kind == OpKind::kSend   ? kOpKindSend
                   : op.kind == OpKind::kRecv ? kOpKindRecv
                                              : std::clamp<int>(op.collective, 0, kOpKindSend - 1);
  Totals& k = by_pair_[kind * kCommKinds + comm_kind];  // the kind is clamped when stored
  AddWeighted(k.time_ns, w, took);
  k.ops.Add(w);
  AddWeighted(k.bytes, w, op.bytes.count());
}

inline bool ReplayAccounting::CountDone(uint32_t actor, uint64_t iteration, Nanoseconds now) {
  if (iteration >= iterations_) return false;
  ++ops_done_;
  if (--iteration_left_[actor * iterations_ + iteration] != 0) return false;
  ++actor_iterations_done_[actor];
  stats_.iteration_end[iteration] = Max(stats_.iteration_end[iteration], now);
  if (--iteration_actors_left_[iteration] != 0) return false;
  ++iterations_done_;
  return true;
}

}  // namespace prism::engine

#endif  // PRISM_DAEMON_ENGINE_REPLAY_ACCOUNTING_H_
