#include "graphgen/job_spec.h"

#include <algorithm>
#include <filesystem>
#include <tuple>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "common/limits.h"
#include "common/status_macros.h"
#include "graphgen/input_file.h"
#include "graphgen/yaml_reader.h"

namespace prism::graphgen {
namespace {

// Job-level limits; graph-level ones are common/limits.h's (shared with prismd).
constexpr uint64_t kMaxWorld = 1ull << 20;
static_assert(kMaxWorld <= limits::kMaxRanks);
constexpr uint64_t kMaxModelDimension = 1ull << 24;
constexpr uint64_t kMaxOpsPerProgram = limits::kMaxOpsPerProgram;

absl::Status ParseModel(const YAML::Node& node, ModelSpec& m) {
  MapReader r(node, "model");
  PRISM_RETURN_IF_ERROR(r.CheckIsMap());
  if (!node.IsDefined() || node.IsNull()) return KeyError("model", "is required (layers, hidden, heads, ...)");
  for (const char* k : {"layers", "hidden", "heads", "seq_len", "vocab"})
    if (!r.Has(k)) return KeyError(r.PathOf(k), "is required");
  PRISM_RETURN_IF_ERROR(r.GetUint32("layers", m.layers));
  PRISM_RETURN_IF_ERROR(r.GetUint("hidden", m.hidden));
  PRISM_RETURN_IF_ERROR(r.GetUint("ffn_hidden", m.ffn_hidden));
  PRISM_RETURN_IF_ERROR(r.GetUint32("heads", m.heads));
  PRISM_RETURN_IF_ERROR(r.GetUint32("kv_heads", m.kv_heads));
  PRISM_RETURN_IF_ERROR(r.GetUint("seq_len", m.seq_len));
  PRISM_RETURN_IF_ERROR(r.GetUint("vocab", m.vocab));
  PRISM_RETURN_IF_ERROR(r.GetUint32("experts", m.experts, 0));
  PRISM_RETURN_IF_ERROR(r.GetUint32("topk", m.topk));
  PRISM_RETURN_IF_ERROR(r.GetUint("moe_ffn_hidden", m.moe_ffn_hidden));
  PRISM_RETURN_IF_ERROR(r.GetBool("gated_mlp", m.gated_mlp));
  PRISM_RETURN_IF_ERROR(r.GetBool("tied_embeddings", m.tied_embeddings));
  std::string pos = m.learned_position_embedding ? "learned" : "rope";
  PRISM_RETURN_IF_ERROR(r.GetString("position_embedding", pos));
  if (pos != "learned" && pos != "rope")
    return KeyError(r.PathOf("position_embedding"),
                    absl::StrCat("must be 'learned' or 'rope', got '", Excerpt(pos), "'"));
  m.learned_position_embedding = pos == "learned";
  PRISM_RETURN_IF_ERROR(r.Finish());
  if (m.ffn_hidden == 0) m.ffn_hidden = 4 * m.hidden;
  if (m.kv_heads == 0) m.kv_heads = m.heads;
  if (m.moe() && m.topk == 0) m.topk = 2;
  if (m.moe_ffn_hidden == 0) m.moe_ffn_hidden = m.ffn_hidden;
  return absl::OkStatus();
}

absl::Status ParseParallel(const YAML::Node& node, ParallelSpec& p, bool& dp_given, bool& schedule_given) {
  MapReader r(node, "parallel");
  PRISM_RETURN_IF_ERROR(r.CheckIsMap());
  dp_given = r.Has("dp");
  PRISM_RETURN_IF_ERROR(r.GetUint32("tp", p.tp));
  PRISM_RETURN_IF_ERROR(r.GetUint32("pp", p.pp));
  PRISM_RETURN_IF_ERROR(r.GetUint32("dp", p.dp));
  PRISM_RETURN_IF_ERROR(r.GetUint32("cp", p.cp));
  PRISM_RETURN_IF_ERROR(r.GetUint32("ep", p.ep));
  PRISM_RETURN_IF_ERROR(r.GetUint32("vpp", p.vpp));
  PRISM_RETURN_IF_ERROR(r.GetUint32("expert_tp", p.expert_tp));
  PRISM_RETURN_IF_ERROR(r.GetUint32("micro_batch", p.micro_batch));
  PRISM_RETURN_IF_ERROR(r.GetUint32("global_batch", p.global_batch));
  schedule_given = r.Has("schedule");
  std::string schedule = "1f1b";
  PRISM_RETURN_IF_ERROR(r.GetString("schedule", schedule));
  if (schedule == "1f1b") p.schedule = Schedule::kOneFOneB;
  else if (schedule == "interleaved-1f1b" || schedule == "interleaved") p.schedule = Schedule::kInterleavedOneFOneB;
  else if (schedule == "gpipe") p.schedule = Schedule::kGPipe;
  else return KeyError(r.PathOf("schedule"), absl::StrCat("must be 1f1b, interleaved-1f1b or gpipe, got '",
                                                          Excerpt(schedule), "'"));
  PRISM_RETURN_IF_ERROR(r.GetBool("sequence_parallel", p.sequence_parallel));
  PRISM_RETURN_IF_ERROR(r.GetBool("distributed_optimizer", p.distributed_optimizer));
  std::string grad_dtype = p.grads_fp32 ? "fp32" : "bf16";
  PRISM_RETURN_IF_ERROR(r.GetString("grad_dtype", grad_dtype));
  if (grad_dtype != "fp32" && grad_dtype != "bf16")
    return KeyError(r.PathOf("grad_dtype"), absl::StrCat("must be fp32 or bf16, got '", Excerpt(grad_dtype), "'"));
  p.grads_fp32 = grad_dtype == "fp32";
  std::string groups = p.split_group_calls ? "split_group" : p.minimal_groups ? "minimal" : "megatron";
  PRISM_RETURN_IF_ERROR(r.GetString("process_groups", groups));
  if (groups != "megatron" && groups != "minimal" && groups != "split_group")
    return KeyError(r.PathOf("process_groups"),
                    absl::StrCat("must be megatron, minimal or split_group, got '", groups, "'"));
  p.minimal_groups = groups != "megatron";
  p.split_group_calls = groups == "split_group";
  std::string version = MegatronVersionName(p.megatron_version);
  PRISM_RETURN_IF_ERROR(r.GetString("megatron_version", version));
  auto parsed_version = ParseMegatronVersion(version);
  if (!parsed_version)
    return KeyError(r.PathOf("megatron_version"),
                    absl::StrCat("must be newest, d98e8a64dd, core_v0.19.0 or core_v0.18.2, got '", Excerpt(version),
                                 "'"));
  p.megatron_version = *parsed_version;
  PRISM_RETURN_IF_ERROR(r.GetBool("gloo_groups", p.gloo_groups));
  std::string buckets = p.megatron_buckets ? "megatron" : "layer";
  PRISM_RETURN_IF_ERROR(r.GetString("grad_buckets", buckets));
  if (buckets != "layer" && buckets != "megatron")
    return KeyError(r.PathOf("grad_buckets"), absl::StrCat("must be layer or megatron, got '", Excerpt(buckets), "'"));
  p.megatron_buckets = buckets == "megatron";
  PRISM_RETURN_IF_ERROR(r.GetBool("clip_grad", p.clip_grad));
  PRISM_RETURN_IF_ERROR(r.GetBool("overlap_grad_reduce", p.overlap_grad_reduce));
  PRISM_RETURN_IF_ERROR(r.GetUint("bucket_size", p.bucket_size));
  if (!p.megatron_buckets && (r.Has("overlap_grad_reduce") || r.Has("bucket_size")))
    return KeyError(r.PathOf(r.Has("bucket_size") ? "bucket_size" : "overlap_grad_reduce"),
                    "applies to Megatron's buckets only: add parallel.grad_buckets: megatron");
  std::string recompute = RecomputeName(p.recompute);
  PRISM_RETURN_IF_ERROR(r.GetString("recompute", recompute));
  if (recompute == "none") p.recompute = Recompute::kNone;
  else if (recompute == "selective") p.recompute = Recompute::kSelective;
  else if (recompute == "full") p.recompute = Recompute::kFull;
  else return KeyError(r.PathOf("recompute"), absl::StrCat("must be none, selective or full, got '",
                                                           Excerpt(recompute), "'"));
  std::string launch = p.launch_in_program_order ? "program" : "streams";
  PRISM_RETURN_IF_ERROR(r.GetString("launch_order", launch));
  if (launch != "streams" && launch != "program")
    return KeyError(r.PathOf("launch_order"), absl::StrCat("must be streams or program, got '", Excerpt(launch), "'"));
  p.launch_in_program_order = launch == "program";
  PRISM_RETURN_IF_ERROR(r.GetUint32("first_stage_layers", p.first_stage_layers));
  PRISM_RETURN_IF_ERROR(r.GetUint32("last_stage_layers", p.last_stage_layers));
  return r.Finish();
}

absl::Status ParseLink(const YAML::Node& node, const std::string& path, LinkSpec& link) {
  MapReader r(node, path);
  PRISM_RETURN_IF_ERROR(r.CheckIsMap());
  PRISM_RETURN_IF_ERROR(r.GetUint("gbps", link.gbps));
  double latency_us = static_cast<double>(link.latency_ns) / 1000.0;
  PRISM_RETURN_IF_ERROR(r.GetDouble("latency_us", latency_us, -1e-12, 1e6));
  link.latency_ns = static_cast<uint64_t>(latency_us * 1000.0 + 0.5);
  return r.Finish();
}

// A step cost in microseconds under `key` of `r`: any number first (MapReader
// names a word or a list), then 0 to 1000 in words a person reads.
absl::Status ReadStepCostUs(MapReader& r, const std::string& key, uint64_t& ns) {
  double us = 0;
  PRISM_RETURN_IF_ERROR(r.GetDouble(key, us, -1e300, 1e300));
  if (us < 0 || us > 1000.0)
    return KeyError(r.PathOf(key), absl::StrCat("must be 0 to 1000 (microseconds per ring step), got ", us));
  ns = static_cast<uint64_t>(us * 1000.0 + 0.5);
  return absl::OkStatus();
}

// cluster.nccl_step_cost_us (`cluster` holds the key): a number (NCCL's Simple
// ring) or a mapping of protocols (simple, ll, ll128) to microseconds.
absl::Status ParseStepCosts(MapReader& cluster, ClusterSpec& c) {
  const std::string key = "nccl_step_cost_us";
  const YAML::Node node = cluster.Child(key);
  if (node.IsScalar()) return ReadStepCostUs(cluster, key, c.nccl_step_cost_ns["SIMPLE"]);
  if (!node.IsMap())
    return KeyError(cluster.PathOf(key), "expected microseconds (NCCL's Simple ring) or a mapping of protocols "
                                         "(simple, ll, ll128) to microseconds, e.g. {simple: 14.0, ll: 13.5}");
  MapReader r(node, cluster.PathOf(key));
  for (const char* protocol : {"simple", "ll", "ll128"}) {
    if (!r.Has(protocol)) continue;
    PRISM_RETURN_IF_ERROR(ReadStepCostUs(r, protocol, c.nccl_step_cost_ns[absl::AsciiStrToUpper(protocol)]));
  }
  PRISM_RETURN_IF_ERROR(r.Finish());
  if (c.nccl_step_cost_ns.empty()) return KeyError(cluster.PathOf(key), "names no protocol (simple, ll, ll128)");
  return absl::OkStatus();
}

absl::Status ParseCluster(const YAML::Node& node, ClusterSpec& c) {
  MapReader r(node, "cluster");
  PRISM_RETURN_IF_ERROR(r.CheckIsMap());
  PRISM_RETURN_IF_ERROR(r.GetUint32("gpus_per_node", c.gpus_per_node));
  const YAML::Node gpu = r.Child("gpu");
  MapReader g(gpu, "cluster.gpu");
  PRISM_RETURN_IF_ERROR(g.CheckIsMap());
  PRISM_RETURN_IF_ERROR(g.GetString("name", c.gpu_name));
  PRISM_RETURN_IF_ERROR(g.GetUint("bf16_tflops", c.bf16_tflops));
  PRISM_RETURN_IF_ERROR(g.GetUint("hbm_gbps", c.hbm_gbps));
  PRISM_RETURN_IF_ERROR(g.GetUint("memory_gib", c.memory_gib));
  PRISM_RETURN_IF_ERROR(g.Finish());
  const YAML::Node nic = r.Child("nic");
  MapReader n(nic, "cluster.nic");
  PRISM_RETURN_IF_ERROR(n.CheckIsMap());
  PRISM_RETURN_IF_ERROR(n.GetUint32("count", c.nic_count));
  PRISM_RETURN_IF_ERROR(n.GetUint("gbps", c.nic.gbps));
  double nic_latency_us = static_cast<double>(c.nic.latency_ns) / 1000.0;
  PRISM_RETURN_IF_ERROR(n.GetDouble("latency_us", nic_latency_us, -1e-12, 1e6));
  c.nic.latency_ns = static_cast<uint64_t>(nic_latency_us * 1000.0 + 0.5);
  PRISM_RETURN_IF_ERROR(n.Finish());
  PRISM_RETURN_IF_ERROR(ParseLink(r.Child("nvlink"), "cluster.nvlink", c.nvlink));
  if (r.Has("nccl_step_cost_us"))
    PRISM_RETURN_IF_ERROR(ParseStepCosts(r, c));
  return r.Finish();
}

absl::Status ParseTable(const YAML::Node& node, const std::string& path, ComputeSpec& c) {
  MapReader r(node, path);
  PRISM_RETURN_IF_ERROR(r.CheckIsMap());
  for (const char* kind : {"attention", "mlp", "moe", "embedding", "output", "optimizer"}) {
    if (!r.Has(kind)) {
      r.Child(kind);
      continue;
    }
    MapReader e(r.Child(kind), r.PathOf(kind));
    PRISM_RETURN_IF_ERROR(e.CheckIsMap());
    MeasuredCompute m;
    PRISM_RETURN_IF_ERROR(e.GetUint("fwd_ns", m.fwd_ns, 0));
    PRISM_RETURN_IF_ERROR(e.GetUint("bwd_ns", m.bwd_ns, 0));
    PRISM_RETURN_IF_ERROR(e.Finish());
    for (const auto& [key, ns] : {std::pair<const char*, uint64_t>{"fwd_ns", m.fwd_ns}, {"bwd_ns", m.bwd_ns}})
      if (ns > limits::kMaxOpDurationNs)
        return KeyError(e.PathOf(key), absl::StrCat(ns, " is above the op-duration limit of ",
                                                    limits::kMaxOpDurationNs, " ns (common/limits.h)"));
    c.table[kind] = m;
  }
  return r.Finish();
}

absl::Status ParseComputeTable(const YAML::Node& node, const std::string& base_dir, ComputeSpec& c) {
  if (!node.IsDefined() || node.IsNull()) return absl::OkStatus();
  if (!node.IsScalar()) return ParseTable(node, "compute_table", c);
  std::filesystem::path p(node.Scalar());
  if (p.is_relative()) p = std::filesystem::path(base_dir) / p;
  auto text = ReadInputFile(p.string(), "compute table");
  if (!text.ok())
    return KeyError("compute_table", absl::StrCat(text.status().message(),
                                                  " (give a mapping or a path to a YAML file relative to the job file)"));
  YAML::Node doc;
  try {
    doc = YAML::Load(*text);
  } catch (const YAML::Exception& e) {
    return KeyError("compute_table", absl::StrCat(p.string(), " is not valid YAML: ", Excerpt(e.what(), 200)));
  }
  if (!doc.IsMap())
    return KeyError("compute_table", absl::StrCat(p.string(), " holds no mapping (attention: {fwd_ns: ..., ",
                                                  "bwd_ns: ...}, ...); is it the right file?"));
  PRISM_RETURN_IF_ERROR(CheckDocument(doc, "compute_table"));
  return ParseTable(doc, "compute_table", c);
}

absl::Status ParseEfficiency(const YAML::Node& node, ComputeSpec& c) {
  MapReader r(node, "efficiency");
  PRISM_RETURN_IF_ERROR(r.CheckIsMap());
  PRISM_RETURN_IF_ERROR(r.GetDouble("matmul", c.matmul_efficiency, 0.0, 1.0));
  PRISM_RETURN_IF_ERROR(r.GetDouble("memory", c.memory_efficiency, 0.0, 1.0));
  return r.Finish();
}

absl::Status ParseDocument(const YAML::Node& doc, const std::string& base_dir, JobSpec& spec) {
  MapReader top(doc, "");
  PRISM_RETURN_IF_ERROR(top.CheckIsMap());
  PRISM_RETURN_IF_ERROR(top.GetString("name", spec.name));
  uint64_t world = 0;
  PRISM_RETURN_IF_ERROR(top.GetUint("world", world));
  PRISM_RETURN_IF_ERROR(ParseModel(top.Child("model"), spec.model));
  bool dp_given = false, schedule_given = false;
  PRISM_RETURN_IF_ERROR(ParseParallel(top.Child("parallel"), spec.parallel, dp_given, schedule_given));
  PRISM_RETURN_IF_ERROR(ParseCluster(top.Child("cluster"), spec.cluster));
  PRISM_RETURN_IF_ERROR(ParseEfficiency(top.Child("efficiency"), spec.compute));
  PRISM_RETURN_IF_ERROR(ParseComputeTable(top.Child("compute_table"), base_dir, spec.compute));
  PRISM_RETURN_IF_ERROR(top.Finish());

  ParallelSpec& p = spec.parallel;
  const uint64_t model_ranks = uint64_t{p.tp} * p.pp * p.cp;
  if (world != 0) {
    if (world % model_ranks != 0)
      return KeyError("world", absl::StrCat(world, " is not divisible by tp*pp*cp = ", model_ranks,
                                            "; change world or parallel.tp/pp/cp"));
    const uint64_t derived = world / model_ranks;
    if (dp_given && derived != p.dp)
      return KeyError("parallel.dp", absl::StrCat(p.dp, " disagrees with world / (tp*pp*cp) = ", derived,
                                                  "; give one of them"));
    p.dp = static_cast<uint32_t>(derived);
  }
  if (p.expert_tp == 0) p.expert_tp = p.tp;
  const uint64_t one_round = uint64_t{p.micro_batch} * p.dp;
  if (p.global_batch == 0 && one_round <= UINT32_MAX) p.global_batch = static_cast<uint32_t>(one_round);
  if (p.vpp > 1 && !schedule_given) p.schedule = Schedule::kInterleavedOneFOneB;
  if (p.tp == 1) p.sequence_parallel = false;  // Megatron turns SP off without TP
  if (spec.name.empty()) spec.name = "job";
  return ValidateJobSpec(spec);
}

// Figures that are multiplied into bit/s, FLOP/s or bytes must not overflow.
absl::Status ValidateClusterFigures(const ClusterSpec& c) {
  constexpr uint64_t kMaxGbps = limits::kMaxBandwidthBps / 1'000'000'000;
  for (const auto& [key, value, max] : {std::tuple<const char*, uint64_t, uint64_t>{"cluster.nic.gbps", c.nic.gbps, kMaxGbps},
                                        {"cluster.nvlink.gbps", c.nvlink.gbps, kMaxGbps},
                                        {"cluster.gpu.bf16_tflops", c.bf16_tflops, 1'000'000},
                                        {"cluster.gpu.hbm_gbps", c.hbm_gbps, 1'000'000},
                                        {"cluster.gpu.memory_gib", c.memory_gib, 1 << 20}})
    if (value > max) return KeyError(key, absl::StrCat(value, " is above the supported ", max));
  return absl::OkStatus();
}

absl::Status Divides(const std::string& key, uint64_t value, uint64_t divisor, const std::string& what) {
  if (divisor != 0 && value % divisor == 0) return absl::OkStatus();
  return KeyError(key, absl::StrCat(value, " is not divisible by ", what, " = ", divisor));
}

}  // namespace

const char* ScheduleName(Schedule s) {
  switch (s) {
    case Schedule::kOneFOneB: return "1f1b";
    case Schedule::kInterleavedOneFOneB: return "interleaved-1f1b";
    case Schedule::kGPipe: return "gpipe";
  }
  return "?";
}

const char* RecomputeName(Recompute r) {
  switch (r) {
    case Recompute::kNone: return "none";
    case Recompute::kSelective: return "selective";
    case Recompute::kFull: return "full";
  }
  return "?";
}

std::string MegatronVersionName(MegatronVersion v) {
  return v == MegatronVersion::kCoreV0_18 ? "core_v0.18.2" : "core_v0.19.0";
}

std::optional<MegatronVersion> ParseMegatronVersion(const std::string& name) {
  if (name == "newest" || name == "d98e8a64dd" || name == "core_v0.19.0") return MegatronVersion::kCoreV0_19;
  if (name == "core_v0.18.2") return MegatronVersion::kCoreV0_18;
  return std::nullopt;
}

uint32_t StageLayers(const JobSpec& spec, uint32_t stage) {
  const ParallelSpec& p = spec.parallel;
  const uint32_t layers = spec.model.layers;
  if (p.first_stage_layers == 0 && p.last_stage_layers == 0) return layers / p.pp;
  if (p.pp == 1) return layers;
  // An unset end takes the share the middle stages get.
  const uint32_t ends_given = (p.first_stage_layers > 0) + (p.last_stage_layers > 0);
  const uint32_t middle_stages = p.pp - ends_given;
  const uint32_t rest = layers - p.first_stage_layers - p.last_stage_layers;
  const uint32_t middle = middle_stages == 0 ? 0 : rest / middle_stages;
  if (stage == 0) return p.first_stage_layers > 0 ? p.first_stage_layers : middle;
  if (stage == p.pp - 1) return p.last_stage_layers > 0 ? p.last_stage_layers : middle;
  return middle;
}

std::vector<uint32_t> ChunkLayers(const JobSpec& spec) {
  const ParallelSpec& p = spec.parallel;
  std::vector<uint32_t> out(uint64_t{p.pp} * p.vpp, 0);
  for (uint32_t stage = 0; stage < p.pp; ++stage) {
    const uint32_t n = StageLayers(spec, stage), base = n / p.vpp, extra = n % p.vpp;
    for (uint32_t c = 0; c < p.vpp; ++c) {
      // The first stage's larger chunks come last, everyone else's first.
      const bool larger = stage == 0 && p.pp > 1 ? c >= p.vpp - extra : c < extra;
      out[uint64_t{c} * p.pp + stage] = base + (larger ? 1 : 0);
    }
  }
  return out;
}

namespace {

// The uneven-stage keys: the ends leave the middle stages a whole, equal,
// non-zero share, and every chunk has a layer.
absl::Status ValidateStageLayers(const ModelSpec& m, const ParallelSpec& p) {
  if (p.first_stage_layers == 0 && p.last_stage_layers == 0)
    return Divides("model.layers", m.layers, uint64_t{p.pp} * p.vpp, "parallel.pp * parallel.vpp");
  const char* key = p.first_stage_layers > 0 ? "parallel.first_stage_layers" : "parallel.last_stage_layers";
  if (p.pp < 2) return KeyError(key, "needs parallel.pp > 1");
  const uint64_t ends = uint64_t{p.first_stage_layers} + p.last_stage_layers;
  const uint32_t ends_given = (p.first_stage_layers > 0) + (p.last_stage_layers > 0);
  const uint32_t middle_stages = p.pp - ends_given;
  if (middle_stages == 0 ? ends != m.layers : ends >= m.layers)
    return KeyError(key, absl::StrCat("first + last stage layers = ", ends, " must leave layers for the other stages ",
                                      "(model.layers = ", m.layers, ")"));
  if (middle_stages > 0 && (m.layers - ends) % middle_stages != 0)
    return KeyError(key, absl::StrCat("the other ", middle_stages, " stages cannot share the remaining ",
                                      m.layers - ends, " layers evenly; change the first/last stage layers"));
  for (uint32_t s = 0; s < p.pp; ++s) {
    JobSpec probe;
    probe.model = m;
    probe.parallel = p;
    if (StageLayers(probe, s) < p.vpp)
      return KeyError(key, absl::StrCat("leaves stage ", s, " with ", StageLayers(probe, s),
                                        " layers, fewer than parallel.vpp = ", p.vpp, " (every chunk needs one)"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status ValidateJobSpec(const JobSpec& spec) {
  const ModelSpec& m = spec.model;
  const ParallelSpec& p = spec.parallel;
  for (const auto& [key, value] : {std::pair<const char*, uint64_t>{"model.hidden", m.hidden},
                                   {"model.ffn_hidden", m.ffn_hidden}, {"model.moe_ffn_hidden", m.moe_ffn_hidden},
                                   {"model.seq_len", m.seq_len}, {"model.vocab", m.vocab},
                                   {"model.layers", m.layers}, {"model.heads", m.heads},
                                   {"model.experts", m.experts}})
    if (value > kMaxModelDimension)
      return KeyError(key, absl::StrCat(value, " is above the supported ", kMaxModelDimension));
  for (const auto& [key, value] : {std::pair<const char*, uint64_t>{"parallel.tp", p.tp}, {"parallel.pp", p.pp},
                                   {"parallel.dp", p.dp}, {"parallel.cp", p.cp}, {"parallel.ep", p.ep},
                                   {"parallel.vpp", p.vpp}, {"parallel.expert_tp", p.expert_tp},
                                   {"parallel.micro_batch", p.micro_batch}})
    if (value > kMaxWorld) return KeyError(key, absl::StrCat(value, " is above the supported ", kMaxWorld));
  if (p.world() > kMaxWorld)
    return KeyError("parallel", absl::StrCat("world size tp*pp*dp*cp = ", p.world(), " is above the supported ",
                                             kMaxWorld));
  if (p.global_batch == 0)
    return KeyError("parallel.global_batch", "is missing, and micro_batch * dp is too large to be its default");
  PRISM_RETURN_IF_ERROR(ValidateClusterFigures(spec.cluster));
  if (uint64_t{p.micro_batch} * m.seq_len * m.hidden > (1ull << 40))
    return KeyError("model.seq_len", "micro_batch * seq_len * hidden is above 2^40 (one microbatch's activations "
                                     "would not fit any GPU)");
  if (p.expert_tp == 0) return KeyError("parallel.expert_tp", "must be at least 1");
  PRISM_RETURN_IF_ERROR(Divides("model.hidden", m.hidden, m.heads, "model.heads"));
  PRISM_RETURN_IF_ERROR(Divides("model.heads", m.heads, p.tp, "parallel.tp"));
  PRISM_RETURN_IF_ERROR(Divides("model.heads", m.heads, m.kv_heads, "model.kv_heads"));
  PRISM_RETURN_IF_ERROR(Divides("model.kv_heads", m.kv_heads, p.tp, "parallel.tp"));
  PRISM_RETURN_IF_ERROR(Divides("model.ffn_hidden", m.ffn_hidden, p.tp, "parallel.tp"));
  PRISM_RETURN_IF_ERROR(ValidateStageLayers(m, p));
  PRISM_RETURN_IF_ERROR(Divides("model.seq_len", m.seq_len, uint64_t{2} * p.cp > 2 ? 2ull * p.cp : 1,
                                "2 * parallel.cp (load-balanced context parallelism)"));
  if (p.sequence_parallel)
    PRISM_RETURN_IF_ERROR(Divides("model.seq_len", m.seq_len, uint64_t{p.tp} * p.cp,
                                  "parallel.tp * parallel.cp (sequence parallelism)"));
  if (m.moe()) {
    if (m.topk > m.experts)
      return KeyError("model.topk", absl::StrCat(m.topk, " is larger than model.experts = ", m.experts));
    PRISM_RETURN_IF_ERROR(Divides("model.experts", m.experts, p.ep, "parallel.ep"));
    PRISM_RETURN_IF_ERROR(Divides("model.moe_ffn_hidden", m.moe_ffn_hidden, p.expert_tp, "parallel.expert_tp"));
    if (p.tp > 1 && !p.sequence_parallel)
      return KeyError("parallel.sequence_parallel", "must be true for MoE models with tp > 1 (as Megatron requires)");
  } else if (p.ep > 1) {
    return KeyError("parallel.ep", absl::StrCat(p.ep, " needs an MoE model (model.experts > 0)"));
  }
  const uint64_t expert_model_ranks = uint64_t{p.expert_tp} * p.ep * p.pp;
  if (p.world() % expert_model_ranks != 0)
    return KeyError("parallel.ep", absl::StrCat("ep * expert_tp = ", uint64_t{p.ep} * p.expert_tp,
                                                " does not divide the data-parallel ranks (tp*dp*cp = ",
                                                uint64_t{p.tp} * p.dp * p.cp, ")"));
  if (p.vpp > 1 && p.pp == 1) return KeyError("parallel.vpp", "needs parallel.pp > 1 (interleaving needs a pipeline)");
  if (p.vpp > 1 && p.schedule != Schedule::kInterleavedOneFOneB)
    return KeyError("parallel.schedule", "must be interleaved-1f1b when parallel.vpp > 1");
  if (p.vpp == 1 && p.schedule == Schedule::kInterleavedOneFOneB)
    return KeyError("parallel.vpp", "must be > 1 for the interleaved-1f1b schedule");
  PRISM_RETURN_IF_ERROR(Divides("parallel.global_batch", p.global_batch, uint64_t{p.micro_batch} * p.dp,
                                "parallel.micro_batch * parallel.dp"));
  if (p.schedule == Schedule::kInterleavedOneFOneB)
    PRISM_RETURN_IF_ERROR(Divides("parallel.global_batch", p.microbatches(), p.pp,
                                  "parallel.pp (microbatches per iteration must be a multiple of pp when "
                                  "interleaving); microbatches"));
  // Op count of one program: a few dozen ops per layer per microbatch.
  uint32_t most_layers = 0;
  for (uint32_t s = 0; s < p.pp; ++s) most_layers = std::max(most_layers, StageLayers(spec, s));
  const uint64_t per_layer = (12 + 2 * uint64_t{p.cp}) * (p.recompute == Recompute::kFull ? 2 : 1);
  const uint64_t ops = uint64_t{2} * p.microbatches() * most_layers * per_layer;
  if (ops > kMaxOpsPerProgram)
    return KeyError("parallel.global_batch", absl::StrCat("gives about ", ops, " ops per program (", p.microbatches(),
                                                          " microbatches x ", most_layers,
                                                          " layers per stage); the limit is ", kMaxOpsPerProgram));
  return absl::OkStatus();
}

absl::StatusOr<JobSpec> ParseJobSpec(const std::string& yaml_text, const std::string& origin,
                                     const std::string& base_dir) {
  YAML::Node doc;
  try {
    doc = YAML::Load(yaml_text);
  } catch (const YAML::Exception& e) {
    return absl::InvalidArgumentError(absl::StrCat(origin, " is not valid YAML: ", Excerpt(e.what(), 200)));
  }
  if (doc.IsDefined() && !doc.IsNull() && !doc.IsMap())  // say what it is not, without its contents
    return absl::InvalidArgumentError(absl::StrCat(origin, " is not a job file: its YAML is not a mapping of keys ",
                                                   "(name:, model:, parallel:, cluster:; see docs/graphgen.md)"));
  JobSpec spec;
  try {
    if (auto s = CheckDocument(doc); !s.ok())
      return absl::InvalidArgumentError(absl::StrCat(origin, ": ", std::string(s.message())));
    if (auto s = ParseDocument(doc, base_dir, spec); !s.ok())
      return absl::InvalidArgumentError(absl::StrCat(origin, ": ", std::string(s.message())));
  } catch (const YAML::Exception& e) {
    return absl::InvalidArgumentError(absl::StrCat(origin, ": malformed job file: ", Excerpt(e.what(), 200)));
  }
  return spec;
}

absl::StatusOr<JobSpec> ParseJobSpecFile(const std::string& path) {
  auto text = ReadInputFile(path, "job file");
  if (!text.ok()) return text.status();
  const std::string dir = std::filesystem::path(path).parent_path().string();
  return ParseJobSpec(*text, path, dir.empty() ? "." : dir);
}

absl::StatusOr<ClusterSpec> ParseClusterFile(const std::string& path) {
  auto text = ReadInputFile(path, "cluster file");
  if (!text.ok()) return text.status();
  ClusterSpec cluster;
  try {
    const YAML::Node doc = YAML::Load(*text);
    if (auto s = CheckDocument(doc); !s.ok())
      return absl::InvalidArgumentError(absl::StrCat(path, ": ", std::string(s.message())));
    if (!doc.IsMap() || !doc["cluster"])
      return absl::InvalidArgumentError(absl::StrCat(path, ": no 'cluster:' mapping (a job file's cluster keys, "
                                                     "docs/graphgen.md)"));
    if (auto s = ParseCluster(doc["cluster"], cluster); !s.ok())
      return absl::InvalidArgumentError(absl::StrCat(path, ": ", std::string(s.message())));
    if (auto s = ValidateClusterFigures(cluster); !s.ok())
      return absl::InvalidArgumentError(absl::StrCat(path, ": ", std::string(s.message())));
  } catch (const YAML::Exception& e) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": not valid YAML: ", Excerpt(e.what(), 200)));
  }
  return cluster;
}

}  // namespace prism::graphgen
