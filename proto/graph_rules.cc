#include "proto/graph_rules.h"

#include <algorithm>
#include <string>

#include "absl/strings/str_cat.h"
#include "common/limits.h"
#include "graphgen/split_color.h"
#include "proto/graph_check_errors.h"
#include "proto/graph_membership.h"

namespace prism::graph {
namespace {

using check::Invalid;

constexpr int kMaxDims = 32;

uint64_t Groups(const GroupFamily& f) {
  uint64_t n = 1;
  for (int d = 0; d < f.radix_size(); ++d)
    if (!(f.member_dims() >> d & 1)) n *= f.radix(d);
  return n;
}

// Ranks per group: the member radices' product (a select dim's selected values).
uint64_t GroupSize(const GroupFamily& f) {
  uint64_t n = 1;
  for (int d = 0; d < f.radix_size(); ++d)
    if (f.member_dims() >> d & 1) n *= f.select_dim() == static_cast<uint32_t>(d) + 1 ? f.select_size() : f.radix(d);
  return n;
}

absl::Status CheckFamilyShape(const GroupFamily& f, int i, uint64_t world) {
  const std::string where = absl::StrCat("rule family ", i, " (", f.name(), ")");
  if (f.radix_size() == 0 || f.radix_size() > kMaxDims)
    return Invalid(absl::StrCat(where, " has ", f.radix_size(), " dims, not 1 to ", kMaxDims));
  uint64_t product = 1;
  for (uint32_t r : f.radix()) {
    if (r == 0) return Invalid(absl::StrCat(where, " has a dim of radix 0"));
    product *= r;
    if (product > world) break;
  }
  if (product != world)
    return Invalid(absl::StrCat(where, "'s radices multiply to ", product, ", not the world's ", world, " ranks"));
  if (f.radix_size() < kMaxDims && (f.member_dims() >> f.radix_size()) != 0)
    return Invalid(absl::StrCat(where, " names member dims beyond its ", f.radix_size(), " dims"));
  if (!CommKind_IsValid(f.kind()))
    return Invalid(absl::StrCat(where, " has kind ", static_cast<int>(f.kind()), ", which this build does not know"));
  if (f.select_dim() == 0) {
    if (f.select_size() > 0) return Invalid(absl::StrCat(where, " selects values without a select dim"));
    return absl::OkStatus();
  }
  const uint32_t d = f.select_dim() - 1;
  if (d >= static_cast<uint32_t>(f.radix_size()) || !(f.member_dims() >> d & 1))
    return Invalid(absl::StrCat(where, " selects values of dim ", d, ", which is not one of its member dims"));
  if (f.select_size() == 0) return Invalid(absl::StrCat(where, " selects no value of dim ", d));
  for (int k = 0; k < f.select_size(); ++k)
    if (f.select(k) >= f.radix(static_cast<int>(d)) || (k > 0 && f.select(k) <= f.select(k - 1)))
      return Invalid(absl::StrCat(where, "'s selected values of dim ", d, " are not ascending below its radix ",
                                  f.radix(static_cast<int>(d))));
  return absl::OkStatus();
}

// Group i of family f takes number first + i * stride in `taken` (one flag
// per number): each number once, all below taken.size().
absl::Status TakeNumbers(const GroupFamily& f, int i, uint64_t first, uint64_t stride, std::vector<uint8_t>& taken,
                         const std::string& what) {
  const uint64_t groups = Groups(f);
  if (stride == 0 && groups > 1)
    return Invalid(absl::StrCat("rule family ", i, " (", f.name(), ") numbers its ", what, "s with stride 0"));
  for (uint64_t g = 0; g < groups; ++g) {
    const uint64_t n = first + g * stride;
    if (n >= taken.size() || taken[n])
      return Invalid(absl::StrCat("rule family ", i, " (", f.name(), ") gives group ", g, " ", what, " ", n, ", ",
                                  n >= taken.size() ? absl::StrCat("beyond the ", taken.size(), " the rules hold")
                                                    : std::string("which another group has")));
    taken[n] = 1;
  }
  return absl::OkStatus();
}

// Every rank of [first, first + count) has a selected value in f's select
// dim (walks the dim's values over the block: at most radix + 1 steps).
absl::Status CheckBlockSelected(const GroupFamily& f, uint64_t first, uint64_t count, int block) {
  if (f.select_dim() == 0) return absl::OkStatus();
  const int d = static_cast<int>(f.select_dim() - 1);
  uint64_t stride = 1;
  for (int e = 0; e < d; ++e) stride *= f.radix(e);
  const uint32_t radix = f.radix(d);
  uint64_t r = first;
  for (uint32_t step = 0; r < first + count && step <= radix; ++step) {
    const uint32_t digit = static_cast<uint32_t>(r / stride % radix);
    if (std::find(f.select().begin(), f.select().end(), digit) == f.select().end())
      return Invalid(absl::StrCat("rule block ", block, " holds rank ", r, ", which no ", f.name(),
                                  " group holds, yet one of its comm slots names that family"));
    r = (r / stride + 1) * stride;
  }
  return absl::OkStatus();
}

absl::Status CheckBlocks(const Graph& g) {
  const GraphRules& rules = g.rules();
  uint64_t first = 0;
  for (int b = 0; b < rules.blocks_size(); ++b) {
    const RankBlock& block = rules.blocks(b);
    if (block.program() >= static_cast<uint32_t>(g.programs_size()))
      return Invalid(absl::StrCat("rule block ", b, " uses program ", block.program(), " of ", g.programs_size()));
    const Program& p = g.programs(static_cast<int>(block.program()));
    if (block.slot_family_size() != p.comm_slot_names_size())
      return Invalid(absl::StrCat("rule block ", b, " maps ", block.slot_family_size(), " comm slots, its program has ",
                                  p.comm_slot_names_size()));
    for (uint32_t f : block.slot_family()) {
      if (f >= static_cast<uint32_t>(rules.families_size()) || rules.families(static_cast<int>(f)).gloo())
        return Invalid(absl::StrCat("rule block ", b, " names family ", f, ", which is not one of the ",
                                    rules.families_size(), " families or not NCCL"));
      if (auto s = CheckBlockSelected(rules.families(static_cast<int>(f)), first, block.ranks(), b); !s.ok()) return s;
    }
    first += block.ranks();
  }
  return absl::OkStatus();
}

// Process group 0 is communicator 0; the NCCL groups name the communicators
// in order (tables keep only that order, so a numbering against it would
// silently name other communicators there). One entry per process group.
absl::Status CheckProcessGroupOrder(const GraphRules& rules, uint64_t groups) {
  struct Owner {
    int family = -1;
    uint64_t group = 0;
  };
  std::vector<Owner> owner(groups);
  for (int i = 0; i < rules.families_size(); ++i) {
    const GroupFamily& f = rules.families(i);
    for (uint64_t k = 0; k < Groups(f); ++k) owner[f.first_process_group() + k * f.process_group_stride()] = {i, k};
  }
  uint64_t next_comm = 0;
  for (size_t k = 0; k < owner.size(); ++k) {
    const GroupFamily& f = rules.families(owner[k].family);
    if (f.gloo()) {
      if (k == 0) return Invalid("process group 0 (PyTorch's default group) is not communicator 0");
      continue;
    }
    const uint64_t comm = f.first_communicator() + owner[k].group * f.communicator_stride();
    if (comm != next_comm)
      return Invalid(absl::StrCat("process group ", k, " names communicator ", comm, ", expected ", next_comm,
                                  " (NCCL groups name the communicators in creation order)"));
    ++next_comm;
  }
  return absl::OkStatus();
}

}  // namespace

FamilyShape::FamilyShape(const GroupFamily& f) {
  uint64_t stride = 1, group_weight = 1;
  for (int d = 0; d < f.radix_size(); ++d) {
    Dim dim;
    dim.radix = f.radix(d);
    dim.stride = stride;
    dim.member = f.member_dims() >> d & 1;
    if (!dim.member) {
      dim.group_weight = group_weight;
      group_weight *= dim.radix;
    }
    stride *= dim.radix;
    dims_.push_back(dim);
  }
  groups_ = static_cast<uint32_t>(group_weight);
  if (f.select_dim() > 0) {
    select_dim_ = static_cast<int>(f.select_dim() - 1);
    select_index_.assign(dims_[select_dim_].radix, -1);
    for (int k = 0; k < f.select_size(); ++k) select_index_[f.select(k)] = k;
  }
  // Member offsets (member dims fastest first, the select dim over its
  // values) and group bases (the other dims fastest first), each by a
  // mixed-radix counter over its dims.
  std::vector<std::vector<uint64_t>> member_steps, group_steps;  // per dim: the rank part of each value
  for (size_t d = 0; d < dims_.size(); ++d) {
    std::vector<uint64_t> steps;
    if (static_cast<int>(d) == select_dim_)
      for (uint32_t v : f.select()) steps.push_back(v * dims_[d].stride);
    else
      for (uint32_t v = 0; v < dims_[d].radix; ++v) steps.push_back(v * dims_[d].stride);
    (dims_[d].member ? member_steps : group_steps).push_back(std::move(steps));
  }
  offset_ = Enumerate(member_steps);
  base_ = Enumerate(group_steps);
  group_size_ = static_cast<uint32_t>(offset_.size());
}

std::vector<uint32_t> FamilyShape::Enumerate(const std::vector<std::vector<uint64_t>>& steps) {
  uint64_t n = 1;
  for (const auto& s : steps) n *= s.size();
  std::vector<uint32_t> out(n);
  std::vector<size_t> digit(steps.size(), 0);
  uint64_t value = 0;
  for (uint64_t i = 0; i < n; ++i) {
    out[i] = static_cast<uint32_t>(value);
    for (size_t d = 0; d < steps.size(); ++d) {  // the next value: the fastest digit first
      value -= steps[d][digit[d]];
      if (++digit[d] < steps[d].size()) {
        value += steps[d][digit[d]];
        break;
      }
      digit[d] = 0;
      value += steps[d][0];
    }
  }
  return out;
}

void FamilyShape::Members(uint32_t g, std::vector<uint32_t>& out) const {
  out.resize(group_size_);
  for (uint32_t k = 0; k < group_size_; ++k) out[k] = base_[g] + offset_[k];
}

uint32_t FamilyShape::GroupOf(uint32_t rank) const {
  uint64_t group = 0;
  for (size_t d = 0; d < dims_.size(); ++d) {
    const Dim& dim = dims_[d];
    const uint32_t digit = static_cast<uint32_t>(rank / dim.stride % dim.radix);
    if (!dim.member) group += digit * dim.group_weight;
    else if (static_cast<int>(d) == select_dim_ && select_index_[digit] < 0) return UINT32_MAX;
  }
  return static_cast<uint32_t>(group);
}

uint32_t RulesRankCount(const GraphRules& rules) {
  uint64_t n = 0;
  for (const RankBlock& b : rules.blocks()) n += b.ranks();
  return static_cast<uint32_t>(std::min<uint64_t>(n, UINT32_MAX));
}

uint32_t RulesCommunicatorCount(const GraphRules& rules) {
  uint64_t n = 0;
  for (const GroupFamily& f : rules.families())
    if (!f.gloo()) n += Groups(f);
  return static_cast<uint32_t>(std::min<uint64_t>(n, UINT32_MAX));
}

uint32_t RulesProcessGroupCount(const GraphRules& rules) {
  uint64_t n = 0;
  for (const GroupFamily& f : rules.families()) n += Groups(f);
  return static_cast<uint32_t>(std::min<uint64_t>(n, UINT32_MAX));
}

absl::Status CheckRules(const Graph& g) {
  if (g.ranks_size() > 0 || g.communicators_size() > 0 || g.process_groups_size() > 0 || g.has_rank_table() ||
      g.has_communicator_table() || g.has_process_group_table())
    return Invalid("the graph holds rules and also records or tables of its ranks, communicators or process groups");
  const GraphRules& rules = g.rules();
  uint64_t world = 0;
  for (const RankBlock& b : rules.blocks()) world += b.ranks();
  if (world == 0) return Invalid("the rules hold no ranks");
  if (world > limits::kMaxRanks)
    return check::OverLimit(absl::StrCat("the world is ", world, " ranks"), limits::kMaxRanks, " ranks");
  if (rules.families_size() == 0) return Invalid("the rules hold no group family");
  uint64_t comms = 0, groups = 0;
  for (int i = 0; i < rules.families_size(); ++i) {
    const GroupFamily& f = rules.families(i);
    if (auto s = CheckFamilyShape(f, i, world); !s.ok()) return s;
    groups += Groups(f);
    if (!f.gloo()) comms += Groups(f);
  }
  if (groups > limits::kMaxStateEntries)
    return check::OverLimit(absl::StrCat("the rules hold ", groups, " groups"), limits::kMaxStateEntries, " groups");
  std::vector<uint8_t> comm_taken(comms, 0), group_taken(groups, 0);
  for (int i = 0; i < rules.families_size(); ++i) {
    const GroupFamily& f = rules.families(i);
    if (!f.gloo())
      if (auto s = TakeNumbers(f, i, f.first_communicator(), f.communicator_stride(), comm_taken, "communicator");
          !s.ok())
        return s;
    if (auto s = TakeNumbers(f, i, f.first_process_group(), f.process_group_stride(), group_taken, "process group");
        !s.ok())
      return s;
  }
  if (auto s = CheckProcessGroupOrder(rules, groups); !s.ok()) return s;
  return CheckBlocks(g);
}

absl::Status CheckRuleGroups(const Graph& g) {
  const GraphRules& rules = g.rules();
  for (const GroupFamily& f : rules.families()) {
    if (!f.gloo() && f.split_of_first() && f.first_communicator() == 0)
      return Invalid("communicator 0 is split from 0, which is not created before it");
    if (f.split_group() && (f.gloo() || !f.split_of_first() || f.communicator_stride() > 1 ||
                            f.process_group_stride() > 1))
      return Invalid(absl::StrCat("family ", f.name(), " is one split_group call but not an NCCL split of the "
                                  "world with consecutive communicators and process groups"));
  }
  // Per rank state, and peers and roots within the smallest group a slot names.
  const std::vector<uint64_t> p2p_ops = check::P2POpsPerProgram(g);
  std::vector<std::vector<uint32_t>> min_slot_size(g.programs_size());
  for (int i = 0; i < g.programs_size(); ++i)
    min_slot_size[i].assign(g.programs(i).comm_slot_names_size(), UINT32_MAX);
  uint64_t entries = 0;
  for (const RankBlock& b : rules.blocks()) {
    entries += uint64_t{b.ranks()} * (2 + b.slot_family_size() + p2p_ops[b.program()]);
    for (int s = 0; s < b.slot_family_size(); ++s) {
      uint32_t& m = min_slot_size[b.program()][s];
      m = static_cast<uint32_t>(std::min<uint64_t>(m, GroupSize(rules.families(static_cast<int>(b.slot_family(s))))));
    }
  }
  if (auto s = check::ValidateStateEntries(entries); !s.ok()) return s;
  return check::ValidatePeersWithin(g, min_slot_size);
}

}  // namespace prism::graph
