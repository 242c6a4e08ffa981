#include "daemon/engine/comm_rank_index.h"

#include <algorithm>
#include <utility>

namespace prism::engine {

CommRankIndex::CommRankIndex(const graph::Graph& graph) : CommRankIndex(graph, *graph::Topology::Of(graph)) {}

CommRankIndex::CommRankIndex(const graph::Graph& graph, graph::Topology topology) : topology_(std::move(topology)) {
  const graph::Topology& t = topology_;
  std::vector<std::vector<uint32_t>> p2p_slots(graph.programs_size());
  for (int i = 0; i < graph.programs_size(); ++i) {
    std::vector<uint8_t> used(graph.programs(i).comm_slot_names_size(), 0);
    for (const graph::Op& op : graph.programs(i).ops()) {
      if (op.has_send()) used[op.send().comm_slot()] = 1;
      if (op.has_recv()) used[op.recv().comm_slot()] = 1;
    }
    for (size_t s = 0; s < used.size(); ++s)
      if (used[s]) p2p_slots[i].push_back(static_cast<uint32_t>(s));
  }
  std::vector<uint8_t> wanted(t.communicators(), 0);
  for (uint32_t r = 0; r < t.ranks(); ++r)
    for (uint32_t s : p2p_slots[t.program(r)]) wanted[t.slots(r)[s]] = 1;
  ascending_.assign(t.communicators(), 0);
  for (uint32_t c = 0; c < t.communicators(); ++c) {
    if (!wanted[c]) continue;
    const auto members = t.members(c);
    if (std::is_sorted(members.begin(), members.end())) {  // found by binary search, no entry
      ascending_[c] = 1;
      continue;
    }
    for (size_t i = 0; i < members.size(); ++i) position_[(uint64_t{c} << 32) | members[i]] = static_cast<uint32_t>(i);
  }
}

uint32_t CommRankIndex::PeerRank(uint32_t rank, const P2PDesc& d) const {
  const uint32_t comm = topology_.slots(rank)[d.slot];
  const auto members = topology_.members(comm);
  const uint32_t size = static_cast<uint32_t>(members.size());
  uint64_t target = d.peer % size;
  if (d.relative) {
    uint32_t mine = 0;
    if (ascending_[comm]) {
      const auto it = std::lower_bound(members.begin(), members.end(), rank);
      mine = it != members.end() && *it == rank ? static_cast<uint32_t>(it - members.begin()) : 0;
    } else if (const auto it = position_.find((uint64_t{comm} << 32) | rank); it != position_.end()) {
      mine = it->second;
    }
    target = (uint64_t{mine} + d.peer) % size;
  }
  return members[target];
}

}  // namespace prism::engine
