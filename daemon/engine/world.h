// The world the replay engine plays: actors (one per rank, or one per
// equivalence class of provably symmetric ranks), the communicators between
// them and each program's operations in a compact form.
//
// BuildWorld runs ValidateGraph (structure and the limits of common/limits.h,
// whoever built the Graph), then validates what the engine assumes beyond it
// (links able to carry every communicator) and returns an error that says
// what is wrong instead of crashing on hostile graphs. It also has `model`
// play every tree all-reduce of one rank per node the graph holds (the
// model caches them), so that no play runs later on the engine thread.
//
// Equivalence classes (docs/network-model.md, "Equivalence classes", has the
// proof): ranks are partitioned by colour refinement until stable; a class is
// replayed by one actor when the reduction checks pass, else every rank is
// its own actor and `reduction_note` says why. Thread-compatible; immutable
// after BuildWorld.
#ifndef PRISM_DAEMON_ENGINE_WORLD_H_
#define PRISM_DAEMON_ENGINE_WORLD_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "common/limits.h"
#include "daemon/engine/network_model.h"
#include "proto/graph.pb.h"

namespace prism::engine {

enum class OpKind : uint8_t { kCompute, kCollective, kSend, kRecv, kGroupStart, kGroupEnd };

// One op of a program, flattened for the hot loop.
struct OpInfo {
  OpKind kind = OpKind::kCompute;
  uint32_t stream = 0;
  uint32_t slot = 0;             // comm slot (collective, send, recv)
  int32_t p2p_desc = -1;         // index into ProgramInfo::p2p (send, recv)
  graph::CollectiveKind collective = graph::COLLECTIVE_KIND_UNSPECIFIED;
  graph::Algorithm algorithm = graph::ALGORITHM_DEFAULT;
  int64_t memory_delta = 0;
  Nanoseconds duration;          // compute
  Bytes bytes;
  uint32_t deps_begin = 0, deps_end = 0;  // range in ProgramInfo::deps
};

// A distinct (slot, peer, relative) send/recv target of a program.
struct P2PDesc {
  uint32_t slot = 0;
  uint32_t peer = 0;
  bool relative = false;
  bool is_send = false;
};

struct ProgramInfo {
  std::string name;
  uint64_t static_memory = 0;
  uint32_t streams = 0;                        // streams actually used
  std::vector<OpInfo> ops;
  std::vector<uint32_t> deps;
  std::vector<std::vector<uint32_t>> stream_ops;  // op indices per stream, in order
  std::vector<P2PDesc> p2p;
};

struct Actor {
  uint32_t program = 0;
  uint32_t rep_rank = 0;                       // a rank this actor plays
  uint64_t weight = 1;                         // ranks it stands for
  bool real = false;                           // progress comes from the inbox
  std::vector<uint32_t> slot_comm;             // engine communicator per slot
  std::vector<uint32_t> slot_canonical;        // first slot naming the same communicator
  std::vector<uint32_t> peer_actor;            // per P2P desc of its program
  std::vector<uint8_t> peer_same_node;         // per P2P desc
};

struct EngineComm {
  std::vector<uint32_t> members;               // actor ids
  CommShape shape;
  graph::CommKind kind = graph::COMM_KIND_UNSPECIFIED;
  std::string name;
};

struct WorldOptions {
  bool use_classes = true;
  std::vector<uint32_t> real_ranks;            // never merged with other ranks
  // The caller already ran graph::ValidateGraph on this very graph
  // (graph::ReadGraphFile does): BuildWorld skips it (at 131,072 ranks it
  // is a sixth of the load).
  bool graph_validated = false;
};

struct EngineWorld {
  std::vector<ProgramInfo> programs;
  std::vector<Actor> actors;
  std::vector<EngineComm> comms;
  std::vector<uint32_t> actor_of_rank;         // rank -> actor
  uint32_t classes = 0;                        // colour classes found (== actors when reduced)
  bool reduced = false;
  std::string reduction_note;                  // why not reduced (or "" when reduced / off)
};

// Limits that keep hostile graphs from exhausting memory (common/limits.h,
// shared with prism-graphgen).
inline constexpr uint64_t kMaxRanks = limits::kMaxRanks;
inline constexpr uint64_t kMaxStreams = limits::kMaxStreams;
// Per-rank (or per-actor) state entries: slots, send/recv targets, op
// counters. About 4-8 bytes each.
inline constexpr uint64_t kMaxStateEntries = limits::kMaxStateEntries;

// Entries the engine allocates to replay `world` for `iterations`
// iterations (op counters, streams, slots, per-iteration bookkeeping).
uint64_t EngineStateEntries(const EngineWorld& world, uint64_t iterations);

absl::StatusOr<EngineWorld> BuildWorld(const graph::Graph& graph, const NetworkModel& model,
                                       const WorldOptions& options);

// Position of ranks inside the communicators that P2P ops address.
class CommRankIndex {
 public:
  // Indexes every communicator some program's send/recv slot maps to.
  explicit CommRankIndex(const graph::Graph& graph);
  // The global rank that `rank` addresses through P2P desc `d` of its program.
  uint32_t PeerRank(uint32_t rank, const P2PDesc& d) const;

 private:
  const graph::Graph& graph_;
  absl::flat_hash_map<uint64_t, uint32_t> position_;  // (comm << 32 | rank) -> comm rank
};

}  // namespace prism::engine

#endif  // PRISM_DAEMON_ENGINE_WORLD_H_
