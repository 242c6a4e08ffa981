// Building the world the replay engine plays (engine_world.h holds the data:
// actors, communicators, each program's operations in a compact form).
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
#include "daemon/engine/comm_rank_index.h"
#include "daemon/engine/engine_world.h"
#include "daemon/engine/network_model.h"
#include "proto/graph.pb.h"
#include "proto/graph_topology.h"

namespace prism::engine {

struct WorldOptions {
  bool use_classes = true;
  std::vector<uint32_t> real_ranks;            // never merged with other ranks
  std::vector<uint32_t> alone_ranks;           // virtual, but never merged either (late_ranks.h)
  // The caller already ran graph::ValidateGraph on this very graph
  // (graph::ReadGraphFile does): BuildWorld skips it (at 131,072 ranks it
  // is a sixth of the load).
  bool graph_validated = false;
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

}  // namespace prism::engine

#endif  // PRISM_DAEMON_ENGINE_WORLD_H_
