#include "graphgen/job_graph.h"

#include <algorithm>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "common/version.h"
#include "graphgen/cost_model.h"
#include "graphgen/megatron_layout.h"
#include "graphgen/program_builder.h"
#include "proto/graph_rules.h"
#include "proto/graph_topology.h"

namespace prism::graphgen {
namespace {

namespace pg = prism::graph;

void FillJobInfo(const JobSpec& spec, pg::Graph& g) {
  const ParallelSpec& p = spec.parallel;
  const ModelSpec& m = spec.model;
  auto* job = g.mutable_job();
  job->set_name(spec.name);
  job->set_generator(absl::StrCat(prism::kGraphgenGenerator, " job"));
  job->set_model(spec.name);
  job->set_world_size(p.world());
  job->set_description(absl::StrCat(m.layers, " layers, hidden ", m.hidden, m.moe() ? absl::StrCat(", ", m.experts,
                                    " experts top-", m.topk) : std::string(), "; tp", p.tp, " pp", p.pp, " dp", p.dp,
                                    " cp", p.cp, " ep", p.ep, " vpp", p.vpp));
  auto& a = *job->mutable_attributes();
  a["iterations"] = "1";
  a["microbatches"] = absl::StrCat(p.microbatches());
  a["expert_tp"] = absl::StrCat(p.expert_tp);
  a["expert_dp"] = absl::StrCat(p.expert_dp());
  a["grad_dtype"] = p.grads_fp32 ? "fp32" : "bf16";
  a["process_groups"] = p.split_group_calls ? "split_group" : p.minimal_groups ? "minimal" : "megatron";
  if (!p.minimal_groups) {
    a["megatron_version"] = MegatronVersionName(p.megatron_version);
    a["gloo_groups"] = p.gloo_groups ? "true" : "false";
  }
  a["recompute"] = RecomputeName(p.recompute);
  if (p.launch_in_program_order) a["nccl_launch_order"] = "program";  // else none: each stream on its own
  a["grad_buckets"] = p.megatron_buckets ? (p.overlap_grad_reduce ? "megatron, overlap_grad_reduce" : "megatron")
                                         : "layer";
  std::string stage_layers;
  for (uint32_t s = 0; s < p.pp; ++s) absl::StrAppend(&stage_layers, s == 0 ? "" : ",", StageLayers(spec, s));
  a["stage_layers"] = stage_layers;
  a["matmul_efficiency"] = absl::StrCat(spec.compute.matmul_efficiency);
  a["memory_efficiency"] = absl::StrCat(spec.compute.memory_efficiency);
  a["compute_source"] = spec.compute.table.empty() ? "roofline" : "table+roofline";
  a["model.layers"] = absl::StrCat(m.layers);
  a["model.hidden"] = absl::StrCat(m.hidden);
  a["model.ffn_hidden"] = absl::StrCat(m.ffn_hidden);
  a["model.heads"] = absl::StrCat(m.heads);
  a["model.kv_heads"] = absl::StrCat(m.kv_heads);
  a["model.seq_len"] = absl::StrCat(m.seq_len);
  a["model.vocab"] = absl::StrCat(m.vocab);
  a["model.experts"] = absl::StrCat(m.experts);
  a["model.topk"] = absl::StrCat(m.topk);
}


void FillLayout(const ParallelSpec& p, pg::Graph& g) {
  auto* l = g.mutable_layout();
  l->set_tp(p.tp);
  l->set_pp(p.pp);
  l->set_dp(p.dp);
  l->set_cp(p.cp);
  l->set_ep(p.ep);
  l->set_vpp(p.vpp);
  l->set_micro_batch(p.micro_batch);
  l->set_global_batch(p.global_batch);
  l->set_schedule(ScheduleName(p.schedule));
  l->set_sequence_parallel(p.sequence_parallel);
  l->set_distributed_optimizer(p.distributed_optimizer);
  l->set_order("tp-cp-ep-dp-pp");
}

pg::GroupFamily FamilyOf(const GroupRule& rule, pg::CommKind kind, const std::string& name, const std::string& desc) {
  pg::GroupFamily f;
  f.mutable_radix()->Add(rule.radix.begin(), rule.radix.end());
  f.set_member_dims(rule.member_dims);
  f.set_select_dim(rule.select_dim);
  f.mutable_select()->Add(rule.select.begin(), rule.select.end());
  f.set_kind(kind);
  f.set_name(name);
  f.set_desc(desc);
  return f;
}

// The world (family 0: communicator 0, process group 0) and one family per
// kind (family k + 1), numbered in creation order (CreationOrder: a
// same_loop kind's group i right after group i of the kind it follows):
// NCCL kinds as communicators split from the world, every kind (Gloo too)
// as process groups.
absl::Status AddFamilies(const std::vector<GroupKind>& kinds, uint32_t world, bool split_group_calls,
                         pg::GraphRules& rules) {
  pg::GroupFamily& everyone =
      *rules.add_families() = FamilyOf(GroupRule{{world}, 1, 0, {}}, pg::COMM_KIND_WORLD, "world", "");
  everyone.set_plain_name(true);
  for (const GroupKind& kind : kinds) {
    pg::GroupFamily& f = *rules.add_families() = FamilyOf(kind.rule, kind.kind, kind.slot, kind.megatron_name);
    f.set_gloo(kind.gloo);
    f.set_split_of_first(!kind.gloo);  // PyTorch's new_group: a split of the world
    f.set_split_group(split_group_calls && !kind.gloo);
  }
  uint32_t next_comm = 1, next_group = 1;
  for (uint32_t k = 0; k < kinds.size(); ++k) {
    if (kinds[k].same_loop && k > 0) continue;  // numbered with the kind it follows
    uint32_t end = k + 1;                       // kinds [k, end) share one loop
    while (end < kinds.size() && kinds[end].same_loop) ++end;
    const uint32_t groups = GroupCount(kinds[k].rule);
    uint32_t nccl = 0;
    for (uint32_t e = k; e < end; ++e) {
      if (GroupCount(kinds[e].rule) != groups)
        return absl::InternalError(absl::StrCat(kinds[e].slot, " is created in the loop of ", kinds[k].slot,
                                                " but has another group count"));
      nccl += kinds[e].gloo ? 0 : 1;
    }
    for (uint32_t e = k, n = 0; e < end; ++e) {
      pg::GroupFamily& f = *rules.mutable_families(static_cast<int>(e + 1));
      f.set_first_process_group(next_group + (e - k));
      f.set_process_group_stride(end - k);
      if (kinds[e].gloo) continue;
      f.set_first_communicator(next_comm + n++);
      f.set_communicator_stride(nccl);
    }
    next_group += groups * (end - k);
    next_comm += groups * nccl;
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<pg::Graph> GenerateJobGraph(const JobSpec& spec, JobGraphForm form) {
  PRISM_RETURN_IF_ERROR(ValidateJobSpec(spec));
  const ParallelSpec& p = spec.parallel;
  const uint32_t world = static_cast<uint32_t>(p.world());
  pg::Graph g;
  FillJobInfo(spec, g);
  FillCluster(spec.cluster, spec.parallel.world(), g);
  FillLayout(p, g);

  std::vector<GroupKind> kinds =
      p.minimal_groups ? MinimalGroupKinds(MegatronGroupKinds(p), spec) : MegatronGroupKinds(p);
  if (p.split_group_calls) {  // one split_group call per kind: its groups one after another
    for (GroupKind& k : kinds) k.same_loop = false;
  }
  pg::GraphRules& rules = *g.mutable_rules();
  PRISM_RETURN_IF_ERROR(AddFamilies(kinds, world, p.split_group_calls, rules));

  // One program per pipeline stage (one block of ranks: pp is the slowest
  // dim); its slots are the world and the kinds whose groups hold the
  // stage's ranks (embedding groups hold only some stages).
  const CostModel cost(spec);
  std::vector<pg::FamilyShape> shapes;  // per kind
  for (uint32_t k = 0; k < kinds.size(); ++k) shapes.emplace_back(rules.families(static_cast<int>(k + 1)));
  for (uint32_t s = 0; s < p.pp; ++s) {
    const uint32_t representative = s * p.tp * p.cp * p.dp;  // tp=cp=dp=0 of stage s
    pg::RankBlock& block = *rules.add_blocks();
    block.set_ranks(world / p.pp);
    block.set_program(s);
    block.add_slot_family(0);
    StageInputs in;
    in.spec = &spec;
    in.cost = &cost;
    in.stage = s;
    in.slot_names.push_back("world");
    for (uint32_t k = 0; k < kinds.size(); ++k) {
      if (kinds[k].gloo) continue;
      if (shapes[k].GroupOf(representative) == UINT32_MAX) continue;
      block.add_slot_family(k + 1);
      in.slot_names.push_back(kinds[k].slot);
    }
    in.dp_cp_size = uint64_t{p.dp} * p.cp;
    in.edp_size = p.expert_dp();
    pg::Program prog = BuildStageProgram(in);
    prog.set_id(s);
    *g.add_programs() = std::move(prog);
  }
  if (form == JobGraphForm::kRules) return g;
  if (auto s = pg::CheckRules(g); !s.ok())
    return absl::InternalError(absl::StrCat("the job's rules are inconsistent (a bug): ", s.message()));
  pg::ExpandRules(g);
  if (form == JobGraphForm::kRecords) pg::ExpandTables(g);
  return g;
}

void FillCluster(const ClusterSpec& c, uint64_t world, prism::graph::Graph& g) {
  auto* cl = g.mutable_cluster();
  cl->set_gpus_per_node(c.gpus_per_node);
  cl->set_nodes(static_cast<uint32_t>((world + c.gpus_per_node - 1) / c.gpus_per_node));
  cl->mutable_gpu()->set_name(c.gpu_name);
  cl->mutable_gpu()->set_peak_bf16_flops(c.bf16_tflops * 1000000000000ull);
  cl->mutable_gpu()->set_hbm_bytes_per_s(c.hbm_gbps * 1000000000ull);
  cl->mutable_gpu()->set_memory_bytes(c.memory_gib << 30);
  cl->mutable_nic()->set_count(c.nic_count);
  cl->mutable_nic()->set_bandwidth_bps(c.nic.gbps * 1000000000ull);
  cl->mutable_nic()->set_latency_ns(c.nic.latency_ns);
  cl->mutable_intra_node()->set_bandwidth_bps(c.nvlink.gbps * 1000000000ull);
  cl->mutable_intra_node()->set_latency_ns(c.nvlink.latency_ns);
  for (const auto& [protocol, cost_ns] : c.nccl_step_cost_ns) {
    prism::graph::NcclStepCost* e = cl->add_nccl_step_costs();
    e->set_protocol(protocol);
    e->set_algorithm(prism::graph::ALGORITHM_RING);
    e->set_cost_ns(cost_ns);
    e->set_source("set in the job file (cluster.nccl_step_cost_us)");
  }
}

}  // namespace prism::graphgen
