// Fidelity experiments (bench/fidelity/): graphs of a synthetic LLM-like
// training step or of collective sweeps, from one spec file that the PyTorch
// driver runs too (it executes the graph's program of its rank, so the
// ground truth, the hybrid run and prismd's replay all run the same ops).
//
// Spec (YAML; bench/fidelity/README.md "Spec format" has the full reference):
//   name: step-tp2-pp2-dp2
//   kind: step                      # or sweep
//   algorithm: ring                 # or tree: the all-reduces'; or pat: the all-gathers' and
//                                   # reduce-scatters' (NCCL_ALGO)
//   link: {gbps: 10, latency_us: 10}
//   iterations: 30                  # measured
//   warmup: 5
//   layout: {tp: 2, pp: 2, dp: 2}   # step: rank order tp fastest, then dp, then pp; dp >= 2,
//                                   # tp, pp >= 1 (tp 1: no TP groups and no TP all-reduces;
//                                   # pp 1: no PP groups and no sends; both 1: DP is the world)
//   step: {microbatches: 4, layers: 2, fwd_us: 2000, bwd_us: 4000, optimizer_us: 1000,
//          tp_bytes: 4M, pp_bytes: 8M, dp_bytes: 16M}
//   straggler: {rank: 3, compute_scale: 1.1}   # step, optional: that rank's compute
//                                              # takes 1.1x as long, every iteration
//   world: 8                        # sweep
//   sweep: {ops: [allreduce, allgather, reducescatter, sendrecv], sizes: [1M, 16M, 64M]}
//
// Step program (one per pipeline stage; streams 0 = compute, TP, PP and
// 1 = DP): at iteration start an all-gather of every layer's parameters on
// the DP stream, each first forward waiting for its layer; Megatron's 1F1B
// (warm-up forwards, steady forward + send-forward/recv-backward and
// backward + send-backward/recv-forward pairs, cool-down backwards), every
// layer's forward and backward a compute op followed by a TP all-reduce;
// during the last backward a reduce-scatter per layer on the DP stream; an
// optimizer step waiting for them. A straggler gets its own copy of its
// stage's program with every compute duration scaled (the ground truth's
// driver runs it, and prismd plays it when that rank is virtual). Groups (in creation order): world, the
// TP groups, the PP groups, the DP groups, each a split of world with
// PyTorch's color (tp and pp 1: the DP collectives go on the world). Sweep program: every (op, size) pair in spec order,
// warmup + iterations times back to back, on the world communicator.
// Pure functions; thread-safe.
#ifndef PRISM_GRAPHGEN_FIDELITY_GRAPH_H_
#define PRISM_GRAPHGEN_FIDELITY_GRAPH_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "proto/graph.pb.h"

namespace prism::graphgen {

struct FidelitySpec {
  std::string name;
  std::string kind;                 // "step" or "sweep"
  double link_gbps = 10;
  double link_latency_us = 10;
  uint32_t iterations = 20;
  uint32_t warmup = 5;
  // NCCL's algorithm ("ring"; "tree": the all-reduces'; "pat": the
  // all-gathers' and reduce-scatters'; run the ranks with the matching
  // NCCL_ALGO). Other collectives are ring.
  std::string algorithm = "ring";
  // step
  uint32_t tp = 1, pp = 1, dp = 1;
  uint32_t microbatches = 4, layers = 2;
  uint64_t fwd_us = 1000, bwd_us = 2000, optimizer_us = 1000;
  uint64_t tp_bytes = 0, pp_bytes = 0, dp_bytes = 0;
  // A slower rank (-1: none): its compute durations times straggler_scale.
  int64_t straggler_rank = -1;
  double straggler_scale = 1.0;
  // sweep
  uint32_t world = 0;
  std::vector<std::string> ops;
  std::vector<uint64_t> sizes;

  uint32_t ranks() const { return kind == "step" ? tp * pp * dp : world; }
};

// Errors name the key path ("step.tp_bytes: ...").
absl::StatusOr<FidelitySpec> ParseFidelitySpec(const std::string& yaml_text, const std::string& origin);
absl::StatusOr<FidelitySpec> ParseFidelitySpecFile(const std::string& path);

absl::StatusOr<prism::graph::Graph> GenerateFidelityGraph(const FidelitySpec& spec);

}  // namespace prism::graphgen

#endif  // PRISM_GRAPHGEN_FIDELITY_GRAPH_H_
