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
// LaunchOrder answers, for a stream's position in its program, which
// communication op the stream will issue next (program order: an op's index
// in its program, iteration by iteration). Built once from the programs;
// immutable, so safe to read from any thread. `programs` must outlive it.
#ifndef PRISM_DAEMON_ENGINE_LAUNCH_ORDER_H_
#define PRISM_DAEMON_ENGINE_LAUNCH_ORDER_H_

#include <cstdint>
#include <optional>
#include <vector>

#include "daemon/engine/engine_world.h"

namespace prism::engine {

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
