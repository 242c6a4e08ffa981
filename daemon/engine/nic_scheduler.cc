#include "daemon/engine/nic_scheduler.h"

#include <algorithm>

namespace prism::engine {
NicScheduler::NicScheduler(const EngineWorld& world, const NetworkModel& model, NicModel nic_model)
    : world_(world), model_(model), nic_model_(nic_model),
      keeps_shares_(nic_model == NicModel::kInterleave || nic_model == NicModel::kTurns ||
                    (nic_model == NicModel::kQueues && model.nccl().p2p_between_ring_steps)),
      nics_(world.actors.size()) {
  if (nic_model_ == NicModel::kShared) shared_ = std::make_unique<SharedNics>(2 * world.actors.size());
}

void NicScheduler::RequestCollective(uint32_t ticket, uint32_t comm, const OpInfo& op, Nanoseconds ready,
                                     Nanoseconds duration) {
  Request r;
  r.kind = Request::Kind::kCollective;
  r.ticket = ticket, r.comm = comm, r.op = &op;
  r.ready = ready, r.duration = duration;
  requests_.push_back(r);
}

void NicScheduler::HoldCollective(uint32_t comm, const OpInfo& op, Nanoseconds ready, Nanoseconds duration) {
  Request r;
  r.kind = Request::Kind::kHold;
  r.comm = comm, r.op = &op;
  r.ready = ready, r.duration = duration;
  requests_.push_back(r);
}

void NicScheduler::RequestPointToPoint(uint32_t ticket, uint32_t src, uint32_t dst, Nanoseconds ready,
                                       Nanoseconds duration) {
  Request r;
  r.kind = Request::Kind::kPointToPoint;
  r.ticket = ticket, r.src = src, r.dst = dst;
  r.ready = ready, r.duration = duration, r.took = duration;
  requests_.push_back(r);
}

void NicScheduler::RequestSend(uint32_t ticket, uint32_t src, Nanoseconds ready, Nanoseconds wire,
                               Nanoseconds took) {
  Request r;
  r.kind = Request::Kind::kSend;
  r.ticket = ticket, r.src = src;
  r.ready = ready, r.duration = wire, r.took = took;
  requests_.push_back(r);
}

void NicScheduler::Grant(Nanoseconds now, Nanoseconds horizon, std::vector<NicGrant>* done,
                         std::vector<NicCheck>* checks) {
  now_ = now;
  forget_before_ = horizon - kMemory;
  batch_.swap(requests_);  // both vectors keep their capacity
  if (nic_model_ == NicModel::kTurns) {
    // The ring shares first, longest first, so that a shorter request finds
    // the longer ones' shares and takes the NIC in turn with them
    // (SharedSent); then the rest shortest first (the header).
    for (Request& r : batch_) r.ring_share = r.kind != Request::Kind::kPointToPoint &&
                                             r.kind != Request::Kind::kSend &&
                                             QueuesOnTx(*r.op, world_.comms[r.comm]);
    std::stable_sort(batch_.begin(), batch_.end(), [](const Request& a, const Request& b) {
      if (a.ring_share != b.ring_share) return a.ring_share;
      return a.ring_share ? b.duration < a.duration : a.duration < b.duration;
    });
  } else {
    std::stable_sort(batch_.begin(), batch_.end(),
                     [](const Request& a, const Request& b) { return a.duration < b.duration; });
  }
  for (const Request& r : batch_) GrantOne(r, done, checks);
  batch_.clear();
}

void NicScheduler::GrantOne(const Request& r, std::vector<NicGrant>* done, std::vector<NicCheck>* checks) {
  switch (r.kind) {
    case Request::Kind::kHold:
      ReserveCollective(r);
      return;
    case Request::Kind::kCollective: {
      if (shared_) {
        std::vector<uint32_t> directions;
        for (uint32_t m : world_.comms[r.comm].members) directions.insert(directions.end(), {Tx(m), Rx(m)});
        std::sort(directions.begin(), directions.end());  // an actor standing for several members counts once
        directions.erase(std::unique(directions.begin(), directions.end()), directions.end());
        StartShared(r, directions, checks);
        return;
      }
      done->push_back({r.ticket, r.ready, ReserveCollective(r)});
      return;
    }
    case Request::Kind::kPointToPoint: {
      if (r.took <= Nanoseconds(0)) {  // nothing to hold the NICs for
        done->push_back({r.ticket, r.ready, r.ready});
        return;
      }
      if (shared_) {
        StartShared(r, {Tx(r.src), Rx(r.dst)}, checks);
        return;
      }
      NicCalendar& tx = nics_[r.src].tx;
      NicCalendar& rx = nics_[r.dst].rx;
      const Nanoseconds start = EarliestCommonStart({&tx, &rx}, r.ready, r.took);
      const Nanoseconds end = SatAdd(start, r.took);
      const Nanoseconds sending_from = InterleavedStart(r.src, r.ready, r.took, start);
      tx.Reserve(start, end, forget_before_);  // the side's work stays counted whole
      rx.Reserve(start, end, forget_before_);
      done->push_back({r.ticket, sending_from, SatAdd(sending_from, r.took)});
      return;
    }
    case Request::Kind::kSend: {
      NicCalendar& tx = nics_[r.src].tx;
      Nanoseconds start = r.ready;
      if (r.duration > Nanoseconds(0)) {
        const Nanoseconds queued = tx.NextFree(r.ready, r.duration);
        start = InterleavedStart(r.src, r.ready, r.duration, queued);
        tx.Reserve(queued, SatAdd(queued, r.duration), forget_before_);
      }
      done->push_back({r.ticket, start, SatAdd(start, r.took)});
      return;
    }
  }
}

Nanoseconds NicScheduler::ReserveCollective(const Request& r) {
  const EngineComm& c = world_.comms[r.comm];
  if (const TxWire& tw = TxWireOf(*r.op, c); tw.queues) {
    const Nanoseconds wire = Min(r.duration, tw.wire);
    const Nanoseconds sent = QueueOnMembersTx(r.comm, r.ready, wire, tw.step);
    return Max(SatAdd(r.ready, r.duration), SatAdd(sent, r.duration - wire));
  }
  return SatAdd(ReserveMembers(c, r.ready, r.duration), r.duration);
}

const NicScheduler::TxWire& NicScheduler::TxWireOf(const OpInfo& op, const EngineComm& c) {
  const TxWireKey key{op.collective, op.algorithm, op.bytes.count(), c.shape};
  if (!tx_wire_ || !(tx_wire_->first == key)) {
    TxWire w;
    w.queues = QueuesOnTx(op, c);
    if (w.queues) {
      w.wire = model_.RingWireTime(op.collective, op.bytes, c.shape);
      const uint64_t n = c.shape.ranks;
      const uint64_t steps = op.collective == graph::ALLREDUCE ? 2 * (n - 1) : n - 1;  // n > 1: spans nodes
      w.step = Max(Nanoseconds(1), Nanoseconds(w.wire.count() / static_cast<int64_t>(steps)));
    }
    tx_wire_.emplace(key, w);
  }
  return tx_wire_->second;
}

bool NicScheduler::QueuesOnTx(const OpInfo& op, const EngineComm& c) const {
  if ((nic_model_ != NicModel::kQueues && !Interleaves()) || !c.shape.SpansNodes()) return false;
  if (op.collective != graph::ALLREDUCE && op.collective != graph::ALLGATHER &&
      op.collective != graph::REDUCESCATTER)
    return false;
  const graph::Algorithm algorithm =
      op.algorithm == graph::ALGORITHM_DEFAULT ? model_.Choose(op.collective, op.bytes, c.shape) : op.algorithm;
  return algorithm == graph::ALGORITHM_RING || algorithm == graph::ALGORITHM_PAT;  // PAT: the ring's volume
}

// Each member's NIC carries its share on its own, first come first served:
// one member's busy NIC does not hold the others idle (with the calendar a
// collective waited for a gap common to all its members, and a late or slow
// rank's delay grew from NIC to NIC: +40 ms for a straggler's 7 ms).
Nanoseconds NicScheduler::QueueOnMembersTx(uint32_t comm, Nanoseconds ready, Nanoseconds wire, Nanoseconds step) {
  Nanoseconds last = ready;
  for (uint32_t m : world_.comms[comm].members) {
    Directions& d = nics_[m];
    const Nanoseconds start = d.tx.NextFree(ready, wire);
    const Nanoseconds end = SatAdd(start, wire);
    const bool interleave = Interleaves();
    const Nanoseconds sent = interleave && start > ready ? SharedSent(d, comm, ready, wire, start) : end;
    d.tx.Reserve(start, end, forget_before_);
    if (keeps_shares_ && wire > Nanoseconds(0)) {  // read by SharedSent (InterleavedStart, interleave)
      if (d.shares.size() >= d.prune_at) {  // forgotten with the calendar's reservations
        std::erase_if(d.shares, [this](const TxShare& s) { return s.end <= forget_before_; });
        d.prune_at = std::max<size_t>(64, 2 * d.shares.size());
      }
      d.shares.push_back({start, end, step, comm});
    }
    last = Max(last, sent);
  }
  return last;
}

// A real NIC carries the chunks of two communicators' operations in turn.
// NCCL puts a ring step's data on the NIC as the step starts, so what is
// queued of the other share when this one arrives (its step in progress)
// goes first; from there the two alternate until the other share has left.
// Its end stays as granted (the engine never moves a grant's end); the
// reservation of this share after it keeps the side's work for later ones.
// kTurns: a NIC that takes its queue pairs in turn shares from `ready` on.
Nanoseconds NicScheduler::SharedSent(const Directions& d, uint32_t comm, Nanoseconds ready, Nanoseconds wire,
                                     Nanoseconds start) const {
  const Nanoseconds queued = SatAdd(start, wire);
  const auto h = std::find_if(d.shares.rbegin(), d.shares.rend(),
                              [ready](const TxShare& s) { return s.start <= ready && ready < s.end; });
  if (h == d.shares.rend() || h->comm == comm) return queued;
  const int64_t in_step = (ready - h->start).count() / h->step.count() + 1;  // steps begun by `ready`
  const Nanoseconds step_end = nic_model_ == NicModel::kTurns
                                   ? ready
                                   : Min(h->end, SatAdd(h->start, Nanoseconds(in_step * h->step.count())));
  const Nanoseconds half = Nanoseconds((h->end - step_end).count() / 2);  // this share's part of the rest
  if (wire <= half) return SatAdd(step_end, wire + wire);
  const Nanoseconds left = wire - half;
  return Min(queued, SatAdd(d.tx.NextFree(h->end, left), left));
}

// A point-to-point transfer behind a ring share of a communicator on its
// sender's transmit side goes as a share of another communicator does under
// kInterleave (SharedSent), under kQueues too: a 2 MiB pipeline send posted
// during a 32 MiB DP reduce-scatter leaves between the ring's steps, not
// after all of it (the dp8 and dp4 ground truths without per-operation CUDA
// events, 2026-12-04: docs/network-model.md, "NIC serialisation").
Nanoseconds NicScheduler::InterleavedStart(uint32_t src, Nanoseconds ready, Nanoseconds wire,
                                           Nanoseconds queued) const {
  if (!keeps_shares_ || queued <= ready || !model_.nccl().p2p_between_ring_steps) return queued;
  return SharedSent(nics_[src], kPointToPointComm, ready, wire, queued) - wire;
}

Nanoseconds NicScheduler::ReserveMembers(const EngineComm& c, Nanoseconds ready, Nanoseconds duration) {
  calendars_.clear();
  for (uint32_t m : c.members) {
    calendars_.push_back(&nics_[m].tx);
    calendars_.push_back(&nics_[m].rx);
  }
  const Nanoseconds start = EarliestCommonStart(calendars_, ready, duration);
  const Nanoseconds end = SatAdd(start, duration);
  for (uint32_t m : c.members) {
    nics_[m].tx.Reserve(start, end, forget_before_);
    nics_[m].rx.Reserve(start, end, forget_before_);
  }
  return start;
}

void NicScheduler::StartShared(const Request& r, const std::vector<uint32_t>& directions,
                               std::vector<NicCheck>* checks) {
  const uint64_t id = shared_->Start(now_, r.kind == Request::Kind::kCollective ? r.duration : r.took, directions);
  shared_tickets_.emplace(id, std::make_pair(r.ticket, now_));
  AddCheck(checks);
}

void NicScheduler::AddCheck(std::vector<NicCheck>* checks) {
  const Nanoseconds at = shared_->NextFinish();
  if (at == Nanoseconds::Max()) return;
  check_generation_ = (check_generation_ + 1) % kCheckGenerations;  // earlier wake-ups are stale now
  checks->push_back({at, check_generation_});
}

void NicScheduler::FinishBy(Nanoseconds now, uint32_t generation, std::vector<NicGrant>* done,
                            std::vector<NicCheck>* checks) {
  if (!shared_ || generation != check_generation_) return;
  for (uint64_t id : shared_->FinishBy(now)) {
    const auto it = shared_tickets_.find(id);
    done->push_back({it->second.first, it->second.second, now});
    shared_tickets_.erase(it);
  }
  AddCheck(checks);
}

void NicScheduler::HoldMembersUntil(uint32_t comm, Nanoseconds now, Nanoseconds end, Nanoseconds horizon) {
  const EngineComm& c = world_.comms[comm];
  if (!c.shape.SpansNodes()) return;
  const Nanoseconds forget = horizon - kMemory;
  for (uint32_t m : c.members) {
    nics_[m].tx.Reserve(now, end, forget);
    nics_[m].rx.Reserve(now, end, forget);
  }
}

bool NicScheduler::VirtualMembersFreeBy(uint32_t comm, Nanoseconds start) const {
  const EngineComm& c = world_.comms[comm];
  if (!c.shape.SpansNodes()) return true;
  for (uint32_t m : c.members)
    if (!world_.actors[m].real && Max(nics_[m].tx.LatestEnd(), nics_[m].rx.LatestEnd()) > start)
      return false;
  return true;
}

}  // namespace prism::engine
