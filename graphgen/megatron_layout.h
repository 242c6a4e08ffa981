// Megatron-core's rank layout and the process groups it creates
// (module: megatron layout / communicators).
//
// Written from the behaviour of Megatron-core's parallel_state
// (initialize_model_parallel and its RankGenerator), default order
// "tp-cp-ep-dp-pp" (tp fastest, pp slowest):
//   - the decoder generator has sizes tp, cp, ep=1, dp, pp;
//   - the expert generator has sizes expert_tp, cp=1, ep, expert_dp, pp;
//   - a group of a token ("tp-pp") holds the ranks that differ only in the
//     token's dimensions; members ascend; groups are listed with the
//     remaining dimensions enumerated fastest-first.
// Group kinds are returned in the order Megatron calls new_group for them;
// the plan per release is in docs/graphgen.md.
// Pure functions of their arguments; thread-safe.
#ifndef PRISM_GRAPHGEN_MEGATRON_LAYOUT_H_
#define PRISM_GRAPHGEN_MEGATRON_LAYOUT_H_

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "graphgen/job_spec.h"
#include "proto/graph.pb.h"

namespace prism::graphgen {

using RankGroups = std::vector<std::vector<uint32_t>>;

// Sizes of the five dimensions in order tp, cp, ep, dp, pp.
struct OrderedDims {
  std::array<uint32_t, 5> size{1, 1, 1, 1, 1};
  uint64_t world() const;
};

// The decoder (dense) and expert generators' dimensions for a job.
OrderedDims DecoderDims(const ParallelSpec& p);
OrderedDims ExpertDims(const ParallelSpec& p);

// A kind's groups as a rule over the ranks' mixed-radix layout: graph.proto's
// GroupFamily fields (radix fastest first, member_dims, select_dim, select)
// with the same meaning; proto/graph_rules.h computes the members.
struct GroupRule {
  std::vector<uint32_t> radix;
  uint32_t member_dims = 0;           // bit d: dim d varies inside a group
  uint32_t select_dim = 0;            // 0: none; d + 1: member dim d takes only `select`
  std::vector<uint32_t> select;       // ascending
};

// The rule for `token` ("tp", "dp-cp", "tp-ep-pp", ...) over `dims`: a
// group holds the ranks that differ only in the token's dimensions, members
// ascend, groups are listed with the remaining dimensions enumerated
// fastest-first. Tokens name dimensions among tp, cp, ep, dp, pp ("" gives
// one group per rank). Contract: token is well formed.
GroupRule RuleOf(const OrderedDims& dims, std::string_view token);
uint32_t GroupCount(const GroupRule& rule);
// The groups a rule gives, listed (members ascending, groups in order).
RankGroups GroupsOf(const GroupRule& rule);
RankGroups GroupsOf(const OrderedDims& dims, std::string_view token);

// One kind of process group, e.g. all tensor-parallel groups.
struct GroupKind {
  std::string slot;                   // program slot name: "tp", "dp_cp", ... ("dp_gloo" for Gloo)
  std::string megatron_name;          // Megatron's group_desc, e.g. "TENSOR_MODEL_PARALLEL_GROUP"
  prism::graph::CommKind kind = prism::graph::COMM_KIND_UNSPECIFIED;
  GroupRule rule;                     // its groups, in creation order
  bool gloo = false;                  // backend="gloo": a PyTorch group, not an NCCL communicator
  // Created in the same loop as the kind before it: group i of this kind
  // comes right after group i of that kind (dp_cp then its Gloo twin; pp,
  // then its embedding and position-embedding groups). Same group count.
  bool same_loop = false;
};

// Every process group Megatron-core's initialize_model_parallel creates for
// the job with its defaults (one distributed-optimizer instance, no
// hierarchical or hybrid CP, no SHARP), NCCL and Gloo (unless
// p.gloo_groups is false), for p.megatron_version, kinds in creation order.
// Checked against the tables in test/fixtures/megatron-groups/.
std::vector<GroupKind> MegatronGroupKinds(const ParallelSpec& p);

// The kinds of `kinds` that the programs of `spec` use (job key
// parallel.process_groups: minimal), order kept: dp_cp, cp (cp > 1), mp
// (without the distributed optimizer), tp, pp, embd (tied embeddings and
// pp > 1), ep and edp (MoE). Megatron's other groups and every Gloo group
// are dropped.
std::vector<GroupKind> MinimalGroupKinds(std::vector<GroupKind> kinds, const JobSpec& spec);

// (kind index, group index) pairs in the order the groups are created: kind
// after kind, a `same_loop` kind's group i right after group i of the kind
// it follows.
std::vector<std::pair<uint32_t, uint32_t>> CreationOrder(const std::vector<GroupKind>& kinds);

// Coordinates of a global rank in the decoder layout.
struct RankCoords {
  uint32_t tp = 0, cp = 0, dp = 0, pp = 0;
};
RankCoords CoordsOf(const ParallelSpec& p, uint32_t rank);

}  // namespace prism::graphgen

#endif  // PRISM_GRAPHGEN_MEGATRON_LAYOUT_H_
