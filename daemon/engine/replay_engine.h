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
#include <deque>
#include <memory>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "daemon/engine/calibration.h"
#include "daemon/engine/event_queue.h"
#include "daemon/engine/injected_events.h"
#include "daemon/engine/launch_order.h"
#include "daemon/engine/network_model.h"
#include "daemon/engine/nic_scheduler.h"
#include "daemon/engine/p2p_queues.h"
#include "daemon/engine/radix_event_queue.h"
#include "daemon/engine/real_rank_ops.h"
#include "daemon/engine/realtime.h"
#include "daemon/engine/replay_accounting.h"
#include "daemon/engine/replay_stats.h"
#include "daemon/engine/trace_writer.h"
#include "daemon/engine/world.h"

namespace prism::engine {

struct EngineProgress {
  Nanoseconds emulated;
  uint64_t events = 0;
  uint64_t iterations_done = 0;
  Nanoseconds lag;            // real-time mode: how far behind the wall clock
  uint64_t ops_done = 0;      // op instances completed by the replayed actors
  uint64_t ops_total = 0;     // ... of this many (every actor's ops times the iterations)
};

// Hybrid: where a real rank's program stands on one stream while the engine
// has played everything it can and waits for the real ranks: the op it waits
// at and that op's iteration; `reached`: the real rank started it (it waits
// for its peers or its end), else the engine waits for the real rank to start
// it (the next communication op on that stream).
struct RealRankPosition {
  uint32_t rank = 0;
  uint32_t stream = 0;
  uint32_t op = 0;
  uint64_t iteration = 0;
  bool reached = false;
};

// Callbacks on the engine thread; implementations must be quick and must not
// call back into the engine.
class EngineObserver {
 public:
  virtual ~EngineObserver() = default;
  // The world about to be replayed (first, before any other callback).
  virtual void OnWorld(const EngineWorld& world) {}
  virtual void OnProgress(const EngineProgress& progress) {}
  virtual void OnIteration(uint64_t index, Nanoseconds duration) {}
  // One engine-level collective instance (in class mode it stands for the
  // instances of all ranks of the classes involved): network time from the
  // last arrival to completion, bytes per rank.
  virtual void OnCollective(graph::CollectiveKind kind, graph::CommKind comm, Nanoseconds latency, Bytes bytes) {}
  virtual void OnPointToPoint(Nanoseconds latency, Bytes bytes) {}
  // An op of a real rank completed (at the time the inbox said).
  virtual void OnRealRankOpComplete(uint32_t rank, uint32_t op, Nanoseconds at) {}
  // Hybrid: every virtual member of collective instance `call` (0-based, all
  // kinds counted) of engine communicator `comm` has arrived; the last at
  // `arrived`. Only for communicators with real members.
  virtual void OnVirtualMembersArrived(uint32_t comm, uint64_t call, Nanoseconds arrived) {}
  // Hybrid: virtual rank `send_rank` starts sending message `index` (0-based,
  // per (comm, send_rank, recv_rank)) of `bytes` to real rank `recv_rank` on
  // engine communicator `comm`; its first byte leaves at `ready`.
  virtual void OnVirtualSendToReal(uint32_t comm, uint32_t send_rank, uint32_t recv_rank, uint64_t index,
                                   Nanoseconds ready, Bytes bytes) {}
  // Hybrid: a collective with real members finished. `virtual_last`: its
  // virtual members arrived after the real ones had finished, so they, not
  // the real transfer, set its end (a late virtual rank, or real ranks the
  // engine thinks are early).
  virtual void OnMixedCollective(bool virtual_last) {}
  // Hybrid: an all-virtual collective took a real measurement's duration
  // instead of the model's (calibration, docs/timing.md).
  virtual void OnCalibratedCollective() {}
  // Hybrid: the engine has nothing left to play and has waited
  // kAwaitReportAfter for the real ranks' reports; `positions` says where
  // each real rank's program stands (a stall report's engine side). Repeated
  // every kAwaitReportAfter while the wait lasts.
  virtual void OnAwaitingRealRanks(const std::vector<RealRankPosition>& positions) {}
};

inline constexpr std::chrono::milliseconds kAwaitReportAfter{1000};

// Fans callbacks out to several observers (metrics, the hybrid bridge, ...).
// Observers are not owned and must outlive the engine run.
class ObserverList final : public EngineObserver {
 public:
  void Add(EngineObserver* o) {
    if (o != nullptr) observers_.push_back(o);
  }
  void OnWorld(const EngineWorld& w) override {
    for (auto* o : observers_) o->OnWorld(w);
  }
  void OnProgress(const EngineProgress& p) override {
    for (auto* o : observers_) o->OnProgress(p);
  }
  void OnIteration(uint64_t index, Nanoseconds d) override {
    for (auto* o : observers_) o->OnIteration(index, d);
  }
  void OnCollective(graph::CollectiveKind kind, graph::CommKind comm, Nanoseconds latency, Bytes bytes) override {
    for (auto* o : observers_) o->OnCollective(kind, comm, latency, bytes);
  }
  void OnPointToPoint(Nanoseconds latency, Bytes bytes) override {
    for (auto* o : observers_) o->OnPointToPoint(latency, bytes);
  }
  void OnRealRankOpComplete(uint32_t rank, uint32_t op, Nanoseconds at) override {
    for (auto* o : observers_) o->OnRealRankOpComplete(rank, op, at);
  }
  void OnVirtualMembersArrived(uint32_t comm, uint64_t call, Nanoseconds arrived) override {
    for (auto* o : observers_) o->OnVirtualMembersArrived(comm, call, arrived);
  }
  void OnVirtualSendToReal(uint32_t comm, uint32_t send_rank, uint32_t recv_rank, uint64_t index,
                           Nanoseconds ready, Bytes bytes) override {
    for (auto* o : observers_) o->OnVirtualSendToReal(comm, send_rank, recv_rank, index, ready, bytes);
  }
  void OnMixedCollective(bool virtual_last) override {
    for (auto* o : observers_) o->OnMixedCollective(virtual_last);
  }
  void OnCalibratedCollective() override {
    for (auto* o : observers_) o->OnCalibratedCollective();
  }
  void OnAwaitingRealRanks(const std::vector<RealRankPosition>& positions) override {
    for (auto* o : observers_) o->OnAwaitingRealRanks(positions);
  }

