#include "proto/graph_topology.h"

#include <bit>

#include "absl/strings/str_cat.h"

namespace prism::graph {
namespace {

absl::Status BadTable(std::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat("invalid graph: ", std::string(what), " (regenerate it with prism-graphgen)"));
}

// Prefix sums of `sizes`; false when they pass `total` entries.
template <typename Sizes>
bool PrefixSums(const Sizes& sizes, uint64_t total, std::vector<uint64_t>& begin) {
  begin.assign(1, 0);
  begin.reserve(static_cast<size_t>(sizes.size()) + 1);
  for (const auto s : sizes) {
    begin.push_back(begin.back() + s);
    if (begin.back() > total) return false;
  }
  return begin.back() == total;
}

std::string TableName(const google::protobuf::RepeatedPtrField<std::string>& prefixes, uint32_t prefix,
                      uint32_t index) {
  std::string name = prefixes.Get(static_cast<int>(prefix));
  if (index > 0) absl::StrAppend(&name, "[", index - 1, "]");
  return name;
}

absl::Status CheckNames(const google::protobuf::RepeatedPtrField<std::string>& prefixes,
                        const google::protobuf::RepeatedField<uint32_t>& prefix, std::string_view table) {
  for (int i = 0; i < prefix.size(); ++i)
    if (prefix[i] >= static_cast<uint32_t>(prefixes.size()))
      return BadTable(absl::StrCat(std::string(table), " entry ", i, " names prefix ", prefix[i], " of ", prefixes.size()));
  return absl::OkStatus();
}

absl::Status IndexRankTable(const Graph& g, std::vector<uint64_t>& slot_begin) {
  const RankTable& t = g.rank_table();
  if (g.ranks_size() > 0) return BadTable("the graph holds its ranks both as records and as a rank table");
  std::vector<uint32_t> slots_of(g.programs_size());
  for (int i = 0; i < g.programs_size(); ++i) slots_of[i] = g.programs(i).comm_slot_names_size();
  slot_begin.assign(1, 0);
  slot_begin.reserve(static_cast<size_t>(t.program_size()) + 1);
  for (int r = 0; r < t.program_size(); ++r) {
    if (t.program(r) >= slots_of.size())
      return BadTable(absl::StrCat("rank ", r, " uses program ", t.program(r), " of ", slots_of.size()));
    slot_begin.push_back(slot_begin.back() + slots_of[t.program(r)]);
  }
  if (slot_begin.back() != static_cast<uint64_t>(t.comm_slots_size()))
    return BadTable(absl::StrCat("the rank table's programs have ", slot_begin.back(), " comm slots in all, its ",
                                 "comm_slots column holds ", t.comm_slots_size()));
  return absl::OkStatus();
}

absl::Status IndexCommunicatorTable(const Graph& g, std::vector<uint64_t>& member_begin) {
  const CommunicatorTable& t = g.communicator_table();
  if (g.communicators_size() > 0)
    return BadTable("the graph holds its communicators both as records and as a communicator table");
  const int n = t.kind_size();
  if (t.size_size() != n || t.name_prefix_size() != n || t.name_index_size() != n || t.split_parent_size() != n ||
      t.split_color_size() != n || t.split_key_size() != n ||
      (t.split_same_call_size() != 0 && t.split_same_call_size() != n))
    return BadTable("the communicator table's columns differ in length");
  if (!PrefixSums(t.size(), static_cast<uint64_t>(t.members_size()), member_begin))
    return BadTable(absl::StrCat("the communicator table's sizes do not add up to its ", t.members_size(),
                                 " members"));
  return CheckNames(t.name_prefixes(), t.name_prefix(), "communicator table");
}

absl::Status IndexProcessGroupTable(const Graph& g, std::vector<uint64_t>& gloo_begin,
                                    std::vector<uint32_t>& nccl_before) {
  const ProcessGroupTable& t = g.process_group_table();
  if (g.process_groups_size() > 0)
    return BadTable("the graph holds its process groups both as records and as a process group table");
  const int n = t.gloo_size_size();
  if (t.desc_size() != n || t.name_prefix_size() != n || t.name_index_size() != n)
    return BadTable("the process group table's columns differ in length");
  if (!PrefixSums(t.gloo_size(), static_cast<uint64_t>(t.gloo_members_size()), gloo_begin))
    return BadTable(absl::StrCat("the process group table's Gloo sizes do not add up to its ",
                                 t.gloo_members_size(), " members"));
  for (int k = 0; k < n; ++k)
    if (t.desc(k) >= static_cast<uint32_t>(t.descs_size()))
      return BadTable(absl::StrCat("process group table entry ", k, " names desc ", t.desc(k), " of ",
                                   t.descs_size()));
  nccl_before.assign(1, 0);
  nccl_before.reserve(static_cast<size_t>(n) + 1);
  for (int k = 0; k < n; ++k) nccl_before.push_back(nccl_before.back() + (t.gloo_size(k) == 0 ? 1 : 0));
  return CheckNames(t.name_prefixes(), t.name_prefix(), "process group table");
}

}  // namespace

