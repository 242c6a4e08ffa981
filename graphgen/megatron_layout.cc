#include "graphgen/megatron_layout.h"

#include <algorithm>


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

RankGroups GroupsOf(const OrderedDims& dims, std::string_view token) {
  std::array<bool, 5> in_group{};
  size_t start = 0;
  while (start <= token.size()) {
    size_t end = token.find('-', start);
    if (end == std::string_view::npos) end = token.size();
    const int i = DimIndex(token.substr(start, end - start));
    if (i >= 0) in_group[i] = true;
    start = end + 1;
  }
  // Stride of each dimension in the global rank (fastest first).
  std::array<uint64_t, 5> stride{};
  uint64_t s = 1;
  for (int i = 0; i < 5; ++i) {
    stride[i] = s;
    s *= dims.size[i];
  }
  std::vector<int> member_dims, group_dims;
  for (int i = 0; i < 5; ++i) (in_group[i] ? member_dims : group_dims).push_back(i);
  uint64_t group_size = 1;
  for (int i : member_dims) group_size *= dims.size[i];
  const uint64_t groups = dims.world() / group_size;

  RankGroups out(groups);
  for (uint64_t g = 0; g < groups; ++g) {
    uint64_t base = 0, rest = g;
    for (int i : group_dims) {
      base += (rest % dims.size[i]) * stride[i];
      rest /= dims.size[i];
    }
    out[g].reserve(group_size);
    for (uint64_t m = 0; m < group_size; ++m) {
      uint64_t rank = base, r = m;
      for (int i : member_dims) {
        rank += (r % dims.size[i]) * stride[i];
        r /= dims.size[i];
      }
      out[g].push_back(static_cast<uint32_t>(rank));
    }
  }
  return out;
}

namespace {

// One singleton group per rank, in rank order: Megatron's GTP_WEIGHT_REMAT
// groups with gtp_remat_size 1 (RankGenerator.get_ranks("gtp_remat")).
RankGroups Singletons(uint64_t world) {
  RankGroups out(world);
  for (uint64_t r = 0; r < world; ++r) out[r] = {static_cast<uint32_t>(r)};
  return out;
}

}  // namespace

