#include "daemon/hybrid/op_time_report.h"

#include <algorithm>
#include <map>
#include <optional>
#include <tuple>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace prism::daemon {
namespace {

const char* KindName(graph::CollectiveKind kind) {
  switch (kind) {
    case graph::ALLREDUCE: return "all-reduce";
    case graph::ALLGATHER: return "all-gather";
    case graph::REDUCESCATTER: return "reduce-scatter";
    default: return "collective";
  }
}

std::string SizeText(Bytes bytes) {
  const double b = static_cast<double>(bytes.count());
  if (b >= 1024.0 * 1024.0) return absl::StrFormat("%.2f MiB", b / (1024.0 * 1024.0));
  if (b >= 1024.0) return absl::StrFormat("%.1f KiB", b / 1024.0);
  return absl::StrFormat("%.0f B", b);
}

// NCCL's algorithm name as the model's; nullopt: not one the model plays.
std::optional<graph::Algorithm> AlgorithmOf(const std::string& nccl_name) {
  if (nccl_name == "RING") return graph::ALGORITHM_RING;
  if (nccl_name == "TREE") return graph::ALGORITHM_TREE;
  if (nccl_name == "PAT") return graph::ALGORITHM_PAT;
  return std::nullopt;
}

const char* AlgorithmSuffix(graph::Algorithm algorithm) {
  switch (algorithm) {
    case graph::ALGORITHM_TREE: return " (tree)";
    case graph::ALGORITHM_PAT: return " (PAT)";
    default: return "";
  }
}

Nanoseconds Median(std::vector<Nanoseconds> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace

Nanoseconds OpTimeGroup::AddedPerIteration(uint64_t iterations) const {
  const int64_t per_op = median.count() - model.count();
  return Nanoseconds(per_op * static_cast<int64_t>(count) / static_cast<int64_t>(std::max<uint64_t>(iterations, 1)));
}

std::vector<OpTimeGroup> GroupCollectiveOps(const std::vector<RingOpTiming>& ops,
                                           const engine::NetworkModel& model) {
  using Key = std::tuple<int, int, uint64_t, engine::CommShape>;
  std::map<Key, std::vector<Nanoseconds>> durations;
  for (const RingOpTiming& op : ops) {
    const std::optional<graph::Algorithm> algorithm =
        op.collective ? std::optional<graph::Algorithm>(graph::ALGORITHM_RING) : AlgorithmOf(op.algorithm);
    if (!algorithm || op.first_send.count() <= 0 || op.end < op.first_send) continue;
    durations[Key{op.kind, *algorithm, op.bytes.count(), op.shape}].push_back(op.end - op.first_send);
  }
  std::vector<OpTimeGroup> groups;
  for (const auto& [key, times] : durations) {
    OpTimeGroup g;
    g.kind = static_cast<graph::CollectiveKind>(std::get<0>(key));
    g.algorithm = static_cast<graph::Algorithm>(std::get<1>(key));
    g.bytes = Bytes(std::get<2>(key));
    g.shape = std::get<3>(key);
    g.count = times.size();
    g.median = Median(times);
    g.model = model.CollectiveTime(g.kind, g.algorithm, g.bytes, g.shape);
    groups.push_back(g);
  }
  std::stable_sort(groups.begin(), groups.end(), [](const OpTimeGroup& a, const OpTimeGroup& b) {
    return a.AddedPerIteration(1) > b.AddedPerIteration(1);
  });
  return groups;
}

std::string DescribeOpTimes(const std::vector<OpTimeGroup>& groups, uint32_t rank, uint64_t iterations,
                            size_t most) {
  if (groups.empty()) return "";
  const uint64_t per = std::max<uint64_t>(iterations, 1);
  std::string out =
      iterations == 0
          ? absl::StrFormat("collectives against the model, rank %u (first send to end, median; no iteration of "
                            "the graph completed, so counts and what each group added are the whole run's):",
                            rank)
          : absl::StrFormat("collectives against the model, rank %u (first send to end, median; what each group "
                            "added to an iteration, of %llu):",
                            rank, static_cast<unsigned long long>(per));
  for (size_t i = 0; i < groups.size() && i < most; ++i) {
    const OpTimeGroup& g = groups[i];
    absl::StrAppend(&out, i == 0 ? " " : "; ",
                    absl::StrFormat("%s%s %s on %u ranks (%u node%s) x%.1f: %.1f us against %.1f us, %+.2f ms",
                                    KindName(g.kind), AlgorithmSuffix(g.algorithm), SizeText(g.bytes),
                                    g.shape.ranks, g.shape.nodes,
                                    g.shape.nodes == 1 ? "" : "s",
                                    static_cast<double>(g.count) / static_cast<double>(per), g.median.count() / 1e3,
                                    g.model.count() / 1e3, g.AddedPerIteration(per).count() / 1e6));
  }
  if (groups.size() > most)
    absl::StrAppend(&out, absl::StrFormat(" (%zu more groups)", groups.size() - most));
  return out;
}

}  // namespace prism::daemon