 private:
  std::vector<EngineObserver*> observers_;
};

struct EngineOptions {
  uint64_t iterations = 1;
  uint64_t progress_every_events = 1 << 16;
  NicModel nic_model = NicModel::kQueues;  // nic_scheduler.h
};

class ReplayEngine {
 public:
  // `world` and `model` must outlive the engine.
  ReplayEngine(const EngineWorld& world, const NetworkModel& model, EngineOptions options);
  ReplayEngine(const ReplayEngine&) = delete;
  ReplayEngine& operator=(const ReplayEngine&) = delete;

  void SetObserver(EngineObserver* observer) { observer_ = observer; }
  void SetTraceRecorder(TraceRecorder* trace) { trace_ = trace; }

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
    uint64_t iteration = 0;
    uint32_t index = 0;
    uint32_t inflight = 0;
    bool in_group = false;
    bool wake_pending = false; // a kWakeFlag event is queued for it
    Nanoseconds reached{-1};   // when it reached its next op, if launch order holds that op back
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
  struct Waiter { uint32_t actor, op; Nanoseconds issued; };
  struct Instance {
    uint32_t arrived = 0, virtual_arrived = 0;
    Nanoseconds last, last_virtual;      // latest arrival (all members / virtual ones)
    uint32_t first_actor = 0, first_op = 0;
    std::vector<Waiter> waiters;
    uint32_t real_left = 0;              // real members that have not finished it
    Nanoseconds real_done, real_started;
    // No real member had other communication in flight while it ran: its
    // real duration is the collective's own (see FinishMixed).
    bool real_alone = true;
  };
  // The last model time asked for on a communicator, and what it was asked for.
  struct ModelMemo {
    graph::CollectiveKind kind = graph::COLLECTIVE_KIND_UNSPECIFIED;
    graph::Algorithm algorithm = graph::ALGORITHM_DEFAULT;
    Bytes bytes;
    Nanoseconds took;
    bool valid = false;
  };
  struct CommState {
    uint32_t members = 0;
    uint64_t base = 0;
    std::deque<Instance> pending;
    uint32_t real_members = 0;
    ModelMemo memo;
  };
  // A transfer between nodes parked while the NIC scheduler holds its
  // ticket (the index into transfers_): what its grant finishes.
  struct Transfer {
    enum class Kind : uint8_t { kCollective, kPointToPoint, kVirtualToReal, kEagerSend };
    Kind kind = Kind::kCollective;
    uint32_t comm = 0;                 // kCollective: the communicator
    Instance instance;                 // kCollective: its members (waiters)
    PendingP2P send{}, recv{};         // kPointToPoint; kVirtualToReal, kEagerSend: send
    uint64_t index = 0;                // kVirtualToReal: message index on its queue
  };

