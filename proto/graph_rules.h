// Format 3's rules (graph.proto's GraphRules): communicators and process
// groups as families of groups over a mixed-radix layout of the ranks, ranks
// as blocks sharing a program. A family's members are computed, never
// listed, so a family holds its ranks by construction: every member is a
// rank of the world, each once, and a rank whose slot names a family is in
// the group the rule gives it. CheckRules therefore costs what the rules
// are (families x dims, blocks x slots), not what the ranks are.
//
// Pure functions and plain values; thread-safe.
#ifndef PRISM_PROTO_GRAPH_RULES_H_
#define PRISM_PROTO_GRAPH_RULES_H_

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "proto/graph.pb.h"

namespace prism::graph {

// A family's arithmetic. Contract: the family passed CheckRules (or was
// built well formed: radices >= 1, select values ascending below their
// radix).
class FamilyShape {
 public:
  explicit FamilyShape(const GroupFamily& family);

  uint32_t groups() const { return groups_; }
  uint32_t group_size() const { return group_size_; }
  // The global rank of member k (< group_size) of group g (< groups).
  uint32_t Member(uint32_t g, uint32_t k) const { return base_[g] + offset_[k]; }
  // Members of group g, ascending.
  void Members(uint32_t g, std::vector<uint32_t>& out) const;
  // The group holding `rank`, or UINT32_MAX when none does (a select dim's
  // value not selected).
  uint32_t GroupOf(uint32_t rank) const;

 private:
  struct Dim {
    uint32_t radix = 1;
    uint64_t stride = 1;
    bool member = false;
    uint64_t group_weight = 0;  // non-member dims: weight of the digit in the group index
  };
  // Every sum of one value per dim (values[d] of dim d), the first dim fastest.
  static std::vector<uint32_t> Enumerate(const std::vector<std::vector<uint64_t>>& values);

  std::vector<Dim> dims_;
  int select_dim_ = -1;
  std::vector<int32_t> select_index_;  // select dim value -> its index in `select`, or -1
  uint32_t groups_ = 1, group_size_ = 1;
  std::vector<uint32_t> base_;    // per group: its rank with every member digit 0
  std::vector<uint32_t> offset_;  // per member index: the member digits' part of its rank
};

// The world size, communicator and process group counts the rules give
// (saturating at UINT32_MAX; CheckRules refuses counts beyond the limits).
uint32_t RulesRankCount(const GraphRules& rules);
uint32_t RulesCommunicatorCount(const GraphRules& rules);
uint32_t RulesProcessGroupCount(const GraphRules& rules);

// InvalidArgument (naming the family or block and "regenerate it with
// prism-graphgen") unless: the graph holds no records or tables beside its
// rules; every family's radices multiply to the world size (the blocks'
// ranks, at most limits::kMaxRanks) and its member and select dims exist;
// the families' communicator and process group numbers are 0, 1, 2, ...
// each once, process group 0 is communicator 0 and the NCCL process groups
// name the communicators in order; every block names an existing program, one NCCL family per
// comm slot of it, and holds only ranks of the groups its families select.
// Cost: families x (dims + groups + select values) + blocks x slots x
// radix, plus one entry per communicator and process group.
absl::Status CheckRules(const Graph& graph);

// What ValidateGraph checks of communicators, process groups and comm slots
// beyond CheckRules, from the rules alone: no family splits communicator 0
// from itself, the ranks' state entries are within
// limits::kMaxStateEntries, and every op's peer or root is below the
// smallest group its slot names. Contract: CheckRules(graph) passed. Cost:
// families + blocks x slots + the programs' ops.
absl::Status CheckRuleGroups(const Graph& graph);

// Replaces the graph's rules by format 2's tables holding the same ranks,
// communicators and process groups (names, kinds, split fields, Gloo
// members). Contract: CheckRules(graph) passed. Cost: linear in the
// memberships, arithmetic only.
void ExpandRules(Graph& graph);

}  // namespace prism::graph

#endif  // PRISM_PROTO_GRAPH_RULES_H_
