// CommRankIndex: the global rank a send or receive addresses through its
// communicator (a P2P descriptor's slot and peer, absolute or relative to
// the sender's own position).
//
// Ownership: holds its own copy of the graph's Topology and an index of the
// communicators some program's send/recv slot maps to; the graph it was
// built from must outlive it. Thread-safety: immutable after construction,
// so any number of threads may call PeerRank.
#ifndef PRISM_DAEMON_ENGINE_COMM_RANK_INDEX_H_
#define PRISM_DAEMON_ENGINE_COMM_RANK_INDEX_H_

#include <cstdint>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "daemon/engine/engine_world.h"
#include "proto/graph.pb.h"
#include "proto/graph_topology.h"

namespace prism::engine {

// Position of ranks inside the communicators that P2P ops address.
class CommRankIndex {
 public:
  // Indexes every communicator some program's send/recv slot maps to.
  // Contract: `graph` passed ValidateGraph; it outlives the index.
  explicit CommRankIndex(const graph::Graph& graph);
  // The same with the graph's Topology already built (records or tables).
  CommRankIndex(const graph::Graph& graph, graph::Topology topology);
  // The global rank that `rank` addresses through P2P desc `d` of its program.
  uint32_t PeerRank(uint32_t rank, const P2PDesc& d) const;

 private:
  graph::Topology topology_;
  std::vector<uint8_t> ascending_;                    // per communicator: members ascend (binary search)
  absl::flat_hash_map<uint64_t, uint32_t> position_;  // others: (comm << 32 | rank) -> comm rank
};

}  // namespace prism::engine

#endif  // PRISM_DAEMON_ENGINE_COMM_RANK_INDEX_H_
