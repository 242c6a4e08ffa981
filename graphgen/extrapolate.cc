#include "graphgen/extrapolate.h"

#include <algorithm>
#include <map>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "google/protobuf/util/message_differencer.h"
#include "graphgen/job_graph.h"
#include "proto/graph_comm_streams.h"

namespace prism::graphgen {
namespace {

namespace pg = prism::graph;

// A rank's own communicators, in creation order: (communicator id, the rank's position in it).
struct Membership {
  uint32_t comm;
  uint32_t position;
};
using Memberships = std::vector<std::vector<Membership>>;  // per global rank

Memberships MembershipsOf(const std::vector<pg::Communicator>& comms, uint64_t world) {
  Memberships of(world);
  for (const pg::Communicator& c : comms)
    for (int i = 0; i < c.members_size(); ++i) of[c.members(i)].push_back({c.id(), static_cast<uint32_t>(i)});
  return of;
}

// Turns a recorded op's communicator id into the rank's slot (its index among the rank's communicators).
void ToSlot(pg::Op& op, const std::vector<Membership>& mine) {
  auto slot_of = [&](uint32_t comm) {
    for (size_t k = 0; k < mine.size(); ++k)
      if (mine[k].comm == comm) return static_cast<uint32_t>(k);
    return uint32_t{0};  // unreachable: ParseRecording checked membership
  };
  if (op.has_collective()) op.mutable_collective()->set_comm_slot(slot_of(op.collective().comm_slot()));
  if (op.has_send()) op.mutable_send()->set_comm_slot(slot_of(op.send().comm_slot()));
  if (op.has_recv()) op.mutable_recv()->set_comm_slot(slot_of(op.recv().comm_slot()));
}

// Slots whose position the program depends on: absolute peers, roots.
void AddPositionalSlots(const std::vector<pg::Op>& ops, std::set<uint32_t>& slots) {
  for (const pg::Op& op : ops) {
    if (op.has_send()) slots.insert(op.send().comm_slot());
    if (op.has_recv()) slots.insert(op.recv().comm_slot());
    if (op.has_collective() && (op.collective().kind() == pg::BROADCAST || op.collective().kind() == pg::REDUCE))
      slots.insert(op.collective().comm_slot());
  }
}

using RoleKey = std::vector<uint64_t>;

RoleKey KeyOf(const std::vector<Membership>& mine, const std::vector<pg::Communicator>& comms,
              const std::set<uint32_t>& positional) {
  RoleKey key;
  for (const Membership& m : mine) key.push_back(static_cast<uint64_t>(comms[m.comm].members_size()));
  key.push_back(UINT64_MAX);  // separator
  for (uint32_t k : positional) key.push_back(k < mine.size() ? mine[k].position : UINT64_MAX);
  return key;
}

std::string SlotName(const pg::Communicator& c, size_t k) {
  const std::string name = c.name().substr(0, c.name().find('['));
  return name.empty() ? absl::StrCat("slot", k) : name;
}

std::string Describe(const pg::Op& op) { return op.ShortDebugString().substr(0, 160); }

// Equal apart from measured figures (compute durations, memory, flops).
bool SameOperation(pg::Op a, pg::Op b) {
  for (pg::Op* op : {&a, &b})
    if (op->has_compute()) {
      op->mutable_compute()->clear_duration_ns();
      op->mutable_compute()->clear_memory_delta_bytes();
      op->mutable_compute()->clear_flops();
    }
  return google::protobuf::util::MessageDifferencer::Equals(a, b);
}

absl::Status CheckAgreement(const std::vector<Recording>& recs) {
  const Recording& first = recs.front();
  for (const Recording& r : recs) {
    if (r.header.world_size() != first.header.world_size())
      return absl::InvalidArgumentError(absl::StrCat("the recordings of ranks ", first.header.rank(), " and ",
                                                     r.header.rank(), " have world sizes ", first.header.world_size(),
                                                     " and ", r.header.world_size(), ": not one job"));
    if (r.comms.size() != first.comms.size())
      return absl::InvalidArgumentError(absl::StrCat("ranks ", first.header.rank(), " and ", r.header.rank(),
                                                     " recorded ", first.comms.size(), " and ", r.comms.size(),
                                                     " communicators: the program creates its groups differently "
                                                     "on different ranks, which Prism cannot extrapolate"));
    for (size_t i = 0; i < r.comms.size(); ++i)
      if (!google::protobuf::util::MessageDifferencer::Equals(r.comms[i], first.comms[i]))
        return absl::InvalidArgumentError(absl::StrCat("ranks ", first.header.rank(), " and ", r.header.rank(),
                                                       " recorded communicator ", i, " differently (members or "
                                                       "creation): the program creates its groups differently on "
                                                       "different ranks, which Prism cannot extrapolate"));
    // PyTorch's group list (Gloo groups too) is the same on every rank, or
    // absent from some recordings (what they recorded could not see it).
    if (!r.process_groups.empty() && !first.process_groups.empty()) {
      bool same = r.process_groups.size() == first.process_groups.size();
      for (size_t i = 0; same && i < r.process_groups.size(); ++i)
        same = google::protobuf::util::MessageDifferencer::Equals(r.process_groups[i], first.process_groups[i]);
      if (!same)
        return absl::InvalidArgumentError(absl::StrCat("ranks ", first.header.rank(), " and ", r.header.rank(),
                                                       " recorded different PyTorch process groups (number, order "
                                                       "or backends): not one program's groups"));
    }
  }
  return absl::OkStatus();
}

struct Role {
  std::vector<uint32_t> ranks;
  std::vector<size_t> recordings;  // indices into the sorted recordings
};

absl::Status CheckRole(const Role& role, const std::vector<Recording>& recs,
                       const std::vector<std::vector<pg::Op>>& slot_ops) {
  const size_t a = role.recordings.front();
  for (size_t b : role.recordings) {
    const uint32_t ra = recs[a].header.rank(), rb = recs[b].header.rank();
    const auto& x = slot_ops[a];
    const auto& y = slot_ops[b];
    for (size_t i = 0; i < std::max(x.size(), y.size()); ++i) {
      if (i < x.size() && i < y.size() && SameOperation(x[i], y[i])) continue;
      return absl::FailedPreconditionError(absl::StrCat(
          "ranks ", ra, " and ", rb, " are of one role (their communicators have the same sizes and they hold the "
          "same positions where the program uses one) but their programs differ at op ", i, ": ",
          i < x.size() ? Describe(x[i]) : "(none)", " vs ", i < y.size() ? Describe(y[i]) : "(none)",
          ". The slice does not establish the program's symmetry: Prism cannot say which program the other ranks "
          "of this role run"));
    }
  }
  return absl::OkStatus();
}

std::string RoleOfRanks(const Role& role) { return RankList(role.ranks); }

// The role's program: the lowest recorded rank's ops, compute durations the mean of its recordings.
pg::Program ProgramOf(const Role& role, const std::vector<Recording>& recs,
                      const std::vector<std::vector<pg::Op>>& slot_ops, const std::vector<pg::Communicator>& comms,
                      const Memberships& of, uint32_t id, const std::string& name) {
  const size_t first = role.recordings.front();
  pg::Program p;
  p.set_id(id);
  p.set_name(name);
  p.set_static_memory_bytes(recs[first].header.static_memory_bytes());
  uint32_t streams = 1;
  for (size_t i = 0; i < slot_ops[first].size(); ++i) {
    pg::Op op = slot_ops[first][i];
    if (op.has_compute()) {
      uint64_t sum = 0;
      for (size_t r : role.recordings) sum += slot_ops[r][i].compute().duration_ns();
      op.mutable_compute()->set_duration_ns(sum / role.recordings.size());
    }
    streams = std::max(streams, op.stream() + 1);
    *p.add_ops() = std::move(op);
  }
  p.set_streams(streams);
  const auto& mine = of[recs[first].header.rank()];
  // The start-up as the role's first recording saw it (matching only: the
  // engine does not replay it, so no roots or positions make roles).
  for (pg::Op op : recs[first].startup_ops) {
    ToSlot(op, mine);
    *p.add_startup_ops() = std::move(op);
  }
  for (size_t k = 0; k < mine.size(); ++k) p.add_comm_slot_names(SlotName(comms[mine[k].comm], k));
  return p;
}

// NCCL's step cost measured on the recorded ranks (their headers), per
// protocol and algorithm: one rank's figure as it is, several ranks' as the
// mean weighted by the operations each was fitted from.
void AddStepCosts(const std::vector<Recording>& recs, pg::Cluster& cluster) {
  std::map<std::pair<std::string, int>, std::vector<std::pair<uint32_t, const pg::NcclStepCost*>>> by_kind;
  for (const Recording& r : recs)
    for (const pg::NcclStepCost& e : r.header.nccl_step_costs())
      by_kind[{e.protocol(), e.algorithm()}].push_back({r.header.rank(), &e});
  for (const auto& [kind, entries] : by_kind) {
    pg::NcclStepCost* out = cluster.add_nccl_step_costs();
    if (entries.size() == 1) {
      *out = *entries.front().second;
      continue;
    }
    unsigned __int128 weighted = 0;
    uint64_t ops = 0;
    std::vector<std::string> ranks, figures;
    for (const auto& [rank, e] : entries) {
      const uint64_t w = std::max<uint32_t>(e->ops(), 1);
      weighted += static_cast<unsigned __int128>(e->cost_ns()) * w;
      ops += w;
      ranks.push_back(absl::StrCat(rank));
      figures.push_back(absl::StrCat(rank, ": ", e->cost_ns() / 1000.0, " us of ", e->ops(), " ops"));
    }
    out->set_protocol(kind.first);
    out->set_algorithm(static_cast<pg::Algorithm>(kind.second));
    out->set_cost_ns(static_cast<uint64_t>((weighted + ops / 2) / ops));
    out->set_ops(static_cast<uint32_t>(std::min<uint64_t>(ops, UINT32_MAX)));
    out->set_source(absl::StrCat("measured by prism capture on ranks ", absl::StrJoin(ranks, ", "), ", ", ops,
                                 " ops (NCCL ", kind.first, " ring; the ranks' figures weighted by their ops: ",
                                 absl::StrJoin(figures, "; "), ")"));
  }
}

}  // namespace

std::string RankList(const std::vector<uint32_t>& ranks) {
  if (ranks.empty()) return "none";
  bool contiguous = true;
  for (size_t i = 1; i < ranks.size(); ++i) contiguous = contiguous && ranks[i] == ranks[i - 1] + 1;
  if (ranks.size() == 1) return absl::StrCat(ranks[0]);
  if (contiguous) return absl::StrCat(ranks.front(), "-", ranks.back());
  std::vector<uint32_t> head(ranks.begin(), ranks.begin() + static_cast<long>(std::min<size_t>(ranks.size(), 4)));
  if (ranks.size() <= 4) return absl::StrJoin(head, ", ");
  return absl::StrCat(absl::StrJoin(head, ", "), ", ... ", ranks.back(), " (", ranks.size(), " ranks)");
}

std::string Extrapolation::Summary() const {
  std::vector<uint32_t> measured;
  for (const RoleReport& r : roles) measured.insert(measured.end(), r.measured.begin(), r.measured.end());
  std::sort(measured.begin(), measured.end());
  std::string out = absl::StrCat("measured: rank", measured.size() == 1 ? " " : "s ", absl::StrJoin(measured, ", "),
                                 " (", measured.size(), " of ", graph.ranks_size(), ")\n");
  for (const RoleReport& r : roles)
    absl::StrAppend(&out, r.program, ": ", r.ranks.size(), " rank", r.ranks.size() == 1 ? "" : "s", " (",
                    RankList(r.ranks), "), ", r.ranks.size() - r.measured.size(), " extrapolated from rank ",
                    r.measured.front(), " (measured: ", absl::StrJoin(r.measured, ", "), ")\n");
  return out;
}

absl::StatusOr<Extrapolation> Extrapolate(std::vector<Recording> recs, const ExtrapolationOptions& options) {
  if (recs.empty()) return absl::InvalidArgumentError("no recordings: give one per role at least");
  std::sort(recs.begin(), recs.end(), [](const Recording& a, const Recording& b) {
    return a.header.rank() < b.header.rank();
  });
  for (size_t i = 1; i < recs.size(); ++i)
    if (recs[i].header.rank() == recs[i - 1].header.rank())
      return absl::InvalidArgumentError(absl::StrCat("two recordings of rank ", recs[i].header.rank()));
  if (auto s = CheckAgreement(recs); !s.ok()) return s;
  const std::vector<pg::Communicator>& comms = recs.front().comms;
  const uint64_t world = recs.front().header.world_size();
  const Memberships of = MembershipsOf(comms, world);

  std::vector<std::vector<pg::Op>> slot_ops(recs.size());
  std::set<uint32_t> positional;
  for (size_t i = 0; i < recs.size(); ++i) {
    slot_ops[i] = recs[i].ops;
    for (pg::Op& op : slot_ops[i]) ToSlot(op, of[recs[i].header.rank()]);
    AddPositionalSlots(slot_ops[i], positional);
  }

  std::map<RoleKey, size_t> role_of_key;
  std::vector<Role> roles;
  std::vector<uint32_t> role_of_rank(world);
  for (uint32_t r = 0; r < world; ++r) {
    auto [it, added] = role_of_key.emplace(KeyOf(of[r], comms, positional), roles.size());
    if (added) roles.emplace_back();
    roles[it->second].ranks.push_back(r);
    role_of_rank[r] = static_cast<uint32_t>(it->second);
  }
  for (size_t i = 0; i < recs.size(); ++i) roles[role_of_rank[recs[i].header.rank()]].recordings.push_back(i);
  for (const Role& role : roles)
    if (role.recordings.empty())
      return absl::FailedPreconditionError(absl::StrCat(
          "no recorded rank has the role of ranks ", RoleOfRanks(role), " (their communicators' sizes or their "
          "positions where the program uses one differ from every recorded rank's): the slice does not cover "
          "every role; record one of them too, e.g. rank ", role.ranks.front()));
  for (const Role& role : roles)
    if (auto s = CheckRole(role, recs, slot_ops); !s.ok()) return s;

  Extrapolation out;
  pg::Graph& g = out.graph;
  g.mutable_job()->set_name(options.name);
  g.mutable_job()->set_generator("prism-graphgen extrapolate");
  g.mutable_job()->set_world_size(world);
  auto& attrs = *g.mutable_job()->mutable_attributes();
  attrs.insert({"iterations", "1"});
  FillCluster(options.cluster, world, g);
  AddStepCosts(recs, *g.mutable_cluster());
  for (const pg::Communicator& c : comms) {
    pg::Communicator* added = g.add_communicators();
    *added = c;
    if (added->name().empty()) added->set_name(absl::StrCat("comm[", c.id(), "]"));
    if (added->creation_case() == pg::Communicator::CREATION_NOT_SET) added->mutable_init();
  }
  for (const Recording& r : recs)  // the first recording that saw PyTorch's groups
    if (!r.process_groups.empty()) {
      g.mutable_process_groups()->Add(r.process_groups.begin(), r.process_groups.end());
      break;
    }
  std::set<std::string> names;
  std::vector<uint32_t> measured;
  for (size_t k = 0; k < roles.size(); ++k) {
    const Role& role = roles[k];
    std::string name = recs[role.recordings.front()].header.program();
    if (name.empty() || names.count(name)) name = absl::StrCat("role-", k);
    names.insert(name);
    *g.add_programs() = ProgramOf(role, recs, slot_ops, comms, of, static_cast<uint32_t>(k), name);
    if (auto crossing = pg::CommunicatorStreamCrossing(g.programs(static_cast<int>(k)), static_cast<uint32_t>(k)))
      return absl::FailedPreconditionError(absl::StrCat(
          "the recording of rank ", recs[role.recordings.front()].header.rank(), " cannot be played with real ranks: ",
          *crossing, " (a capture from before 2026-12-02: run prism-session-capture again)"));
    RoleReport report{name, {}, role.ranks};
    for (size_t i : role.recordings) report.measured.push_back(recs[i].header.rank());
    attrs.insert({absl::StrCat("capture.", name), absl::StrCat(role.ranks.size(), " ranks (", RankList(role.ranks),
                                                               ") from rank ", report.measured.front())});
    measured.insert(measured.end(), report.measured.begin(), report.measured.end());
    out.roles.push_back(std::move(report));
  }
  std::sort(measured.begin(), measured.end());
  attrs.insert({"capture.measured", absl::StrJoin(measured, ",")});
  const uint32_t gpn = options.cluster.gpus_per_node;
  for (uint32_t r = 0; r < world; ++r) {
    pg::Rank* rank = g.add_ranks();
    rank->set_rank(r);
    rank->set_program(role_of_rank[r]);
    rank->set_node(r / gpn);
    rank->set_local_gpu(r % gpn);
    for (const Membership& m : of[r]) rank->add_comm_slots(m.comm);
  }
  return out;
}

}  // namespace prism::graphgen
