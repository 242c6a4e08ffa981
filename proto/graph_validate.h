// Validating an execution graph (graph.proto): the structure and the limits
// of common/limits.h, on records or format 2's tables alike. graph_file.h's
// readers run it on every graph they return; prism-graphgen before writing.
// Thread-safe (no shared state).
#ifndef PRISM_PROTO_GRAPH_VALIDATE_H_
#define PRISM_PROTO_GRAPH_VALIDATE_H_

#include "absl/status/status.h"
#include "proto/graph.pb.h"

namespace prism::graph {

// Structural checks, on records or tables alike (graph::Topology::Of's
// checks of the tables first): ids equal indices, every rank has a valid program and
// one comm slot per program slot, communicator members are distinct valid
// ranks and contain the ranks whose slots name them, split parents come
// earlier, ops reference valid slots/streams/earlier ops, peers and roots are
// in range, cluster sizes match the rank count, enum values (collective,
// algorithm, dtype, communicator kinds) are known, GroupStart/GroupEnd pair up
// on each stream (no nesting), and the k-th send from a rank to a peer on a
// communicator has the size of that peer's k-th receive from it; and the
// limits of common/limits.h hold (ranks, ops, streams, durations, sizes,
// memory, link figures, per-rank state). Returns the first problem found:
// InvalidArgument for a broken structure, OutOfRange (naming the limit) for a
// figure beyond a limit.
// Cost: linear in the graph (ranks x slots + membership + ops + distinct
// send/recv sequences).
absl::Status ValidateGraph(const Graph& graph);

}  // namespace prism::graph

#endif  // PRISM_PROTO_GRAPH_VALIDATE_H_
