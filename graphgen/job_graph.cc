#include "graphgen/job_graph.h"

#include <algorithm>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "graphgen/split_color.h"
#include "common/status_macros.h"
#include "common/version.h"
#include "graphgen/cost_model.h"
#include "graphgen/megatron_layout.h"
#include "graphgen/program_builder.h"

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
  a["process_groups"] = p.minimal_groups ? "minimal" : "megatron";
  if (!p.minimal_groups) {
    a["megatron_version"] = MegatronVersionName(p.megatron_version);
    a["gloo_groups"] = p.gloo_groups ? "true" : "false";
  }
  a["recompute"] = RecomputeName(p.recompute);
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

// Adds the world and every group in creation order: NCCL groups as
// communicators, every group (Gloo too) as a process group. Returns, per
// kind, the communicator id of each rank's group (UINT32_MAX where not a
// member, and for Gloo kinds).
std::vector<std::vector<uint32_t>> AddCommunicators(const std::vector<GroupKind>& kinds, uint32_t world,
                                                    pg::Graph& g) {
  auto* w = g.add_communicators();
  w->set_id(0);
  w->set_kind(pg::COMM_KIND_WORLD);
  w->set_name("world");
  for (uint32_t r = 0; r < world; ++r) w->add_members(r);
  w->mutable_init();
  g.add_process_groups()->set_communicator(0);
  std::vector<std::vector<uint32_t>> comm_of(kinds.size(), std::vector<uint32_t>(world, UINT32_MAX));
  for (const auto& [k, gi] : CreationOrder(kinds)) {
    const GroupKind& kind = kinds[k];
    const std::vector<uint32_t>& members = kind.groups[gi];
    auto* process_group = g.add_process_groups();
    process_group->set_desc(kind.megatron_name);
    if (kind.gloo) {
      process_group->set_backend(pg::ProcessGroup::GLOO);
      process_group->set_name(absl::StrCat(kind.slot, "[", gi, "]"));
      process_group->mutable_members()->Add(members.begin(), members.end());
      continue;
    }
    auto* c = g.add_communicators();
    const uint32_t id = static_cast<uint32_t>(g.communicators_size() - 1);
    process_group->set_communicator(id);
    c->set_id(id);
    c->set_kind(kind.kind);
    c->set_name(absl::StrCat(kind.slot, "[", gi, "]"));
    c->mutable_members()->Reserve(static_cast<int>(members.size()));
    for (uint32_t m : members) {
      c->add_members(m);
      comm_of[k][m] = id;
    }
    auto* split = c->mutable_split();
    split->set_parent(0);
    split->set_color(PyTorchSplitColor(members));
    split->set_key(0);  // PyTorch: the member's index in the sorted group
  }
  return comm_of;
}

}  // namespace

absl::StatusOr<pg::Graph> GenerateJobGraph(const JobSpec& spec) {
  PRISM_RETURN_IF_ERROR(ValidateJobSpec(spec));
  const ParallelSpec& p = spec.parallel;
  const uint32_t world = static_cast<uint32_t>(p.world());
  pg::Graph g;
  FillJobInfo(spec, g);
  FillCluster(spec.cluster, spec.parallel.world(), g);
  FillLayout(p, g);

  const std::vector<GroupKind> kinds =
      p.minimal_groups ? MinimalGroupKinds(MegatronGroupKinds(p), spec) : MegatronGroupKinds(p);
  const std::vector<std::vector<uint32_t>> comm_of = AddCommunicators(kinds, world, g);

  // One program per pipeline stage; its slots are the kinds whose groups
  // contain the stage's ranks (embedding groups hold only some stages).
  const CostModel cost(spec);
  std::vector<std::vector<uint32_t>> stage_kinds(p.pp);
  for (uint32_t s = 0; s < p.pp; ++s) {
    const uint32_t representative = s * p.tp * p.cp * p.dp;  // tp=cp=dp=0 of stage s
    StageInputs in;
    in.spec = &spec;
    in.cost = &cost;
    in.stage = s;
    in.slot_names.push_back("world");
    for (uint32_t k = 0; k < kinds.size(); ++k) {
      if (kinds[k].gloo || comm_of[k][representative] == UINT32_MAX) continue;
      stage_kinds[s].push_back(k);
      in.slot_names.push_back(kinds[k].slot);
    }
    in.dp_cp_size = uint64_t{p.dp} * p.cp;
    in.edp_size = p.expert_dp();
    pg::Program prog = BuildStageProgram(in);
    prog.set_id(s);
    *g.add_programs() = std::move(prog);
  }

  const uint32_t gpn = spec.cluster.gpus_per_node;
  g.mutable_ranks()->Reserve(static_cast<int>(world));
  for (uint32_t r = 0; r < world; ++r) {
    const uint32_t stage = CoordsOf(p, r).pp;
    auto* rk = g.add_ranks();
    rk->set_rank(r);
    rk->set_program(stage);
    rk->set_node(r / gpn);
    rk->set_local_gpu(r % gpn);
    rk->add_comm_slots(0);
    for (uint32_t k : stage_kinds[stage]) {
      const uint32_t id = comm_of[k][r];
      if (id == UINT32_MAX)
        return absl::InternalError(absl::StrCat("rank ", r, " is not in a ", kinds[k].slot,
                                                " group although its stage's first rank is"));
      rk->add_comm_slots(id);
    }
  }
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
}

}  // namespace prism::graphgen
