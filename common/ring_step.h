// NCCL's ring step as Prism times it, in one place for prismd's model
// (daemon/engine/network_model.h, RingStepBound) and the plugin's lockstep
// floor (plugin/arrival.h): docs/network-model.md, "NCCL's step cost".
// Pure functions; safe from any thread.
#ifndef PRISM_COMMON_RING_STEP_H_
#define PRISM_COMMON_RING_STEP_H_

#include <algorithm>
#include <cstdint>

#include "common/time_math.h"
#include "common/units.h"

namespace prism {

// Slices per ring step in NCCL 2.28's Simple ring all-reduce, all-gather and
// reduce-scatter (chunk steps / slice steps = (NCCL_STEPS/2) / (NCCL_STEPS/4)).
// The model times every protocol with it (an LL step is one transfer of
// twice the data's bytes; the measured step cost folds that in).
inline constexpr uint64_t kNcclRingSlicesPerStep = 2;

// The time a ring's first `steps` steps take: each moves `step_wire` (the
// ring's wire time per member over its steps, W/h) in `slices` slices, and a
// member forwards a slice one `step_latency` (link latency L plus NCCL's step
// cost c) after it arrived, so
//   RingStepsTime = steps * (W/(h k) + L + c) + (k - 1) * W/(h k)
// (the second slice of the last step trails its first). Saturating; slices 0
// counts as 1.
inline Nanoseconds RingStepsTime(Nanoseconds step_wire, Nanoseconds step_latency, uint64_t steps,
                                 uint64_t slices) {
  if (steps == 0) return Nanoseconds(0);
  slices = std::max<uint64_t>(slices, 1);
  const Nanoseconds slice = Nanoseconds(step_wire.count() / static_cast<int64_t>(slices));
  return SatAdd(SatTimes(SatAdd(slice, step_latency), steps), step_wire - slice);
}

// W/h: a ring's wire time per member (`ring_wire`) over its `hops` steps
// (0 when it has none).
inline Nanoseconds RingStepWire(Nanoseconds ring_wire, uint64_t hops) {
  return hops > 0 ? Nanoseconds(ring_wire.count() / static_cast<int64_t>(hops)) : Nanoseconds(0);
}

}  // namespace prism

#endif  // PRISM_COMMON_RING_STEP_H_
