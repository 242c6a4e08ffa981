// What the bootstrap emulation must play: which global ranks are real, where
// every rank sits (node, local GPU) and the communicators in creation order.
// Built from the execution graph (proto/graph.proto) or directly in tests.
// Plain values; no threads.
#ifndef PRISM_DAEMON_BOOTSTRAP_BOOTSTRAP_PLAN_H_
#define PRISM_DAEMON_BOOTSTRAP_BOOTSTRAP_PLAN_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace prism::graph {
class Graph;
}

namespace prism::bootstrap {

struct RankPlacement {
  uint32_t node = 0;
  uint32_t local_gpu = 0;
};

// One ncclCommSplit call on a parent creates every communicator listed here.
struct PlanComm {
  uint32_t id = 0;
  std::string name;
  std::vector<uint32_t> members;   // global ranks, communicator-rank order
  std::optional<uint32_t> parent;  // split parent's id; nullopt = init
  int32_t color = 0;
  // Key passed by members[i] is key0 + i (PyTorch passes the rank in the new
  // group); NCCL orders a child by key then parent rank.
  int32_t key0 = 0;
  // Made by the same ncclCommSplit call as the plan's previous child of this
  // parent (PyTorch's split_group: one call makes every group of split_ranks).
  bool same_call = false;
};

// One ncclCommSplit call on a parent: every parent rank passes the color
// and key of the child that holds it, NCCL_SPLIT_NOCOLOR when none does.
// One child for PyTorch's new_group (its non-members pass NOCOLOR), several
// for split_group, none where every rank passes NOCOLOR (see
// DeriveSplitCalls: a Gloo new_group on an eagerly started default group).
struct PlanSplitCall {
  uint32_t parent = 0;
  std::vector<uint32_t> children;  // plan comm ids, disjoint members
};

// One PyTorch process group of the program (Graph.process_groups): an NCCL
// communicator of the plan, or a Gloo group, which has no communicator.
struct PlanProcessGroup {
  bool gloo = false;
  uint32_t comm = 0;                // !gloo: the communicator's id
  std::vector<uint32_t> members;    // gloo: global ranks, ascending
  std::string name;                 // gloo: e.g. "dp_gloo[3]"
  std::string desc;                 // the framework's group_desc
};

struct BootstrapPlan {
  std::vector<RankPlacement> ranks;     // index = global rank
  std::vector<uint32_t> real_ranks;     // global ranks played by real processes
  std::vector<PlanComm> comms;          // creation order; comms[i].id == i
  // PyTorch's group k is process_groups[k] (0 = the default group); empty:
  // group k is comms[k] (graphs without Gloo groups, tests).
  std::vector<PlanProcessGroup> process_groups;
  // Every parent's ncclCommSplit calls, in call order per parent
  // (DeriveSplitCalls; AddSplit appends one).
  std::vector<PlanSplitCall> split_calls;

  bool IsReal(uint32_t global_rank) const;
};

// Plan for a graph, its split calls from DeriveSplitCalls. InvalidArgument
// on inconsistent input (unknown real rank, parent created later, member out
// of range).
absl::StatusOr<BootstrapPlan> PlanFromGraph(const prism::graph::Graph& graph,
                                            const std::vector<uint32_t>& real_ranks);

// A world communicator of `world_size` ranks, `gpus_per_node` per node, plus
// optional split children (built with AddSplit).
BootstrapPlan WorldPlan(uint32_t world_size, uint32_t gpus_per_node,
                        std::vector<uint32_t> real_ranks);
// Appends a child of `parent` with the given members (in child-rank order)
// and a split call that makes it alone.
uint32_t AddSplit(BootstrapPlan& plan, uint32_t parent, std::vector<uint32_t> members,
                  int32_t color, int32_t key0, std::string name);

// Rebuilds plan.split_calls from plan.comms and plan.process_groups, as
// PyTorch 2.11 makes its calls with an eagerly started default group
// (init_process_group with device_id):
//  * Children of the default group's communicator (process group 0) that
//    the process-group list names: each rank calls ncclCommSplit on it once
//    per later process group, in the list's order: for an NCCL group with
//    its color if a member, NOCOLOR if not; for a Gloo group with NOCOLOR if
//    not a member and not at all if a member (c10d's non-member path splits
//    whatever the group's backend; the members build Gloo only). A rank's
//    k-th call meets every other rank's k-th: a group's members must all
//    reach it at the same position, and a position no group's members reach
//    is a call where every rank passes NOCOLOR. The children of one
//    split_group call (same_call) count as one call.
//  * Every other split child (and every child when the list is empty): its
//    own call on its parent in plan order, same_call joining the call before.
// Returns what does not fit PyTorch's order (members of a group at different
// positions, ranks making different numbers of calls: such a program hangs
// in NCCL without Prism too), empty when all fits. Pure.
std::string DeriveSplitCalls(BootstrapPlan& plan);

absl::Status ValidatePlan(const BootstrapPlan& plan);

}  // namespace prism::bootstrap

#endif  // PRISM_DAEMON_BOOTSTRAP_BOOTSTRAP_PLAN_H_
