#include "daemon/engine/nic_scheduler.h"

#include <algorithm>
#include <limits>

namespace prism::engine {
namespace {

int64_t AddTime(int64_t a, int64_t b) { return SatAdd(Nanoseconds(a), Nanoseconds(b)).count(); }

}  // namespace

NicScheduler::NicScheduler(const EngineWorld& world, const NetworkModel& model, NicModel nic_model)
    : world_(world), model_(model), nic_model_(nic_model), nics_(world.actors.size()) {
  if (nic_model_ == NicModel::kShared) shared_ = std::make_unique<SharedNics>(2 * world.actors.size());
}

void NicScheduler::RequestCollective(uint32_t ticket, uint32_t comm, const OpInfo& op, Nanoseconds ready,
                                     Nanoseconds duration) {
  Request r;
  r.kind = Request::Kind::kCollective;
  r.ticket = ticket, r.comm = comm, r.op = &op;
  r.ready = ready.count(), r.duration = duration.count();
  requests_.push_back(r);
}

void NicScheduler::HoldCollective(uint32_t comm, const OpInfo& op, Nanoseconds ready, Nanoseconds duration) {
  Request r;
  r.kind = Request::Kind::kHold;
  r.comm = comm, r.op = &op;
  r.ready = ready.count(), r.duration = duration.count();
  requests_.push_back(r);
}

void NicScheduler::RequestPointToPoint(uint32_t ticket, uint32_t src, uint32_t dst, Nanoseconds ready,
                                       Nanoseconds duration) {
  Request r;
  r.kind = Request::Kind::kPointToPoint;
  r.ticket = ticket, r.src = src, r.dst = dst;
  r.ready = ready.count(), r.duration = duration.count(), r.took = duration.count();
  requests_.push_back(r);
}

void NicScheduler::RequestSend(uint32_t ticket, uint32_t src, Nanoseconds ready, Nanoseconds wire,
                               Nanoseconds took) {
  Request r;
  r.kind = Request::Kind::kSend;
  r.ticket = ticket, r.src = src;
  r.ready = ready.count(), r.duration = wire.count(), r.took = took.count();
  requests_.push_back(r);
}

void NicScheduler::Grant(Nanoseconds now, Nanoseconds horizon, std::vector<NicGrant>* done,
                         std::vector<Nanoseconds>* shared_checks) {
  now_ = now.count();
  forget_before_ = (horizon - kMemory).count();
  batch_.swap(requests_);  // both vectors keep their capacity
  std::stable_sort(batch_.begin(), batch_.end(),
                   [](const Request& a, const Request& b) { return a.duration < b.duration; });
  for (const Request& r : batch_) GrantOne(r, done, shared_checks);
  batch_.clear();
}

void NicScheduler::GrantOne(const Request& r, std::vector<NicGrant>* done, std::vector<Nanoseconds>* shared_checks) {
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
        StartShared(r, directions, shared_checks);
        return;
      }
      done->push_back({r.ticket, Nanoseconds(r.ready), Nanoseconds(ReserveCollective(r))});
      return;
    }
    case Request::Kind::kPointToPoint: {
      if (r.took <= 0) {  // nothing to hold the NICs for
        done->push_back({r.ticket, Nanoseconds(r.ready), Nanoseconds(r.ready)});
        return;
      }
      if (shared_) {
        StartShared(r, {Tx(r.src), Rx(r.dst)}, shared_checks);
        return;
      }
      NicCalendar& tx = nics_[r.src].tx;
      NicCalendar& rx = nics_[r.dst].rx;
      const int64_t start = EarliestCommonStart({&tx, &rx}, r.ready, r.took);
      const int64_t end = AddTime(start, r.took);
      tx.Reserve(start, end, forget_before_);
      rx.Reserve(start, end, forget_before_);
      done->push_back({r.ticket, Nanoseconds(start), Nanoseconds(end)});
      return;
    }
    case Request::Kind::kSend: {
      NicCalendar& tx = nics_[r.src].tx;
      int64_t start = r.ready;
      if (r.duration > 0) {
        start = tx.NextFree(r.ready, r.duration);
        tx.Reserve(start, AddTime(start, r.duration), forget_before_);
      }
      done->push_back({r.ticket, Nanoseconds(start), Nanoseconds(AddTime(start, r.took))});
      return;
    }
  }
}

