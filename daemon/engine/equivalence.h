// Equivalence classes of symmetric ranks (see docs/network-model.md,
// "Equivalence classes", for the symmetry argument).
//
// ReduceWorld partitions the ranks of `full` (rank_world.h: the world one
// rank at a time, flat) by colour refinement and, when every reduction check
// passes, returns a world with one actor per class whose replay gives every
// rank exactly the timeline of the full replay. When a check fails it
// returns the world with every rank its own actor (EveryRankWorld) with
// `reduction_note` naming the reason. No shared state; takes the programs
// out of `full`.
#ifndef PRISM_DAEMON_ENGINE_EQUIVALENCE_H_
#define PRISM_DAEMON_ENGINE_EQUIVALENCE_H_

#include <cstdint>
#include <vector>

#include "daemon/engine/engine_world.h"
#include "daemon/engine/rank_world.h"

namespace prism::engine {

// Colour refinement: ranks get the same colour only if they run the same
// program, are both virtual (real ranks are singletons), and for every comm
// slot name communicators of the same shape, member-colour set and slot
// aliasing, and reach P2P peers of the same colours and node locality.
// Returns the stable colouring (colours dense, numbered by first rank).
std::vector<uint32_t> RefineColours(const RankWorld& full);

EngineWorld ReduceWorld(RankWorld& full);

}  // namespace prism::engine

#endif  // PRISM_DAEMON_ENGINE_EQUIVALENCE_H_
