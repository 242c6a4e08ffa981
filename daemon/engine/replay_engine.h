// The discrete-event replay engine.
//
// One thread (the caller of Run) owns all engine state. Every actor of the
// world (a rank, or an equivalence class of ranks) runs its program: ops on a
// stream in order, Op.deps as cross-stream edges, GroupStart..GroupEnd issued
// together. A collective completes when every member has reached it (the j-th
// call on a communicator matches the j-th call of every member), then takes
// the network model's time; across nodes each GPU's NIC share carries one
// transfer at a time in each direction (NicModel: a ring collective's members
// queue their shares on their own transmit sides). Send/recv match per
// (communicator, src, dst) in order and take the point-to-point time. Time is
// integer ns.
//
// Hybrid mode (real ranks among virtual ones, docs/timing.md): a real rank's
// communication ops are issued when the inbox says it reached them and
// complete when the inbox says it finished them (RankCompletedOp); its compute
// ops end when it moves on. A collective with real members completes for its
// virtual members when the last real member finished it (in a ring all of
// them finish together); a virtual rank's receive from a real sender completes
// when the real send's last byte arrives; a virtual rank's send to a real
// receiver completes by the model, and the observer hears when it left
// (OnVirtualSendToReal) so that the real receiver can be told. The engine may
// run ahead of the wall clock (the pacer's lookahead); real ranks' events
// arrive with their own, possibly past, times and are handled at those times.
//
// Other threads interact only through the EngineInbox passed to Run and the
// EngineObserver callbacks, which run on the engine thread.
#ifndef PRISM_DAEMON_ENGINE_REPLAY_ENGINE_H_
#define PRISM_DAEMON_ENGINE_REPLAY_ENGINE_H_

#include <chrono>
#include <cstdint>
#include <memory>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "daemon/engine/collective_instance.h"
#include "daemon/engine/engine_observer.h"
#include "daemon/engine/event_queue.h"
#include "daemon/engine/fifo.h"
#include "daemon/engine/injected_events.h"
#include "daemon/engine/late_ranks.h"
#include "daemon/engine/launch_order.h"
#include "daemon/engine/mixed_collectives.h"
#include "daemon/engine/network_model.h"
#include "daemon/engine/nic_scheduler.h"
#include "daemon/engine/p2p_transfers.h"
#include "daemon/engine/real_rank_ops.h"
#include "daemon/engine/realtime.h"
#include "daemon/engine/replay_accounting.h"
#include "daemon/engine/replay_queue.h"
#include "daemon/engine/replay_stats.h"
#include "daemon/engine/trace_writer.h"
#include "daemon/engine/world.h"

namespace prism::engine {

struct EngineOptions {
  uint64_t iterations = 1;
  uint64_t progress_every_events = 1 << 16;
  NicModel nic_model = NicModel::kQueues;  // nic_scheduler.h
  // Virtual ranks late in one iteration (late_ranks.h); null or empty: none.
  // Not owned; must outlive the engine.
  const LateComputes* late = nullptr;
};

class ReplayEngine {
 public:
  // `world` and `model` must outlive the engine.
  ReplayEngine(const EngineWorld& world, const NetworkModel& model, EngineOptions options);
  ReplayEngine(const ReplayEngine&) = delete;
  ReplayEngine& operator=(const ReplayEngine&) = delete;

  void SetObserver(EngineObserver* observer) {
    observer_ = observer;
    p2p_.SetObserver(observer);
    mixed_.SetObserver(observer);
  }
  void SetTraceRecorder(TraceRecorder* trace) { trace_ = trace, p2p_.SetTraceRecorder(trace); }

  // Replays every iteration. `pacer` (nullable) paces to the wall clock;
  // `inbox` (nullable) injects events; with real ranks Run waits on the inbox
  // for their progress. Returns FailedPrecondition when the replay stalls
  // (a collective or send/recv that can never complete), Cancelled on a
  // StopRequest, DeadlineExceeded when a hard-limit pacer falls behind.
  absl::Status Run(WallClockPacer* pacer, EngineInbox* inbox);

  const ReplayStats& stats() const { return stats_; }

