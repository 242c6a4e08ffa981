#include "daemon/engine/launch_order.h"

#include "absl/strings/str_cat.h"

namespace prism::engine {

absl::StatusOr<LaunchOrderChoice> ResolveLaunchOrder(const std::string& flag, const graph::JobInfo& job) {
  if (flag == "true") return LaunchOrderChoice{true, "--launch-order true"};
  if (flag == "false") return LaunchOrderChoice{false, "--launch-order false"};
  if (flag != "graph")
    return absl::InvalidArgumentError(absl::StrCat("--launch-order ", flag, ": graph, true or false"));
  const auto it = job.attributes().find(kLaunchOrderAttribute);
  if (it == job.attributes().end()) return LaunchOrderChoice{false, "default: the graph does not say"};
  if (it->second == "program") return LaunchOrderChoice{true, absl::StrCat("the graph's ", kLaunchOrderAttribute)};
  if (it->second == "streams") return LaunchOrderChoice{false, absl::StrCat("the graph's ", kLaunchOrderAttribute)};
  return absl::InvalidArgumentError(absl::StrCat("graph attribute ", kLaunchOrderAttribute, "=\"", it->second,
                                                 "\": program or streams; or pass --launch-order true|false"));
}

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
