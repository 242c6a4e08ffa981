#include "daemon/engine/launch_order.h"

namespace prism::engine {

LaunchOrder::LaunchOrder(const std::vector<ProgramInfo>& programs) : programs_(programs), next_(programs.size()) {
  for (size_t p = 0; p < programs.size(); ++p) {
    const ProgramInfo& program = programs[p];
    next_[p].resize(program.stream_ops.size());
    for (size_t s = 0; s < program.stream_ops.size(); ++s) {
      const std::vector<uint32_t>& ops = program.stream_ops[s];
      std::vector<uint32_t>& next = next_[p][s];
      next.assign(ops.size() + 1, static_cast<uint32_t>(ops.size()));
      for (size_t i = ops.size(); i-- > 0;)
        next[i] = IsComm(program.ops[ops[i]].kind) ? static_cast<uint32_t>(i) : next[i + 1];
    }
  }
}

std::optional<LaunchOrder::Position> LaunchOrder::NextComm(uint32_t program, uint32_t stream, uint64_t iteration,
                                                           uint32_t index, uint64_t iterations) const {
  const std::vector<uint32_t>& next = next_[program][stream];
  const std::vector<uint32_t>& ops = programs_[program].stream_ops[stream];
  if (iteration >= iterations || ops.empty()) return std::nullopt;
  if (next[index] < ops.size()) return Position{iteration, ops[next[index]]};
  if (iteration + 1 >= iterations || next[0] == ops.size()) return std::nullopt;
  return Position{iteration + 1, ops[next[0]]};
}

std::optional<LaunchOrder::Position> LaunchOrder::LastIssued(uint32_t program, uint32_t stream, uint64_t iteration,
                                                             uint32_t index) const {
  const std::vector<uint32_t>& ops = programs_[program].stream_ops[stream];
  if (ops.empty()) return std::nullopt;
  if (index > 0) return Position{iteration, ops[index - 1]};
  if (iteration == 0) return std::nullopt;
  return Position{iteration - 1, ops.back()};
}

}  // namespace prism::engine
