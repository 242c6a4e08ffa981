#include "graphgen/megatron_layout.h"

#include <algorithm>

#include "proto/graph_rules.h"


namespace prism::graphgen {
namespace {

constexpr std::array<std::string_view, 5> kOrder = {"tp", "cp", "ep", "dp", "pp"};

int DimIndex(std::string_view name) {
  for (size_t i = 0; i < kOrder.size(); ++i)
    if (kOrder[i] == name) return static_cast<int>(i);
  return -1;
}

}  // namespace

uint64_t OrderedDims::world() const {
  uint64_t w = 1;
  for (uint32_t s : size) w *= s;
  return w;
}

OrderedDims DecoderDims(const ParallelSpec& p) { return OrderedDims{{p.tp, p.cp, 1, p.dp, p.pp}}; }

OrderedDims ExpertDims(const ParallelSpec& p) {
  return OrderedDims{{p.expert_tp, 1, p.ep, static_cast<uint32_t>(p.expert_dp()), p.pp}};
}

GroupRule RuleOf(const OrderedDims& dims, std::string_view token) {
  GroupRule rule;
  rule.radix.assign(dims.size.begin(), dims.size.end());
  size_t start = 0;
  while (start <= token.size()) {
    size_t end = token.find('-', start);
    if (end == std::string_view::npos) end = token.size();
    const int i = DimIndex(token.substr(start, end - start));
    if (i >= 0) rule.member_dims |= 1u << i;
    start = end + 1;
  }
  return rule;
}

namespace {

prism::graph::GroupFamily FamilyOf(const GroupRule& rule) {
  prism::graph::GroupFamily f;
  f.mutable_radix()->Add(rule.radix.begin(), rule.radix.end());
  f.set_member_dims(rule.member_dims);
  f.set_select_dim(rule.select_dim);
  f.mutable_select()->Add(rule.select.begin(), rule.select.end());
  return f;
}

// Pipeline rule `pp` with member dim pp (the last) limited to `values`.
GroupRule SelectStages(GroupRule pp, std::vector<uint32_t> values) {
  pp.select_dim = static_cast<uint32_t>(pp.radix.size());
  pp.select = std::move(values);
  return pp;
}

}  // namespace

uint32_t GroupCount(const GroupRule& rule) {
  uint64_t n = 1;
  for (size_t d = 0; d < rule.radix.size(); ++d)
    if (!(rule.member_dims >> d & 1)) n *= rule.radix[d];
  return static_cast<uint32_t>(n);
}

RankGroups GroupsOf(const GroupRule& rule) {
  const prism::graph::FamilyShape shape(FamilyOf(rule));
  RankGroups out(shape.groups());
  for (uint32_t g = 0; g < shape.groups(); ++g) shape.Members(g, out[g]);
  return out;
}

RankGroups GroupsOf(const OrderedDims& dims, std::string_view token) { return GroupsOf(RuleOf(dims, token)); }

std::vector<GroupKind> MegatronGroupKinds(const ParallelSpec& p) {
  namespace pg = prism::graph;
  const OrderedDims dec = DecoderDims(p);
  const OrderedDims exp = ExpertDims(p);
  const bool v19 = p.megatron_version == MegatronVersion::kCoreV0_19;
  std::vector<GroupKind> kinds;
  auto add = [&](std::string slot, std::string name, pg::CommKind kind, GroupRule rule) {
    kinds.push_back(GroupKind{std::move(slot), std::move(name), kind, std::move(rule)});
  };
  // The Gloo twin of the kind just added, created in the same loop.
  auto add_gloo = [&](std::string slot, std::string name) {
    if (!p.gloo_groups) return;
    GroupKind twin{std::move(slot), std::move(name), pg::COMM_KIND_OTHER, kinds.back().rule};
    twin.gloo = true;
    twin.same_loop = true;
    kinds.push_back(std::move(twin));
  };
  auto add_same_loop = [&](std::string slot, std::string name, pg::CommKind kind, GroupRule rule) {
    add(std::move(slot), std::move(name), kind, std::move(rule));
    kinds.back().same_loop = true;
  };

  if (v19) add("gtp", "GTP_WEIGHT_REMAT_GROUP", pg::COMM_KIND_OTHER, RuleOf(dec, ""));
  add("dp_cp", "DATA_PARALLEL_GROUP_WITH_CP", pg::COMM_KIND_DP_CP, RuleOf(dec, "dp-cp"));
  add_gloo("dp_cp_gloo", "DATA_PARALLEL_GROUP_WITH_CP_GLOO");
  add("dp", "DATA_PARALLEL_GROUP", pg::COMM_KIND_DP, RuleOf(dec, "dp"));
  add_gloo("dp_gloo", "DATA_PARALLEL_GROUP_GLOO");
  add("cp", "CONTEXT_PARALLEL_GROUP", pg::COMM_KIND_CP, RuleOf(dec, "cp"));
  add("mp", "MODEL_PARALLEL_GROUP", pg::COMM_KIND_MP, RuleOf(dec, "tp-pp"));
  add("tp", "TENSOR_MODEL_PARALLEL_GROUP", pg::COMM_KIND_TP, RuleOf(dec, "tp"));

  // Pipeline groups, each followed by its embedding (first and last stage)
  // and position-embedding (first stage) group: one loop in Megatron.
  const GroupRule pipelines = RuleOf(dec, "pp");
  // First and last stage (the one stage when pp is 1), and the first.
  const GroupRule embedding = SelectStages(pipelines, p.pp == 1 ? std::vector<uint32_t>{0}
                                                                 : std::vector<uint32_t>{0, p.pp - 1});
  const GroupRule position = SelectStages(pipelines, {0});
  add("pp", "PIPELINE_MODEL_PARALLEL_GROUP", pg::COMM_KIND_PP, pipelines);
  add_same_loop("embd", "EMBEDDING_GROUP", pg::COMM_KIND_EMBEDDING, embedding);
  add_same_loop("pos_embd", "POSITION_EMBEDDING_GROUP", pg::COMM_KIND_POSITION_EMBEDDING, position);

  add("tp_dp_cp", "TENSOR_AND_DATA_PARALLEL_GROUP_WITH_CP", pg::COMM_KIND_TP_DP_CP, RuleOf(dec, "tp-dp-cp"));
  add("tp_dp", "TENSOR_AND_DATA_PARALLEL_GROUP", pg::COMM_KIND_OTHER, RuleOf(dec, "tp-dp"));
  add("tp_cp", "TENSOR_AND_CONTEXT_PARALLEL_GROUP", pg::COMM_KIND_OTHER, RuleOf(dec, "tp-cp"));

  if (v19) add("egtp", "EXPERT_GTP_WEIGHT_REMAT_GROUP", pg::COMM_KIND_OTHER, RuleOf(exp, ""));
  add("ep", "EXPERT_MODEL_PARALLEL_GROUP", pg::COMM_KIND_EP, RuleOf(exp, "ep"));
  add("etp", "EXPERT_TENSOR_PARALLEL_GROUP", pg::COMM_KIND_EXPERT_TP, RuleOf(exp, "tp"));
  add("tp_ep", "EXPERT_TENSOR_AND_MODEL_PARALLEL_GROUP", pg::COMM_KIND_TP_EP, RuleOf(exp, "tp-ep"));
  const GroupRule tp_ep_pp = RuleOf(exp, "tp-ep-pp");
  add("tp_ep_pp", "EXPERT_TENSOR_MODEL_PIPELINE_PARALLEL_GROUP", pg::COMM_KIND_OTHER, tp_ep_pp);
  if (v19) {
    add("tp_ep_pp_egtp", "EXPERT_TENSOR_MODEL_PIPELINE_PARALLEL_GROUP_WITH_EGTP", pg::COMM_KIND_OTHER, tp_ep_pp);
  }
  add("edp", "EXPERT_DATA_PARALLEL_GROUP", pg::COMM_KIND_EXPERT_DP, RuleOf(exp, "dp"));
  add_gloo("edp_gloo", "EXPERT_DATA_PARALLEL_GROUP_GLOO");

  // One distributed-optimizer instance: the union of all tp-ep-pp groups
  // (every rank), PyTorch orders members ascending.
  add("dist_opt", "INTRA_DISTRIBUTED_OPTIMIZER_INSTANCE_GROUP", pg::COMM_KIND_OTHER, RuleOf(exp, "tp-cp-ep-dp-pp"));
  return kinds;
}

std::vector<GroupKind> MinimalGroupKinds(std::vector<GroupKind> kinds, const JobSpec& spec) {
  const ParallelSpec& p = spec.parallel;
  auto used = [&](const GroupKind& k) {
    const std::string& slot = k.slot;
    if (k.gloo) return false;
    if (slot == "dp_cp" || slot == "tp" || slot == "pp") return true;
    if (slot == "cp") return p.cp > 1;
    if (slot == "mp") return !p.distributed_optimizer;
    if (slot == "embd") return spec.model.tied_embeddings && p.pp > 1;
    if (slot == "ep" || slot == "edp") return spec.model.moe();
    return false;
  };
  std::erase_if(kinds, [&](const GroupKind& k) { return !used(k); });
  return kinds;
}

std::vector<std::pair<uint32_t, uint32_t>> CreationOrder(const std::vector<GroupKind>& kinds) {
  std::vector<std::pair<uint32_t, uint32_t>> order;
  for (uint32_t k = 0; k < kinds.size(); ++k) {
    if (kinds[k].same_loop && k > 0) continue;  // emitted with the kind it follows
    uint32_t end = k + 1;                       // kinds [k, end) share one loop
    while (end < kinds.size() && kinds[end].same_loop) ++end;
    std::vector<uint32_t> count(end - k);
    for (uint32_t e = k; e < end; ++e) count[e - k] = GroupCount(kinds[e].rule);
    for (uint32_t g = 0; g < count[0]; ++g)
      for (uint32_t e = k; e < end; ++e)
        if (g < count[e - k]) order.emplace_back(e, g);
  }
  return order;
}

RankCoords CoordsOf(const ParallelSpec& p, uint32_t rank) {
  RankCoords c;
  c.tp = rank % p.tp;
  rank /= p.tp;
  c.cp = rank % p.cp;
  rank /= p.cp;
  c.dp = rank % p.dp;
  rank /= p.dp;
  c.pp = rank;
  return c;
}

}  // namespace prism::graphgen