absl::StatusOr<Topology> Topology::Of(const Graph& g) {
  if (g.has_rules())
    return BadTable("the graph holds format 3's rules: expand them first (graph_rules.h's ExpandRules; "
                    "graph_file.h's readers do)");
  Topology t;
  t.g_ = &g;
  t.rank_table_ = g.has_rank_table();
  t.comm_table_ = g.has_communicator_table();
  t.pg_table_ = g.has_process_group_table();
  t.gpus_per_node_ = g.cluster().gpus_per_node() == 0 ? 1 : g.cluster().gpus_per_node();
  if (std::has_single_bit(t.gpus_per_node_)) t.node_shift_ = std::countr_zero(t.gpus_per_node_);
  if (t.rank_table_) {
    if (auto s = IndexRankTable(g, t.slot_begin_); !s.ok()) return s;
    t.ranks_ = static_cast<uint32_t>(g.rank_table().program_size());
  } else {
    t.ranks_ = static_cast<uint32_t>(g.ranks_size());
  }
  if (t.comm_table_) {
    if (auto s = IndexCommunicatorTable(g, t.member_begin_); !s.ok()) return s;
    t.communicators_ = static_cast<uint32_t>(g.communicator_table().kind_size());
  } else {
    t.communicators_ = static_cast<uint32_t>(g.communicators_size());
  }
  if (t.pg_table_) {
    if (auto s = IndexProcessGroupTable(g, t.gloo_begin_, t.nccl_before_); !s.ok()) return s;
    t.process_groups_ = static_cast<uint32_t>(g.process_group_table().gloo_size_size());
  } else {
    t.process_groups_ = static_cast<uint32_t>(g.process_groups_size());
  }
  return t;
}

absl::Span<const uint32_t> Topology::slots(uint32_t r) const {
  if (!rank_table_) {
    const auto& s = g_->ranks(static_cast<int>(r)).comm_slots();
    return absl::MakeConstSpan(s.data(), static_cast<size_t>(s.size()));
  }
  return absl::MakeConstSpan(g_->rank_table().comm_slots().data() + slot_begin_[r],
                             static_cast<size_t>(slot_begin_[r + 1] - slot_begin_[r]));
}

absl::Span<const uint32_t> Topology::members(uint32_t c) const {
  if (!comm_table_) {
    const auto& m = g_->communicators(static_cast<int>(c)).members();
    return absl::MakeConstSpan(m.data(), static_cast<size_t>(m.size()));
  }
  return absl::MakeConstSpan(g_->communicator_table().members().data() + member_begin_[c],
                             static_cast<size_t>(member_begin_[c + 1] - member_begin_[c]));
}

CommKind Topology::kind(uint32_t c) const {
  return comm_table_ ? g_->communicator_table().kind(static_cast<int>(c)) : g_->communicators(static_cast<int>(c)).kind();
}

std::string Topology::name(uint32_t c) const {
  if (!comm_table_) return g_->communicators(static_cast<int>(c)).name();
  const CommunicatorTable& t = g_->communicator_table();
  return TableName(t.name_prefixes(), t.name_prefix(static_cast<int>(c)), t.name_index(static_cast<int>(c)));
}

bool Topology::is_split(uint32_t c) const {
  return comm_table_ ? g_->communicator_table().split_parent(static_cast<int>(c)) > 0
                     : g_->communicators(static_cast<int>(c)).has_split();
}

uint32_t Topology::split_parent(uint32_t c) const {
  return comm_table_ ? g_->communicator_table().split_parent(static_cast<int>(c)) - 1
                     : g_->communicators(static_cast<int>(c)).split().parent();
}

int32_t Topology::split_color(uint32_t c) const {
  return comm_table_ ? g_->communicator_table().split_color(static_cast<int>(c))
                     : g_->communicators(static_cast<int>(c)).split().color();
}

bool Topology::split_same_call(uint32_t c) const {
  if (!comm_table_) return g_->communicators(static_cast<int>(c)).split().same_call();
  const CommunicatorTable& t = g_->communicator_table();
  return c < static_cast<uint32_t>(t.split_same_call_size()) && t.split_same_call(static_cast<int>(c));
}

int32_t Topology::split_key(uint32_t c) const {
  return comm_table_ ? g_->communicator_table().split_key(static_cast<int>(c))
                     : g_->communicators(static_cast<int>(c)).split().key();
}

