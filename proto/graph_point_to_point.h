// The send/recv size check (internal to proto/; graph_validate.h's
// ValidateGraph runs it): the k-th send from a rank to a peer on a
// communicator meets the peer's k-th receive from that rank (the engine's
// matching), and both have one size. Pure function; thread-safe.
#ifndef PRISM_PROTO_GRAPH_POINT_TO_POINT_H_
#define PRISM_PROTO_GRAPH_POINT_TO_POINT_H_

#include "absl/status/status.h"
#include "proto/graph.pb.h"
#include "proto/graph_topology.h"

namespace prism::graph::check {

// InvalidArgument naming both ops and ranks for the first mismatch (ranks
// in order). Cost: every rank's targets resolved once, then one comparison
// per distinct (programs, send targets, receive targets). Contract: the
// graph passed the membership checks (graph_membership.h).
absl::Status ValidatePointToPoint(const Graph& g, const Topology& topology);

}  // namespace prism::graph::check

#endif  // PRISM_PROTO_GRAPH_POINT_TO_POINT_H_
