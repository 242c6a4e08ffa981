// The replay engine's point-to-point transfers: what happens between a
// send/recv being issued and its completion events.
//
// A matched pair (P2PQueues) takes the model's point-to-point time; between
// nodes it asks the NIC scheduler for the sender's transmit and the
// receiver's receive direction and finishes when granted. A virtual send
// whose bytes fit in the connection's buffers completes when posted
// (SendHeldTime is zero), else once the buffers took its last byte; with
// p2p_eager such a send between nodes to a virtual receiver goes on the wire
// at once. Hybrid runs add two cases: a virtual sender to a real receiver
// leaves when its NIC is free (the observer hears when its first byte left,
// OnVirtualSendToReal), and a real sender's data reaches a virtual receiver a
// hop after the real send's last byte left (the real rank's report).
//
// It pushes completion events (actor, op, issued) into the engine's queue,
// reports transfers to the observer and the trace recorder, and hands the
// NIC scheduler tickets of its own (IsTicket): the engine routes those grants
// back here (Finish). What a completion means to the ranks' programs stays
// with the engine.
//
// Thread-safety: none; the engine thread owns it. `world`, `model`, `nics`
// and `queue` must outlive it; the observer and trace recorder (nullable,
// not owned) must outlive the run.
#ifndef PRISM_DAEMON_ENGINE_P2P_TRANSFERS_H_
#define PRISM_DAEMON_ENGINE_P2P_TRANSFERS_H_

#include <cstdint>
#include <vector>

#include "common/units.h"
#include "daemon/engine/engine_observer.h"
#include "daemon/engine/engine_world.h"
#include "daemon/engine/network_model.h"
#include "daemon/engine/nic_scheduler.h"
#include "daemon/engine/p2p_queues.h"
#include "daemon/engine/replay_queue.h"
#include "daemon/engine/trace_writer.h"

namespace prism::engine {

class P2PTransfers {
 public:
  P2PTransfers(const EngineWorld& world, const NetworkModel& model, NicScheduler& nics, ReplayQueue& queue);
  P2PTransfers(const P2PTransfers&) = delete;
  P2PTransfers& operator=(const P2PTransfers&) = delete;

  void SetObserver(EngineObserver* observer) { observer_ = observer; }
  void SetTraceRecorder(TraceRecorder* trace) { trace_ = trace; }

  // `actor` issued its send (`is_send`) or receive op `k` at `now`; its
  // stream reached it at `reached` (earlier when launch order held it back,
  // launch_order.h): the op's start in reports and traces.
  void Post(uint32_t actor, uint32_t k, bool is_send, Nanoseconds now, Nanoseconds reached);
  // Real `actor`'s send/recv op `k` ended at `at` (its report): a send to a
  // virtual receiver delivers its data (now, or when the receive is posted).
  void RealOpDone(uint32_t actor, uint32_t k, Nanoseconds at);

  // Whether virtual `actor`'s send op `k` goes to a real receiver; if so,
  // what it will be when posted next on its queue: the message's index,
  // whether it stays on the node, and the time it holds the sender's
  // transmit side (RequestSend's wire).
  struct ToRealPlan {
    uint64_t index = 0;
    bool same_node = false;
    Nanoseconds wire;
  };
  bool PlanToReal(uint32_t actor, uint32_t k, ToRealPlan* plan);

  // Whether a NIC grant's ticket is one of these transfers'.
  static bool IsTicket(uint32_t ticket) { return (ticket & kTicketFlag) != 0; }
  // The NIC scheduler granted this transfer (IsTicket(grant.ticket)) at the
  // engine's instant `now`: it finishes.
  void Finish(const NicGrant& grant, Nanoseconds now);

 private:
  static constexpr uint32_t kTicketFlag = 1u << 31;
  // A transfer between nodes parked while the NIC scheduler holds its ticket.
  struct Parked {
    enum class Kind : uint8_t { kPair, kToReal, kEager };
    Kind kind = Kind::kPair;
    PendingP2P send{}, recv{};  // kPair; kToReal, kEager: send
    uint64_t index = 0;         // kToReal: message index on its queue
  };

  // The model's point-to-point time and SendHeldTime of `bytes`, within a
  // node or between nodes; the last size asked for each is remembered (a
  // pipeline's sends and receives repeat one size).
  struct SizeTimes {
    Bytes bytes;
    Nanoseconds point_to_point, send_held;
    bool valid = false;
  };
  const SizeTimes& TimesOf(Bytes bytes, bool same_node);
  uint32_t Park(const Parked& p);
  void Match(const PendingP2P& send, const PendingP2P& recv, bool same_node, Nanoseconds now);
  void SendToReal(uint32_t actor, uint32_t k, uint64_t index, bool same_node, Nanoseconds now);
  void DeliverFromReal(const PendingP2P& send, const PendingP2P& recv, bool same_node);
  void FinishPair(const PendingP2P& send, const PendingP2P& recv, Nanoseconds start, Nanoseconds end,
                  bool same_node, Nanoseconds now);
  void FinishToReal(const PendingP2P& send, uint64_t index, Nanoseconds start, Nanoseconds end, bool same_node,
                    Nanoseconds now);
  void FinishEager(const PendingP2P& send, Nanoseconds start, Nanoseconds end);
  void CompleteSend(const PendingP2P& send, const OpInfo& op, Nanoseconds start, bool same_node, Nanoseconds now);
  const OpInfo& OpOf(uint32_t actor, uint32_t k) const {
    return world_.programs[world_.actors[actor].program].ops[k];
  }

  const EngineWorld& world_;
  const NetworkModel& model_;
  NicScheduler& nics_;
  ReplayQueue& queue_;
  EngineObserver* observer_ = nullptr;
  TraceRecorder* trace_ = nullptr;
  P2PQueues queues_;
  std::vector<Parked> parked_;          // by ticket (without kTicketFlag); free ones in free_
  std::vector<uint32_t> free_;
  SizeTimes times_[2];                  // TimesOf's memo: [0] between nodes, [1] within a node
};

}  // namespace prism::engine

#endif  // PRISM_DAEMON_ENGINE_P2P_TRANSFERS_H_
