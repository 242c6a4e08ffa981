// The discrete-event replay engine.
//
// One thread (the caller of Run) owns all engine state. Every actor of the
// world (a rank, or an equivalence class of ranks) runs its program: ops on a
// stream in order, Op.deps as cross-stream edges, GroupStart..GroupEnd issued
// together. A collective completes when every member has reached it (the j-th
// call on a communicator matches the j-th call of every member), then takes
// the network model's time, after waiting for the members' NIC shares when it
// spans nodes (per-GPU NIC serialisation, each direction separately: a GPU's
// share transmits one transfer and receives one transfer at a time). Send/recv match per (communicator,
// src, dst) in order and take the point-to-point time. Time is integer ns.
//
// Other threads interact only through the EngineInbox passed to Run and the
// EngineObserver callbacks, which run on the engine thread.
#ifndef PRISM_DAEMON_ENGINE_REPLAY_ENGINE_H_
#define PRISM_DAEMON_ENGINE_REPLAY_ENGINE_H_

#include <cstdint>
#include <deque>
#include <tuple>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "daemon/engine/event_queue.h"
#include "daemon/engine/network_model.h"
#include "daemon/engine/realtime.h"
#include "daemon/engine/replay_stats.h"
#include "daemon/engine/trace_writer.h"
#include "daemon/engine/world.h"

namespace prism::engine {

struct EngineProgress {
  Nanoseconds emulated;
  uint64_t events = 0;
  uint64_t iterations_done = 0;
  Nanoseconds lag;            // real-time mode: how far behind the wall clock
};

// Callbacks on the engine thread; implementations must be quick and must not
// call back into the engine.
class EngineObserver {
 public:
  virtual ~EngineObserver() = default;
  virtual void OnProgress(const EngineProgress& progress) {}
  virtual void OnIteration(uint64_t index, Nanoseconds duration) {}
  // One engine-level collective instance (in class mode it stands for the
  // instances of all ranks of the classes involved): network time from the
  // last arrival to completion, bytes per rank.
  virtual void OnCollective(graph::CollectiveKind kind, graph::CommKind comm, Nanoseconds latency, Bytes bytes) {}
  virtual void OnPointToPoint(Nanoseconds latency, Bytes bytes) {}
  // An op of a real rank completed (sessions turn this into schedules).
  virtual void OnRealRankOpComplete(uint32_t rank, uint32_t op, Nanoseconds at) {}
};

struct EngineOptions {
  uint64_t iterations = 1;
  uint64_t progress_every_events = 1 << 16;
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
  struct StreamState { uint64_t pos = 0; uint32_t inflight = 0; bool in_group = false; int64_t pending_compute = -1; int64_t pending_issued = 0; };
  struct ActorState {
    std::vector<StreamState> streams;
    std::vector<uint32_t> done;      // per op: completed instances
    std::vector<uint32_t> reached;   // real actors: per op, injected "reached" count
    std::vector<uint64_t> calls;     // per canonical slot: collective calls made
    std::vector<uint32_t> iteration_left;
    uint64_t iterations_done = 0;
    int64_t nic_tx_busy = 0, nic_rx_busy = 0, last_change = 0, memory = 0, memory_peak = 0, exposed = 0;
    uint32_t computing = 0, communicating = 0;
  };
  struct Waiter { uint32_t actor, op; int64_t issued; };
  struct Instance { uint32_t arrived = 0; int64_t last = 0; uint32_t first_actor = 0, first_op = 0; std::vector<Waiter> waiters; };
  struct CommState { uint64_t base = 0; std::deque<Instance> pending; };
  struct PendingP2P { uint32_t actor, op; int64_t posted; };
  struct P2PQueue { std::deque<PendingP2P> sends, recvs; };

  void Advance(uint32_t actor);
  void AdvanceStream(uint32_t actor, uint32_t stream);
  bool Ready(uint32_t actor, const OpInfo& op, uint32_t k, uint64_t iteration) const;
  void Issue(uint32_t actor, uint32_t k);
  void Complete(uint32_t actor, uint32_t k, int64_t issued);
  void FinishInstant(uint32_t actor, uint32_t k);
  void CountDone(uint32_t actor, uint32_t k);
  void Account(ActorState& s);
  void Arrive(uint32_t actor, uint32_t k);
  void ResolveCollective(uint32_t comm, Instance& in);
  void PostP2P(uint32_t actor, uint32_t k, bool is_send);
  void MatchP2P(const PendingP2P& send, const PendingP2P& recv, bool same_node);
  void Push(int64_t time, uint32_t actor, uint32_t op, int64_t issued);
  absl::Status ApplyInbox(EngineInbox* inbox);
  absl::Status StallError() const;
  bool Finished() const;
  void Progress(WallClockPacer* pacer);

  const EngineWorld& world_;
  const NetworkModel& model_;
  EngineOptions options_;
  EngineObserver* observer_ = nullptr;
  TraceRecorder* trace_ = nullptr;
  EventQueue queue_;
  int64_t now_ = 0;
  uint64_t events_ = 0;
  uint64_t iterations_done_ = 0;
  bool stop_ = false;
  std::vector<ActorState> state_;
  std::vector<CommState> comm_state_;
  std::vector<uint64_t> iteration_actors_left_;
  std::vector<P2PQueue> p2p_;                       // one per (communicator, src, dst)
  std::vector<std::vector<uint32_t>> p2p_queue_of_;  // per actor, per P2P desc: index into p2p_
  ReplayStats stats_;
};

}  // namespace prism::engine

#endif  // PRISM_DAEMON_ENGINE_REPLAY_ENGINE_H_
