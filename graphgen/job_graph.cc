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

// Index of `text` in `list`, appended when absent (a handful of entries).
uint32_t Intern(google::protobuf::RepeatedPtrField<std::string>& list, const std::string& text) {
  for (int i = 0; i < list.size(); ++i)
    if (list[i] == text) return static_cast<uint32_t>(i);
  *list.Add() = text;
  return static_cast<uint32_t>(list.size() - 1);
}

void AddTableCommunicator(pg::CommunicatorTable& t, pg::CommKind kind, const std::vector<uint32_t>& members,
                          uint32_t prefix, uint32_t index, uint32_t split_parent, int32_t color) {
  t.add_kind(kind);
  t.add_size(static_cast<uint32_t>(members.size()));
  t.mutable_members()->Add(members.begin(), members.end());
  t.add_name_prefix(prefix);
  t.add_name_index(index);
  t.add_split_parent(split_parent);
  t.add_split_color(color);
  t.add_split_key(0);  // PyTorch: the member's index in the sorted group
}

void AddTableProcessGroup(pg::ProcessGroupTable& t, uint32_t desc, const std::vector<uint32_t>* gloo_members,
                          uint32_t prefix, uint32_t index) {
  t.add_desc(desc);
  t.add_gloo_size(gloo_members ? static_cast<uint32_t>(gloo_members->size()) : 0);
  if (gloo_members) t.mutable_gloo_members()->Add(gloo_members->begin(), gloo_members->end());
  t.add_name_prefix(prefix);
  t.add_name_index(index);
}

// Sizes every column once (a 131,072-rank job's columns hold millions of
// entries: growing them by doubling copies and faults them in again).
void ReserveTables(const std::vector<GroupKind>& kinds, uint32_t world, pg::CommunicatorTable& comms,
                   pg::ProcessGroupTable& groups) {
  uint64_t communicators = 1, members = world, process_groups = 1, gloo_members = 0;
  for (const GroupKind& kind : kinds) {
    process_groups += kind.groups.size();
    uint64_t entries = 0;
    for (const auto& g : kind.groups) entries += g.size();
    (kind.gloo ? gloo_members : members) += entries;
    if (!kind.gloo) communicators += kind.groups.size();
  }
  const int n = static_cast<int>(communicators);
  comms.mutable_kind()->Reserve(n);
  comms.mutable_size()->Reserve(n);
  comms.mutable_members()->Reserve(static_cast<int>(members));
  comms.mutable_name_prefix()->Reserve(n);
  comms.mutable_name_index()->Reserve(n);
  comms.mutable_split_parent()->Reserve(n);
  comms.mutable_split_color()->Reserve(n);
  comms.mutable_split_key()->Reserve(n);
  const int k = static_cast<int>(process_groups);
  groups.mutable_gloo_size()->Reserve(k);
  groups.mutable_gloo_members()->Reserve(static_cast<int>(gloo_members));
  groups.mutable_desc()->Reserve(k);
  groups.mutable_name_prefix()->Reserve(k);
  groups.mutable_name_index()->Reserve(k);
}

// Adds the world and every group in creation order, as format 2's tables:
// NCCL groups as communicators, every group (Gloo too) as a process group.
// Returns, per kind, the communicator id of each rank's group (UINT32_MAX
// where not a member, and for Gloo kinds).
std::vector<std::vector<uint32_t>> AddCommunicators(const std::vector<GroupKind>& kinds, uint32_t world,
                                                    pg::Graph& g) {
  pg::CommunicatorTable& comms = *g.mutable_communicator_table();
  pg::ProcessGroupTable& groups = *g.mutable_process_group_table();
  std::vector<uint32_t> everyone(world);
  for (uint32_t r = 0; r < world; ++r) everyone[r] = r;
  AddTableCommunicator(comms, pg::COMM_KIND_WORLD, everyone, Intern(*comms.mutable_name_prefixes(), "world"), 0,
                       0, 0);
  const uint32_t no_name = Intern(*groups.mutable_name_prefixes(), "");
  AddTableProcessGroup(groups, Intern(*groups.mutable_descs(), ""), nullptr, no_name, 0);
  // Per kind: its desc and its name prefix, in the tables' short lists.
  std::vector<uint32_t> desc(kinds.size()), prefix(kinds.size());
  for (size_t k = 0; k < kinds.size(); ++k) {
    desc[k] = Intern(*groups.mutable_descs(), kinds[k].megatron_name);
    prefix[k] = Intern(kinds[k].gloo ? *groups.mutable_name_prefixes() : *comms.mutable_name_prefixes(), kinds[k].slot);
  }
  ReserveTables(kinds, world, comms, groups);
  std::vector<std::vector<uint32_t>> comm_of(kinds.size(), std::vector<uint32_t>(world, UINT32_MAX));
  uint32_t next_id = 1;
  for (const auto& [k, gi] : CreationOrder(kinds)) {
    const GroupKind& kind = kinds[k];
    const std::vector<uint32_t>& members = kind.groups[gi];
    if (kind.gloo) {
      AddTableProcessGroup(groups, desc[k], &members, prefix[k], gi + 1);
      continue;
    }
    AddTableProcessGroup(groups, desc[k], nullptr, no_name, 0);
    const uint32_t id = next_id++;
    // Members ascend (GroupsOf), as PyTorchSplitColor sorts them: hashed in place.
    const int32_t color = std::is_sorted(members.begin(), members.end())
                              ? PyTorchColorOfHash(PythonTupleHash(members))
                              : PyTorchSplitColor(members);
    AddTableCommunicator(comms, kind.kind, members, prefix[k], gi + 1, 1, color);  // split of communicator 0
    for (uint32_t m : members) comm_of[k][m] = id;
  }
  return comm_of;
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

  // Placement by the table's rule: node r / gpus_per_node (FillCluster).
  pg::RankTable& ranks = *g.mutable_rank_table();
  ranks.mutable_program()->Reserve(static_cast<int>(world));
  uint64_t slots = 0;
  for (uint32_t s = 0; s < p.pp; ++s) slots += uint64_t{world / p.pp} * (1 + stage_kinds[s].size());
  ranks.mutable_comm_slots()->Reserve(static_cast<int>(slots));
  for (uint32_t r = 0; r < world; ++r) {
    const uint32_t stage = CoordsOf(p, r).pp;
    ranks.add_program(stage);
    ranks.add_comm_slots(0);
    for (uint32_t k : stage_kinds[stage]) {
      const uint32_t id = comm_of[k][r];
      if (id == UINT32_MAX)
        return absl::InternalError(absl::StrCat("rank ", r, " is not in a ", kinds[k].slot,
                                                " group although its stage's first rank is"));
      ranks.add_comm_slots(id);
    }
  }
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
}

}  // namespace prism::graphgen
