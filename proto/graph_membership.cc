#include "proto/graph_membership.h"

#include <algorithm>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/limits.h"
#include "proto/graph_check_errors.h"

namespace prism::graph::check {
namespace {

// Per-rank checks: program index, slot count, membership, peers in range.
// A rank table's placement (node r / gpus_per_node) fits the cluster
// (ValidateCluster) and its slot counts are its programs' (Topology::Of).
absl::Status ValidateRankRecord(const Graph& g, int r) {
  const Rank& rk = g.ranks(r);
  const uint32_t nodes = g.cluster().nodes();
  const uint32_t gpn = g.cluster().gpus_per_node();
  if (rk.rank() != static_cast<uint32_t>(r)) return Invalid(absl::StrCat("rank ", r, " has id ", rk.rank()));
  if (rk.program() >= static_cast<uint32_t>(g.programs_size()))
    return Invalid(absl::StrCat("rank ", r, " uses program ", rk.program(), " of ", g.programs_size()));
  if (rk.node() >= nodes || rk.local_gpu() >= gpn)
    return Invalid(absl::StrCat("rank ", r, " is placed on node ", rk.node(), " gpu ", rk.local_gpu(), " of a ",
                                nodes, "x", gpn, " cluster"));
  const Program& p = g.programs(rk.program());
  if (rk.comm_slots_size() != p.comm_slot_names_size())
    return Invalid(absl::StrCat("rank ", r, " maps ", rk.comm_slots_size(), " comm slots, its program has ",
                                p.comm_slot_names_size()));
  return absl::OkStatus();
}

// Per (rank, slot), at begin[rank] + slot: 1 when the communicator the slot
// names contains the rank. The (rank, slot) pairs are grouped by the
// communicator they name (a counting sort); each communicator then stamps
// its members once and checks its pairs against the stamps: linear in the
// memberships, no sort, search or hash per rank (a 131,072-rank graph has
// millions of memberships). Slots name existing communicators (ValidateRanks).
std::vector<uint8_t> ContainedSlots(const Topology& t, const std::vector<uint64_t>& begin) {
  const uint32_t ranks = t.ranks(), comms = t.communicators();
  std::vector<uint64_t> first(comms + uint64_t{1}, 0);
  for (uint32_t r = 0; r < ranks; ++r)
    for (uint32_t c : t.slots(r)) ++first[c + 1];
  for (uint32_t c = 0; c < comms; ++c) first[c + 1] += first[c];
  std::vector<std::pair<uint32_t, uint32_t>> naming(begin[ranks]);  // (rank, slot), grouped by communicator
  std::vector<uint64_t> next(first.begin(), first.end() - 1);
  for (uint32_t r = 0; r < ranks; ++r) {
    const auto slots = t.slots(r);
    for (size_t s = 0; s < slots.size(); ++s) naming[next[slots[s]]++] = {r, static_cast<uint32_t>(s)};
  }
  std::vector<uint32_t> stamp(ranks, UINT32_MAX);
  std::vector<uint8_t> contained(begin[ranks], 0);
  for (uint32_t c = 0; c < comms; ++c) {
    for (uint32_t m : t.members(c)) stamp[m] = c;  // m < ranks: ValidateCommunicators
    for (uint64_t i = first[c]; i < first[c + 1]; ++i)
      if (stamp[naming[i].first] == c) contained[begin[naming[i].first] + naming[i].second] = 1;
  }
  return contained;
}

}  // namespace

absl::Status ValidateCommunicators(const Graph& g, const Topology& t, bool members_proven) {
  const uint64_t world = t.ranks();
  std::vector<uint8_t> seen(world, 0);
  for (uint32_t i = 0; i < t.communicators(); ++i) {
    if (!g.has_communicator_table() && g.communicators(static_cast<int>(i)).id() != i)
      return Invalid(absl::StrCat("communicator ", i, " has id ", g.communicators(static_cast<int>(i)).id()));
    if (!CommKind_IsValid(t.kind(i)))
      return Invalid(absl::StrCat("communicator ", i, " has kind ", static_cast<int>(t.kind(i)),
                                  ", which this build does not know"));
    const auto members = t.members(i);
    if (members.empty()) return Invalid(absl::StrCat("communicator ", i, " has no members"));
    for (uint32_t m : members_proven ? decltype(members){} : members) {
      if (m >= world)
        return Invalid(absl::StrCat("communicator ", i, " names rank ", m, " of a ", world, "-rank world"));
      if (seen[m]) return Invalid(absl::StrCat("communicator ", i, " lists rank ", m, " twice"));
      seen[m] = 1;
    }
    for (uint32_t m : members_proven ? decltype(members){} : members) seen[m] = 0;
    if (t.is_split(i) && t.split_parent(i) >= i)
      return Invalid(absl::StrCat("communicator ", i, " is split from ", t.split_parent(i),
                                  ", which is not created before it"));
  }
  return absl::OkStatus();
}

// process_groups, when present: entry 0 is the world communicator, the NCCL
// entries name communicators 0, 1, 2, ... in order (every one once), Gloo
// entries list ranks of the world, ascending.
absl::Status ValidateProcessGroups(const Graph& g, const Topology& t, bool members_proven) {
  if (t.process_groups() == 0) return absl::OkStatus();
  const uint64_t world = t.ranks();
  uint32_t next_comm = 0;
  for (uint32_t i = 0; i < t.process_groups(); ++i) {
    const bool gloo = t.process_group_is_gloo(i);
    if (i == 0 && (gloo || t.process_group_communicator(i) != 0))
      return Invalid("process group 0 (PyTorch's default group) is not communicator 0");
    if (!gloo) {
      if (t.process_group_communicator(i) != next_comm)
        return Invalid(absl::StrCat("process group ", i, " names communicator ", t.process_group_communicator(i),
                                    ", expected ", next_comm,
                                    " (NCCL groups name the communicators in creation order)"));
      ++next_comm;
      continue;
    }
    if (!g.has_process_group_table() && g.process_groups(static_cast<int>(i)).backend() != ProcessGroup::GLOO)
      return Invalid(absl::StrCat("process group ", i, " has backend ",
                                  static_cast<int>(g.process_groups(static_cast<int>(i)).backend()),
                                  ", which this build does not know"));
    const auto members = t.process_group_members(i);
    if (members.empty()) return Invalid(absl::StrCat("process group ", i, " has no members"));
    for (size_t m = 0; m < (members_proven ? 0 : members.size()); ++m) {
      if (members[m] >= world)
        return Invalid(absl::StrCat("process group ", i, " names rank ", members[m], " of a ", world,
                                    "-rank world"));
      if (m > 0 && members[m] <= members[m - 1])
        return Invalid(absl::StrCat("process group ", i, " lists its ranks out of order or twice"));
    }
  }
  if (next_comm != t.communicators())
    return Invalid(absl::StrCat("the process groups name ", next_comm, " of the ", t.communicators(),
                                " communicators"));
  return absl::OkStatus();
}

absl::Status ValidateRanks(const Graph& g, const Topology& t) {
  const uint32_t comms = t.communicators();
  for (uint32_t r = 0; r < t.ranks(); ++r) {
    if (!g.has_rank_table())
      if (auto s = ValidateRankRecord(g, static_cast<int>(r)); !s.ok()) return s;
    for (uint32_t c : t.slots(r)) {
      if (c >= comms) return Invalid(absl::StrCat("rank ", r, " names communicator ", c, " of ", comms));
    }
  }
  return absl::OkStatus();
}

// Every slot communicator contains its rank (ContainedSlots); peers and
// roots are below the smallest communicator size a slot maps to.
absl::Status ValidateMembership(const Graph& g, const Topology& t) {
  const uint32_t ranks = t.ranks();
  std::vector<uint64_t> begin(ranks + uint64_t{1}, 0);
  for (uint32_t r = 0; r < ranks; ++r) begin[r + 1] = begin[r] + t.slots(r).size();
  const std::vector<uint8_t> contained = ContainedSlots(t, begin);
  std::vector<std::vector<uint32_t>> min_slot_size(g.programs_size());
  for (int i = 0; i < g.programs_size(); ++i)
    min_slot_size[i].assign(g.programs(i).comm_slot_names_size(), UINT32_MAX);
  for (uint32_t r = 0; r < ranks; ++r) {
    const auto slots = t.slots(r);
    for (size_t s = 0; s < slots.size(); ++s) {
      const uint32_t c = slots[s];
      if (!contained[begin[r] + s])
        return Invalid(absl::StrCat("rank ", r, " slot ", s, " names communicator ", c,
                                    " which does not contain it"));
      uint32_t& m = min_slot_size[t.program(r)][s];
      m = std::min<uint32_t>(m, static_cast<uint32_t>(t.members(c).size()));
    }
  }
  return ValidatePeersWithin(g, min_slot_size);
}

absl::Status ValidatePeersWithin(const Graph& g, const std::vector<std::vector<uint32_t>>& min_slot_size) {
  for (int i = 0; i < g.programs_size(); ++i) {
    const Program& p = g.programs(i);
    for (int k = 0; k < p.ops_size(); ++k) {
      const Op& op = p.ops(k);
      uint32_t slot = 0, peer = 0;
      if (op.has_send()) { slot = op.send().comm_slot(); peer = op.send().peer(); }
      else if (op.has_recv()) { slot = op.recv().comm_slot(); peer = op.recv().peer(); }
      else if (op.has_collective()) { slot = op.collective().comm_slot(); peer = op.collective().root(); }
      else continue;
      const uint32_t size = min_slot_size[i][slot];
      if (size != UINT32_MAX && peer >= size)
        return Invalid(absl::StrCat("program ", i, " op ", k, " names peer/root ", peer,
                                    " in a communicator of ", size, " ranks"));
    }
    for (int k = 0; k < p.startup_ops_size(); ++k) {
      const CollectiveOp& c = p.startup_ops(k).collective();  // ValidateProgram: collectives only
      const uint32_t size = min_slot_size[i][c.comm_slot()];
      if (size != UINT32_MAX && c.root() >= size)
        return Invalid(absl::StrCat("program ", i, " start-up op ", k, " names root ", c.root(),
                                    " in a communicator of ", size, " ranks"));
    }
  }
  return absl::OkStatus();
}

// What prismd allocates per rank (comm slots, send/recv targets, bookkeeping)
// is bounded before it allocates it.
absl::Status ValidateRankState(const Graph& g, const Topology& t) {
  const std::vector<uint64_t> p2p_ops = P2POpsPerProgram(g);
  uint64_t entries = 0;
  for (uint32_t r = 0; r < t.ranks(); ++r) entries += 2 + t.slots(r).size() + p2p_ops[t.program(r)];
  return ValidateStateEntries(entries);
}

std::vector<uint64_t> P2POpsPerProgram(const Graph& g) {
  std::vector<uint64_t> p2p_ops(g.programs_size(), 0);
  for (int i = 0; i < g.programs_size(); ++i)
    for (const Op& op : g.programs(i).ops()) p2p_ops[i] += op.has_send() || op.has_recv();
  return p2p_ops;
}

absl::Status ValidateStateEntries(uint64_t entries) {
  if (entries > limits::kMaxStateEntries)
    return OverLimit(absl::StrCat("the ranks need ", entries, " state entries (comm slots and send/recv targets)"),
                     limits::kMaxStateEntries, " entries");
  return absl::OkStatus();
}

}  // namespace prism::graph::check
