// NCCL's double binary tree all-reduce, played chunk by chunk, to time what
// one rank of it receives (docs/timing.md, "Tree all-reduce").
//
// NCCL (src/graph/trees.cc, src/graph/connect.cc; read, not copied) builds
// two binary trees over the nodes: tree 0 where node 0 is the root with one
// child, and tree 1, the mirror of tree 0 (n - 1 - r) for an even node count
// or tree 0 shifted by one for an odd one, so that a node that is interior in
// one tree is a leaf in the other. The first half of an operation's channels
// run tree 0, the second half tree 1, each on 1/channels of the data in
// chunks (Simple: one 512 KiB step each). Per chunk, a node sends up to its
// parent once it has the chunk from all its children (leaves at once), the
// root turns it around, and each node forwards what comes down to its
// children. Each node has one NIC: its sends leave one after another, in the
// order they became ready, at the link's rate, and arrive one latency later.
// Each connection (a node's link to its parent or to one child, per channel)
// holds at most NCCL_STEPS chunks: its GPU fills step k only once the send of
// step k - NCCL_STEPS has left, so a leaf does not queue all its chunks ahead
// of what it forwards in the other tree; its connections share the NIC.
//
// With one rank per node (how the fidelity bench runs: each rank its own
// NCCL_HOSTID), the node is the rank. prismd's scheduler plays it for a real
// rank's tree all-reduce (its STREAM schedule), and the engine's network
// model for a tree all-reduce of one rank per node (NetworkModel).
// Thread-compatible pure functions.
#ifndef PRISM_DAEMON_ENGINE_TREE_PIPELINE_H_
#define PRISM_DAEMON_ENGINE_TREE_PIPELINE_H_

#include <cstdint>
#include <optional>
#include <vector>

#include "common/units.h"

namespace prism::engine {

// NCCL's chunk for a Simple tree: one step of the default buffer
// (NCCL_BUFFSIZE 4 MiB / NCCL_STEPS 8). prismd cannot see a rank's
// NCCL_BUFFSIZE; a rank that changes it gets this chunk all the same.
inline constexpr Bytes kNcclSimpleStepBytes{512 * 1024};
// NCCL_STEPS: the slots of one connection's buffer, its sends in flight at most.
inline constexpr int kNcclSteps = 8;

struct TreeNode {
  int parent = -1;              // -1: the root
  std::vector<int> children;    // 0, 1 or 2
};

// Node `rank`'s place in NCCL's tree 0 and tree 1 over `nodes` nodes.
TreeNode BinaryTreeNode(int nodes, int rank);
TreeNode DoubleTreeSecondNode(int nodes, int rank);

struct TreeAllReduce {
  int nodes = 0;
  int channels = 1;             // NCCL's channels for the operation (first half: tree 0)
  Bytes bytes;                  // the operation's buffer
  Bytes chunk;                  // NCCL's chunk (Simple: NCCL_BUFFSIZE / NCCL_STEPS)
  BitsPerSecond link;           // each node's NIC
  Nanoseconds latency;          // one hop
  int send_window = kNcclSteps; // chunks one connection may have queued or on the wire (0: unbounded)
};

// What node `rank` receives in the operation, in time from its start (every
// node starting together).
struct TreeArrivals {
  Nanoseconds first;            // the first message's arrival
  Nanoseconds last;             // the last message's arrival
  Bytes first_bytes;            // that first message's size
  Bytes received;               // all it receives
  Nanoseconds end;              // its operation ends: last arrival or last send
  Nanoseconds operation_end;    // the last arrival at any node: the whole operation's end
};

// How virtual senders stream an operation's messages to a real rank (a
// STREAM schedule, docs/timing.md "Timing a receive"): back to back at
// `rate` from the virtual side's ready time + `ready_offset`.
struct StreamShape {
  BitsPerSecond rate;
  Nanoseconds ready_offset;  // negative: the stream starts before that ready time
};

// The stream that reproduces `a` at the receiving rank, each message
// `latency` in flight: the first lands at a.first, the last at a.last.
// nullopt when `a` has a single arrival time (no rate to tell).
std::optional<StreamShape> StreamOf(const TreeArrivals& a, Nanoseconds latency);

// The largest play prismd's scheduler runs (it plays each size once per
// rank, under its lock, before the schedule can go out): about 20 ms on the
// build host (bench/tree_pipeline_bench); larger trees keep the half-link rule.
inline constexpr int64_t kMaxPlayedTreeTransfers = 250'000;

// Plays the operation; nullopt when it is too large to play (more than
// `max_messages` chunk transfers in all) or malformed (no link, no chunk,
// fewer than 2 nodes, rank outside).
std::optional<TreeArrivals> PlayTreeAllReduce(const TreeAllReduce& op, int rank, int64_t max_messages = 4'000'000);

}  // namespace prism::engine

#endif  // PRISM_DAEMON_ENGINE_TREE_PIPELINE_H_
