// NCCL's launch order on one rank: a rank's communication kernels start in
// the order the rank issued them, whatever stream each is on. A job that
// runs CUDA_DEVICE_MAX_CONNECTIONS=1 (Megatron-LM's requirement) has one
// hardware queue, and the GPU host's MPS clients share a few: a kernel
// issued behind a collective whose stream is still busy waits for that
// collective to start. The ground truth of step-n16-dp8-2g5 (2026-12-02)
// shows it: stage 1's last gradient send, issued after its second DP
// reduce-scatter, went on the wire only once that reduce-scatter was over,
// in every iteration (docs/network-model.md, "Launch order").
//
// Whether a job's ranks launch this way is the graph's to say: a graph
// whose JobInfo.attributes["nccl_launch_order"] is "program" was taken where
// it holds (prism-graphgen fidelity: the GPU host's ranks, MPS clients of
// one GPU); "streams", or no such attribute, keeps each stream on its own
// (ResolveLaunchOrder; prismd --launch-order overrides the graph).
//
// LaunchOrder answers, for a stream's position in its program, which
// communication op the stream will issue next (program order: an op's index
// in its program, iteration by iteration). Built once from the programs;
// immutable, so safe to read from any thread. `programs` must outlive it.
#ifndef PRISM_DAEMON_ENGINE_LAUNCH_ORDER_H_
#define PRISM_DAEMON_ENGINE_LAUNCH_ORDER_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "daemon/engine/engine_world.h"
#include "proto/graph.pb.h"

namespace prism::engine {

// The job attribute that says how the ranks launch their NCCL kernels.
inline constexpr char kLaunchOrderAttribute[] = "nccl_launch_order";

// NcclBehaviour::launch_in_order and where it came from (the report's line).
struct LaunchOrderChoice {
  bool in_order = false;
  std::string source;
};

// prismd --launch-order: "graph" (the graph's attribute: "program" in
// order, "streams" or none each stream on its own), "true" or "false".
// Errors name the flag or the attribute's unknown value.
absl::StatusOr<LaunchOrderChoice> ResolveLaunchOrder(const std::string& flag, const graph::JobInfo& job);

class LaunchOrder {
 public:
  explicit LaunchOrder(const std::vector<ProgramInfo>& programs);

  // A position in a rank's program order.
  struct Position {
    uint64_t iteration = 0;
    uint32_t op = 0;
    auto operator<=>(const Position&) const = default;
  };

  // The first communication op stream `stream` of program `program` issues
  // from its position (`iteration`, `index` into its stream_ops) on, within
  // `iterations`; nullopt when there is none.
  std::optional<Position> NextComm(uint32_t program, uint32_t stream, uint64_t iteration, uint32_t index,
                                   uint64_t iterations) const;

  // The op stream `stream` issued last before its position (`iteration`,
  // `index`); nullopt at the very start.
  std::optional<Position> LastIssued(uint32_t program, uint32_t stream, uint64_t iteration, uint32_t index) const;

  static bool IsComm(OpKind k) { return k == OpKind::kCollective || k == OpKind::kSend || k == OpKind::kRecv; }

 private:
  const std::vector<ProgramInfo>& programs_;
  // next_[program][stream][index]: the stream index of the first
  // communication op at or after `index` in that iteration (the stream's
  // length when none).
  std::vector<std::vector<std::vector<uint32_t>>> next_;
};

}  // namespace prism::engine

#endif  // PRISM_DAEMON_ENGINE_LAUNCH_ORDER_H_
