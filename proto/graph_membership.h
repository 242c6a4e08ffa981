// Who belongs where: the checks of a graph's communicators, process groups
// and ranks' comm slots (internal to proto/; graph_validate.h's ValidateGraph
// runs them). Each works on records or tables alike through a Topology that
// passed Topology::Of, and returns the first problem found (InvalidArgument,
// or OutOfRange for a limit of common/limits.h). Pure functions; thread-safe.
#ifndef PRISM_PROTO_GRAPH_MEMBERSHIP_H_
#define PRISM_PROTO_GRAPH_MEMBERSHIP_H_

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "proto/graph.pb.h"
#include "proto/graph_topology.h"

namespace prism::graph::check {

// Communicator ids equal indices, kinds are known, members are distinct
// ranks of the world (unless `members_proven`: graph_validate.h's
// ValidateOptions), split parents come earlier.
absl::Status ValidateCommunicators(const Graph& g, const Topology& t, bool members_proven = false);

// Process groups, when present: entry 0 is the world communicator, the NCCL
// entries name communicators 0, 1, 2, ... in order, Gloo entries list ranks
// of the world, ascending.
// (The Gloo member checks are skipped when `members_proven`.)
absl::Status ValidateProcessGroups(const Graph& g, const Topology& t, bool members_proven = false);

// Rank records (ids, programs, placement, slot counts) and slots naming
// existing communicators. Contract: programs passed their own checks.
absl::Status ValidateRanks(const Graph& g, const Topology& t);

// What prismd allocates per rank is within limits::kMaxStateEntries.
absl::Status ValidateRankState(const Graph& g, const Topology& t);

// Every slot's communicator contains its rank; peers and roots are below
// the smallest communicator size a slot maps to. Cost: linear in the
// memberships. Contract: ValidateCommunicators and ValidateRanks passed.
absl::Status ValidateMembership(const Graph& g, const Topology& t);

// The parts of the two checks above that need no rank (graph_rules.h's
// rule checks use them too): send/recv ops per program; OutOfRange when
// `entries` passes limits::kMaxStateEntries; every op's peer or root below
// min_slot_size[program][slot] (UINT32_MAX: no rank maps the slot).
std::vector<uint64_t> P2POpsPerProgram(const Graph& g);
absl::Status ValidateStateEntries(uint64_t entries);
absl::Status ValidatePeersWithin(const Graph& g, const std::vector<std::vector<uint32_t>>& min_slot_size);

}  // namespace prism::graph::check

#endif  // PRISM_PROTO_GRAPH_MEMBERSHIP_H_
