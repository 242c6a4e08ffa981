// Equivalence classes of symmetric ranks (see docs/network-model.md,
// "Equivalence classes", for the symmetry argument).
//
// ReduceWorld partitions the ranks of `full` (one actor per rank) by colour
// refinement and, when every reduction check passes, returns a world with one
// actor per class whose replay gives every rank exactly the timeline of the
// full replay. When a check fails it returns `full` unchanged with
// `reduction_note` naming the reason. Pure function; no shared state.
#ifndef PRISM_DAEMON_ENGINE_EQUIVALENCE_H_
#define PRISM_DAEMON_ENGINE_EQUIVALENCE_H_

#include <cstdint>
#include <vector>

#include "daemon/engine/engine_world.h"
#include "proto/graph.pb.h"

namespace prism::engine {

// Colour refinement: ranks get the same colour only if they run the same
// program, are both virtual (real ranks are singletons), and for every comm
// slot name communicators of the same shape, member-colour set and slot
// aliasing, and reach P2P peers of the same colours and node locality.
// Returns the stable colouring (colours dense, numbered by first rank).
std::vector<uint32_t> RefineColours(const graph::Graph& graph, const EngineWorld& full);

EngineWorld ReduceWorld(const graph::Graph& graph, EngineWorld full);

}  // namespace prism::engine

#endif  // PRISM_DAEMON_ENGINE_EQUIVALENCE_H_
