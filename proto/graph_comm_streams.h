// Whether a program leaves the order of one communicator's operations open
// between streams. NCCL runs a communicator's operations one after the
// other, in the order the rank issued them; prismd's engine pairs a rank's
// n-th call on a communicator with its peers' n-th, and calls a real rank's
// operation once the rank reported it and the operation's stream is free (a
// real rank's dependencies are not waited for: its host enqueues ahead of
// its GPU). So when an operation follows, in program order, one of the same
// communicator on another stream, the engine may call the two in another
// order for a real rank than for its virtual peers, pair the real rank's
// operation with a different one of theirs, and a hybrid run stalls
// (TorchTitan FSDP2+TP at 1024, GPU host, 2026-12-02: the loss all-reduce on
// stream 0 and the FSDP reduce-scatters on stream 1 of one communicator).
// Pure functions; thread-safe.
#ifndef PRISM_PROTO_GRAPH_COMM_STREAMS_H_
#define PRISM_PROTO_GRAPH_COMM_STREAMS_H_

#include <cstdint>
#include <optional>
#include <string>

#include "proto/graph.pb.h"

namespace prism::graph {

// The first operation of `program` (the graph's program `index`) that
// follows, in program order, an operation on the same communicator slot on
// another stream, described ("program 0 (role-0) op 197 (ALLREDUCE, stream
// 0) follows op 195 (REDUCESCATTER, stream 1) on comm slot 145 ..."); nullopt
// when every communicator slot's operations are on one stream.
std::optional<std::string> CommunicatorStreamCrossing(const Program& program, uint32_t index);

// The same over every program of `graph`: the first crossing found.
std::optional<std::string> CommunicatorStreamCrossing(const Graph& graph);

}  // namespace prism::graph

#endif  // PRISM_PROTO_GRAPH_COMM_STREAMS_H_
