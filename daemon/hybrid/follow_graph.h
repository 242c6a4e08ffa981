// What prismd --follow keeps of its --graph: the world and the cluster.
//
// In follow mode prismd plays the virtual ranks of a program it has no graph
// for: the bootstrap and the store follow the communicators the real ranks
// make (daemon/bootstrap/split_source.h, daemon/rendezvous/group_source.h)
// and every operation a real rank issues with virtual peers gets an on-time
// schedule (HybridScheduler, unmatched ops are no divergence). The graph
// given only says where every rank sits (nodes, GPUs), the cluster (the
// links the on-time schedules stream at) and, as its first communicator, the
// world: any graph of the job's world size will do (`prism-graphgen
// collective --ranks N ...`, or a job file's graph). Pure function.
#ifndef PRISM_DAEMON_HYBRID_FOLLOW_GRAPH_H_
#define PRISM_DAEMON_HYBRID_FOLLOW_GRAPH_H_

#include "absl/status/statusor.h"
#include "proto/graph.pb.h"

namespace prism::daemon {

// `graph` reduced to its job, cluster, ranks and world communicator, with one
// program of one empty compute op that every rank runs (the engine has
// nothing to replay for the real ranks to wait on). InvalidArgument when the
// graph's first communicator is not the whole world.
absl::StatusOr<graph::Graph> FollowGraph(const graph::Graph& graph);

}  // namespace prism::daemon

#endif  // PRISM_DAEMON_HYBRID_FOLLOW_GRAPH_H_