 private:
  // A stream's place in its program: what every event of it reads. Its op
  // index `index` and `iteration` move together (no divisions in the hot
  // loop); its position is iteration * length + index.
  struct StreamState {
    static constexpr uint32_t kNotBlocked = ~0u;
    uint64_t iteration = 0;
    uint32_t index = 0;
    uint32_t inflight = 0;
    // A virtual stream whose next op waits for op `blocked_on`'s count to
    // grow (Ready failed on it); CountDone clears it. kNotBlocked: none.
    uint32_t blocked_on = kNotBlocked;
    bool in_group = false;
    bool wake_pending = false; // a kWakeFlag event is queued for it
    Nanoseconds reached{-1};   // when it reached its next op, if launch order holds that op back
    // Whether AdvanceStream may move it: not waiting for its op in flight
    // or for a dependency (Ready would fail as before), not at its end.
    bool Movable(uint64_t iterations) const {
      return blocked_on == kNotBlocked && (in_group || inflight == 0) && iteration < iterations;
    }
    void Step(uint64_t len) {
      if (++index == len) index = 0, ++iteration;
    }
    uint64_t Pos(uint64_t len) const { return iteration * len + index; }
  };
  // A stream's state that only hybrid runs use (beside StreamState, by the same index).
  struct StreamWait {
    int64_t pending_compute = -1;  // a real rank's compute op that ends when it moves on; -1: none
    Nanoseconds pending_issued;
    Nanoseconds last_done;         // latest completion of one of its ops
  };
  // What the hot loop reads of an actor for every event, 32 bytes; its
  // streams, op counters and call counters lie in flat arrays from the bases.
  struct ActorState {
    const ProgramInfo* program = nullptr;  // world_.programs[its actor's program]
    uint64_t done_base = 0;    // done_[done_base + k]: op k's completed instances
    uint32_t stream_base = 0;  // streams_[stream_base + s]
    uint32_t slot_base = 0;    // slots_[slot_base + slot]
    uint32_t streams = 0;
    bool real = false;
  };
  using Instance = CollectiveInstance;
  using Waiter = CollectiveInstance::Waiter;
  // The last model time asked for on a communicator, and what it was asked for.
  struct ModelMemo {
    graph::CollectiveKind kind = graph::COLLECTIVE_KIND_UNSPECIFIED;
    graph::Algorithm algorithm = graph::ALGORITHM_DEFAULT;
    Bytes bytes;
    Nanoseconds took;
    bool valid = false;
    bool paced = false;  // a long latency-bound ring: a captured own pace counts (ModelTime)
  };
  struct CommState {
    uint32_t members = 0;
    uint64_t base = 0;
    Fifo<Instance> pending;  // calls base, base + 1, ...: some member has not arrived
    uint32_t real_members = 0;
    ModelMemo memo;
  };
  // A collective across nodes parked while the NIC scheduler holds its
  // ticket (the index into transfers_): the members its grant finishes.
  struct CollectiveTransfer {
    uint32_t comm = 0;
    Instance instance;
  };

