// Job description of a Megatron-style training job, parsed from YAML and
// validated (module: yaml job parsing + validation).
//
// Contract: ParseJobSpec* never throws. On success every field is set
// (defaults filled in, derived sizes computed) and every divisibility rule
// that the generator relies on holds. On failure the status message starts
// with the full key path (e.g. "parallel.tp: ...") and says what to do.
// Plain value types; thread-compatible.
#ifndef PRISM_GRAPHGEN_JOB_SPEC_H_
#define PRISM_GRAPHGEN_JOB_SPEC_H_

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace prism::graphgen {

struct ModelSpec {
  uint32_t layers = 0;
  uint64_t hidden = 0;
  uint64_t ffn_hidden = 0;          // default 4 * hidden
  uint32_t heads = 0;
  uint32_t kv_heads = 0;            // default heads (MHA)
  uint64_t seq_len = 0;
  uint64_t vocab = 0;
  uint32_t experts = 0;             // 0 = dense model
  uint32_t topk = 0;                // default 2 when experts > 0
  uint64_t moe_ffn_hidden = 0;      // default ffn_hidden
  bool gated_mlp = false;           // SwiGLU (3 matrices) instead of GeLU (2)
  bool tied_embeddings = true;      // output layer shares the word embedding
  bool learned_position_embedding = true;  // "learned" vs "rope"

  uint64_t head_dim() const { return hidden / heads; }
  bool moe() const { return experts > 0; }
};

enum class Schedule { kOneFOneB, kInterleavedOneFOneB, kGPipe };

// Activation recomputation, as Megatron offers it (docs/graphgen.md states
// the memory and time each costs): none; selective (Megatron-core's
// recompute_granularity selective with the modules core_attn and mlp: a
// layer keeps its attention activations and only its MLP's input; the MLP
// forward runs again before its backward); full (recompute_granularity full,
// method uniform, one layer per checkpoint: a layer keeps only its input and
// its whole forward, TP collectives included, runs again before its backward).
enum class Recompute { kNone, kSelective, kFull };

// Megatron-core releases whose initialize_model_parallel differ in the groups
// they create. kCoreV0_19: core_v0.19.0 and main at d98e8a64dd (2026-08-22),
// whose parallel_state.py is the same file ("newest"); they create the
// GTP_WEIGHT_REMAT groups. kCoreV0_18: core_v0.18.2, without them.
enum class MegatronVersion { kCoreV0_18, kCoreV0_19 };
std::string MegatronVersionName(MegatronVersion v);
// nullopt for a name the job file may not use.
std::optional<MegatronVersion> ParseMegatronVersion(const std::string& name);

struct ParallelSpec {
  uint32_t tp = 1, pp = 1, dp = 1, cp = 1, ep = 1, vpp = 1;
  uint32_t expert_tp = 0;           // default tp
  uint32_t micro_batch = 1;
  uint32_t global_batch = 0;        // default micro_batch * dp
  Schedule schedule = Schedule::kOneFOneB;
  bool sequence_parallel = false;
  bool distributed_optimizer = true;
  bool grads_fp32 = true;           // grad buffers / reductions in fp32 (Megatron with bf16)
  // Which process groups exist: every group Megatron-core creates (false), or
  // only those the programs use (true: parallel.process_groups: minimal, as a
  // hand-written PyTorch program creates them; the grad-norm all-reduce of the
  // distributed optimizer then runs on the world group).
  bool minimal_groups = false;
  // With minimal_groups: each kind's groups are made by one
  // torch.distributed.split_group call (parallel.process_groups: split_group,
  // as DeviceMesh makes them on an eagerly started default group).
  bool split_group_calls = false;
  // Which Megatron-core's group plan `process_groups: megatron` follows
  // (parallel.megatron_version) and whether it has Megatron's Gloo groups
  // (parallel.gloo_groups, Megatron's create_gloo_process_groups, default true).
  MegatronVersion megatron_version = MegatronVersion::kCoreV0_19;
  bool gloo_groups = true;
  // Data-parallel gradient buckets (parallel.grad_buckets): false = one per
  // layer, reduced right after the layer's last backward (`layer`, what
  // examples/train_gpt.py does); true = Megatron-core's
  // DistributedDataParallel (`megatron`): with overlap_grad_reduce false
  // (its default) one bucket per gradient buffer (dense, expert), reduced by
  // finish_grad_sync after the whole backward; with true, buckets of at
  // least bucket_size parameters (default max(40,000,000, 1,000,000 x the
  // data-parallel size)) on the first stage, one bucket on the others.
  bool megatron_buckets = false;
  bool overlap_grad_reduce = false;
  uint64_t bucket_size = 0;         // 0: Megatron's default
  // The optimizer's grad-norm all-reduce (parallel.clip_grad: Megatron's
  // optimizer with clip_grad > 0); false: none (a torch optimizer such as
  // Megatron's examples/run_simple_mcore_train_loop.py uses, or clip_grad 0).
  bool clip_grad = true;
  Recompute recompute = Recompute::kNone;
  // parallel.launch_order: program = each rank's NCCL kernels start in the
  // order it issued them, whatever their stream (one hardware queue, e.g. a
  // job run with CUDA_DEVICE_MAX_CONNECTIONS=1 where that holds its sends):
  // the graph's nccl_launch_order attribute (daemon/engine/launch_order.h);
  // streams (default, no attribute) = each stream on its own.
  bool launch_in_program_order = false;
  // Layers of the first and of the last pipeline stage (Megatron's
  // decoder_first/last_pipeline_num_layers); 0 = an even share. The other
  // stages split the rest evenly. Within a stage, layers are spread over its
  // vpp chunks as evenly as possible, the first stage's first chunk and the
  // last stage's last chunk taking the smaller share (they also hold the
  // embedding and the output layer).
  uint32_t first_stage_layers = 0;
  uint32_t last_stage_layers = 0;

  uint64_t world() const { return uint64_t{tp} * pp * dp * cp; }
  uint32_t microbatches() const { return static_cast<uint32_t>(global_batch / (uint64_t{micro_batch} * dp)); }
  // Data-parallel ranks of expert layers: world / (expert_tp * ep * pp).
  uint64_t expert_dp() const { return world() / (uint64_t{expert_tp} * ep * pp); }
};

struct LinkSpec {
  uint64_t gbps = 0;                // per link, gigabits per second
  uint64_t latency_ns = 0;
};

struct ClusterSpec {
  uint32_t gpus_per_node = 8;
  std::string gpu_name = "H100";
  uint64_t bf16_tflops = 989;       // dense bf16 peak
  uint64_t hbm_gbps = 3350;         // HBM bandwidth, gigaBYTES per second
  uint64_t memory_gib = 80;
  uint32_t nic_count = 8;
  LinkSpec nic{400, 5000};
  LinkSpec nvlink{3600, 1000};      // 450 GB/s per GPU
  // cluster.nccl_step_cost_us: NCCL's cost per ring step beyond the link's
  // latency, nanoseconds, per protocol ("SIMPLE", "LL", "LL128"), as the
  // graph's Cluster.nccl_step_costs carries it (docs/network-model.md, "NCCL's
  // step cost"). A number sets SIMPLE alone; empty: prismd's table decides.
  std::map<std::string, uint64_t> nccl_step_cost_ns;
};

// Measured compute: nanoseconds per layer type and direction, per microbatch.
struct MeasuredCompute {
  uint64_t fwd_ns = 0;
  uint64_t bwd_ns = 0;
};

struct ComputeSpec {
  double matmul_efficiency = 0.55;  // fraction of peak bf16 FLOP/s matmuls reach
  double memory_efficiency = 0.70;  // fraction of HBM bandwidth elementwise ops reach
  // Keys: attention, mlp, moe, embedding, output, optimizer (optimizer: fwd_ns only).
  std::map<std::string, MeasuredCompute> table;
};

struct JobSpec {
  std::string name;
  ModelSpec model;
  ParallelSpec parallel;
  ClusterSpec cluster;
  ComputeSpec compute;
};

// Parses YAML text. `origin` names the source in messages; `base_dir` resolves
// a relative `compute_table:` path.
absl::StatusOr<JobSpec> ParseJobSpec(const std::string& yaml_text, const std::string& origin = "<job>",
                                     const std::string& base_dir = ".");
// Reads and parses a job file.
absl::StatusOr<JobSpec> ParseJobSpecFile(const std::string& path);

// The `cluster:` mapping of a YAML file (a job file; other top-level keys are
// not read), checked as in a job file. Defaults for keys it leaves out.
absl::StatusOr<ClusterSpec> ParseClusterFile(const std::string& path);

// The divisibility and range rules (also run by ParseJobSpec). Exposed so
// tests and programmatic callers can check a hand-built spec.
absl::Status ValidateJobSpec(const JobSpec& spec);

const char* ScheduleName(Schedule s);
const char* RecomputeName(Recompute r);

// Layers of each virtual pipeline stage v = chunk * pp + stage (model order),
// for a spec that ValidateJobSpec accepts.
std::vector<uint32_t> ChunkLayers(const JobSpec& spec);
// Layers held by pipeline stage `stage` (all its chunks).
uint32_t StageLayers(const JobSpec& spec, uint32_t stage);

}  // namespace prism::graphgen

#endif  // PRISM_GRAPHGEN_JOB_SPEC_H_