int64_t NicScheduler::ReserveCollective(const Request& r) {
  const EngineComm& c = world_.comms[r.comm];
  if (QueuesOnTx(*r.op, c)) {
    const int64_t wire = std::min(r.duration, model_.RingWireTime(r.op->collective, r.op->bytes, c.shape).count());
    const int64_t sent = QueueOnMembersTx(c, r.ready, wire);
    return std::max(AddTime(r.ready, r.duration), AddTime(sent, r.duration - wire));
  }
  return AddTime(ReserveMembers(c, r.ready, r.duration), r.duration);
}

bool NicScheduler::QueuesOnTx(const OpInfo& op, const EngineComm& c) const {
  if (nic_model_ != NicModel::kQueues || !c.shape.SpansNodes()) return false;
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
int64_t NicScheduler::QueueOnMembersTx(const EngineComm& c, int64_t ready, int64_t wire) {
  int64_t last = ready;
  for (uint32_t m : c.members) {
    NicCalendar& tx = nics_[m].tx;
    const int64_t start = tx.NextFree(ready, wire);
    const int64_t sent = AddTime(start, wire);
    tx.Reserve(start, sent, forget_before_);
    last = std::max(last, sent);
  }
  return last;
}

int64_t NicScheduler::ReserveMembers(const EngineComm& c, int64_t ready, int64_t duration) {
  calendars_.clear();
  for (uint32_t m : c.members) {
    calendars_.push_back(&nics_[m].tx);
    calendars_.push_back(&nics_[m].rx);
  }
  const int64_t start = EarliestCommonStart(calendars_, ready, duration);
  const int64_t end = AddTime(start, duration);
  for (uint32_t m : c.members) {
    nics_[m].tx.Reserve(start, end, forget_before_);
    nics_[m].rx.Reserve(start, end, forget_before_);
  }
  return start;
}

void NicScheduler::StartShared(const Request& r, const std::vector<uint32_t>& directions,
                               std::vector<Nanoseconds>* checks) {
  const uint64_t id = shared_->Start(now_, r.kind == Request::Kind::kCollective ? r.duration : r.took, directions);
  shared_tickets_.emplace(id, std::make_pair(r.ticket, now_));
  checks->push_back(NextFinish());
}

Nanoseconds NicScheduler::NextFinish() const {
  if (!shared_) return Nanoseconds::Max();
  const int64_t next = shared_->NextFinish();
  return next == std::numeric_limits<int64_t>::max() ? Nanoseconds::Max() : Nanoseconds(next);
}

void NicScheduler::FinishBy(Nanoseconds now, std::vector<NicGrant>* done) {
  if (!shared_) return;
  for (uint64_t id : shared_->FinishBy(now.count())) {
    const auto it = shared_tickets_.find(id);
    done->push_back({it->second.first, Nanoseconds(it->second.second), now});
    shared_tickets_.erase(it);
  }
}

void NicScheduler::HoldMembersUntil(uint32_t comm, Nanoseconds now, Nanoseconds end, Nanoseconds horizon) {
  const EngineComm& c = world_.comms[comm];
  if (!c.shape.SpansNodes()) return;
  const int64_t forget = (horizon - kMemory).count();
  for (uint32_t m : c.members) {
    nics_[m].tx.Reserve(now.count(), end.count(), forget);
    nics_[m].rx.Reserve(now.count(), end.count(), forget);
  }
}

bool NicScheduler::VirtualMembersFreeBy(uint32_t comm, Nanoseconds start) const {
  const EngineComm& c = world_.comms[comm];
  if (!c.shape.SpansNodes()) return true;
  for (uint32_t m : c.members)
    if (!world_.actors[m].real && std::max(nics_[m].tx.LatestEnd(), nics_[m].rx.LatestEnd()) > start.count())
      return false;
  return true;
}

}  // namespace prism::engine
