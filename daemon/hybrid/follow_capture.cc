#include "daemon/hybrid/follow_capture.h"

#include <algorithm>
#include <map>
#include <optional>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "daemon/bootstrap/split_source.h"
#include "daemon/hybrid/follow_program.h"
#include "graphgen/split_color.h"

namespace prism::daemon {
namespace {

// A followed group: its members (ascending), its split number (new_group's
// number; a split_group call's groups share theirs) and whether a
// split_group call made it (the bootstrap's name says so).
struct Followed {
  std::vector<uint32_t> members;
  int64_t split = 0;
  bool split_group = false;
};

bool SplitGroupName(const std::string& name) { return absl::EndsWith(name, bootstrap::kSplitGroupSuffix); }

// "group<k>[<first>]" (split_source.cc) -> k.
std::optional<int64_t> SplitNumber(const std::string& name) {
  if (name.rfind("group", 0) != 0) return std::nullopt;
  const size_t bracket = name.find('[');
  int64_t k = 0;
  if (bracket == std::string::npos || !absl::SimpleAtoi(name.substr(5, bracket - 5), &k)) return std::nullopt;
  return k;
}

struct Family {
  uint32_t stride = 0, size = 0, copy = 0;    // copy: groups of the same members made before
  int64_t first_split = 0;
  bool one_call = false;                      // split_group: every group one split, one number
  std::vector<std::vector<uint32_t>> groups;  // by lowest rank
  std::vector<std::pair<size_t, int64_t>> seen;  // (group index, new_group number) of followed groups
  // Split numbers the family takes: one per group, or one for the call.
  size_t Numbers() const { return one_call ? 1 : groups.size(); }
};

// The ranges of `g`'s shape that tile a world of `world` ranks.
absl::StatusOr<Family> FamilyOf(const std::vector<uint32_t>& g, uint32_t world) {
  Family f;
  f.size = static_cast<uint32_t>(g.size());
  f.stride = g.size() > 1 ? g[1] - g[0] : 1;
  for (size_t i = 1; i < g.size(); ++i)
    if (g[i] - g[i - 1] != f.stride)
      return absl::InvalidArgumentError(absl::StrCat("group ", absl::StrJoin(g, ","), " is not a rank range"));
  const uint64_t span = static_cast<uint64_t>(f.stride) * f.size;
  if (world % span != 0 || g[0] % span >= f.stride)
    return absl::InvalidArgumentError(absl::StrCat("the ranges like ", g[0], "..", g.back(), " (", f.size,
                                                   " ranks, step ", f.stride, ") do not tile the world of ", world));
  for (uint64_t q = 0; q < world / span; ++q)
    for (uint32_t j = 0; j < f.stride; ++j) {
      std::vector<uint32_t> m;
      for (uint32_t i = 0; i < f.size; ++i) m.push_back(static_cast<uint32_t>(q * span + j + uint64_t{i} * f.stride));
      f.groups.push_back(std::move(m));
    }
  return f;
}

// Places families[from...] from new_group number `next` on: a block of m
// families of as many groups, made interleaved (group i of the block's j-th
// family is number next + i*m + j; m = 1: one family after the other), then
// the rest. Every followed group must land on its number. Fills `number`
// (family -> its first group's number and the block's m).
bool Place(const std::vector<Family>& families, size_t from, int64_t next,
           std::vector<std::pair<int64_t, size_t>>& number) {
  if (from == families.size()) return true;
  if (families[from].one_call) {  // a split_group call: every group it made takes number `next`
    for (const auto& [i, k] : families[from].seen)
      if (k != next) return false;
    number[from] = {next, 1};
    return Place(families, from + 1, next + 1, number);
  }
  const size_t count = families[from].groups.size();
  for (size_t m = 1; from + m <= families.size() && !families[from + m - 1].one_call &&
                     families[from + m - 1].groups.size() == count;
       ++m) {
    bool fits = true;
    for (size_t j = 0; j < m && fits; ++j)
      for (const auto& [i, k] : families[from + j].seen)
        fits &= next + static_cast<int64_t>(i * m + j) == k;
    if (!fits) continue;
    for (size_t j = 0; j < m; ++j) number[from + j] = {next + static_cast<int64_t>(j), m};
    if (Place(families, from + m, next + static_cast<int64_t>(count * m), number)) return true;
  }
  return false;
}

// A followed group's key: its split number and lowest rank.
using FollowedKey = std::pair<int64_t, uint32_t>;

// Every communicator of the target, world first, in split order (the
// followed groups' numbers; a split_group call's groups one after another,
// SplitCreation.same_call on all but its first); `ids` maps a followed group
// to its communicator id.
absl::StatusOr<std::vector<graph::Communicator>> Complete(uint32_t world, std::vector<Followed> followed,
                                                           std::map<FollowedKey, uint32_t>& ids) {
  std::sort(followed.begin(), followed.end(), [](const Followed& a, const Followed& b) { return a.split < b.split; });
  std::vector<Family> families;
  for (size_t n = 0; n < followed.size(); ++n) {
    const Followed& g = followed[n];
    auto f = FamilyOf(g.members, world);
    if (!f.ok()) return f.status();
    f->copy = static_cast<uint32_t>(std::count_if(followed.begin(), followed.begin() + static_cast<long>(n),
                                                  [&](const Followed& o) { return o.members == g.members; }));
    const size_t index = static_cast<size_t>(std::find(f->groups.begin(), f->groups.end(), g.members) - f->groups.begin());
    f->one_call = g.split_group;
    auto same = std::find_if(families.begin(), families.end(), [&](const Family& o) {
      return o.stride == f->stride && o.size == f->size && o.copy == f->copy && o.one_call == f->one_call &&
             (!o.one_call || o.first_split == g.split);  // a split_group call's groups: that call's family
    });
    if (same == families.end()) {
      f->first_split = g.split;
      families.push_back(std::move(*f));
      same = families.end() - 1;
    }
    same->seen.push_back({index, g.split});
  }
  std::vector<std::pair<int64_t, size_t>> number(families.size());
  if (!Place(families, 0, 1, number))
    return absl::InvalidArgumentError(absl::StrCat(
        "the followed groups' new_group numbers (", absl::StrJoin(followed, ", ", [](std::string* out, const Followed& g) {
          absl::StrAppend(out, "#", g.split, " ", g.members.front(), "..", g.members.back());
        }), ") do not fit families of rank ranges made one after the other (or interleaved, as Megatron makes pp "
        "and embedding groups), lowest rank first: the program makes its groups in another order, or makes "
        "groups no real rank of the slice is in; capture with a graph of the program instead"));
  // Each group's split number; a split_group call's groups share theirs and
  // follow each other, so communicator ids are the groups in (number, index) order.
  struct Slot {
    int64_t number;
    size_t family, index;
  };
  std::vector<Slot> slots;
  for (size_t f = 0; f < families.size(); ++f)
    for (size_t i = 0; i < families[f].groups.size(); ++i)
      slots.push_back({number[f].first + (families[f].one_call ? 0 : static_cast<int64_t>(i * number[f].second)), f, i});
  std::sort(slots.begin(), slots.end(), [](const Slot& a, const Slot& b) {
    return a.number != b.number ? a.number < b.number : a.index < b.index;
  });
  std::vector<graph::Communicator> comms(1 + slots.size());
  comms[0].set_id(0);
  comms[0].set_name("world");
  comms[0].mutable_init();
  for (uint32_t r = 0; r < world; ++r) comms[0].add_members(r);
  for (size_t n = 0; n < slots.size(); ++n) {
    const Family& family = families[slots[n].family];
    const std::vector<uint32_t>& members = family.groups[slots[n].index];
    const auto id = static_cast<uint32_t>(n + 1);
    graph::Communicator& c = comms[id];
    c.set_id(id);
    c.set_name(absl::StrCat("g", slots[n].family + 1, "[", slots[n].index, "]"));
    for (uint32_t m : members) c.add_members(m);
    c.mutable_split()->set_parent(0);
    c.mutable_split()->set_color(family.one_call ? graphgen::SplitGroupColor(members)
                                                 : graphgen::PyTorchSplitColor(members));
    if (family.one_call && slots[n].index > 0) c.mutable_split()->set_same_call(true);
    ids[{slots[n].number, members.front()}] = id;
  }
  return comms;
}

}  // namespace

absl::StatusOr<FollowCapture> CaptureFromFollow(const Recording& recording, uint64_t skip_iterations,
                                                const std::map<uint32_t, TorchTrace>* torch) {
  if (recording.graph.rfind("follow:", 0) != 0)
    return absl::InvalidArgumentError(absl::StrCat("the recording is of graph '", recording.graph.substr(0, 64),
                                                   "', not of a prismd --follow run: give --graph"));
  std::map<uint64_t, CommDescription> by_hash;
  std::map<uint64_t, FollowedKey> split_of_hash;
  std::optional<uint32_t> world;
  std::vector<Followed> followed;
  for (const RecordedLine& l : recording.lines) {
    if (l.kind != RecordedLine::kCommunicator || by_hash.count(l.comm.comm_hash) != 0) continue;
    by_hash[l.comm.comm_hash] = l.comm;
    if (l.comm.graph_comm == 0) world = static_cast<uint32_t>(l.comm.members.size());
    if (auto k = SplitNumber(l.comm.name)) {
      std::vector<uint32_t> m = l.comm.members;
      std::sort(m.begin(), m.end());
      split_of_hash[l.comm.comm_hash] = {*k, m.front()};
      if (std::none_of(followed.begin(), followed.end(),
                       [&](const Followed& f) { return f.split == *k && f.members == m; }))
        followed.push_back({m, *k, SplitGroupName(l.comm.name)});
    }
  }
  if (!world) return absl::InvalidArgumentError("the recording names no world communicator (prismd --follow)");
  std::map<FollowedKey, uint32_t> ids;
  auto comms = Complete(*world, followed, ids);
  if (!comms.ok()) return comms.status();

  std::map<uint32_t, std::vector<SeenOp>> ops;
  std::map<std::pair<uint64_t, uint64_t>, std::pair<uint32_t, size_t>> open;  // (session, op id) -> (rank, index)
  for (const RecordedLine& l : recording.lines) {
    if (l.kind != RecordedLine::kEvents) continue;
    for (const rpc::Event& e : l.events.events()) {
      if (e.has_op_started()) {
        const rpc::OpStarted& s = e.op_started();
        auto c = by_hash.find(s.key().comm_hash());
        if (c == by_hash.end() || s.comm_rank() < 0 || static_cast<size_t>(s.comm_rank()) >= c->second.members.size())
          return absl::InvalidArgumentError(absl::StrCat("an operation on communicator ", s.key().comm_hash(),
                                                         ", which the recording does not name"));
        std::vector<uint32_t> sorted = c->second.members;
        std::sort(sorted.begin(), sorted.end());
        const auto split = split_of_hash.find(c->first);
        const auto followed_id = split != split_of_hash.end() ? ids.find(split->second) : ids.end();
        const uint32_t id = c->second.graph_comm == 0 ? 0 : followed_id != ids.end() ? followed_id->second : UINT32_MAX;
        if (id == UINT32_MAX)
          return absl::InvalidArgumentError(absl::StrCat("communicator '", c->second.name.substr(0, 64),
                                                         "' was not followed by the bootstrap (a lone send/recv "
                                                         "pair, or a group made outside new_group)"));
        const uint32_t rank = c->second.members[static_cast<size_t>(s.comm_rank())];
        SeenOp seen;
        seen.kind = s.key().kind();
        seen.comm = id;
        const bool full = seen.kind == rpc::OP_ALL_GATHER || seen.kind == rpc::OP_REDUCE_SCATTER;
        seen.bytes = full ? s.bytes() * static_cast<uint64_t>(std::max(s.comm_size(), 1)) : s.bytes();
        if (seen.PointToPoint()) {  // the capture's peer: a rank of the capture communicator (sorted members)
          const uint32_t g = c->second.members[static_cast<size_t>(s.key().peer())];
          seen.peer = static_cast<int32_t>(std::find(sorted.begin(), sorted.end(), g) - sorted.begin());
        }
        if (seen.kind == rpc::OP_BROADCAST || seen.kind == rpc::OP_REDUCE) seen.root = s.root();
        seen.at = s.at_ns();
        open[{l.session, s.op_id()}] = {rank, ops[rank].size()};
        ops[rank].push_back(seen);
      } else if (e.has_op_finished()) {
        auto it = open.find({l.session, e.op_finished().op_id()});
        if (it == open.end()) continue;
        SeenOp& seen = ops[it->second.first][it->second.second];
        seen.first_send = e.op_finished().first_send_ns();
        seen.end = e.op_finished().end_ns();
        open.erase(it);
      }
    }
  }
  FollowCapture out;
  for (auto& [rank, seen] : ops) {  // which of its communicators have another real rank
    std::map<uint32_t, bool> shared;
    for (SeenOp& s : seen) {
      auto [it, fresh] = shared.emplace(s.comm, false);
      if (fresh)
        for (uint32_t m : (*comms)[s.comm].members()) it->second |= m != rank && ops.count(m) != 0;
      s.shared = it->second;
    }
  }
  for (auto& [rank, seen] : ops) {
    // Program order: the enqueue times (events of one session arrive in
    // batches, and a rank's communicators run on streams of their own), or
    // the program's calls when the torch trace gives every operation's.
    std::stable_sort(seen.begin(), seen.end(), [](const SeenOp& a, const SeenOp& b) { return a.at < b.at; });
    const TorchTrace* trace = nullptr;
    if (torch != nullptr && torch->count(rank) != 0) trace = &torch->at(rank);
    const bool traced = trace != nullptr;
    const size_t matched = traced ? MatchTorchCalls(seen, *trace, *comms) : 0;
    if (traced && matched == seen.size())
      std::stable_sort(seen.begin(), seen.end(),
                       [](const SeenOp& a, const SeenOp& b) { return a.call->number < b.call->number; });
    const auto it = RepeatingPeriod(seen);
    if (!it)
      return absl::InvalidArgumentError(absl::StrCat("rank ", rank, ": its ", seen.size(), " operations do not "
                                                     "repeat (run at least 3 iterations)"));
    graphgen::Recording r;
    r.header.set_format(graphgen::kCaptureFormat);
    r.header.set_rank(rank);
    r.header.set_world_size(*world);
    r.header.set_source(traced ? "prism-session-capture (prismd --follow, torch trace)"
                               : "prism-session-capture (prismd --follow)");
    r.comms = *comms;
    FollowProgram p = BuildFollowProgram(seen, it->first, it->second, skip_iterations);
    if (p.static_memory_bytes) r.header.set_static_memory_bytes(*p.static_memory_bytes);
    if (p.peak_memory_bytes) r.header.set_peak_memory_bytes(*p.peak_memory_bytes);
    r.ops = std::move(p.ops);
    r.startup_ops = StartupOps(seen, it->first);
    std::string line = absl::StrCat("rank ", rank, ": ", seen.size(), " operations, ", p.iterations,
                                    " iterations of ", it->second, " from operation ", it->first, "; compute ",
                                    static_cast<double>(p.compute_ns) / 1e9, " s per iteration; steady iteration ",
                                    static_cast<double>(p.steady_iteration_ns) / 1e9, " s");
    if (traced)
      absl::StrAppend(&line, "; torch trace: ", matched, " of ", seen.size(), " operations matched to calls, ",
                      p.streams, " stream(s), ", p.dependencies, " dependencies, memory ",
                      p.static_memory_bytes ? absl::StrCat("static ", *p.static_memory_bytes, " B, peak ",
                                                           *p.peak_memory_bytes, " B")
                                            : std::string("not recorded"));
    out.summary.push_back(std::move(line));
    out.recordings.push_back(std::move(r));
  }
  if (out.recordings.empty()) return absl::InvalidArgumentError("no real rank reported an operation");
  return out;
}

Recording FollowCaptureInput(const Recording& recording) {
  Recording out = recording;
  out.lines.clear();
  for (const RecordedLine& l : recording.lines) {
    if (l.kind == RecordedLine::kCommunicator) {
      out.lines.push_back(l);
      continue;
    }
    if (l.kind != RecordedLine::kEvents) continue;
    RecordedLine kept{RecordedLine::kEvents};
    kept.at = l.at;
    kept.session = l.session;
    for (const rpc::Event& e : l.events.events())
      if (e.has_op_started() || e.has_op_finished()) *kept.events.add_events() = e;
    if (kept.events.events_size() > 0) out.lines.push_back(std::move(kept));
  }
  return out;
}

}  // namespace prism::daemon
