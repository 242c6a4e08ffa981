#include "proto/graph_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <map>
#include <sstream>
#include <tuple>
#include <vector>

#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/wire_format_lite.h>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "common/output_file.h"
#include "proto/graph_topology.h"

namespace prism::graph {
namespace {

void PutU32(std::string& out, uint32_t v) {
  for (int i = 0; i < 4; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}

uint32_t GetU32(std::string_view data, size_t off) {
  uint32_t v = 0;
  for (int i = 0; i < 4; ++i) v |= static_cast<uint32_t>(static_cast<uint8_t>(data[off + i])) << (8 * i);
  return v;
}

absl::Status Invalid(std::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat("invalid graph: ", std::string(what),
                                                 " (regenerate it with prism-graphgen)"));
}

// `what` is "<thing> is <value>"; the limit is common/limits.h's.
absl::Status OverLimit(const std::string& what, uint64_t limit, const std::string& unit = "") {
  return absl::OutOfRangeError(absl::StrCat("graph beyond Prism's limits: ", what, ", the limit is ",
                                            limit, unit,
                                            " (common/limits.h); make the graph smaller or its figures realistic"));
}

uint64_t Magnitude(int64_t v) { return v < 0 ? uint64_t{0} - static_cast<uint64_t>(v) : static_cast<uint64_t>(v); }

absl::Status ValidateLink(const std::string& name, uint64_t bandwidth_bps, uint64_t latency_ns) {
  if (bandwidth_bps != 0 && bandwidth_bps < limits::kMinBandwidthBps)
    return absl::OutOfRangeError(absl::StrCat(
        "graph beyond Prism's limits: ", name, " bandwidth is ", bandwidth_bps, " bit/s, under the minimum of ",
        limits::kMinBandwidthBps, " bit/s (common/limits.h); give the link's real bandwidth"));
  if (bandwidth_bps > limits::kMaxBandwidthBps)
    return OverLimit(absl::StrCat(name, " bandwidth is ", bandwidth_bps, " bit/s"), limits::kMaxBandwidthBps,
                     " bit/s");
  if (latency_ns > limits::kMaxLatencyNs)
    return OverLimit(absl::StrCat(name, " latency is ", latency_ns, " ns"), limits::kMaxLatencyNs, " ns");
  return absl::OkStatus();
}

absl::Status ValidateCluster(const Graph& g, const Topology& t) {
  if (static_cast<uint64_t>(t.ranks()) > limits::kMaxRanks)
    return OverLimit(absl::StrCat("the world is ", t.ranks(), " ranks"), limits::kMaxRanks, " ranks");
  const Cluster& cl = g.cluster();
  if (cl.nodes() == 0 || cl.gpus_per_node() == 0) return Invalid("cluster has zero nodes or GPUs per node");
  if (cl.gpus_per_node() > limits::kMaxGpusPerNode)
    return OverLimit(absl::StrCat("a node has ", cl.gpus_per_node(), " GPUs"), limits::kMaxGpusPerNode, " GPUs");
  if (cl.nodes() > limits::kMaxRanks)
    return OverLimit(absl::StrCat("the cluster has ", cl.nodes(), " nodes"), limits::kMaxRanks, " nodes");
  if (cl.nic().count() > limits::kMaxNicsPerNode)
    return OverLimit(absl::StrCat("a node has ", cl.nic().count(), " NICs"), limits::kMaxNicsPerNode, " NICs");
  if (static_cast<uint64_t>(cl.nodes()) * cl.gpus_per_node() < static_cast<uint64_t>(t.ranks()))
    return Invalid(absl::StrCat("cluster of ", cl.nodes(), "x", cl.gpus_per_node(), " GPUs cannot hold ",
                                t.ranks(), " ranks"));
  if (cl.nic().count() > 0 && cl.nic().bandwidth_bps() == 0) return Invalid("NIC bandwidth is zero");
  if (auto s = ValidateLink("NIC", cl.nic().bandwidth_bps(), cl.nic().latency_ns()); !s.ok()) return s;
  return ValidateLink("intra-node link", cl.intra_node().bandwidth_bps(), cl.intra_node().latency_ns());
}

absl::Status ValidateCommunicators(const Graph& g, const Topology& t) {
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
    for (uint32_t m : members) {
      if (m >= world)
        return Invalid(absl::StrCat("communicator ", i, " names rank ", m, " of a ", world, "-rank world"));
      if (seen[m]) return Invalid(absl::StrCat("communicator ", i, " lists rank ", m, " twice"));
      seen[m] = 1;
    }
    for (uint32_t m : members) seen[m] = 0;
    if (t.is_split(i) && t.split_parent(i) >= i)
      return Invalid(absl::StrCat("communicator ", i, " is split from ", t.split_parent(i),
                                  ", which is not created before it"));
  }
  return absl::OkStatus();
}

// process_groups, when present: entry 0 is the world communicator, the NCCL
// entries name communicators 0, 1, 2, ... in order (every one once), Gloo
// entries list ranks of the world, ascending.
absl::Status ValidateProcessGroups(const Graph& g, const Topology& t) {
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
    for (size_t m = 0; m < members.size(); ++m) {
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

absl::Status ValidateCompute(const ComputeOp& c, const std::string& where) {
  if (c.duration_ns() > limits::kMaxOpDurationNs)
    return OverLimit(absl::StrCat(where, " has a duration of ", c.duration_ns(), " ns"), limits::kMaxOpDurationNs,
                     " ns");
  if (Magnitude(c.memory_delta_bytes()) > limits::kMaxMemoryBytes)
    return OverLimit(absl::StrCat(where, " changes memory by ", c.memory_delta_bytes(), " bytes"),
                     limits::kMaxMemoryBytes, " bytes");
  return absl::OkStatus();
}

absl::Status ValidateBytes(uint64_t bytes, const std::string& where) {
  if (bytes > limits::kMaxOpBytes)
    return OverLimit(absl::StrCat(where, " moves ", bytes, " bytes"), limits::kMaxOpBytes, " bytes");
  return absl::OkStatus();
}

absl::Status ValidateCollective(const CollectiveOp& c, const std::string& where) {
  if (!CollectiveKind_IsValid(c.kind()) || c.kind() == COLLECTIVE_KIND_UNSPECIFIED)
    return Invalid(absl::StrCat(where, " has collective kind ", static_cast<int>(c.kind()),
                                ", which is not one of ALLREDUCE..BARRIER (1..7)"));
  if (!Algorithm_IsValid(c.algorithm()))
    return Invalid(absl::StrCat(where, " has algorithm ", static_cast<int>(c.algorithm()),
                                ", which this build does not know"));
  if (!DType_IsValid(c.dtype()))
    return Invalid(absl::StrCat(where, " has dtype ", static_cast<int>(c.dtype()), ", which this build does not know"));
  return ValidateBytes(c.bytes(), where);
}

// The kind-specific checks of one op; `*slot` is its comm slot, or -1.
absl::Status ValidateOpKind(const Op& op, const std::string& where, int64_t* slot) {
  *slot = -1;
  switch (op.kind_case()) {
    case Op::kCompute: return ValidateCompute(op.compute(), where);
    case Op::kCollective: *slot = op.collective().comm_slot(); return ValidateCollective(op.collective(), where);
    case Op::kSend: *slot = op.send().comm_slot(); return ValidateBytes(op.send().bytes(), where);
    case Op::kRecv: *slot = op.recv().comm_slot(); return ValidateBytes(op.recv().bytes(), where);
    case Op::KIND_NOT_SET: return Invalid(absl::StrCat(where, " has no kind"));
    default: return absl::OkStatus();
  }
}

// GroupStart..GroupEnd pair up on each stream, without nesting (the engine
// issues a group's ops together; a stream left inside a group never
// finishes its iteration).
absl::Status ValidateGroups(const Program& p, int index) {
  absl::flat_hash_map<uint32_t, int> open;  // stream -> op index of its open GroupStart
  for (int k = 0; k < p.ops_size(); ++k) {
    const Op& op = p.ops(k);
    if (!op.has_group_start() && !op.has_group_end()) continue;
    const auto it = open.find(op.stream());
    if (op.has_group_start() && it != open.end())
      return Invalid(absl::StrCat("program ", index, " op ", k, " starts a group on stream ", op.stream(),
                                  " inside the group op ", it->second, " started (nested groups are not supported)"));
    if (op.has_group_end() && it == open.end())
      return Invalid(absl::StrCat("program ", index, " op ", k, " ends a group on stream ", op.stream(),
                                  " that no group_start opened"));
    if (op.has_group_start()) open[op.stream()] = k;
    else open.erase(it);
  }
  if (!open.empty())
    return Invalid(absl::StrCat("program ", index, " op ", open.begin()->second, " starts a group on stream ",
                                open.begin()->first, " that no group_end closes"));
  return absl::OkStatus();
}

absl::Status ValidateProgram(const Program& p, int index) {
  if (p.id() != static_cast<uint32_t>(index))
    return Invalid(absl::StrCat("program ", index, " has id ", p.id()));
  if (static_cast<uint64_t>(p.ops_size()) > limits::kMaxOpsPerProgram)
    return OverLimit(absl::StrCat("program ", index, " has ", p.ops_size(), " ops"), limits::kMaxOpsPerProgram,
                     " ops");
  if (p.static_memory_bytes() > limits::kMaxMemoryBytes)
    return OverLimit(absl::StrCat("program ", index, " holds ", p.static_memory_bytes(), " bytes of static memory"),
                     limits::kMaxMemoryBytes, " bytes");
  const uint32_t slots = p.comm_slot_names_size();
  for (int k = 0; k < p.ops_size(); ++k) {
    const Op& op = p.ops(k);
    const std::string where = absl::StrCat("program ", index, " op ", k);
    if (op.stream() >= p.streams()) return Invalid(absl::StrCat(where, " uses stream ", op.stream(),
                                                                " of ", p.streams()));
    if (op.stream() >= limits::kMaxStreams)
      return OverLimit(absl::StrCat(where, " uses stream ", op.stream()), limits::kMaxStreams, " streams");
    for (uint32_t d : op.deps())
      if (d >= static_cast<uint32_t>(k)) return Invalid(absl::StrCat(where, " depends on later op ", d));
    int64_t slot = -1;
    if (auto s = ValidateOpKind(op, where, &slot); !s.ok()) return s;
    if (slot >= static_cast<int64_t>(slots))
      return Invalid(absl::StrCat(where, " uses comm slot ", slot, " of ", slots));
  }
  return ValidateGroups(p, index);
}

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
  }
  return absl::OkStatus();
}

// What prismd allocates per rank (comm slots, send/recv targets, bookkeeping)
// is bounded before it allocates it.
absl::Status ValidateRankState(const Graph& g, const Topology& t) {
  std::vector<uint64_t> p2p_ops(g.programs_size(), 0);
  for (int i = 0; i < g.programs_size(); ++i)
    for (const Op& op : g.programs(i).ops()) p2p_ops[i] += op.has_send() || op.has_recv();
  uint64_t entries = 0;
  for (uint32_t r = 0; r < t.ranks(); ++r) entries += 2 + t.slots(r).size() + p2p_ops[t.program(r)];
  if (entries > limits::kMaxStateEntries)
    return OverLimit(absl::StrCat("the ranks need ", entries, " state entries (comm slots and send/recv targets)"),
                     limits::kMaxStateEntries, " entries");
  return absl::OkStatus();
}

// ---- Send/recv sizes: the k-th send from a rank to a peer on a communicator
// meets the peer's k-th receive from that rank (the engine's matching). ----

struct P2POp {
  uint32_t op = 0;
  uint64_t bytes = 0;
};

// (slot, peer, peer_relative, is_send): a distinct send/recv target of a program.
using Target = std::tuple<uint32_t, uint32_t, bool, bool>;

struct ProgramTargets {
  std::vector<Target> targets;
  std::vector<std::vector<P2POp>> ops;  // per target, in program order
};

ProgramTargets CollectTargets(const Program& p) {
  ProgramTargets out;
  std::map<Target, uint32_t> index;
  for (int k = 0; k < p.ops_size(); ++k) {
    const Op& op = p.ops(k);
    if (!op.has_send() && !op.has_recv()) continue;
    const bool send = op.has_send();
    const Target t = send ? Target{op.send().comm_slot(), op.send().peer(), op.send().peer_relative(), true}
                          : Target{op.recv().comm_slot(), op.recv().peer(), op.recv().peer_relative(), false};
    const auto [it, fresh] = index.try_emplace(t, static_cast<uint32_t>(out.targets.size()));
    if (fresh) {
      out.targets.push_back(t);
      out.ops.emplace_back();
    }
    out.ops[it->second].push_back(P2POp{static_cast<uint32_t>(k), send ? op.send().bytes() : op.recv().bytes()});
  }
  return out;
}

// Which (communicator, global rank) a rank addresses through a target.
class PeerResolver {
 public:
  PeerResolver(const Topology& topology, const std::vector<ProgramTargets>& programs) : t_(topology) {
    std::vector<uint8_t> wanted(t_.communicators(), 0);
    for (uint32_t r = 0; r < t_.ranks(); ++r)
      for (const Target& t : programs[t_.program(r)].targets)
        if (std::get<2>(t)) wanted[t_.slots(r)[std::get<0>(t)]] = 1;
    for (uint32_t c = 0; c < t_.communicators(); ++c) {
      if (!wanted[c]) continue;
      const auto members = t_.members(c);
      for (size_t i = 0; i < members.size(); ++i) position_[Key(c, members[i])] = static_cast<uint32_t>(i);
    }
  }

