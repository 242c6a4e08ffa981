#include "daemon/engine/rank_world.h"

#include <algorithm>
#include <map>
#include <tuple>

#include "absl/strings/str_cat.h"
#include "common/limits.h"
#include "daemon/engine/comm_rank_index.h"
#include "daemon/engine/engine_time.h"

namespace prism::engine {
namespace {

absl::Status Invalid(const std::string& what) {
  return absl::InvalidArgumentError(absl::StrCat("graph cannot be replayed: ", what));
}

OpInfo FlattenOp(const graph::Op& op) {
  OpInfo o;
  o.stream = op.stream();
  switch (op.kind_case()) {
    case graph::Op::kCompute:
      o.kind = OpKind::kCompute;
      o.duration = Nanoseconds(static_cast<int64_t>(std::min<uint64_t>(op.compute().duration_ns(), kMaxTimeNs)));
      o.memory_delta = op.compute().memory_delta_bytes();
      break;
    case graph::Op::kCollective:
      o.kind = OpKind::kCollective;
      o.slot = op.collective().comm_slot();
      o.collective = op.collective().kind();
      o.algorithm = op.collective().algorithm();
      o.bytes = Bytes(op.collective().bytes());
      o.duration = Nanoseconds(static_cast<int64_t>(std::min<uint64_t>(op.collective().measured_ns(), kMaxTimeNs)));
      break;
    case graph::Op::kSend:
      o.kind = OpKind::kSend;
      o.slot = op.send().comm_slot();
      o.bytes = Bytes(op.send().bytes());
      break;
    case graph::Op::kRecv:
      o.kind = OpKind::kRecv;
      o.slot = op.recv().comm_slot();
      o.bytes = Bytes(op.recv().bytes());
      break;
    case graph::Op::kGroupStart: o.kind = OpKind::kGroupStart; break;
    default: o.kind = OpKind::kGroupEnd; break;
  }
  return o;
}

absl::StatusOr<ProgramInfo> FlattenProgram(const graph::Program& p) {
  ProgramInfo info;
  info.name = p.name().empty() ? absl::StrCat("program-", p.id()) : p.name();
  info.static_memory = p.static_memory_bytes();
  std::map<std::tuple<uint32_t, uint32_t, bool, bool>, int32_t> descs;
  uint32_t streams = 0;
  for (const graph::Op& op : p.ops()) streams = std::max(streams, op.stream() + 1);
  if (streams > limits::kMaxStreams)
    return Invalid(absl::StrCat("program ", info.name, " uses stream ", streams - 1, "; at most ", limits::kMaxStreams,
                                " streams are supported"));
  info.streams = streams;
  info.stream_ops.resize(streams);
  info.ops.reserve(p.ops_size());
  for (int k = 0; k < p.ops_size(); ++k) {
    const graph::Op& op = p.ops(k);
    OpInfo o = FlattenOp(op);
    o.deps_begin = static_cast<uint32_t>(info.deps.size());
    for (uint32_t d : op.deps()) info.deps.push_back(d);
    o.deps_end = static_cast<uint32_t>(info.deps.size());
    if (o.kind == OpKind::kSend || o.kind == OpKind::kRecv) {
      const bool is_send = o.kind == OpKind::kSend;
      const uint32_t peer = is_send ? op.send().peer() : op.recv().peer();
      const bool rel = is_send ? op.send().peer_relative() : op.recv().peer_relative();
      auto [it, fresh] = descs.try_emplace({o.slot, peer, rel, is_send}, static_cast<int32_t>(info.p2p.size()));
      if (fresh) info.p2p.push_back(P2PDesc{o.slot, peer, rel, is_send});
      o.p2p_desc = it->second;
    }
    info.stream_ops[o.stream].push_back(static_cast<uint32_t>(k));
    info.ops.push_back(o);
  }
  return info;
}

// Nodes per member run: members in node order (ascending ranks, as job
// graphs list them) are counted as they come; others sorted first
// (`nodes` is scratch space, kept for its capacity).
CommShape ShapeOf(const graph::Topology& t, uint32_t c, std::vector<uint32_t>& nodes) {
  nodes.clear();
  bool ordered = true;
  for (uint32_t m : t.members(c)) {
    nodes.push_back(t.node(m));
    ordered = ordered && (nodes.size() == 1 || nodes[nodes.size() - 2] <= nodes.back());
  }
  if (!ordered) std::sort(nodes.begin(), nodes.end());
  CommShape s;
  s.ranks = static_cast<uint32_t>(nodes.size());
  s.nodes = 0;
  s.min_per_node = UINT32_MAX;
  s.max_per_node = 0;
  for (size_t i = 0; i < nodes.size();) {
    size_t j = i;
    while (j < nodes.size() && nodes[j] == nodes[i]) ++j;
    const uint32_t count = static_cast<uint32_t>(j - i);
    ++s.nodes;
    s.min_per_node = std::min(s.min_per_node, count);
    s.max_per_node = std::max(s.max_per_node, count);
    i = j;
  }
  return s;
}

// Per slot, the first slot naming the same communicator, appended to `out`.
void AppendCanonicalSlots(absl::Span<const uint32_t> slots, std::vector<uint32_t>& out) {
  for (size_t s = 0; s < slots.size(); ++s) {
    uint32_t canon = static_cast<uint32_t>(s);
    for (size_t t = 0; t < s; ++t)
      if (slots[t] == slots[s]) { canon = static_cast<uint32_t>(t); break; }
    out.push_back(canon);
  }
}

}  // namespace

std::string RankWorld::CommName(uint32_t c) const {
  std::string name = topology.name(c);
  return name.empty() ? absl::StrCat("comm-", c) : name;
}

absl::StatusOr<RankWorld> BuildRankWorld(const graph::Graph& g, graph::Topology topology,
                                         const std::vector<uint32_t>& real_ranks) {
  RankWorld w(std::move(topology));
  const graph::Topology& t = w.topology;
  for (const graph::Program& p : g.programs()) {
    auto info = FlattenProgram(p);
    if (!info.ok()) return info.status();
    w.programs.push_back(std::move(*info));
  }
  w.shapes.reserve(t.communicators());
  std::vector<uint32_t> nodes;
  for (uint32_t c = 0; c < t.communicators(); ++c) w.shapes.push_back(ShapeOf(t, c, nodes));
  const uint32_t ranks = t.ranks();
  w.real.assign(ranks, 0);
  for (uint32_t r : real_ranks) {
    if (r >= ranks)
      return absl::InvalidArgumentError(absl::StrCat("real rank ", r, " is outside the ", ranks,
                                                     "-rank world of the graph"));
    w.real[r] = 1;
  }
  const CommRankIndex index(g, t);
  uint64_t slots = 0, peers = 0;
  for (uint32_t r = 0; r < ranks; ++r) {
    slots += t.slots(r).size();
    peers += w.programs[t.program(r)].p2p.size();
  }
  w.slot_begin.reserve(ranks + uint64_t{1});
  w.peer_begin.reserve(ranks + uint64_t{1});
  w.slot_canonical.reserve(slots);
  w.peer.reserve(peers);
  w.peer_same_node.reserve(peers);
  w.slot_begin.push_back(0);
  w.peer_begin.push_back(0);
  for (uint32_t r = 0; r < ranks; ++r) {
    AppendCanonicalSlots(t.slots(r), w.slot_canonical);
    w.slot_begin.push_back(w.slot_canonical.size());
    for (const P2PDesc& d : w.programs[t.program(r)].p2p) {
      const uint32_t peer = index.PeerRank(r, d);
      w.peer.push_back(peer);
      w.peer_same_node.push_back(t.node(peer) == t.node(r));
    }
    w.peer_begin.push_back(w.peer.size());
  }
  return w;
}

EngineComm RankComm(const RankWorld& w, uint32_t c) {
  EngineComm ec;
  const auto members = w.members(c);
  ec.members.assign(members.begin(), members.end());
  ec.shape = w.shapes[c];
  ec.kind = w.topology.kind(c);
  ec.name = w.CommName(c);
  return ec;
}

EngineWorld EveryRankWorld(RankWorld& w) {
  EngineWorld out;
  out.programs = std::move(w.programs);
  out.comms.reserve(w.communicators());
  for (uint32_t c = 0; c < w.communicators(); ++c) out.comms.push_back(RankComm(w, c));
  const uint32_t ranks = w.ranks();
  out.actors.resize(ranks);
  out.actor_of_rank.resize(ranks);
  for (uint32_t r = 0; r < ranks; ++r) {
    Actor& a = out.actors[r];
    a.program = w.program(r);
    a.rep_rank = r;
    a.real = w.real[r] != 0;
    const auto slots = w.slots(r);
    a.slot_comm.assign(slots.begin(), slots.end());
    const auto canonical = w.canonical(r);
    a.slot_canonical.assign(canonical.begin(), canonical.end());
    const auto peers = w.peers(r);
    a.peer_actor.assign(peers.begin(), peers.end());
    const auto same = w.peers_same_node(r);
    a.peer_same_node.assign(same.begin(), same.end());
    out.actor_of_rank[r] = r;
  }
  out.classes = ranks;
  return out;
}

}  // namespace prism::engine
