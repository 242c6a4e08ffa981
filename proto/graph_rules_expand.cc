// ExpandRules (graph_rules.h): format 3's rules into format 2's tables.
#include <string>
#include <utility>
#include <vector>

#include "graphgen/split_color.h"
#include "proto/graph_rules.h"

namespace prism::graph {
namespace {

using Strings = google::protobuf::RepeatedPtrField<std::string>;

// Index of `text` in `list`, appended when absent (a handful of entries).
uint32_t Intern(Strings& list, const std::string& text) {
  for (int i = 0; i < list.size(); ++i)
    if (list[i] == text) return static_cast<uint32_t>(i);
  *list.Add() = text;
  return static_cast<uint32_t>(list.size() - 1);
}

// `column` holding n entries, uninitialised: the caller writes every one
// (no zero fill first: a 131,072-rank job's columns hold millions).
template <typename T>
T* Sized(google::protobuf::RepeatedField<T>* column, uint64_t n) {
  column->Clear();
  column->Reserve(static_cast<int>(n));
  return column->AddNAlreadyReserved(static_cast<int>(n));
}

// A family's group index of consecutive ranks, one rank at a time (a
// mixed-radix counter: no division per rank).
class GroupCursor {
 public:
  GroupCursor(const GroupFamily& f, uint32_t rank) {
    uint64_t weight = 1;
    for (int d = 0; d < f.radix_size(); ++d) {
      const bool member = f.member_dims() >> d & 1;
      const uint32_t digit = static_cast<uint32_t>(rank % f.radix(d));
      rank /= f.radix(d);
      dims_.push_back({f.radix(d), member ? 0 : weight, digit});
      group_ += digit * dims_.back().weight;
      if (!member) weight *= f.radix(d);
    }
  }
  uint64_t group() const { return group_; }
  void Next() {
    for (Dim& d : dims_) {
      group_ += d.weight;
      if (++d.digit < d.radix) return;
      group_ -= uint64_t{d.radix} * d.weight;
      d.digit = 0;
    }
  }