  std::pair<uint32_t, uint32_t> Resolve(uint32_t rank, const Target& t) const {
    const auto [slot, peer, relative, send] = t;
    const uint32_t comm = t_.slots(rank)[slot];
    const auto members = t_.members(comm);
    const uint64_t size = static_cast<uint64_t>(members.size());
    uint64_t target = peer % size;
    if (relative) {
      const auto it = position_.find(Key(comm, rank));
      target = ((it == position_.end() ? 0 : it->second) + uint64_t{peer}) % size;
    }
    return {comm, members[target]};
  }

 private:
  static uint64_t Key(uint32_t comm, uint32_t rank) { return (uint64_t{comm} << 32) | rank; }
  const Topology& t_;
  absl::flat_hash_map<uint64_t, uint32_t> position_;
};

// Every rank's targets resolved once: (comm, peer) per target of its
// program, ranks in order.
class ResolvedTargets {
 public:
  ResolvedTargets(const Topology& t, const std::vector<ProgramTargets>& programs, const PeerResolver& peers) {
    begin_.reserve(static_cast<size_t>(t.ranks()) + 1);
    begin_.push_back(0);
    for (uint32_t r = 0; r < t.ranks(); ++r) {
      for (const Target& target : programs[t.program(r)].targets) to_.push_back(peers.Resolve(r, target));
      begin_.push_back(to_.size());
    }
  }
  const std::pair<uint32_t, uint32_t>& To(uint32_t rank, uint32_t target) const { return to_[begin_[rank] + target]; }