std::vector<GroupKind> MegatronGroupKinds(const ParallelSpec& p) {
  namespace pg = prism::graph;
  const OrderedDims dec = DecoderDims(p);
  const OrderedDims exp = ExpertDims(p);
  const bool v19 = p.megatron_version == MegatronVersion::kCoreV0_19;
  std::vector<GroupKind> kinds;
  auto add = [&](std::string slot, std::string name, pg::CommKind kind, RankGroups groups) {
    kinds.push_back(GroupKind{std::move(slot), std::move(name), kind, std::move(groups)});
  };
  // The Gloo twin of the kind just added, created in the same loop.
  auto add_gloo = [&](std::string slot, std::string name) {
    if (!p.gloo_groups) return;
    GroupKind twin{std::move(slot), std::move(name), pg::COMM_KIND_OTHER, kinds.back().groups};
    twin.gloo = true;
    twin.same_loop = true;
    kinds.push_back(std::move(twin));
  };
  auto add_same_loop = [&](std::string slot, std::string name, pg::CommKind kind, RankGroups groups) {
    add(std::move(slot), std::move(name), kind, std::move(groups));
    kinds.back().same_loop = true;
  };

  if (v19) add("gtp", "GTP_WEIGHT_REMAT_GROUP", pg::COMM_KIND_OTHER, Singletons(dec.world()));
  add("dp_cp", "DATA_PARALLEL_GROUP_WITH_CP", pg::COMM_KIND_DP_CP, GroupsOf(dec, "dp-cp"));
  add_gloo("dp_cp_gloo", "DATA_PARALLEL_GROUP_WITH_CP_GLOO");
  add("dp", "DATA_PARALLEL_GROUP", pg::COMM_KIND_DP, GroupsOf(dec, "dp"));
  add_gloo("dp_gloo", "DATA_PARALLEL_GROUP_GLOO");
  add("cp", "CONTEXT_PARALLEL_GROUP", pg::COMM_KIND_CP, GroupsOf(dec, "cp"));
  add("mp", "MODEL_PARALLEL_GROUP", pg::COMM_KIND_MP, GroupsOf(dec, "tp-pp"));
  add("tp", "TENSOR_MODEL_PARALLEL_GROUP", pg::COMM_KIND_TP, GroupsOf(dec, "tp"));

  // Pipeline groups, each followed by its embedding (first and last stage)
  // and position-embedding (first stage) group: one loop in Megatron.
  const RankGroups pipelines = GroupsOf(dec, "pp");
  RankGroups embedding, position;
  for (const auto& ranks : pipelines) {
    embedding.push_back(ranks.size() == 1 ? ranks : std::vector<uint32_t>{ranks.front(), ranks.back()});
    position.push_back({ranks.front()});
  }
  add("pp", "PIPELINE_MODEL_PARALLEL_GROUP", pg::COMM_KIND_PP, pipelines);
  add_same_loop("embd", "EMBEDDING_GROUP", pg::COMM_KIND_EMBEDDING, embedding);
  add_same_loop("pos_embd", "POSITION_EMBEDDING_GROUP", pg::COMM_KIND_POSITION_EMBEDDING, position);

  add("tp_dp_cp", "TENSOR_AND_DATA_PARALLEL_GROUP_WITH_CP", pg::COMM_KIND_TP_DP_CP, GroupsOf(dec, "tp-dp-cp"));
  add("tp_dp", "TENSOR_AND_DATA_PARALLEL_GROUP", pg::COMM_KIND_OTHER, GroupsOf(dec, "tp-dp"));
  add("tp_cp", "TENSOR_AND_CONTEXT_PARALLEL_GROUP", pg::COMM_KIND_OTHER, GroupsOf(dec, "tp-cp"));

  if (v19) add("egtp", "EXPERT_GTP_WEIGHT_REMAT_GROUP", pg::COMM_KIND_OTHER, Singletons(exp.world()));
  add("ep", "EXPERT_MODEL_PARALLEL_GROUP", pg::COMM_KIND_EP, GroupsOf(exp, "ep"));
  add("etp", "EXPERT_TENSOR_PARALLEL_GROUP", pg::COMM_KIND_EXPERT_TP, GroupsOf(exp, "tp"));
  add("tp_ep", "EXPERT_TENSOR_AND_MODEL_PARALLEL_GROUP", pg::COMM_KIND_TP_EP, GroupsOf(exp, "tp-ep"));
  const RankGroups tp_ep_pp = GroupsOf(exp, "tp-ep-pp");
  add("tp_ep_pp", "EXPERT_TENSOR_MODEL_PIPELINE_PARALLEL_GROUP", pg::COMM_KIND_OTHER, tp_ep_pp);
  if (v19) {
    add("tp_ep_pp_egtp", "EXPERT_TENSOR_MODEL_PIPELINE_PARALLEL_GROUP_WITH_EGTP", pg::COMM_KIND_OTHER, tp_ep_pp);
  }
  add("edp", "EXPERT_DATA_PARALLEL_GROUP", pg::COMM_KIND_EXPERT_DP, GroupsOf(exp, "dp"));
  add_gloo("edp_gloo", "EXPERT_DATA_PARALLEL_GROUP_GLOO");

  // One distributed-optimizer instance: the union of all tp-ep-pp groups
  // (every rank), PyTorch orders members ascending.
  std::vector<uint32_t> all;
  for (const auto& g : tp_ep_pp) all.insert(all.end(), g.begin(), g.end());
  std::sort(all.begin(), all.end());
  add("dist_opt", "INTRA_DISTRIBUTED_OPTIMIZER_INSTANCE_GROUP", pg::COMM_KIND_OTHER, RankGroups{all});
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
    for (uint32_t g = 0; g < kinds[k].groups.size(); ++g)
      for (uint32_t e = k; e < end; ++e)
        if (g < kinds[e].groups.size()) order.emplace_back(e, g);
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
