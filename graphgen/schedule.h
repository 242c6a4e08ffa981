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

// A pipeline exchange with the neighbouring stages, posted as one NCCL group
// in Megatron's order: send to previous, recv from previous, send to next,
// recv from next. "next" carries activations (forward), "prev" gradients.
struct PipelineExchange {
  bool send_prev = false;           // gradient to stage - 1 (mod pp)
  bool recv_prev = false;           // activation from stage - 1
  bool send_next = false;           // activation to stage + 1 (mod pp)
  bool recv_next = false;           // gradient from stage + 1
  bool empty() const { return !send_prev && !recv_prev && !send_next && !recv_next; }
};

// One entry of a stage's timeline: a pass or an exchange.
struct PipelineAction {
  bool is_exchange = false;
  PipelineStep step;                // when !is_exchange
  PipelineExchange exchange;        // when is_exchange (never empty)
};

// Contract: stage < pp, microbatches >= 1, vpp >= 1; for the interleaved
// schedule microbatches % pp == 0. Every (direction, chunk, microbatch)
// appears exactly once; each backward comes after its forward. Exchanges
// follow Megatron's p2p pattern for the schedule (1F1B: send_forward_recv_
// backward / send_backward_recv_forward; interleaved: one combined exchange
// per step, with Megatron's recv_prev/recv_next rules), so that every
// stage's exchanges match its neighbours' in order.
std::vector<PipelineAction> StageActions(Schedule schedule, uint32_t pp, uint32_t vpp, uint32_t stage,
                                         uint32_t microbatches);

// The passes of StageActions alone, in order.
std::vector<PipelineStep> StageSchedule(Schedule schedule, uint32_t pp, uint32_t vpp, uint32_t stage,
                                        uint32_t microbatches);

}  // namespace prism::graphgen

#endif  // PRISM_GRAPHGEN_SCHEDULE_H_