  StreamState& Stream(uint32_t actor, uint32_t stream) { return streams_[state_[actor].stream_base + stream]; }
  // Asks for the lines the next event will read (its actor's counters and
  // streams) while this one is handled.
  void PrefetchNext();
  void Advance(uint32_t actor);
  // Issues what the stream may issue now; true when it moved (another
  // stream may then go: LaunchWaits, or a dependency on a group's end).
  bool AdvanceStream(uint32_t actor, uint32_t stream);
  bool LaunchWaits(uint32_t actor, uint32_t stream, uint32_t k, uint64_t iteration) const;
  // Whether a virtual stream's next op `op` must wait past now: a completion
  // it depends on was handled earlier but lies later in time (a paced run
  // handled a real rank's report at its past stamp). Then a wake-up is
  // queued for that time.
  bool WaitsForLaterCompletion(uint32_t actor, uint32_t stream, const OpInfo& op);
  bool Ready(uint32_t actor, const OpInfo& op, uint32_t k, uint64_t iteration) const;
  void Issue(uint32_t actor, uint32_t k);
  void Complete(uint32_t actor, uint32_t k, Nanoseconds issued);
  void CountDone(uint32_t actor, uint32_t k);
  void Arrive(uint32_t actor, uint32_t k);
  void ResolveCollective(uint32_t comm, uint64_t call, Instance& in);
  void FinishMixed(const Instance& in);
  uint32_t Park(Transfer t);
  // Lets the transfers the NIC scheduler granted go on (grants_, checks_).
  void GrantNics();
  void FinishGrants();
  void FinishCollectiveTransfer(uint32_t comm, const Instance& in, Nanoseconds end);
  void FinishPointToPoint(const PendingP2P& send, const PendingP2P& recv, Nanoseconds start, Nanoseconds end,
                          bool same_node);
  void FinishVirtualToReal(const PendingP2P& send, uint64_t index, Nanoseconds start, Nanoseconds end,
                           bool same_node);
  void CompleteSend(const PendingP2P& send, const OpInfo& op, Nanoseconds start, bool same_node);
  void FinishEagerSend(const PendingP2P& send, Nanoseconds start, Nanoseconds end);
  // NicModel::kShared: a kFlowFlag event at `at` (the latest one counts);
  // FinishSharedTransfers completes the transfers done by now_.
  void ScheduleSharedCheck(Nanoseconds at);
  void FinishSharedTransfers(uint32_t generation);
  void RealCollectiveDone(uint32_t actor, uint32_t k, Nanoseconds at, Nanoseconds started);
  void PostP2P(uint32_t actor, uint32_t k, bool is_send);
  void SendVirtualToReal(uint32_t actor, uint32_t k, uint64_t index, bool same_node);
  void MatchP2P(const PendingP2P& send, const PendingP2P& recv, bool same_node);
  void DeliverFromReal(const PendingP2P& send, const PendingP2P& recv, bool same_node);
  void RealP2PDone(uint32_t actor, uint32_t k, Nanoseconds at);
  void ReachOp(uint32_t actor, uint32_t k);
  bool NextCommReached(uint32_t actor, uint32_t stream) const;
  void Push(Nanoseconds time, uint32_t actor, uint32_t op, Nanoseconds issued);
  // Paced runs: the emulated time the engine learned of `e` (its time, unless
  // it followed from a real rank's report handled after that time).
  Nanoseconds KnownAt(const Event& e) const;
  // The model's time of `op` on `comm` (remembered per communicator: a
  // communicator's instances mostly repeat one kind and size).
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
  RadixEventQueue queue_;
  // Paced runs: events of queue_ learned after their time, by (time, actor, op).
  absl::flat_hash_map<std::tuple<int64_t, uint32_t, uint32_t>, Nanoseconds> late_known_;
  WallClockPacer* pacer_ = nullptr;   // paced runs only (Run's argument)
  bool handling_report_ = false;      // the current event is a real rank's report
  Nanoseconds handling_known_;        // paced: when the engine learned of the current event (KnownAt)
  Nanoseconds now_;
  uint64_t events_ = 0;
  const bool has_real_;        // some actor is a real rank (hybrid)
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
  P2PQueues p2p_;
  // Mixed instances whose members all arrived, waiting for real members' reports; key (comm, call).
  absl::flat_hash_map<std::pair<uint32_t, uint64_t>, Instance> awaiting_real_;
  Calibration calibration_;
  InjectedEvents injected_;                          // ApplyInbox's batch (kept for its capacity)
  NicScheduler nics_;
  LaunchOrder launch_order_;
  Nanoseconds reached_;  // the op being issued: when its stream reached it (its start in reports and traces)
  std::vector<Transfer> transfers_;                  // by ticket; free ones listed in free_tickets_
  std::vector<uint32_t> free_tickets_;
  std::vector<NicGrant> grants_;                     // the scheduler's answers (kept for their capacity)
  std::vector<Nanoseconds> checks_;
  uint32_t shared_generation_ = 0;                   // the one kFlowFlag event that is current
  Nanoseconds horizon_;                              // latest event time handled (reports, lag)
  ReplayAccounting accounting_;
  ReplayStats& stats_ = accounting_.stats();        // the run's own figures (events, end, hybrid counts)
};

}  // namespace prism::engine

#endif  // PRISM_DAEMON_ENGINE_REPLAY_ENGINE_H_
