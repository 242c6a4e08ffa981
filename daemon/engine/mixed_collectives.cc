#include "daemon/engine/mixed_collectives.h"

namespace prism::engine {

std::optional<Nanoseconds> MixedCollectives::Calibrated(const OpInfo& op, const CommShape& shape, Nanoseconds model) {
  const auto measured = calibration_.Find(op, shape, model);
  if (measured) {
    ++stats_.calibrated_instances;
    if (observer_) observer_->OnCalibratedCollective();
  }
  return measured;
}

void MixedCollectives::AllArrived(uint32_t comm, uint64_t call, CollectiveInstance&& in, Nanoseconds now,
                                  Nanoseconds horizon) {
  if (nccl_.calibrate && !nccl_.own_hold_unclean) in.virtual_nics_free = nics_.VirtualMembersFreeBy(comm, in.last);
  if (in.real_left == 0) Finish(in, now, horizon);
  else awaiting_.emplace(std::make_pair(comm, call), std::move(in));
}

void MixedCollectives::RealMemberDone(uint32_t comm, uint64_t call, CollectiveInstance* arriving, Nanoseconds at,
                                      Nanoseconds started, bool alone, Nanoseconds now, Nanoseconds horizon) {
  CollectiveInstance* in = arriving;
  auto waiting = awaiting_.end();
  if (in == nullptr) {
    waiting = awaiting_.find({comm, call});
    if (waiting == awaiting_.end()) return;
    in = &waiting->second;
  }
  if (!alone) in->real_alone = false;
  in->real_done = Max(in->real_done, at);
  in->real_started = Max(in->real_started, started);
  if (in->real_left > 0) --in->real_left;
  if (waiting != awaiting_.end() && in->real_left == 0) {
    Finish(*in, now, horizon);
    awaiting_.erase(waiting);
  }
}

void MixedCollectives::Finish(const CollectiveInstance& in, Nanoseconds now, Nanoseconds horizon) {
  const Nanoseconds end = Max(in.real_done, in.last_virtual);
  if (in.real_done < in.last_virtual) ++stats_.late_virtual_members;
  if (observer_) observer_->OnMixedCollective(in.real_done < in.last_virtual);
  const Actor& first = world_.actors[in.first_actor];
  const OpInfo& op = world_.programs[first.program].ops[in.first_op];
  const uint32_t comm = first.slot_comm[op.slot];
  const EngineComm& c = world_.comms[comm];
  for (const CollectiveInstance::Waiter& w : in.waiters)
    if (!world_.actors[w.actor].real) queue_.Push(end, w.actor, w.op, w.issued);
  // Its members' NICs stay busy until the real end, when later than the model's.
  nics_.HoldMembersUntil(comm, now, end, horizon);
  const Nanoseconds start = Max(in.real_started, in.last_virtual);
  if (Clean(in, comm, start)) calibration_.Record(op, c.shape, in.real_done - start, in.model);
  if (observer_) observer_->OnCollective(op.collective, c.kind, end - in.last, op.bytes);
}

bool MixedCollectives::Clean(const CollectiveInstance& in, uint32_t comm, Nanoseconds start) const {
  if (!nccl_.calibrate) return false;
  if (in.startup && !nccl_.startup_calibrates) return false;  // NCCL's warm-up
  if (in.real_started <= Nanoseconds(0) || in.real_started < in.last_virtual || in.real_done <= start) return false;
  if (!in.real_alone) return false;
  // The engine before 2026-12-05 read the NICs now, its own hold included.
  return nccl_.own_hold_unclean ? nics_.VirtualMembersFreeBy(comm, start) : in.virtual_nics_free;
}

}  // namespace prism::engine
