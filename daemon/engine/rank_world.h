// The world one rank at a time, in flat arrays: what BuildWorld checks and
// reduces to equivalence classes before it builds the EngineWorld the engine
// plays (engine_world.h). Per rank its program, whether it is real, its comm
// slots (the graph's own, read through graph::Topology), which slot each
// slot aliases, and the rank and node locality of every P2P peer; per
// communicator its shape. Nothing is allocated per rank or communicator, so
// a 131,072-rank world costs a few arrays, and communicator names and
// member lists are copied only for the communicators the played world keeps.
//
// A RankWorld borrows the graph its Topology reads: the graph must outlive it
// unmodified. Immutable after BuildRankWorld; thread-compatible.
#ifndef PRISM_DAEMON_ENGINE_RANK_WORLD_H_
#define PRISM_DAEMON_ENGINE_RANK_WORLD_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "daemon/engine/engine_world.h"
#include "proto/graph.pb.h"
#include "proto/graph_topology.h"

namespace prism::engine {

struct RankWorld {
  explicit RankWorld(graph::Topology t) : topology(std::move(t)) {}

  graph::Topology topology;
  std::vector<ProgramInfo> programs;
  std::vector<uint8_t> real;             // per rank
  std::vector<uint8_t> alone;            // per rank, or empty: virtual ranks kept out of classes (WorldOptions)
  std::vector<uint64_t> slot_begin;      // per rank + 1: its first entry of slot_canonical
  std::vector<uint32_t> slot_canonical;  // per (rank, slot): the first slot naming the same communicator
  std::vector<uint64_t> peer_begin;      // per rank + 1: its first entry of peer / peer_same_node
  std::vector<uint32_t> peer;            // per (rank, P2P desc of its program): the peer's rank
  std::vector<uint8_t> peer_same_node;
  std::vector<CommShape> shapes;         // per communicator

  uint32_t ranks() const { return topology.ranks(); }
  uint32_t communicators() const { return topology.communicators(); }
  uint32_t program(uint32_t r) const { return topology.program(r); }
  absl::Span<const uint32_t> slots(uint32_t r) const { return topology.slots(r); }
  absl::Span<const uint32_t> canonical(uint32_t r) const {
    return absl::MakeConstSpan(slot_canonical.data() + slot_begin[r], slot_begin[r + 1] - slot_begin[r]);
  }
  absl::Span<const uint32_t> peers(uint32_t r) const {
    return absl::MakeConstSpan(peer.data() + peer_begin[r], peer_begin[r + 1] - peer_begin[r]);
  }
  absl::Span<const uint8_t> peers_same_node(uint32_t r) const {
    return absl::MakeConstSpan(peer_same_node.data() + peer_begin[r], peer_begin[r + 1] - peer_begin[r]);
  }
  absl::Span<const uint32_t> members(uint32_t c) const { return topology.members(c); }
  // The communicator's name in reports ("comm-<id>" when the graph gives none).
  std::string CommName(uint32_t c) const;
};

// InvalidArgument when a real rank is outside the world or a program uses
// more streams than the engine supports. Contract: `graph` passed
// ValidateGraph and `topology` is its Topology.
absl::StatusOr<RankWorld> BuildRankWorld(const graph::Graph& graph, graph::Topology topology,
                                         const std::vector<uint32_t>& real_ranks);

// Communicator c as the engine plays it with every rank its own actor.
EngineComm RankComm(const RankWorld& w, uint32_t c);

// The world with every rank its own actor (actor r plays rank r, every
// communicator kept); takes the programs out of `w`.
EngineWorld EveryRankWorld(RankWorld& w);

}  // namespace prism::engine

#endif  // PRISM_DAEMON_ENGINE_RANK_WORLD_H_
