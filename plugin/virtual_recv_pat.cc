// PAT's floor of a virtual receive (VirtualRecvComm::PatFloorOf): prismd's
// play of the PAT operation the real rank's NCCL runs (common/pat_schedule.h),
// the earliest each of its receives from virtual peers may complete.
#include <algorithm>
#include <memory>

#include "plugin/virtual_comms.h"

namespace prism::plugin {

Nanoseconds VirtualRecvComm::PatFloorOf(const Slot& slot, const ArrivalInput& in, const OpSchedule* s) {
  const OpRecord& op = *slot.op.op;
  const OpInfo& info = op.info();
  const int dim = PatDimensionOf(slot.op);
  if (dim < 0 || info.comm_size < 2 || in.link.bandwidth.count() == 0) return Nanoseconds(0);
  // NCCL counts an all-gather's and a reduce-scatter's bytes per rank; the
  // play takes the all-gather's output, the reduce-scatter's input.
  const uint64_t ranks = static_cast<uint64_t>(info.comm_size);
  const Nanoseconds ring_c =
      s != nullptr && s->step_cost_ns > 0 ? Nanoseconds(s->step_cost_ns) : env_.schedules->ring_step_cost();
  const Nanoseconds c = PatStepCost(ring_c, PatDimensions(ranks));  // NCCL's cost per PAT hop, as prismd's model charges it
  const Nanoseconds step = SatAdd(in.link.latency, c);
  const auto bps = static_cast<uint64_t>(in.link.bandwidth.count());
  if (pat_play_op_ != info.id || pat_play_bps_ != bps || pat_play_step_ns_ != step.count()) {
    const PatShape shape{info.kind == OpKind::kAllGather, static_cast<uint32_t>(ranks), Bytes(info.bytes * ranks),
                         std::max<uint32_t>(info.channels, 1), in.link.bandwidth, step};
    // NCCL's own order where the model charges NCCL's step cost, as the model plays it.
    pat_play_ = env_.schedules->pat_plays().Of(shape, c > Nanoseconds(0));
    pat_play_op_ = info.id, pat_play_bps_ = bps, pat_play_step_ns_ = step.count();
  }
  if (pat_play_ == nullptr) return Nanoseconds(0);
  const Nanoseconds start = Max(in.ready, in.own_first_send);
  return PatFloor(*pat_play_, start, dim, slot.op.step, in.link.latency);
}

}  // namespace prism::plugin
