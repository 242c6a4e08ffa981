// Pipeline schedules: the order in which one pipeline stage runs the forward
// and backward passes of its microbatches and model chunks
// (module: program builder per schedule, part 1).
//
//   gpipe:            all forwards (mb 0..M-1), then all backwards (mb 0..M-1).
//   1f1b:             warmup = min(pp - stage - 1, M) forwards, then
//                     alternating 1F1B, then the remaining backwards.
//   interleaved-1f1b: Megatron's interleaved schedule over M*vpp virtual
//                     microbatches; warmup = (pp - stage - 1) * 2 + (vpp - 1) * pp
//                     (capped at M*vpp); virtual microbatch k runs chunk
//                     (k mod pp*vpp) / pp of microbatch (k / (pp*vpp)) * pp + k mod pp,
//                     backward chunks in reverse.
// Pure functions; thread-safe.
#ifndef PRISM_GRAPHGEN_SCHEDULE_H_
#define PRISM_GRAPHGEN_SCHEDULE_H_

#include <cstdint>
#include <vector>

#include "graphgen/job_spec.h"

namespace prism::graphgen {

struct PipelineStep {
  bool forward = true;
  uint32_t chunk = 0;               // model chunk (virtual stage) on this rank, 0..vpp-1
  uint32_t microbatch = 0;
  bool operator==(const PipelineStep&) const = default;
};

// Contract: stage < pp, microbatches >= 1, vpp >= 1; for the interleaved
// schedule microbatches % pp == 0. Every (direction, chunk, microbatch)
// appears exactly once; each backward comes after its forward.
std::vector<PipelineStep> StageSchedule(Schedule schedule, uint32_t pp, uint32_t vpp, uint32_t stage,
                                        uint32_t microbatches);

}  // namespace prism::graphgen

#endif  // PRISM_GRAPHGEN_SCHEDULE_H_
