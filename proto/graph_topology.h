// A graph's ranks, communicators and process groups read the same way
// whichever form the graph holds them in: records (Graph.ranks,
// .communicators, .process_groups) or format 2's tables (Graph.rank_table,
// .communicator_table, .process_group_table; graph.proto).
//
// Topology::Of checks only what it needs to index the tables (columns of one
// length, sums that match, indices into the name and desc lists, programs in
// range); ValidateGraph (graph_file.h) checks the rest. ExpandTables turns
// tables into records for code that reads the records directly.
//
// A Topology borrows the Graph: the graph must outlive it and stay
// unmodified meanwhile. Immutable after Of: thread-compatible.
#ifndef PRISM_PROTO_GRAPH_TOPOLOGY_H_
#define PRISM_PROTO_GRAPH_TOPOLOGY_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "proto/graph.pb.h"

namespace prism::graph {

class Topology {
 public:
  // InvalidArgument (naming the table and the fix) when a list is held in
  // both forms, a table's columns do not fit together, or the graph holds
  // format 3's rules (graph_rules.h's ExpandRules turns them into tables). Cost: linear in
  // the ranks and communicators (prefix sums), no copy of the members.
  static absl::StatusOr<Topology> Of(const Graph& graph);

  uint32_t ranks() const { return ranks_; }
  uint32_t communicators() const { return communicators_; }
  uint32_t process_groups() const { return process_groups_; }

  uint32_t program(uint32_t r) const {
    return rank_table_ ? g_->rank_table().program(static_cast<int>(r)) : g_->ranks(static_cast<int>(r)).program();
  }
  uint32_t node(uint32_t r) const {
    if (!rank_table_) return g_->ranks(static_cast<int>(r)).node();
    return node_shift_ >= 0 ? r >> node_shift_ : r / gpus_per_node_;
  }
  uint32_t local_gpu(uint32_t r) const {
    return rank_table_ ? r % gpus_per_node_ : g_->ranks(static_cast<int>(r)).local_gpu();
  }
  // Communicator id per comm slot of the rank's program.
  absl::Span<const uint32_t> slots(uint32_t r) const;

  // Global ranks in communicator-rank order.
  absl::Span<const uint32_t> members(uint32_t c) const;
  CommKind kind(uint32_t c) const;
  std::string name(uint32_t c) const;
  bool is_split(uint32_t c) const;
  uint32_t split_parent(uint32_t c) const;  // valid when is_split
  int32_t split_color(uint32_t c) const;
  int32_t split_key(uint32_t c) const;
  bool split_same_call(uint32_t c) const;  // SplitCreation.same_call

  bool process_group_is_gloo(uint32_t k) const;  // records: any backend but NCCL
  // NCCL groups: the communicator it names. Records: its field; tables: the
  // count of NCCL groups before it (tables name communicators in order).
  uint32_t process_group_communicator(uint32_t k) const;
  absl::Span<const uint32_t> process_group_members(uint32_t k) const;  // Gloo
  std::string process_group_name(uint32_t k) const;                    // Gloo ("" for NCCL)
  const std::string& process_group_desc(uint32_t k) const;

  bool has_tables() const { return rank_table_ || comm_table_ || pg_table_; }

 private:
  Topology() = default;

  const Graph* g_ = nullptr;
  bool rank_table_ = false, comm_table_ = false, pg_table_ = false;
  uint32_t ranks_ = 0, communicators_ = 0, process_groups_ = 0;
  uint32_t gpus_per_node_ = 1;
  int node_shift_ = -1;  // log2(gpus_per_node_) when a power of two (node() without a division)
  std::vector<uint64_t> slot_begin_;    // rank table: rank -> first entry of comm_slots (ranks + 1)
  std::vector<uint64_t> member_begin_;  // communicator table: id -> first entry of members (+ 1)
  std::vector<uint64_t> gloo_begin_;    // process group table: group -> first Gloo member (+ 1)
  std::vector<uint32_t> nccl_before_;   // process group table: NCCL groups before group k
};

// The rank count and a rank's program in either form, in constant time (no
// Topology built). Contract for ProgramOfRank: r < RankCount(graph).
uint32_t RankCount(const Graph& graph);
uint32_t ProgramOfRank(const Graph& graph, uint32_t r);

// Replaces `graph`'s tables by the records they stand for (exactly the
// records format 1 would hold: ids, names, split fields, node = r /
// gpus_per_node). A graph without tables is left as it is. The graph must
// have passed Topology::Of (ValidateGraph does it).
void ExpandTables(Graph& graph);

}  // namespace prism::graph

#endif  // PRISM_PROTO_GRAPH_TOPOLOGY_H_