bool Topology::process_group_is_gloo(uint32_t k) const {
  return pg_table_ ? g_->process_group_table().gloo_size(static_cast<int>(k)) > 0
                   : g_->process_groups(static_cast<int>(k)).backend() != ProcessGroup::NCCL;
}

uint32_t Topology::process_group_communicator(uint32_t k) const {
  return pg_table_ ? nccl_before_[k] : g_->process_groups(static_cast<int>(k)).communicator();
}

absl::Span<const uint32_t> Topology::process_group_members(uint32_t k) const {
  if (!pg_table_) {
    const auto& m = g_->process_groups(static_cast<int>(k)).members();
    return absl::MakeConstSpan(m.data(), static_cast<size_t>(m.size()));
  }
  return absl::MakeConstSpan(g_->process_group_table().gloo_members().data() + gloo_begin_[k],
                             static_cast<size_t>(gloo_begin_[k + 1] - gloo_begin_[k]));
}

std::string Topology::process_group_name(uint32_t k) const {
  if (!pg_table_) return g_->process_groups(static_cast<int>(k)).name();
  const ProcessGroupTable& t = g_->process_group_table();
  if (t.gloo_size(static_cast<int>(k)) == 0) return "";
  return TableName(t.name_prefixes(), t.name_prefix(static_cast<int>(k)), t.name_index(static_cast<int>(k)));
}

const std::string& Topology::process_group_desc(uint32_t k) const {
  if (!pg_table_) return g_->process_groups(static_cast<int>(k)).desc();
  const ProcessGroupTable& t = g_->process_group_table();
  return t.descs(static_cast<int>(t.desc(static_cast<int>(k))));
}

uint32_t RankCount(const Graph& g) {
  return static_cast<uint32_t>(g.has_rank_table() ? g.rank_table().program_size() : g.ranks_size());
}

uint32_t ProgramOfRank(const Graph& g, uint32_t r) {
  return g.has_rank_table() ? g.rank_table().program(static_cast<int>(r)) : g.ranks(static_cast<int>(r)).program();
}

void ExpandTables(Graph& g) {
  if (!g.has_rank_table() && !g.has_communicator_table() && !g.has_process_group_table()) return;
  Graph records;  // the expanded lists, built while the tables are read
  {
    auto topology = Topology::Of(g);
    if (!topology.ok()) return;  // contract: the caller validated the graph
    const Topology& t = *topology;
    if (g.has_rank_table()) {
      records.mutable_ranks()->Reserve(static_cast<int>(t.ranks()));
      for (uint32_t r = 0; r < t.ranks(); ++r) {
        Rank* rk = records.add_ranks();
        rk->set_rank(r);
        rk->set_program(t.program(r));
        rk->set_node(t.node(r));
        rk->set_local_gpu(t.local_gpu(r));
        const auto slots = t.slots(r);
        rk->mutable_comm_slots()->Add(slots.begin(), slots.end());
      }
    }
    if (g.has_communicator_table()) {
      records.mutable_communicators()->Reserve(static_cast<int>(t.communicators()));
      for (uint32_t c = 0; c < t.communicators(); ++c) {
        Communicator* x = records.add_communicators();
        x->set_id(c);
        x->set_kind(t.kind(c));
        x->set_name(t.name(c));
        const auto members = t.members(c);
        x->mutable_members()->Add(members.begin(), members.end());
        if (!t.is_split(c)) {
          x->mutable_init();
          continue;
        }
        SplitCreation* split = x->mutable_split();
        split->set_parent(t.split_parent(c));
        split->set_color(t.split_color(c));
        split->set_key(t.split_key(c));
        split->set_same_call(t.split_same_call(c));
      }
    }
    if (g.has_process_group_table()) {
      records.mutable_process_groups()->Reserve(static_cast<int>(t.process_groups()));
      for (uint32_t k = 0; k < t.process_groups(); ++k) {
        ProcessGroup* p = records.add_process_groups();
        p->set_desc(t.process_group_desc(k));
        if (!t.process_group_is_gloo(k)) {
          p->set_communicator(t.process_group_communicator(k));
          continue;
        }
        p->set_backend(ProcessGroup::GLOO);
        p->set_name(t.process_group_name(k));
        const auto members = t.process_group_members(k);
        p->mutable_members()->Add(members.begin(), members.end());
      }
    }
  }
  if (g.has_rank_table()) {
    g.mutable_ranks()->Swap(records.mutable_ranks());
    g.clear_rank_table();
  }
  if (g.has_communicator_table()) {
    g.mutable_communicators()->Swap(records.mutable_communicators());
    g.clear_communicator_table();
  }
  if (g.has_process_group_table()) {
    g.mutable_process_groups()->Swap(records.mutable_process_groups());
    g.clear_process_group_table();
  }
}

}  // namespace prism::graph
