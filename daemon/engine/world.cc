#include "daemon/engine/world.h"

#include <algorithm>
#include <map>
#include <tuple>

#include "absl/strings/str_cat.h"
#include "daemon/engine/equivalence.h"
#include "proto/graph_file.h"
#include "proto/graph_topology.h"

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
  if (streams > kMaxStreams)
    return Invalid(absl::StrCat("program ", info.name, " uses stream ", streams - 1, "; at most ", kMaxStreams,
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

// `nodes` is scratch space (kept for its capacity across communicators).
CommShape ShapeOf(const graph::Topology& t, uint32_t c, std::vector<uint32_t>& nodes) {
  nodes.clear();
  for (uint32_t m : t.members(c)) nodes.push_back(t.node(m));
  std::sort(nodes.begin(), nodes.end());
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

std::vector<uint32_t> CanonicalSlots(absl::Span<const uint32_t> slots) {
  std::vector<uint32_t> canon(slots.size());
  for (size_t s = 0; s < slots.size(); ++s) {
    canon[s] = static_cast<uint32_t>(s);
    for (size_t t = 0; t < s; ++t)
      if (slots[t] == slots[s]) { canon[s] = static_cast<uint32_t>(t); break; }
  }
  return canon;
}

// Per program, the slots its collectives use, each once, in the order of
// their first op: the checks below visit each rank's communicators, not
// each rank's ops (a 131,072-rank graph has 16 programs of thousands of ops).
std::vector<std::vector<uint32_t>> CollectiveSlots(const EngineWorld& w) {
  std::vector<std::vector<uint32_t>> slots(w.programs.size());
  for (size_t i = 0; i < w.programs.size(); ++i)
    for (const OpInfo& op : w.programs[i].ops)
      if (op.kind == OpKind::kCollective &&
          std::find(slots[i].begin(), slots[i].end(), op.slot) == slots[i].end())
        slots[i].push_back(op.slot);
  return slots;
}

// Every communicator a collective uses and every P2P pair must be servable.
absl::Status CheckLinks(const EngineWorld& w, const NetworkModel& model) {
  const std::vector<std::vector<uint32_t>> slots = CollectiveSlots(w);
  std::vector<uint8_t> checked(w.comms.size(), 0);
  for (const Actor& a : w.actors) {
    for (uint32_t slot : slots[a.program]) {
      const uint32_t c = a.slot_comm[slot];
      if (checked[c]) continue;
      checked[c] = 1;
      if (auto s = model.CheckShape(w.comms[c].shape); !s.ok())
        return Invalid(absl::StrCat("communicator ", w.comms[c].name, ": ", std::string(s.message())));
    }
    for (size_t d = 0; d < w.programs[a.program].p2p.size(); ++d)
      if (auto s = model.CheckP2P(a.peer_same_node[d]); !s.ok())
        return Invalid(absl::StrCat("rank ", a.rep_rank, " send/recv: ", std::string(s.message())));
  }
  return absl::OkStatus();
}

// Plays every tree all-reduce the model will play (one rank per node,
// NetworkModel::Tree) now, so that a play of up to about 20 ms never runs
// on the engine thread while prismd keeps pace with real ranks. Each
// (program, slot, algorithm, size) once per rank, each communicator once.
void PlayTreesAhead(const EngineWorld& w, const NetworkModel& model) {
  struct Tree {
    uint32_t slot;
    graph::Algorithm algorithm;
    Bytes bytes;
    bool operator==(const Tree&) const = default;
  };
  std::vector<std::vector<Tree>> trees(w.programs.size());
  for (size_t i = 0; i < w.programs.size(); ++i)
    for (const OpInfo& op : w.programs[i].ops) {
      if (op.kind != OpKind::kCollective || op.collective != graph::ALLREDUCE) continue;
      if (op.algorithm != graph::ALGORITHM_TREE && op.algorithm != graph::ALGORITHM_DEFAULT) continue;
      const Tree t{op.slot, op.algorithm, op.bytes};
      if (std::find(trees[i].begin(), trees[i].end(), t) == trees[i].end()) trees[i].push_back(t);
    }
  for (const Actor& a : w.actors)
    for (const Tree& t : trees[a.program]) {
      const CommShape& shape = w.comms[a.slot_comm[t.slot]].shape;
      if (shape.max_per_node == 1 && shape.SpansNodes())
        (void)model.CollectiveTime(graph::ALLREDUCE, t.algorithm, t.bytes, shape);
    }
}

absl::StatusOr<EngineWorld> BuildFull(const graph::Graph& g, const graph::Topology& t,
                                      const WorldOptions& options) {
  EngineWorld w;
  for (const graph::Program& p : g.programs()) {
    auto info = FlattenProgram(p);
    if (!info.ok()) return info.status();
    w.programs.push_back(std::move(*info));
  }
  w.comms.reserve(t.communicators());
  std::vector<uint32_t> nodes;
  for (uint32_t c = 0; c < t.communicators(); ++c) {
    EngineComm ec;
    const auto members = t.members(c);
    ec.members.assign(members.begin(), members.end());
    ec.shape = ShapeOf(t, c, nodes);
    ec.kind = t.kind(c);
    ec.name = t.name(c);
    if (ec.name.empty()) ec.name = absl::StrCat("comm-", c);
    w.comms.push_back(std::move(ec));
  }
  const uint32_t ranks = t.ranks();
  std::vector<uint8_t> real(ranks, 0);
  for (uint32_t r : options.real_ranks) {
    if (r >= ranks)
      return absl::InvalidArgumentError(absl::StrCat("real rank ", r, " is outside the ", ranks,
                                                     "-rank world of the graph"));
    real[r] = 1;
  }
  const CommRankIndex index(g, t);
  w.actors.resize(ranks);
  w.actor_of_rank.resize(ranks);
  for (uint32_t r = 0; r < ranks; ++r) {
    Actor& a = w.actors[r];
    a.program = t.program(r);
    a.rep_rank = r;
    a.real = real[r] != 0;
    const auto slots = t.slots(r);
    a.slot_comm.assign(slots.begin(), slots.end());
    a.slot_canonical = CanonicalSlots(slots);
    for (const P2PDesc& d : w.programs[a.program].p2p) {
      const uint32_t peer = index.PeerRank(r, d);
      a.peer_actor.push_back(peer);
      a.peer_same_node.push_back(t.node(peer) == t.node(r));
    }
    w.actor_of_rank[r] = r;
  }
  w.classes = ranks;
  return w;
}

}  // namespace

CommRankIndex::CommRankIndex(const graph::Graph& graph) : CommRankIndex(graph, *graph::Topology::Of(graph)) {}

CommRankIndex::CommRankIndex(const graph::Graph& graph, graph::Topology topology) : topology_(std::move(topology)) {
  const graph::Topology& t = topology_;
  std::vector<std::vector<uint32_t>> p2p_slots(graph.programs_size());
  for (int i = 0; i < graph.programs_size(); ++i) {
    std::vector<uint8_t> used(graph.programs(i).comm_slot_names_size(), 0);
    for (const graph::Op& op : graph.programs(i).ops()) {
      if (op.has_send()) used[op.send().comm_slot()] = 1;
      if (op.has_recv()) used[op.recv().comm_slot()] = 1;
    }
    for (size_t s = 0; s < used.size(); ++s)
      if (used[s]) p2p_slots[i].push_back(static_cast<uint32_t>(s));
  }
  std::vector<uint8_t> wanted(t.communicators(), 0);
  for (uint32_t r = 0; r < t.ranks(); ++r)
    for (uint32_t s : p2p_slots[t.program(r)]) wanted[t.slots(r)[s]] = 1;
  for (uint32_t c = 0; c < t.communicators(); ++c) {
    if (!wanted[c]) continue;
    const auto members = t.members(c);
    for (size_t i = 0; i < members.size(); ++i) position_[(uint64_t{c} << 32) | members[i]] = static_cast<uint32_t>(i);
  }
}

uint32_t CommRankIndex::PeerRank(uint32_t rank, const P2PDesc& d) const {
  const uint32_t comm = topology_.slots(rank)[d.slot];
  const auto members = topology_.members(comm);
  const uint32_t size = static_cast<uint32_t>(members.size());
  uint64_t target = d.peer % size;
  if (d.relative) {
    const auto it = position_.find((uint64_t{comm} << 32) | rank);
    const uint32_t mine = it == position_.end() ? 0 : it->second;
    target = (uint64_t{mine} + d.peer) % size;
  }
  return members[target];
}

uint64_t EngineStateEntries(const EngineWorld& world, uint64_t iterations) {
  uint64_t entries = 0;
  for (const Actor& a : world.actors) {
    const ProgramInfo& p = world.programs[a.program];
    entries += p.ops.size() * (a.real ? 2 : 1) + p.streams + a.slot_comm.size() + iterations;
  }
  return entries;
}

absl::StatusOr<EngineWorld> BuildWorld(const graph::Graph& graph, const NetworkModel& model,
                                       const WorldOptions& options) {
  // Ranks, per-rank state, durations, sizes and kinds within common/limits.h.
  if (!options.graph_validated)
    if (auto s = graph::ValidateGraph(graph); !s.ok()) return s;
  auto topology = graph::Topology::Of(graph);  // ValidateGraph (here or the caller's) checked the tables
  if (!topology.ok()) return topology.status();
  auto full = BuildFull(graph, *topology, options);
  if (!full.ok()) return full.status();
  if (auto s = CheckLinks(*full, model); !s.ok()) return s;
  PlayTreesAhead(*full, model);
  if (!options.use_classes) {
    full->reduction_note = "equivalence classes switched off (--no-classes)";
    return full;
  }
  return ReduceWorld(graph, std::move(*full));
}

}  // namespace prism::engine
