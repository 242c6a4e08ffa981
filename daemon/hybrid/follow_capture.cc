#include "daemon/hybrid/follow_capture.h"

#include <algorithm>
#include <map>
#include <optional>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "graphgen/split_color.h"

namespace prism::daemon {
namespace {

// One NCCL operation of a real rank as its plugin reported it.
struct Seen {
  rpc::OpKind kind = rpc::OP_KIND_UNSPECIFIED;
  uint32_t comm = 0;       // capture communicator id
  uint64_t bytes = 0;      // the graph's convention
  int32_t peer = -1;       // send/recv: communicator rank
  int32_t root = -1;
  uint64_t at = 0, first_send = 0, end = 0;
  bool SameOp(const Seen& o) const {
    return kind == o.kind && comm == o.comm && bytes == o.bytes && peer == o.peer && root == o.root;
  }
  bool PointToPoint() const { return kind == rpc::OP_SEND || kind == rpc::OP_RECV; }
  uint64_t GpuStart() const { return first_send != 0 ? first_send : at; }
};

// A followed group: its members (ascending) and its new_group number.
struct Followed {
  std::vector<uint32_t> members;
  int64_t split = 0;
};

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
  std::vector<std::vector<uint32_t>> groups;  // by lowest rank
  std::vector<std::pair<size_t, int64_t>> seen;  // (group index, new_group number) of followed groups
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
  const size_t count = families[from].groups.size();
  for (size_t m = 1; from + m <= families.size() && families[from + m - 1].groups.size() == count; ++m) {
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

// Every communicator of the target, world first, in new_group order (the
// followed groups' numbers); `ids` maps a followed group's number to its id.
absl::StatusOr<std::vector<graph::Communicator>> Complete(uint32_t world, std::vector<Followed> followed,
                                                           std::map<int64_t, uint32_t>& ids) {
  std::sort(followed.begin(), followed.end(), [](const Followed& a, const Followed& b) { return a.split < b.split; });
  std::vector<Family> families;
  for (size_t n = 0; n < followed.size(); ++n) {
    const Followed& g = followed[n];
    auto f = FamilyOf(g.members, world);
    if (!f.ok()) return f.status();
    f->copy = static_cast<uint32_t>(std::count_if(followed.begin(), followed.begin() + static_cast<long>(n),
                                                  [&](const Followed& o) { return o.members == g.members; }));
    const size_t index = static_cast<size_t>(std::find(f->groups.begin(), f->groups.end(), g.members) - f->groups.begin());
    auto same = std::find_if(families.begin(), families.end(), [&](const Family& o) {
      return o.stride == f->stride && o.size == f->size && o.copy == f->copy;
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
  std::vector<graph::Communicator> comms(1);
  comms[0].set_id(0);
  comms[0].set_name("world");
  comms[0].mutable_init();
  for (uint32_t r = 0; r < world; ++r) comms[0].add_members(r);
  size_t total = 1;
  for (const Family& f : families) total += f.groups.size();
  comms.resize(total);
  for (size_t f = 0; f < families.size(); ++f)
    for (size_t i = 0; i < families[f].groups.size(); ++i) {
      const auto id = static_cast<size_t>(number[f].first + static_cast<int64_t>(i * number[f].second));
      graph::Communicator& c = comms[id];
      c.set_id(static_cast<uint32_t>(id));
      c.set_name(absl::StrCat("g", f + 1, "[", i, "]"));
      for (uint32_t m : families[f].groups[i]) c.add_members(m);
      c.mutable_split()->set_parent(0);
      c.mutable_split()->set_color(graphgen::PyTorchSplitColor(families[f].groups[i]));
    }
  for (const Followed& g : followed) ids[g.split] = static_cast<uint32_t>(g.split);
  return comms;
}

// The shortest period from which `ops` repeat over at least half of them and twice: (first op, period).
std::optional<std::pair<size_t, size_t>> Iteration(const std::vector<Seen>& ops) {
  const size_t n = ops.size();
  for (size_t p = 1; 2 * p <= n; ++p) {
    size_t run = 0, best = 0, best_end = 0;
    for (size_t i = 0; i + p < n; ++i) {
      run = ops[i].SameOp(ops[i + p]) ? run + 1 : 0;
      if (run > best) best = run, best_end = i + 1;
    }
    if (best + p >= std::max(2 * p, (n + 1) / 2)) return std::make_pair(best_end - best, p);
  }
  return std::nullopt;
}

graph::CollectiveKind CollectiveOf(rpc::OpKind k) {
  switch (k) {
    case rpc::OP_ALL_REDUCE: return graph::ALLREDUCE;
    case rpc::OP_ALL_GATHER: return graph::ALLGATHER;
    case rpc::OP_REDUCE_SCATTER: return graph::REDUCESCATTER;
    case rpc::OP_BROADCAST: return graph::BROADCAST;
    case rpc::OP_REDUCE: return graph::REDUCE;
    case rpc::OP_ALL_TO_ALL: return graph::ALLTOALL;
    default: return graph::COLLECTIVE_KIND_UNSPECIFIED;
  }
}

graph::Op OpOf(const Seen& s) {
  graph::Op op;
  if (s.PointToPoint()) {
    auto* p = s.kind == rpc::OP_SEND ? op.mutable_send() : nullptr;
    auto* q = s.kind == rpc::OP_RECV ? op.mutable_recv() : nullptr;
    if (p != nullptr) p->set_comm_slot(s.comm), p->set_peer(static_cast<uint32_t>(s.peer)), p->set_bytes(s.bytes);
    if (q != nullptr) q->set_comm_slot(s.comm), q->set_peer(static_cast<uint32_t>(s.peer)), q->set_bytes(s.bytes);
    return op;
  }
  graph::CollectiveOp* c = op.mutable_collective();
  c->set_comm_slot(s.comm);
  c->set_kind(CollectiveOf(s.kind));
  c->set_bytes(s.bytes);
  if (s.root >= 0) c->set_root(static_cast<uint32_t>(s.root));
  return op;
}

// One iteration of `ops` (from `first`, `period` long) as graph ops, with
// the measured compute before each and p2p groups.
std::vector<graph::Op> Program(const std::vector<Seen>& ops, size_t first, size_t period, uint64_t skip,
                               uint64_t* compute_ns, uint64_t* iterations) {
  const size_t its = (ops.size() - first) / period;
  *iterations = its;
  std::vector<graph::Op> out;
  bool in_group = false;
  *compute_ns = 0;
  for (size_t j = 0; j < period; ++j) {
    uint64_t sum = 0, n = 0, overlapped = 0;
    for (size_t it = std::max<uint64_t>(skip, 1); it < its; ++it) {
      const Seen& cur = ops[first + it * period + j];
      const Seen& prev = ops[first + it * period + j - 1];
      if (prev.end == 0) continue;  // no transfer through the plugin ended it (e.g. real peers over NVLink)
      sum += cur.GpuStart() > prev.end ? cur.GpuStart() - prev.end : 0;
      overlapped += cur.at < prev.end;
      ++n;
    }
    const uint64_t gap = n == 0 ? 0 : sum / n;
    const Seen& s = ops[first + j];
    const bool joins = in_group && s.PointToPoint() && 2 * overlapped > n && gap == 0;
    if (in_group && !joins) out.emplace_back().mutable_group_end(), in_group = false;
    if (gap > 0) {
      graph::ComputeOp* c = out.emplace_back().mutable_compute();
      c->set_duration_ns(gap);
      c->set_label("captured compute");
      *compute_ns += gap;
    }
    const bool next_joins = [&] {
      if (!s.PointToPoint() || j + 1 >= period || !ops[first + j + 1].PointToPoint()) return false;
      uint64_t over = 0, m = 0;
      for (size_t it = std::max<uint64_t>(skip, 1); it < its; ++it, ++m)
        over += ops[first + it * period + j + 1].at < ops[first + it * period + j].end;
      return m > 0 && 2 * over > m;
    }();
    if (!in_group && next_joins) out.emplace_back().mutable_group_start(), in_group = true;
    out.push_back(OpOf(s));
  }
  if (in_group) out.emplace_back().mutable_group_end();
  return out;
}

}  // namespace

absl::StatusOr<FollowCapture> CaptureFromFollow(const Recording& recording, uint64_t skip_iterations) {
  if (recording.graph.rfind("follow:", 0) != 0)
    return absl::InvalidArgumentError(absl::StrCat("the recording is of graph '", recording.graph.substr(0, 64),
                                                   "', not of a prismd --follow run: give --graph"));
  std::map<uint64_t, CommDescription> by_hash;
  std::map<uint64_t, int64_t> split_of_hash;
  std::optional<uint32_t> world;
  std::vector<Followed> followed;
  for (const RecordedLine& l : recording.lines) {
    if (l.kind != RecordedLine::kCommunicator || by_hash.count(l.comm.comm_hash) != 0) continue;
    by_hash[l.comm.comm_hash] = l.comm;
    if (l.comm.graph_comm == 0) world = static_cast<uint32_t>(l.comm.members.size());
    if (auto k = SplitNumber(l.comm.name)) {
      std::vector<uint32_t> m = l.comm.members;
      std::sort(m.begin(), m.end());
      split_of_hash[l.comm.comm_hash] = *k;
      if (std::none_of(followed.begin(), followed.end(), [&](const Followed& f) { return f.split == *k; }))
        followed.push_back({m, *k});
    }
  }
  if (!world) return absl::InvalidArgumentError("the recording names no world communicator (prismd --follow)");
  std::map<int64_t, uint32_t> ids;
  auto comms = Complete(*world, followed, ids);
  if (!comms.ok()) return comms.status();

  std::map<uint32_t, std::vector<Seen>> ops;
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
        const uint32_t id = c->second.graph_comm == 0 ? 0 : split != split_of_hash.end() ? ids[split->second] : UINT32_MAX;
        if (id == UINT32_MAX)
          return absl::InvalidArgumentError(absl::StrCat("communicator '", c->second.name.substr(0, 64),
                                                         "' was not followed by the bootstrap (a lone send/recv "
                                                         "pair, or a group made outside new_group)"));
        const uint32_t rank = c->second.members[static_cast<size_t>(s.comm_rank())];
        Seen seen;
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
        Seen& seen = ops[it->second.first][it->second.second];
        seen.first_send = e.op_finished().first_send_ns();
        seen.end = e.op_finished().end_ns();
        open.erase(it);
      }
    }
  }
  FollowCapture out;
  for (auto& [rank, seen] : ops) {
    // Program order: the enqueue times (events of one session arrive in
    // batches, and a rank's communicators run on streams of their own).
    std::stable_sort(seen.begin(), seen.end(), [](const Seen& a, const Seen& b) { return a.at < b.at; });
    const auto it = Iteration(seen);
    if (!it)
      return absl::InvalidArgumentError(absl::StrCat("rank ", rank, ": its ", seen.size(), " operations do not "
                                                     "repeat (run at least 3 iterations)"));
    graphgen::Recording r;
    r.header.set_format(graphgen::kCaptureFormat);
    r.header.set_rank(rank);
    r.header.set_world_size(*world);
    r.header.set_source("prism-session-capture (prismd --follow)");
    r.comms = *comms;
    uint64_t compute = 0, iterations = 0;
    r.ops = Program(seen, it->first, it->second, skip_iterations, &compute, &iterations);
    out.summary.push_back(absl::StrCat("rank ", rank, ": ", seen.size(), " operations, ", iterations,
                                       " iterations of ", it->second, " from operation ", it->first,
                                       "; compute ", static_cast<double>(compute) / 1e9, " s per iteration"));
    out.recordings.push_back(std::move(r));
  }
  if (out.recordings.empty()) return absl::InvalidArgumentError("no real rank reported an operation");
  return out;
}

}  // namespace prism::daemon