 private:
  std::vector<uint64_t> begin_;
  std::vector<std::pair<uint32_t, uint32_t>> to_;
};

// Targets of `rank` (sends or receives) that resolve to (comm, peer).
std::vector<uint32_t> TargetsTo(const ResolvedTargets& resolved, const ProgramTargets& program, uint32_t rank,
                                bool sends, std::pair<uint32_t, uint32_t> to) {
  std::vector<uint32_t> ids;
  for (uint32_t i = 0; i < program.targets.size(); ++i)
    if (std::get<3>(program.targets[i]) == sends && resolved.To(rank, i) == to) ids.push_back(i);
  return ids;
}

// Whether (programs, send targets, receive targets) was compared already:
// one integer for the usual one send and one receive target, a string
// otherwise.
class ComparedPairs {
 public:
  bool Insert(uint32_t src_program, uint32_t dst_program, const std::vector<uint32_t>& sends,
              const std::vector<uint32_t>& recvs) {
    if (sends.size() == 1 && recvs.size() == 1 && src_program < 0x10000 && dst_program < 0x10000 &&
        sends[0] < 0x10000 && recvs[0] < 0x10000)
      return single_.insert((uint64_t{src_program} << 48) | (uint64_t{dst_program} << 32) | (sends[0] << 16) | recvs[0])
          .second;
    std::string key = absl::StrCat(src_program, "/", dst_program, ":");
    for (uint32_t i : sends) absl::StrAppend(&key, i, ",");
    absl::StrAppend(&key, ":");
    for (uint32_t i : recvs) absl::StrAppend(&key, i, ",");
    return other_.insert(std::move(key)).second;
  }

