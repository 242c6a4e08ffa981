// Execution graphs built in C++ for the daemon's tests and benchmarks (until
// and besides prism-graphgen): collective micro-graphs and a Megatron-like
// TP x PP x DP 1F1B training iteration. Pure functions.
#ifndef PRISM_TEST_DAEMON_TEST_GRAPHS_H_
#define PRISM_TEST_DAEMON_TEST_GRAPHS_H_

#include <cstdint>

#include "proto/graph.pb.h"

namespace prism::testing {

struct ClusterSpec {
  uint32_t gpus_per_node = 8;
  uint32_t nics_per_node = 8;
  uint64_t nic_bps = 400'000'000'000ull;     // 400 Gb/s
  uint64_t nic_latency_ns = 5'000;
  uint64_t nvlink_bps = 3'600'000'000'000ull; // 450 GB/s
  uint64_t nvlink_latency_ns = 1'000;
};

// `ranks` ranks (ceil(ranks / gpus_per_node) nodes), one program, the world
// communicator, `count` collectives of `kind` with `bytes` each, separated by
// `compute_ns` of compute.
graph::Graph CollectiveGraph(uint32_t ranks, graph::CollectiveKind kind, uint64_t bytes,
                             graph::Algorithm algorithm = graph::ALGORITHM_DEFAULT, uint32_t count = 1,
                             uint64_t compute_ns = 0, const ClusterSpec& cluster = {});

// The end of a distributed-optimizer iteration (examples/train_gpt.py's):
// an all-reduce of `norm_bytes` over the world (the gradient norm),
// `compute_ns` of compute (the optimizer), then on stream 1 an all-gather of
// `gather_bytes` in the rank's data-parallel group: even ranks and odd
// ranks (`ranks` even, at least 4).
graph::Graph NormThenGatherGraph(uint32_t ranks, uint64_t norm_bytes, uint64_t compute_ns, uint64_t gather_bytes);

struct TrainingSpec {
  uint32_t tp = 8, pp = 16, dp = 64;
  uint32_t microbatches = 24;
  uint32_t layers_per_stage = 6;
  uint64_t activation_bytes = 50ull << 20;   // per TP allreduce and per PP send
  uint64_t grad_bytes = 2ull << 30;          // DP reduce-scatter input / all-gather output
  uint64_t layer_fwd_ns = 1'500'000;         // per half layer (attention or MLP)
  bool dp_on_second_stream = true;           // gradient collectives overlap on stream 1
  int64_t activation_memory = 256ll << 20;   // allocated per forward microbatch, freed by its backward
  ClusterSpec cluster;
};

// Rank order tp-dp-pp (tp fastest); one program per pipeline stage; comm
// slots ["tp", "pp", "dp"]; Megatron-style 1F1B with grouped send/recv pairs.
graph::Graph TrainingGraph(const TrainingSpec& spec);

// TP2 PP4 DP4 (32 ranks, 4 GPUs and 2 NICs per node), 6 microbatches, 2
// layers per stage: small enough to replay rank by rank with every timeline.
TrainingSpec SmallTrainingSpec();

}  // namespace prism::testing

#endif  // PRISM_TEST_DAEMON_TEST_GRAPHS_H_
