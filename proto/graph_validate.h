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
// A graph with rules (format 3) has them checked (graph_rules.h's
// CheckRules) and the rest checked on a copy with the rules expanded.
absl::Status ValidateGraph(const Graph& graph);

// For a graph with rules, what can be checked from the rules, the cluster and
// the programs alone, in time that follows the families, blocks and ops, not
// the ranks: everything ValidateGraph checks but the send/recv sizes of each
// rank pair, which need every rank's peers (the readers of graph_file.h,
// which run ValidateGraph, check those). prism-graphgen runs it before it
// writes rules. A graph without rules gets ValidateGraph.
absl::Status ValidateGraphRules(const Graph& graph);

struct ValidateOptions {
  // The graph's tables were built by ExpandRules from rules that passed
  // CheckRules and CheckRuleGroups (graph_rules.h): communicators and Gloo
  // groups hold distinct ranks of the world (ascending), every slot names an
  // existing communicator that holds its rank, and the state entries, peers
  // and roots were checked on the rules, so those per-rank and per-member
  // checks are skipped (the rest is checked as above: the send/recv pairs
  // rank by rank).
  bool membership_proven = false;
};
absl::Status ValidateGraph(const Graph& graph, ValidateOptions options);

}  // namespace prism::graph

#endif  // PRISM_PROTO_GRAPH_VALIDATE_H_
