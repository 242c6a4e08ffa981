#include "daemon/engine/trace_budget.h"

#include <algorithm>
#include <climits>

#include "proto/graph_topology.h"

namespace prism::engine {

std::vector<uint32_t> OneRankPerProgram(const graph::Graph& graph, size_t max_ranks) {
  std::vector<uint32_t> first(graph.programs_size(), UINT32_MAX);
  for (uint32_t r = 0; r < graph::RankCount(graph); ++r) {
    const uint32_t p = graph::ProgramOfRank(graph, r);
    const uint32_t id = graph.has_rank_table() ? r : graph.ranks(static_cast<int>(r)).rank();
    if (p < first.size()) first[p] = std::min(first[p], id);
  }
  std::erase(first, UINT32_MAX);
  std::sort(first.begin(), first.end());
  if (first.size() > max_ranks) first.resize(max_ranks);
  return first;
}

uint64_t EstimateTraceBytes(const graph::Graph& graph, const std::vector<uint32_t>& ranks, uint64_t iterations) {
  unsigned __int128 bytes = 0;
  for (uint32_t r : ranks) {
    if (r >= graph::RankCount(graph)) continue;
    const uint32_t p = graph::ProgramOfRank(graph, r);
    if (p < static_cast<uint32_t>(graph.programs_size()))
      bytes += static_cast<unsigned __int128>(graph.programs(static_cast<int>(p)).ops_size()) * iterations *
               kTraceBytesPerOp;
  }
  return bytes > UINT64_MAX ? UINT64_MAX : static_cast<uint64_t>(bytes);
}

}  // namespace prism::engine
