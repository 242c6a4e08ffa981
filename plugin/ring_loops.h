// How many times NCCL runs a ring collective's steps: the lockstep floor's
// share of the model's step per NCCL step (plugin/arrival.h RingFloor,
// docs/timing.md "Timing a receive", MIRROR). Pure; safe from any thread.
#ifndef PRISM_PLUGIN_RING_LOOPS_H_
#define PRISM_PLUGIN_RING_LOOPS_H_

#include <algorithm>
#include <cstdint>

namespace prism::plugin {

// prismd's model moves a ring all-reduce of `bytes` over `n` members in
// 2(n-1) steps of bytes/n each (all-gather and reduce-scatter: n-1 steps of
// the per-rank `bytes`). NCCL's Simple ring cuts each channel's share into
// chunks of `slices_per_step` transfers of `message_bytes` and runs the
// ring's steps once per loop of n chunks, so a large operation on a small
// ring takes loops x 2(n-1) steps, each moving 1/loops of a model step over
// all `channels`. Returns loops = model step bytes / (channels x
// slices_per_step x message_bytes), rounded down and at least 1 (never more
// loops than NCCL ran: a floor stays a floor). `message_bytes` is the
// operation's first transfer on the connection (a full slice whenever
// there is more than one loop).
inline uint64_t RingLoopsOf(bool all_reduce, uint64_t bytes, uint64_t n, uint64_t channels,
                            uint64_t slices_per_step, uint64_t message_bytes) {
  if (n < 2 || message_bytes == 0) return 1;
  const uint64_t model_step = all_reduce ? bytes / n : bytes;
  const uint64_t nccl_step = std::max<uint64_t>(channels, 1) * std::max<uint64_t>(slices_per_step, 1) * message_bytes;
  return std::max<uint64_t>(1, model_step / nccl_step);
}

}  // namespace prism::plugin

#endif  // PRISM_PLUGIN_RING_LOOPS_H_
