// Assembles the full execution graph of a Megatron job: cluster, layout,
// communicators in Megatron's creation order, one program per pipeline
// stage, and every rank's placement and comm slots.
//
// Communicator creation: communicator 0 is the world (kind WORLD, init).
// Every Megatron process group is recorded as an ncclCommSplit of the world
// (what PyTorch does for new_group when the default group was created with
// device_id): parent 0, color = PyTorch's color of the group's sorted ranks,
// key 0 (members ascend, as PyTorch sorts new_group's ranks).
// Program slot 0 is "world"; then one slot per Megatron group kind the
// stage's ranks belong to, in creation order of the kinds.
// Pure function; thread-safe.
#ifndef PRISM_GRAPHGEN_JOB_GRAPH_H_
#define PRISM_GRAPHGEN_JOB_GRAPH_H_

#include "absl/status/statusor.h"
#include "graphgen/job_spec.h"
#include "proto/graph.pb.h"

namespace prism::graphgen {

// How the graph holds its ranks, communicators and process groups:
// records (Graph.ranks, ...), format 2's tables (Graph.rank_table, ...;
// placement by rule, node = rank / gpus_per_node) or format 3's rules
// (Graph.rules: one family per group kind, one block per pipeline stage).
// The same graph every way: ExpandRules of the rules gives the tables,
// ExpandTables of the tables the records.
enum class JobGraphForm { kRecords, kTables, kRules };

// Contract: `spec` passed ValidateJobSpec (ParseJobSpec does that).
absl::StatusOr<prism::graph::Graph> GenerateJobGraph(const JobSpec& spec, JobGraphForm form = JobGraphForm::kRecords);

// Sets g.cluster from the job file's cluster keys for `world` ranks (nodes =
// world / gpus_per_node, rounded up). Contract: `c` passed the job checks.
void FillCluster(const ClusterSpec& c, uint64_t world, prism::graph::Graph& g);

}  // namespace prism::graphgen

#endif  // PRISM_GRAPHGEN_JOB_GRAPH_H_