  StreamState& Stream(uint32_t actor, uint32_t stream) { return streams_[state_[actor].stream_base + stream]; }
  // Moves every stream of `actor` that may move; first frees a stream
  // waiting for op `done` (StreamState::blocked_on; kNotBlocked: none), as
  // CountDone would.
  void Advance(uint32_t actor, uint32_t done = StreamState::kNotBlocked);
  // Issues what the stream may issue now; true when it moved (another
  // stream may then go: LaunchWaits, or a dependency on a group's end).
  bool AdvanceStream(uint32_t actor, uint32_t stream);
  // AdvanceStream for a stream `st` known Movable.
  bool MoveStream(uint32_t actor, uint32_t stream, StreamState& st);
  // Of a real `actor`'s communication ops in flight on streams other than
  // `stream`, how many wait for a dependency not yet met. A real rank's op
  // is in flight from when its NCCL reached it, and a program enqueues a
  // side stream's collective ahead of the compute it follows (PyTorch's
  // CPU runs ahead of the GPU): its kernel waits on the stream and sends
  // nothing, so it does not make another collective's measurement unclean.
  // A group in flight counts as sending.
  uint32_t CommHeldByDeps(uint32_t actor, uint32_t stream) const;
  // NCCL's launch order holds op `k` back (only when launch_in_order_).
  bool LaunchWaits(uint32_t actor, uint32_t stream, uint32_t k, uint64_t iteration) const;
  // Whether a virtual stream's next op `op` must wait past now: a completion
  // it depends on was handled earlier but lies later in time (a paced run
  // handled a real rank's report at its past stamp). Then a wake-up is
  // queued for that time.
  bool WaitsForLaterCompletion(uint32_t actor, uint32_t stream, const OpInfo& op);
  // Whether op `k` (`op`), next on stream `st`, may start; a virtual stream
  // that waits for a dependency remembers which (StreamState::blocked_on).
  bool Ready(uint32_t actor, const OpInfo& op, uint32_t k, StreamState& st);
  // Starts op `k` (`op`) of `actor` (`s`).
  void Issue(uint32_t actor, const ActorState& s, const OpInfo& op, uint32_t k, uint64_t iteration);
  void Complete(uint32_t actor, uint32_t k, Nanoseconds issued);
  // Complete's part for hybrid runs and traces (out of the hot path): the
  // observer's OnRealRankOpComplete, the trace's record, the completion
  // times WaitsForLaterCompletion reads.
  void NoteCompletion(uint32_t actor, uint32_t k, Nanoseconds issued);
  // One more instance of op k of `actor` is done: streams waiting for it
  // are freed (not moved), then Tally.
  void CountDone(uint32_t actor, uint32_t k);
  // CountDone without freeing streams: the op's count, the accounting, the
  // observer's OnIteration.
  void Tally(uint32_t actor, uint32_t k);
  void Arrive(uint32_t actor, uint32_t k);
  void ResolveCollective(uint32_t comm, uint64_t call, Instance& in);
  // Hybrid (arrival_forecast.cc): instance `call` of `comm`, with one real
  // member (its end reported or not yet), has all its members. Where each virtual
  // member has only modelled compute between it and its next collective,
  // the same for all of them, tells the observer when that collective's
  // virtual members arrive as a function of the real member's end
  // (OnVirtualMembersForecast): the real rank can time its receives of that
  // collective without waiting for the engine.
  void ForecastNextArrival(uint32_t comm, uint64_t call, const Instance& in);
  // The next collective of virtual `actor` after collective op `k` (issued,
  // still in flight), when only compute whose other dependencies are done
  // lies between: its communicator and call, and its arrival as
  // max(*floor, S + *after) for S = when `actor` completes op `k`, given
  // that S >= `from`. False otherwise, or once it walked `*budget` ops
  // (counted down).
  struct NextArrival {
    uint32_t comm = 0;
    uint64_t call = 0;
    Nanoseconds floor, after;
  };
  bool ChainToNextCollective(uint32_t actor, uint32_t k, Nanoseconds from, NextArrival* out, int* budget) const;
  // The walk both forecasts take (arrival_forecast.cc): the ops of virtual
  // `actor`'s stream after its op `k`, the stream's one op in flight (no
  // group open, not blocked), in order, at most `max_ops` and `*budget`
  // (counted down). `*floor` starts at max(`from`, the stream's last
  // completion); before `visit(j, pos)` sees op j (at stream position pos)
  // every dependency of it other than op k and the chain's earlier ops must
  // be done, and `*floor` rises to their completions. `visit` may move
  // `*floor` on (compute) and says whether to go on; the walk is true only
  // when it ends with kFound.
  enum class ChainStep { kNext, kFound, kStop };
  bool WalkChain(uint32_t actor, uint32_t k, Nanoseconds from, Nanoseconds* floor, int max_ops, int* budget,
                 absl::FunctionRef<ChainStep(uint32_t j, uint64_t pos)> visit) const;
  // Hybrid (send_forecast.cc): virtual `actor`'s op `k` (in flight) ends at
  // `end`, known now. Where only modelled compute whose other dependencies
  // are done, a group's start and the group's receives lie between it and a
  // send to a real rank, and nothing else can take the sender's NIC first,
  // tells the observer when that send's first byte leaves
  // (OnVirtualSendToRealForecast): the real receiver gets its schedule
  // before the engine plays the send.
  void ForecastSendToReal(uint32_t actor, uint32_t k, Nanoseconds end);
  // Whether none of `actor`'s streams but `stream` can issue an op before
  // `stream` passes position `send_pos` (send_forecast.cc).
  bool OtherStreamsWaitFor(uint32_t actor, uint32_t stream, uint64_t chain_begin, uint64_t send_pos) const;
  // Empties `waiters` into spare_waiters_ (for the next instance).
  void Recycle(std::vector<Waiter>& waiters);
  uint32_t Park(uint32_t comm, Instance in);
  // Lets the transfers the NIC scheduler granted go on (grants_) and queues
  // its wake-ups (checks_).
  void GrantNics();
  void FinishGrants();
  void FinishCollectiveTransfer(uint32_t comm, const Instance& in, Nanoseconds end);
  // NicModel::kShared: a kFlowFlag event, the scheduler's wake-up (NicCheck).
  void FinishSharedTransfers(uint32_t generation);
  // Run's handling of an event with a flag (kReachFlag, kCompleteFlag, kWakeFlag, kFlowFlag).
  void HandleFlagged(const Event& e);
  void RealCollectiveDone(uint32_t actor, uint32_t k, Nanoseconds at, Nanoseconds started);
  void RealP2PDone(uint32_t actor, uint32_t k, Nanoseconds at);
  void ReachOp(uint32_t actor, uint32_t k);
  bool NextCommReached(uint32_t actor, uint32_t stream) const;
  // The model's time of `op` on `comm` (remembered per communicator: a
  // communicator's instances mostly repeat one kind and size); for a long
  // latency-bound ring, at least the op's measured own pace (OpInfo::duration).
  Nanoseconds ModelTime(uint32_t comm, const OpInfo& op);
  absl::Status ApplyInbox(EngineInbox* inbox);
  absl::Status StallError() const;
  // Where every real rank's streams stand (OnAwaitingRealRanks).
  std::vector<RealRankPosition> RealRankPositions() const;
  void Progress(WallClockPacer* pacer);

