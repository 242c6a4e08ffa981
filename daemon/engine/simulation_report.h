// The result of a simulation, as text for people and JSON for tools.
// Per-rank figures are averages over the ranks (weighted by class sizes) and
// per iteration. Value type; thread-compatible.
#ifndef PRISM_DAEMON_ENGINE_SIMULATION_REPORT_H_
#define PRISM_DAEMON_ENGINE_SIMULATION_REPORT_H_

#include <cstdint>
#include <string>
#include <vector>

#include "common/units.h"
#include "daemon/engine/late_ranks.h"
#include "daemon/engine/replay_stats.h"
#include "daemon/engine/world.h"
#include "proto/graph.pb.h"

namespace prism::engine {

struct KindRow {
  std::string name;
  double time_s_per_rank = 0;   // per iteration
  double ops_per_rank = 0;      // per iteration
  double bytes_per_rank = 0;    // per iteration
};

// How many collective calls (per iteration, all ranks) ran which algorithm
// and protocol: NCCL's choice (network_model.h) or the graph's own
// (`forced`, protocol not chosen then).
struct AlgorithmRow {
  std::string kind;             // "allgather", ...
  std::string algorithm;        // "Ring", "Tree", "PAT", "Pairwise"
  std::string protocol;         // "LL", "LL128", "Simple"; "" when forced or not NCCL's choice
  bool forced = false;          // the graph named the algorithm
  uint64_t calls = 0;
};

struct MemoryRow {
  std::string program;
  uint64_t ranks = 0;
  uint64_t static_bytes = 0;
  int64_t peak_bytes = 0;       // static + running max of memory deltas, max over its ranks
  bool over_capacity = false;   // peak_bytes > the GPU's memory (the graph's cluster.gpu.memory_bytes)
};

// Throughput of a training graph. Model FLOPs are the sum of the graph's
// compute ops' `flops` over every rank (prism-graphgen: forward matmuls, the
// causal attention core, logits; backward twice forward; recomputation not
// counted), so MFU is model FLOPs / (iteration time * world * GPU peak).
// Absent (`known` false) when the graph has no ops with FLOPs, no batch or
// sequence length, or no GPU peak.
struct Throughput {
  bool known = false;
  uint64_t tokens_per_iteration = 0;     // global_batch * seq_len
  double model_flops_per_iteration = 0;  // all ranks
  double tokens_per_s = 0;
  double tflops_per_gpu = 0;             // model FLOPs per second per GPU, 1e12
  double peak_tflops_per_gpu = 0;
  double mfu = 0;                        // tflops_per_gpu / peak_tflops_per_gpu
};

struct SimulationReport {
  std::string graph_name;
  uint64_t world_size = 0;
  uint64_t iterations = 0;         // completed (all of them unless `stopped`)
  bool stopped = false;            // the replay was stopped early: a partial report
  uint64_t iterations_requested = 0;  // when stopped: the iterations asked for
  std::vector<Nanoseconds> iteration_times;
  Nanoseconds mean_iteration;
  // A hybrid run's report (MarkHybridRun): its iteration 0 holds the real
  // ranks' start-up (NCCL's set-up, the first calls), so the figure to read
  // is SteadyIteration(), and the throughput is computed from it.
  bool hybrid = false;
  // The mean of iterations 1.. (zero with fewer than two).
  Nanoseconds SteadyIteration() const;
  Nanoseconds emulated_end;
  uint64_t events = 0;
  double wall_s = 0;               // whole simulation: world setup + replay
  double engine_wall_s = 0;        // the event loop alone; events_per_second = events / engine_wall_s
  uint64_t actors = 0;
  uint64_t classes = 0;
  bool reduced = false;
  std::string reduction_note;
  double exposed_comm_s_mean = 0;   // per rank per iteration
  double exposed_comm_s_max = 0;
  // Of the exposed time, the part with only pipeline send/recv in flight:
  // the pipeline bubble (waiting for the neighbour stage) and the activation
  // transfers. exposed_comm_s_* minus this is the other communication.
  double pipeline_wait_s_mean = 0;
  double pipeline_wait_s_max = 0;
  Throughput throughput;
  uint64_t gpu_memory_bytes = 0;    // the graph's GPU memory; 0 = unknown
  double compute_s_per_rank = 0;
  std::vector<KindRow> by_comm;     // only kinds that occurred
  std::vector<KindRow> by_op;
  std::vector<MemoryRow> memory;    // empty when the graph models no memory
  Nanoseconds step_cost;            // NCCL's cost per ring step the model used
  std::string step_cost_source;     // where that figure comes from ("" when 0 and unexplained)
  Nanoseconds step_turnaround;      // NcclBehaviour::step_turnaround
  Nanoseconds collective_turnaround;  // NcclBehaviour::collective_turnaround
  std::string nccl_algo;            // NCCL_ALGO the model followed ("": NCCL's default)
  bool launch_in_order = false;     // NcclBehaviour::launch_in_order (launch_order.h)
  std::string launch_order_source;  // where that came from ("" when unexplained)
  std::string algorithm_choice;     // "NCCL 2.28.9's tuning" or "the model's formulas"
  std::vector<AlgorithmRow> algorithms;
  std::vector<LateRank> late;       // prismd --late: virtual ranks late in one iteration

  // What iteration `k` took beyond the median of the other iterations after
  // the first (the start-up); zero without two such iterations.
  Nanoseconds OverOtherIterations(uint64_t k) const;

  // One JSON object. include_wall = false leaves out wall_s, engine_wall_s
  // and events_per_second, the only fields that differ between identical runs.
  std::string ToJson(bool include_wall = true) const;
  std::string ToText() const;
};

SimulationReport BuildReport(const graph::Graph& graph, const EngineWorld& world, const ReplayStats& stats,
                             uint64_t iterations, double wall_s);

// Makes `report` a hybrid run's: `hybrid` set and the throughput from its
// SteadyIteration() (none without one: iteration 0 is no step); the text
// then heads with this run's time instead of a prediction.
void MarkHybridRun(const graph::Graph& graph, SimulationReport& report);

}  // namespace prism::engine

#endif  // PRISM_DAEMON_ENGINE_SIMULATION_REPORT_H_
