// NCCL's PAT all-gather and reduce-scatter (one rank per node) in prismd's
// model: the plays of common/pat_schedule.h (how NCCL moves the data, and
// the links' own bound) and common/pat_kernel.h (NCCL's kernel in its own
// order; docs/network-model.md, "PAT"), on the graph's collective kinds.
// Pure functions; thread-safe.
#ifndef PRISM_DAEMON_ENGINE_PAT_PLAY_H_
#define PRISM_DAEMON_ENGINE_PAT_PLAY_H_

#include <cstdint>
#include <optional>
#include <vector>

#include "common/pat_kernel.h"
#include "common/pat_schedule.h"
#include "common/units.h"
#include "proto/graph.pb.h"

namespace prism::engine {

struct PatOperation {
  graph::CollectiveKind kind = graph::ALLGATHER;  // ALLGATHER or REDUCESCATTER
  uint32_t ranks = 1;
  Bytes bytes;                // the all-gather's output, the reduce-scatter's input
  uint32_t channels = 2;      // NCCL's channels for the communicator
  BitsPerSecond bandwidth;    // the rank's NIC (shared by its channels)
  Nanoseconds step_latency;   // link latency + NCCL's step cost, per message
};

using prism::kMaxPlayedPatMessages;
using prism::PatCut;

inline PatShape ShapeOf(const PatOperation& op) {
  return PatShape{op.kind == graph::ALLGATHER, op.ranks, op.bytes, op.channels, op.bandwidth, op.step_latency};
}

inline PatCut CutPat(const PatOperation& op) { return CutPatShape(ShapeOf(op)); }

// The operation's time from the moment every rank arrived; nullopt when
// there would be more than kMaxPlayedPatMessages messages.
inline std::optional<Nanoseconds> PlayPat(const PatOperation& op) {
  const std::optional<PatPlay> play = PlayPatSchedule(ShapeOf(op));
  if (!play) return std::nullopt;
  return play->end;
}

// The operation's time as NCCL's kernel runs it (common/pat_kernel.h: its
// steps in its order, in rounds at PatRoundCost of the kind, NCCL_STEPS
// messages in flight per connection), from the moment every rank arrived;
// nullopt past kMaxPlayedPatSteps. The model plays this where it charges
// NCCL's step cost, PlayPat (the links' own bound) where it does not.
inline std::optional<Nanoseconds> PlayPatKernelOf(const PatOperation& op) {
  return PlayPatKernel(ShapeOf(op), PatRoundCost(op.kind == graph::ALLGATHER));
}

// Messages one rank sends per channel on each dimension, all loops.
inline std::vector<uint64_t> PatMessagesPerDimension(const PatOperation& op) { return PatMessagesPerDim(ShapeOf(op)); }

// NCCL's PAT chunk for `bytes` over `channels` (all-gather or reduce-scatter).
inline Bytes PatChunkBytes(graph::CollectiveKind kind, Bytes bytes, uint32_t channels) {
  return PatChunk(kind == graph::ALLGATHER, bytes, channels);
}

}  // namespace prism::engine

#endif  // PRISM_DAEMON_ENGINE_PAT_PLAY_H_