 private:
  struct Dim {
    uint32_t radix;
    uint64_t weight;
    uint32_t digit;
  };
  std::vector<Dim> dims_;
  uint64_t group_ = 0;
};

void ExpandRanks(const GraphRules& rules, uint32_t world, RankTable& t) {
  uint64_t slots = 0;
  for (const RankBlock& b : rules.blocks()) slots += uint64_t{b.ranks()} * b.slot_family_size();
  uint32_t* program = Sized(t.mutable_program(), world);
  uint32_t* out = Sized(t.mutable_comm_slots(), slots);
  uint32_t first = 0;
  for (const RankBlock& b : rules.blocks()) {
    const size_t n = static_cast<size_t>(b.slot_family_size());
    std::fill(program + first, program + first + b.ranks(), b.program());
    for (size_t s = 0; s < n; ++s) {
      const GroupFamily& f = rules.families(static_cast<int>(b.slot_family(static_cast<int>(s))));
      GroupCursor cursor(f, first);
      for (uint32_t i = 0; i < b.ranks(); ++i, cursor.Next())
        out[i * n + s] = static_cast<uint32_t>(f.first_communicator() + cursor.group() * f.communicator_stride());
    }
    out += uint64_t{b.ranks()} * n;
    first += b.ranks();
  }
}

struct Owner {
  uint32_t family = 0, group = 0;
};

void ExpandCommunicators(const GraphRules& rules, const std::vector<FamilyShape>& shapes,
                         const std::vector<Owner>& owner, CommunicatorTable& t) {
  std::vector<uint32_t> prefix(shapes.size(), 0);
  for (size_t f = 0; f < shapes.size(); ++f)
    if (!rules.families(static_cast<int>(f)).gloo())
      prefix[f] = Intern(*t.mutable_name_prefixes(), rules.families(static_cast<int>(f)).name());
  const uint64_t n = owner.size();
  uint64_t members = 0;
  for (const Owner& o : owner) members += shapes[o.family].group_size();
  int* kind = Sized(t.mutable_kind(), n);
  uint32_t* size = Sized(t.mutable_size(), n);
  uint32_t* name_prefix = Sized(t.mutable_name_prefix(), n);
  uint32_t* name_index = Sized(t.mutable_name_index(), n);
  uint32_t* split_parent = Sized(t.mutable_split_parent(), n);
  int32_t* split_color = Sized(t.mutable_split_color(), n);
  int32_t* split_key = Sized(t.mutable_split_key(), n);
  bool any_split_group = false;
  for (const GroupFamily& f : rules.families()) any_split_group |= f.split_group();
  bool* same_call = any_split_group ? Sized(t.mutable_split_same_call(), n) : nullptr;
  uint32_t* out = Sized(t.mutable_members(), members);
  for (uint64_t c = 0; c < n; ++c) {
    const Owner& o = owner[c];
    const GroupFamily& f = rules.families(static_cast<int>(o.family));
    const FamilyShape& shape = shapes[o.family];
    kind[c] = f.kind();
    size[c] = shape.group_size();
    name_prefix[c] = prefix[o.family];
    name_index[c] = f.plain_name() ? 0 : o.group + 1;
    split_parent[c] = f.split_of_first() ? 1 : 0;
    split_key[c] = 0;  // PyTorch's index of members[0] in the sorted group
    graphgen::PythonTupleHasher hash;  // members ascend: PyTorch's sorted tuple, hashed as they come
    const uint32_t lowest = shape.Member(o.group, 0);  // split_group's color (graphgen/split_color.h)
    for (uint32_t m = 0; m < shape.group_size(); ++m) {
      *out = shape.Member(o.group, m);
      hash.Add(*out++);
    }
    split_color[c] = !f.split_of_first() ? 0
                     : f.split_group()   ? static_cast<int32_t>(lowest)
                                         : graphgen::PyTorchColorOfHash(hash.Value());
    if (same_call != nullptr) same_call[c] = f.split_of_first() && f.split_group() && o.group > 0;
  }
}

void ExpandProcessGroups(const GraphRules& rules, const std::vector<FamilyShape>& shapes,
                         const std::vector<Owner>& owner, ProcessGroupTable& t) {
  const uint32_t no_name = Intern(*t.mutable_name_prefixes(), "");
  std::vector<uint32_t> desc(shapes.size()), prefix(shapes.size(), no_name);
  for (size_t f = 0; f < shapes.size(); ++f) {
    const GroupFamily& family = rules.families(static_cast<int>(f));
    desc[f] = Intern(*t.mutable_descs(), family.desc());
    if (family.gloo()) prefix[f] = Intern(*t.mutable_name_prefixes(), family.name());
  }
  const uint64_t n = owner.size();
  uint64_t members = 0;
  for (const Owner& o : owner)
    if (rules.families(static_cast<int>(o.family)).gloo()) members += shapes[o.family].group_size();
  uint32_t* gloo_size = Sized(t.mutable_gloo_size(), n);
  uint32_t* desc_of = Sized(t.mutable_desc(), n);
  uint32_t* name_prefix = Sized(t.mutable_name_prefix(), n);
  uint32_t* name_index = Sized(t.mutable_name_index(), n);
  uint32_t* out = Sized(t.mutable_gloo_members(), members);
  for (uint64_t k = 0; k < n; ++k) {
    const Owner& o = owner[k];
    const GroupFamily& f = rules.families(static_cast<int>(o.family));
    desc_of[k] = desc[o.family];
    name_prefix[k] = prefix[o.family];
    gloo_size[k] = 0;
    name_index[k] = 0;
    if (!f.gloo()) continue;  // NCCL: names the next communicator; no name of its own
    const FamilyShape& shape = shapes[o.family];
    gloo_size[k] = shape.group_size();
    name_index[k] = f.plain_name() ? 0 : o.group + 1;
    for (uint32_t m = 0; m < shape.group_size(); ++m) *out++ = shape.Member(o.group, m);
  }
}

}  // namespace

void ExpandRules(Graph& g) {
  if (!g.has_rules()) return;
  GraphRules rules = std::move(*g.mutable_rules());
  g.clear_rules();
  std::vector<FamilyShape> shapes;
  shapes.reserve(static_cast<size_t>(rules.families_size()));
  for (const GroupFamily& f : rules.families()) shapes.emplace_back(f);
  std::vector<Owner> comm_owner(RulesCommunicatorCount(rules)), group_owner(RulesProcessGroupCount(rules));
  for (uint32_t f = 0; f < shapes.size(); ++f) {
    const GroupFamily& family = rules.families(static_cast<int>(f));
    for (uint32_t i = 0; i < shapes[f].groups(); ++i) {
      if (!family.gloo()) comm_owner[family.first_communicator() + uint64_t{i} * family.communicator_stride()] = {f, i};
      group_owner[family.first_process_group() + uint64_t{i} * family.process_group_stride()] = {f, i};
    }
  }
  ExpandRanks(rules, RulesRankCount(rules), *g.mutable_rank_table());
  ExpandCommunicators(rules, shapes, comm_owner, *g.mutable_communicator_table());
  ExpandProcessGroups(rules, shapes, group_owner, *g.mutable_process_group_table());
}

}  // namespace prism::graph
