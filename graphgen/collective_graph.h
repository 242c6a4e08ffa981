// nccl-tests-like graphs: every rank runs one collective (or a ring of
// send/recv) `iterations` times on the world communicator
// (module: collective generator).
//
// Shape: one program shared by all ranks, one slot "world" naming
// communicator 0 (kind WORLD, init). The program holds ONE iteration (the op
// once); job.attributes["iterations"] records how many times the simulator
// repeats the program (prismd's engine reads it as its default). `bytes` follows NCCL's full-buffer
// convention (graph.proto): allreduce/broadcast = the buffer, allgather = the
// output, reducescatter = the input, alltoall = the whole send buffer,
// sendrecv = what each rank sends (to rank+1; it receives from rank-1, inside
// one NCCL group).
// Pure functions; thread-safe.
#ifndef PRISM_GRAPHGEN_COLLECTIVE_GRAPH_H_
#define PRISM_GRAPHGEN_COLLECTIVE_GRAPH_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "proto/graph.pb.h"

namespace prism::graphgen {

struct CollectiveJob {
  std::string op = "allreduce";     // allreduce|allgather|reducescatter|alltoall|broadcast|sendrecv
  uint64_t bytes = 0;
  uint32_t ranks = 0;
  uint32_t gpus_per_node = 1;
  uint64_t nic_gbps = 400;
  double nic_latency_us = 5.0;
  uint32_t nics_per_node = 1;
  uint64_t nvlink_gbps = 3600;
  double nvlink_latency_us = 1.0;
  std::string algo;                 // "", "ring", "tree" or "pat"
  uint32_t iterations = 20;
  std::string name;                 // default "<op>-<ranks>"
  // When > 1: after the world communicator, add the subgroups a program
  // creates with new_group, as splits of the world (color = group index,
  // key = global rank): first the TP-like groups of `subgroup_size`
  // consecutive ranks, then the DP-like groups of ranks with the same index
  // inside their TP-like group. For control-plane tests (prismd's bootstrap
  // emulation); the ops stay on the world communicator.
  uint32_t subgroup_size = 0;
  // Limit on how many groups of each kind are added (0 = all): a rank-0
  // test need not create every group (the first TP-like and DP-like groups
  // hold rank 0).
  uint32_t max_subgroups = 0;
};

// Errors name the command-line flag ("--bytes: ..."). Figures are range
// checked against common/limits.h before any conversion (bandwidths 1 to
// 10^6 Gbit/s, latencies 0 to 10^6 us, ranks and iterations prismd's limits).
absl::StatusOr<prism::graph::Graph> GenerateCollectiveGraph(const CollectiveJob& job);

// "1G", "64M", "512K", "4096" (K/M/G = KiB/MiB/GiB; optional trailing B/iB).
absl::StatusOr<uint64_t> ParseByteSize(const std::string& text);

}  // namespace prism::graphgen

#endif  // PRISM_GRAPHGEN_COLLECTIVE_GRAPH_H_