  const EngineWorld& world_;
  const NetworkModel& model_;
  EngineOptions options_;
  EngineObserver* observer_ = nullptr;
  TraceRecorder* trace_ = nullptr;
  ReplayQueue queue_;
  Nanoseconds now_;
  uint64_t events_ = 0;
  const bool has_real_;        // some actor is a real rank (hybrid)
  const bool launch_in_order_;  // the model's nccl().launch_in_order (launch_order.h)
  bool stop_ = false;
  bool input_ended_ = false;  // EndOfInput seen: no more reports will come
  std::vector<ActorState> state_;                    // per actor
  std::vector<StreamState> streams_;                 // per actor's stream (ActorState::stream_base)
  std::vector<StreamWait> stream_waits_;             // hybrid runs: as streams_
  std::vector<uint32_t> done_;                       // per actor's op (ActorState::done_base)
  std::vector<Nanoseconds> done_at_;                 // hybrid runs: as done_, its latest completion
  // An actor's comm slot: its communicator, and (kept in the first slot
  // naming that communicator) the collective calls made on it.
  struct SlotState {
    uint32_t comm = 0;
    uint32_t canonical = 0;    // slots_ index of the first slot naming the same communicator
    uint64_t calls = 0;
  };
  std::vector<SlotState> slots_;                     // per actor's comm slot (ActorState::slot_base)
  std::vector<std::unique_ptr<RealRankOps>> real_;   // per actor; real actors only
  std::vector<CommState> comm_state_;
  InjectedEvents injected_;                          // ApplyInbox's batch (kept for its capacity)
  NicScheduler nics_;
  LaunchOrder launch_order_;
  Nanoseconds reached_;  // the op being issued: when its stream reached it (its start in reports and traces)
  P2PTransfers p2p_;                                 // sends and receives, from issue to completion
  // Emptied waiter lists of finished collective instances, kept for their
  // capacity: a new instance takes one instead of allocating (Arrive).
  std::vector<std::vector<Waiter>> spare_waiters_;
  std::vector<CollectiveTransfer> transfers_;        // by ticket; free ones listed in free_tickets_
  std::vector<uint32_t> free_tickets_;
  std::vector<NicGrant> grants_;                     // the scheduler's answers (kept for their capacity)
  std::vector<NicCheck> checks_;
  Nanoseconds horizon_;                              // latest event time handled (reports, lag)
  ReplayAccounting accounting_;
  ReplayStats& stats_ = accounting_.stats();        // the run's own figures (events, end, hybrid counts)
  MixedCollectives mixed_;                           // collectives with real members; calibration
};

}  // namespace prism::engine

#endif  // PRISM_DAEMON_ENGINE_REPLAY_ENGINE_H_
