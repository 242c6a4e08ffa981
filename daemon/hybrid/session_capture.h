// Compute durations measured on a hybrid run's real ranks, from prismd's
// session recording (--record-sessions, session_recorder.h): the recording
// side of a capture (docs/capture.md, "Measuring a slice").
//
// Each real rank's NCCL operations (the plugin's OpStarted/OpFinished) are
// matched to its program's ops (RealRankPrograms: per communicator, function
// and NCCL sequence number; send/recv per peer and direction). On each stream
// the compute ops between two blocks of communication ops take, per
// iteration, from the end of the first block (its last transfer completed,
// or a cross-stream dependency's, whichever is later) to the start of the
// next block on the GPU (its first send posted, which the proxy does once
// the kernel has produced the data). The gap is shared among those compute
// ops in proportion to their durations in the graph and averaged over the
// iterations from `skip_iterations` on. Compute ops whose gap cannot be
// measured in most of those iterations keep the graph's durations: after a
// block with a send (its completion does not say when the stream went on),
// before a block that only receives (no send marks its start on the GPU),
// next to a communicator prismd's bootstrap never saw, a compute op ahead of
// one that waits for another stream, or a gap that comes out negative.
// Pure function of its inputs; thread-safe.
#ifndef PRISM_DAEMON_HYBRID_SESSION_CAPTURE_H_
#define PRISM_DAEMON_HYBRID_SESSION_CAPTURE_H_

#include <cstdint>
#include <map>
#include <optional>
#include <vector>

#include "absl/status/statusor.h"
#include "daemon/hybrid/session_recorder.h"
#include "proto/graph.pb.h"

namespace prism::daemon {

struct MeasuredRank {
  uint32_t rank = 0;
  // Per op of the rank's program: the measured duration (compute ops only).
  std::vector<std::optional<uint64_t>> compute_ns;
  uint64_t iterations = 0;         // iterations seen (operations matched to their program op)
  uint64_t matched_ops = 0;        // NCCL operations matched to a program op
  uint64_t unmatched_ops = 0;      // NCCL operations not in the rank's program
  // The mean time from one iteration's first enqueue to the next's, over the
  // iterations from skip_iterations on (0: fewer than two of them).
  uint64_t steady_iteration_ns = 0;
  // (operations on a communicator the recording does not name cannot be
  // told apart by rank and are left out of both counts)
};

// One entry per real rank of the recording that reported operations.
// InvalidArgument when the recording is not of `graph` (another job name, or
// a communicator that is not the graph's of that id and name).
// The mean of start(i+1) - start(i) over the iterations i >= skip_iterations
// of `starts` (iteration -> first enqueue, ns) whose successor is there; 0
// when there is none.
uint64_t SteadyIteration(const std::map<uint64_t, uint64_t>& starts, uint64_t skip_iterations);

absl::StatusOr<std::vector<MeasuredRank>> MeasureCompute(const graph::Graph& graph, const Recording& recording,
                                                         uint64_t skip_iterations);

}  // namespace prism::daemon

#endif  // PRISM_DAEMON_HYBRID_SESSION_CAPTURE_H_