 private:
  absl::flat_hash_set<uint64_t> single_;
  absl::flat_hash_set<std::string> other_;
};

std::vector<P2POp> Sequence(const ProgramTargets& program, const std::vector<uint32_t>& ids) {
  std::vector<P2POp> seq;
  for (uint32_t i : ids) seq.insert(seq.end(), program.ops[i].begin(), program.ops[i].end());
  std::sort(seq.begin(), seq.end(), [](const P2POp& a, const P2POp& b) { return a.op < b.op; });
  return seq;
}

absl::Status ValidatePointToPoint(const Graph& g, const Topology& topology) {
  std::vector<ProgramTargets> programs;
  bool any = false;
  for (const Program& p : g.programs()) {
    programs.push_back(CollectTargets(p));
    any |= !programs.back().targets.empty();
  }
  if (!any) return absl::OkStatus();
  const ResolvedTargets resolved(topology, programs, PeerResolver(topology, programs));
  ComparedPairs compared;  // (program, send targets, program, recv targets) already checked
  for (uint32_t src = 0; src < topology.ranks(); ++src) {
    const uint32_t src_program = topology.program(src);
    const ProgramTargets& mine = programs[src_program];
    for (uint32_t t = 0; t < mine.targets.size(); ++t) {
      if (!std::get<3>(mine.targets[t])) continue;
      const auto [comm, dst] = resolved.To(src, t);
      const std::vector<uint32_t> sends = TargetsTo(resolved, mine, src, true, {comm, dst});
      if (sends.front() != t) continue;  // this (comm, dst) was checked with an earlier target
      const uint32_t dst_program = topology.program(dst);
      const std::vector<uint32_t> recvs = TargetsTo(resolved, programs[dst_program], dst, false, {comm, src});
      if (recvs.empty()) continue;  // no receive at all: the replay reports the stall
      if (!compared.Insert(src_program, dst_program, sends, recvs)) continue;
      const std::vector<P2POp> a = Sequence(mine, sends), b = Sequence(programs[dst_program], recvs);
      for (size_t i = 0; i < std::min(a.size(), b.size()); ++i)
        if (a[i].bytes != b[i].bytes)
          return Invalid(absl::StrCat("rank ", src, " (program ", src_program, " op ", a[i].op, ") sends ", a[i].bytes,
                                      " bytes to rank ", dst, " on communicator ", comm, ", whose matching receive (",
                                      "program ", dst_program, " op ", b[i].op, ") expects ", b[i].bytes,
                                      " bytes; a send and its receive must have one size"));
    }
  }
  return absl::OkStatus();
}

// Counts what parsing would allocate, from the wire bytes alone: the ranks
// (Graph field 7) and each program's ops (Graph field 6, Program field 6).
// Refuses a graph beyond the limits before the parse allocates it; a
// malformed message is left for the parse to report.
absl::Status ScanCounts(std::string_view body) {
  using google::protobuf::internal::WireFormatLite;
  google::protobuf::io::CodedInputStream in(reinterpret_cast<const uint8_t*>(body.data()),
                                            static_cast<int>(body.size()));
  in.SetRecursionLimit(100);
  uint64_t ranks = 0;
  while (const uint32_t tag = in.ReadTag()) {
    const int field = WireFormatLite::GetTagFieldNumber(tag);
    const bool nested = WireFormatLite::GetTagWireType(tag) == WireFormatLite::WIRETYPE_LENGTH_DELIMITED;
    if (nested && field == 7) ++ranks;
    if (nested && field == 9) {  // RankTable: one varint of `program` (field 1, packed) per rank
      uint32_t length = 0;
      if (!in.ReadVarint32(&length)) return absl::OkStatus();
      const auto limit = in.PushLimit(static_cast<int>(length));
      while (const uint32_t inner = in.ReadTag()) {
        if (inner != WireFormatLite::MakeTag(1, WireFormatLite::WIRETYPE_LENGTH_DELIMITED)) {
          if (!WireFormatLite::SkipField(&in, inner)) return absl::OkStatus();
          continue;
        }
        uint32_t bytes = 0;
        if (!in.ReadVarint32(&bytes)) return absl::OkStatus();
        const void* data = nullptr;
        int size = 0;
        while (bytes > 0 && in.GetDirectBufferPointer(&data, &size)) {
          const int n = std::min<int>(size, static_cast<int>(bytes));
          for (int i = 0; i < n; ++i) ranks += (static_cast<const uint8_t*>(data)[i] & 0x80) == 0;
          in.Skip(n);
          bytes -= static_cast<uint32_t>(n);
        }
        if (bytes > 0) return absl::OkStatus();
      }
      in.PopLimit(limit);
    }
    if (ranks > limits::kMaxRanks)
      return OverLimit(absl::StrCat("the world has more than ", limits::kMaxRanks, " ranks"), limits::kMaxRanks,
                       " ranks");
    if (field == 9 && nested) continue;
    if (!(nested && field == 6)) {
      if (!WireFormatLite::SkipField(&in, tag)) return absl::OkStatus();
      continue;
    }
    uint32_t length = 0;
    if (!in.ReadVarint32(&length)) return absl::OkStatus();
    const auto limit = in.PushLimit(static_cast<int>(length));
    uint64_t ops = 0;
    while (const uint32_t inner = in.ReadTag()) {
      if (WireFormatLite::GetTagFieldNumber(inner) == 6 && ++ops > limits::kMaxOpsPerProgram)
        return OverLimit(absl::StrCat("a program has more than ", limits::kMaxOpsPerProgram, " ops"),
                         limits::kMaxOpsPerProgram, " ops");
      if (!WireFormatLite::SkipField(&in, inner)) return absl::OkStatus();
    }
    in.PopLimit(limit);
  }
  return absl::OkStatus();
}

// Reads all of `fd`, which must be a regular file of at most kMaxGraphFileBytes.
absl::StatusOr<std::string> ReadRegularFile(int fd, const std::string& path) {
  struct stat st {};
  if (fstat(fd, &st) != 0) return absl::UnavailableError(absl::StrCat("cannot stat ", path, ": ", std::strerror(errno)));
  if (S_ISDIR(st.st_mode))
    return absl::InvalidArgumentError(absl::StrCat(path, " is a directory, not a graph file; pass the file ",
                                                   "prism-graphgen wrote (-o FILE)"));
  if (!S_ISREG(st.st_mode))
    return absl::InvalidArgumentError(absl::StrCat(path, " is not a regular file (a device, FIFO or socket); ",
                                                   "pass the file prism-graphgen wrote (-o FILE)"));
  if (static_cast<uint64_t>(st.st_size) > kMaxGraphFileBytes)
    return absl::OutOfRangeError(absl::StrCat(path, " is ", st.st_size, " bytes, larger than the ",
                                              kMaxGraphFileBytes, "-byte (1 GiB) graph file limit"));
  std::string data(static_cast<size_t>(st.st_size), '\0');
  size_t done = 0;
  while (done < data.size()) {
    const ssize_t n = read(fd, data.data() + done, data.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return absl::UnavailableError(absl::StrCat("cannot read ", path, ": ", std::strerror(errno)));
    if (n == 0) break;  // shrank while reading: decode what is there
    done += static_cast<size_t>(n);
  }
  data.resize(done);
  return data;
}

}  // namespace

absl::Status ValidateGraph(const Graph& g) {
  auto topology = Topology::Of(g);
  if (!topology.ok()) return topology.status();
  const Topology& t = *topology;
  if (t.ranks() == 0) return Invalid("no ranks");
  if (auto s = ValidateCluster(g, t); !s.ok()) return s;
  if (g.programs_size() == 0) return Invalid("no programs");
  if (auto s = ValidateCommunicators(g, t); !s.ok()) return s;
  if (auto s = ValidateProcessGroups(g, t); !s.ok()) return s;
  for (int i = 0; i < g.programs_size(); ++i)
    if (auto s = ValidateProgram(g.programs(i), i); !s.ok()) return s;
  if (auto s = ValidateRanks(g, t); !s.ok()) return s;
  if (auto s = ValidateRankState(g, t); !s.ok()) return s;
  if (auto s = ValidateMembership(g, t); !s.ok()) return s;
  return ValidatePointToPoint(g, t);
}

absl::StatusOr<std::string> EncodeGraph(const Graph& graph) {
  const uint32_t version = FormatVersionFor(graph);
  std::string out(kGraphMagic, sizeof(kGraphMagic));
  PutU32(out, version);
  PutU32(out, 0);
  // Graph.format_version is field 1, serialised first. A graph that leaves it
  // unset (0, not on the wire) gets it written here, byte for byte what a
  // copy with it set would give: no copy of a 131,072-rank graph. Only a
  // graph that names another version is copied.
  Graph copy_if_needed;
  const Graph* g = &graph;
  std::string version_field;
  if (graph.format_version() == 0) {
    version_field.push_back(static_cast<char>(1 << 3));  // field 1, varint
    for (uint32_t v = version; ; v >>= 7) {
      version_field.push_back(static_cast<char>((v & 0x7f) | (v > 0x7f ? 0x80 : 0)));
      if (v <= 0x7f) break;
    }
  } else if (graph.format_version() != version) {
    copy_if_needed = graph;
    copy_if_needed.set_format_version(version);
    g = &copy_if_needed;
  }
  if (const uint64_t size = kGraphHeaderBytes + version_field.size() + g->ByteSizeLong(); size > kMaxGraphFileBytes)
    return OverLimit(absl::StrCat("the graph file would be ", size, " bytes"), kMaxGraphFileBytes, " bytes");
  out += version_field;
  if (!g->AppendToString(&out)) return absl::InternalError("graph serialisation failed");
  return out;
}

namespace {

absl::Status DecodeGraphInto(std::string_view data, std::string_view origin, Graph& g, ReadOptions options) {
  if (data.size() < kGraphHeaderBytes || std::memcmp(data.data(), kGraphMagic, sizeof(kGraphMagic)) != 0)
    return absl::InvalidArgumentError(absl::StrCat(
        std::string(origin), " is not a Prism graph file (no PRISMGRF header); make one with prism-graphgen"));
  const uint32_t version = GetU32(data, 8);
  if (version < kGraphFormatVersionRecords || version > kGraphFormatVersion)
    return absl::InvalidArgumentError(absl::StrCat(std::string(origin), " has graph format version ", version,
                                                   ", this build reads versions ", kGraphFormatVersionRecords,
                                                   " and ", kGraphFormatVersion,
                                                   "; regenerate it with this build's prism-graphgen"));
  g.Clear();
  const std::string_view body = data.substr(kGraphHeaderBytes);
  if (auto s = ScanCounts(body); !s.ok())
    return absl::OutOfRangeError(absl::StrCat(std::string(origin), ": ", s.message()));
  if (!g.ParseFromArray(body.data(), static_cast<int>(body.size())))
    return absl::InvalidArgumentError(absl::StrCat(std::string(origin), " is truncated or corrupt (protobuf parse failed)"));
  if (version < FormatVersionFor(g))
    return absl::InvalidArgumentError(absl::StrCat(
        std::string(origin), " has graph format version ", version, " in its header but holds format ",
        FormatVersionFor(g), "'s tables; the file is corrupt: regenerate it with this build's prism-graphgen"));
  if (auto s = ValidateGraph(g); !s.ok())
    return absl::InvalidArgumentError(absl::StrCat(std::string(origin), ": ", s.message()));
  if (!options.keep_tables && version > kGraphFormatVersionRecords) {
    ExpandTables(g);
    g.set_format_version(FormatVersionFor(g));  // records now: the version they would be written with
  }
  return absl::OkStatus();
}

}  // namespace

uint32_t FormatVersionFor(const Graph& graph) {
  const bool tables = graph.has_rank_table() || graph.has_communicator_table() || graph.has_process_group_table();
  return tables ? kGraphFormatVersion : kGraphFormatVersionRecords;
}

absl::StatusOr<Graph> DecodeGraph(std::string_view data, std::string_view origin, ReadOptions options) {
  Graph g;
  if (auto s = DecodeGraphInto(data, origin, g, options); !s.ok()) return s;
  return g;
}

std::string TemporaryPathFor(const std::string& path) { return OutputFile::TemporaryPathFor(path); }

absl::Status WriteGraphFile(const Graph& graph, const std::string& path) {
  auto bytes = EncodeGraph(graph);
  if (!bytes.ok()) return bytes.status();
  auto file = OutputFile::Create(path, "graph file");
  if (!file.ok()) return file.status();
  (*file)->stream().write(bytes->data(), static_cast<std::streamsize>(bytes->size()));
  return (*file)->Commit();
}

absl::StatusOr<Graph> ReadGraphFile(const std::string& path) {
  Graph g;
  if (auto s = ReadGraphFileInto(path, &g); !s.ok()) return s;
  return g;
}

absl::Status ReadGraphFileInto(const std::string& path, Graph* out, ReadOptions options) {
  // O_NONBLOCK: opening a FIFO must not wait for a writer (it is refused below).
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) return absl::NotFoundError(absl::StrCat("cannot open graph file ", path, ": ", std::strerror(errno),
                                                      " (make one with prism-graphgen)"));
  auto data = ReadRegularFile(fd, path);
  close(fd);
  if (!data.ok()) return data.status();
  return DecodeGraphInto(*data, path, *out, options);
}

}  // namespace prism::graph
