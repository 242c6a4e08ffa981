#include "daemon/engine/p2p_transfers.h"

namespace prism::engine {

P2PTransfers::P2PTransfers(const EngineWorld& world, const NetworkModel& model, NicScheduler& nics,
                           ReplayQueue& queue)
    : world_(world), model_(model), nics_(nics), queue_(queue), queues_(world) {}

const P2PTransfers::SizeTimes& P2PTransfers::TimesOf(Bytes bytes, bool same_node) {
  SizeTimes& t = times_[same_node ? 1 : 0];
  if (!t.valid || t.bytes != bytes)
    t = SizeTimes{bytes, model_.PointToPointTime(bytes, same_node), model_.SendHeldTime(bytes, same_node), true};
  return t;
}

void P2PTransfers::Post(uint32_t actor, uint32_t k, bool is_send, Nanoseconds now, Nanoseconds reached) {
  const Actor& a = world_.actors[actor];
  const OpInfo& op = world_.programs[a.program].ops[k];
  const P2PQueues::Link& link = queues_.LinkOf(actor, op.p2p_desc);
  const bool same_node = link.same_node, peer_real = link.peer_real;
  // A virtual send whose bytes all fit in the connection's buffers is done
  // when posted, as NCCL's kernel is; its transfer still waits for the
  // receiver (SendHeldTime).
  const bool buffered = is_send && !a.real && TimesOf(op.bytes, same_node).send_held == Nanoseconds(0);
  if (buffered) queue_.Push(now, actor, k, reached);
  // With p2p_eager, such a send to a virtual receiver between nodes goes on
  // the wire now, whether or not the receive is posted: NCCL's receiver
  // posted its buffers when its host enqueued the operation, ahead of its GPU.
  const bool eager = model_.nccl().p2p_eager && buffered && !same_node && !peer_real;
  const PendingP2P mine{actor, k, now, PendingP2P::kNotReported, reached};
  const P2PMatch m = eager ? queues_.PostEagerSend(mine, op.p2p_desc)
                           : queues_.Post(mine, op.p2p_desc, is_send, a.real, peer_real);
  switch (m.kind) {
    case P2PMatch::Kind::kWaiting: break;
    case P2PMatch::Kind::kEager:
      nics_.RequestPointToPoint(Park({Parked::Kind::kEager, mine}), actor, link.peer, now,
                                TimesOf(op.bytes, false).point_to_point);
      break;
    case P2PMatch::Kind::kMatched: Match(m.send, m.recv, same_node, now); break;
    case P2PMatch::Kind::kDeliver: DeliverFromReal(m.send, m.recv, same_node); break;
    case P2PMatch::Kind::kToReal: SendToReal(actor, k, m.index, same_node, now); break;
  }
}

void P2PTransfers::RealOpDone(uint32_t actor, uint32_t k, Nanoseconds at) {
  const Actor& a = world_.actors[actor];
  const OpInfo& op = world_.programs[a.program].ops[k];
  const bool peer_real = world_.actors[a.peer_actor[op.p2p_desc]].real;
  if (op.kind == OpKind::kSend && !peer_real)
    if (const auto matched = queues_.RealSendDone(actor, op.p2p_desc, at))
      DeliverFromReal(matched->first, matched->second, a.peer_same_node[op.p2p_desc] != 0);
}

uint32_t P2PTransfers::Park(const Parked& p) {
  if (free_.empty()) free_.push_back(static_cast<uint32_t>(parked_.size())), parked_.emplace_back();
  const uint32_t slot = free_.back();
  free_.pop_back();
  parked_[slot] = p;
  return slot | kTicketFlag;
}

void P2PTransfers::Finish(const NicGrant& g, Nanoseconds now) {
  const uint32_t slot = g.ticket & ~kTicketFlag;
  const Parked p = parked_[slot];
  free_.push_back(slot);
  switch (p.kind) {
    case Parked::Kind::kPair: FinishPair(p.send, p.recv, g.start, g.end, false, now); break;
    case Parked::Kind::kToReal: FinishToReal(p.send, p.index, g.start, g.end, false, now); break;
    case Parked::Kind::kEager: FinishEager(p.send, g.start, g.end); break;
  }
}

void P2PTransfers::Match(const PendingP2P& send, const PendingP2P& recv, bool same_node, Nanoseconds now) {
  const OpInfo& op = OpOf(send.actor, send.op);
  const Nanoseconds ready = Max(send.posted, recv.posted);
  const Nanoseconds took = TimesOf(op.bytes, same_node).point_to_point;
  if (same_node) {  // no NIC
    FinishPair(send, recv, ready, SatAdd(ready, took), /*same_node=*/true, now);
    return;
  }
  // Between nodes: the sender's transmit and the receiver's receive direction.
  nics_.RequestPointToPoint(Park({Parked::Kind::kPair, send, recv}), send.actor, recv.actor, ready, took);
}

bool P2PTransfers::PlanToReal(uint32_t actor, uint32_t k, ToRealPlan* plan) {
  const OpInfo& op = OpOf(actor, k);
  const P2PQueues::Link& link = queues_.LinkOf(actor, op.p2p_desc);
  if (world_.actors[actor].real || !link.peer_real) return false;
  plan->index = queues_.NextToRealIndex(actor, op.p2p_desc);
  plan->same_node = link.same_node;
  plan->wire = Nanoseconds(0);
  if (!link.same_node) plan->wire = TimesOf(op.bytes, false).point_to_point - model_.HopLatency(false);
  return true;
}

// A virtual sender does not wait for its real receiver (NCCL's senders never
// do): it leaves when its NIC is free, completes once the connection's
// buffers took its last byte (CompleteSend), and the observer tells the real
// receiver when the first byte left.
void P2PTransfers::SendToReal(uint32_t actor, uint32_t k, uint64_t index, bool same_node, Nanoseconds now) {
  const Nanoseconds took = TimesOf(OpOf(actor, k).bytes, same_node).point_to_point;
  const PendingP2P send{actor, k, now};
  if (same_node) {  // no NIC
    FinishToReal(send, index, now, SatAdd(now, took), /*same_node=*/true, now);
    return;
  }
  nics_.RequestSend(Park({Parked::Kind::kToReal, send, {}, index}), actor, now,
                    took - model_.HopLatency(same_node), took);
}

void P2PTransfers::FinishToReal(const PendingP2P& send, uint64_t index, Nanoseconds start, Nanoseconds end,
                                bool same_node, Nanoseconds now) {
  const Actor& a = world_.actors[send.actor];
  const OpInfo& op = world_.programs[a.program].ops[send.op];
  CompleteSend(send, op, start, same_node, now);
  const uint32_t comm = a.slot_comm[op.slot];
  const uint32_t recv_rank = world_.actors[a.peer_actor[op.p2p_desc]].rep_rank;
  if (observer_) {
    observer_->OnVirtualSendToReal(comm, a.rep_rank, recv_rank, index, start, op.bytes);
    observer_->OnPointToPoint(end - start, op.bytes);
  }
}

// A real send's last byte left at send.real_done: the virtual receive ends a
// hop later, or when it was posted if that is later.
void P2PTransfers::DeliverFromReal(const PendingP2P& send, const PendingP2P& recv, bool same_node) {
  const Nanoseconds end = Max(recv.posted, SatAdd(send.real_done, model_.HopLatency(same_node)));
  queue_.Push(end, recv.actor, recv.op, recv.Started());
  if (trace_ && (trace_->Traces(send.actor) || trace_->Traces(recv.actor)))
    trace_->RecordFlow(send.actor, send.op, recv.actor, recv.op, send.posted, recv.posted, end);
}

void P2PTransfers::FinishPair(const PendingP2P& send, const PendingP2P& recv, Nanoseconds start, Nanoseconds end,
                              bool same_node, Nanoseconds now) {
  const OpInfo& op = OpOf(send.actor, send.op);
  CompleteSend(send, op, start, same_node, now);
  queue_.Push(end, recv.actor, recv.op, recv.Started());
  if (observer_) observer_->OnPointToPoint(end - start, op.bytes);
  if (trace_ && (trace_->Traces(send.actor) || trace_->Traces(recv.actor)))
    trace_->RecordFlow(send.actor, send.op, recv.actor, recv.op, send.posted, recv.posted, end);
}

// A virtual send whose transfer started at `start` completes once the
// connection's buffers took its last byte (SendHeldTime after the start;
// never before `now`: the shared NIC model grants at the end), unless it fit
// in them whole and completed when posted (Post).
void P2PTransfers::CompleteSend(const PendingP2P& send, const OpInfo& op, Nanoseconds start, bool same_node,
                                Nanoseconds now) {
  const Nanoseconds held = TimesOf(op.bytes, same_node).send_held;
  if (held > Nanoseconds(0)) queue_.Push(Max(now, SatAdd(start, held)), send.actor, send.op, send.Started());
}

// An eager send's data arrived at `end` (its last byte left a hop earlier):
// its receive, if posted, ends then (DeliverFromReal), else when posted.
void P2PTransfers::FinishEager(const PendingP2P& send, Nanoseconds start, Nanoseconds end) {
  const OpInfo& op = OpOf(send.actor, send.op);
  if (observer_) observer_->OnPointToPoint(end - start, op.bytes);
  const Nanoseconds left = end - model_.HopLatency(false);
  if (const auto matched = queues_.RealSendDone(send.actor, op.p2p_desc, left, /*eager=*/true))
    DeliverFromReal(matched->first, matched->second, false);
}

}  // namespace prism::engine
