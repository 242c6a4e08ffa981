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

  bool IsReal(uint32_t global_rank) const;
};

// Plan for a graph. Every split-created communicator is taken to be its own
// ncclCommSplit call on its parent (PyTorch new_group: non-members pass
// NCCL_SPLIT_NOCOLOR). InvalidArgument on inconsistent input (unknown real
// rank, parent created later, member out of range).
absl::StatusOr<BootstrapPlan> PlanFromGraph(const prism::graph::Graph& graph,
                                            const std::vector<uint32_t>& real_ranks);

// A world communicator of `world_size` ranks, `gpus_per_node` per node, plus
// optional split children (built with AddSplit).
BootstrapPlan WorldPlan(uint32_t world_size, uint32_t gpus_per_node,
                        std::vector<uint32_t> real_ranks);
// Appends a child of `parent` with the given members (in child-rank order).
uint32_t AddSplit(BootstrapPlan& plan, uint32_t parent, std::vector<uint32_t> members,
                  int32_t color, int32_t key0, std::string name);

absl::Status ValidatePlan(const BootstrapPlan& plan);

}  // namespace prism::bootstrap

#endif  // PRISM_DAEMON_BOOTSTRAP_BOOTSTRAP_PLAN_H_
