#include "graphgen/inspect.h"

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <map>
#include <set>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "proto/graph_topology.h"

namespace prism::graphgen {
namespace {

namespace pg = prism::graph;
using nlohmann::json;

std::string KindName(pg::CommKind k) {
  std::string n = pg::CommKind_Name(k);
  const std::string prefix = "COMM_KIND_";
  if (n.rfind(prefix, 0) == 0) n = n.substr(prefix.size());
  return n;
}

std::string CollectiveName(pg::CollectiveKind k) {
  switch (k) {
    case pg::ALLREDUCE: return "allreduce";
    case pg::ALLGATHER: return "allgather";
    case pg::REDUCESCATTER: return "reducescatter";
    case pg::BROADCAST: return "broadcast";
    case pg::REDUCE: return "reduce";
    case pg::ALLTOALL: return "alltoall";
    case pg::BARRIER: return "barrier";
    default: return "unspecified";
  }
}

json Communicators(const pg::Topology& t, bool include_members) {
  struct KindSummary {
    uint64_t count = 0;
    uint64_t members = 0;
    std::set<uint32_t> sizes;
    json groups = json::array();
  };
  std::map<std::string, KindSummary> by_kind;
  std::vector<std::string> order;
  pg::CommKind last_kind = pg::COMM_KIND_UNSPECIFIED;
  KindSummary* s = nullptr;
  for (uint32_t c = 0; c < t.communicators(); ++c) {
    if (s == nullptr || t.kind(c) != last_kind) {  // runs of one kind: one map look-up per run
      last_kind = t.kind(c);
      const std::string kind = KindName(last_kind);
      auto [it, inserted] = by_kind.try_emplace(kind);
      if (inserted) order.push_back(kind);
      s = &it->second;
    }
    const auto members = t.members(c);
    ++s->count;
    s->members += members.size();
    s->sizes.insert(static_cast<uint32_t>(members.size()));
    if (!include_members) continue;
    json e = {{"id", c}, {"name", t.name(c)}, {"members", std::vector<uint32_t>(members.begin(), members.end())}};
    if (t.is_split(c)) {
      e["creation"] = "split";
      e["parent"] = t.split_parent(c);
      e["color"] = t.split_color(c);
      e["key"] = t.split_key(c);
    } else {
      e["creation"] = "init";
    }
    s->groups.push_back(std::move(e));
  }
  json kinds = json::array();
  for (const std::string& k : order) {
    KindSummary& s = by_kind[k];
    json e = {{"kind", k}, {"count", s.count}, {"sizes", std::vector<uint32_t>(s.sizes.begin(), s.sizes.end())},
              {"total_members", s.members}};
    if (include_members) e["groups"] = std::move(s.groups);
    kinds.push_back(std::move(e));
  }
  return {{"count", t.communicators()}, {"by_kind", std::move(kinds)}};
}

// PyTorch's process groups in creation order (Graph.process_groups); the
// list only with members (JSON form).
json ProcessGroups(const pg::Topology& t, bool include_members) {
  uint64_t gloo = 0;
  json groups = json::array();
  for (uint32_t k = 0; k < t.process_groups(); ++k) {
    const bool is_gloo = t.process_group_is_gloo(k);
    gloo += is_gloo ? 1 : 0;
    if (!include_members) continue;
    json e = {{"n", k}, {"backend", is_gloo ? "gloo" : "nccl"}, {"desc", t.process_group_desc(k)}};
    if (is_gloo) {
      e["name"] = t.process_group_name(k);
      const auto members = t.process_group_members(k);
      e["members"] = std::vector<uint32_t>(members.begin(), members.end());
    } else {
      const uint32_t comm = t.process_group_communicator(k);
      e["communicator"] = comm;
      if (comm < t.communicators()) e["name"] = t.name(comm);
    }
    groups.push_back(std::move(e));
  }
  json out = {{"count", t.process_groups()}, {"gloo", gloo}};
  if (include_members) out["groups"] = std::move(groups);
  return out;
}

// job.attributes["iterations"]: how many times the simulator repeats the
// programs (each program holds one iteration). 1 when absent or malformed.
uint64_t Iterations(const pg::Graph& g) {
  const auto& a = g.job().attributes();
  auto it = a.find("iterations");
  if (it == a.end()) return 1;
  const uint64_t n = std::strtoull(it->second.c_str(), nullptr, 10);
  return n == 0 ? 1 : n;
}

json ProgramClass(const pg::Program& p, uint64_t ranks, uint32_t first_rank, uint64_t gpu_memory) {
  std::map<std::string, uint64_t> counts = {{"compute", 0}, {"collective", 0}, {"send", 0},
                                            {"recv", 0},    {"group_start", 0}, {"group_end", 0}};
  std::map<std::string, uint64_t> bytes;
  std::map<std::string, std::map<std::string, uint64_t>> bytes_by_slot;
  uint64_t compute_ns = 0;
  int64_t live = 0, peak = 0;
  auto slot_name = [&](uint32_t s) {
    return s < static_cast<uint32_t>(p.comm_slot_names_size()) ? p.comm_slot_names(s) : std::string("?");
  };
  for (const pg::Op& op : p.ops()) {
    switch (op.kind_case()) {
      case pg::Op::kCompute:
        ++counts["compute"];
        compute_ns += op.compute().duration_ns();
        live += op.compute().memory_delta_bytes();
        peak = std::max(peak, live);
        break;
      case pg::Op::kCollective: {
        ++counts["collective"];
        const std::string k = CollectiveName(op.collective().kind());
        bytes[k] += op.collective().bytes();
        bytes_by_slot[slot_name(op.collective().comm_slot())][k] += op.collective().bytes();
        break;
      }
      case pg::Op::kSend:
        ++counts["send"];
        bytes["send"] += op.send().bytes();
        bytes_by_slot[slot_name(op.send().comm_slot())]["send"] += op.send().bytes();
        break;
      case pg::Op::kRecv:
        ++counts["recv"];
        bytes["recv"] += op.recv().bytes();
        bytes_by_slot[slot_name(op.recv().comm_slot())]["recv"] += op.recv().bytes();
        break;
      case pg::Op::kGroupStart: ++counts["group_start"]; break;
      case pg::Op::kGroupEnd: ++counts["group_end"]; break;
      default: break;
    }
  }
  json op_counts = counts;
  op_counts["total"] = p.ops_size();
  op_counts["startup"] = p.startup_ops_size();  // collectives before the first iteration (captured programs)
  return {{"program", p.id()},
          {"name", p.name()},
          {"ranks", ranks},
          {"first_rank", first_rank},
          {"streams", p.streams()},
          {"comm_slots", std::vector<std::string>(p.comm_slot_names().begin(), p.comm_slot_names().end())},
          {"op_counts", std::move(op_counts)},
          {"compute_ns_per_iteration", compute_ns},
          {"bytes_per_iteration", bytes},
          {"bytes_per_iteration_by_slot", bytes_by_slot},
          {"memory",
           {{"static_bytes", p.static_memory_bytes()},
            {"peak_activation_bytes", peak},
            {"peak_bytes", p.static_memory_bytes() + static_cast<uint64_t>(peak)},
            {"over_capacity", gpu_memory > 0 && p.static_memory_bytes() + static_cast<uint64_t>(peak) > gpu_memory}}}};
}

std::string HumanBytes(double b) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int u = 0;
  while (b >= 1024.0 && u < 4) {
    b /= 1024.0;
    ++u;
  }
  // Two literal formats: clang checks absl::StrFormat's format at compile time.
  return u == 0 ? absl::StrFormat("%.0f %s", b, units[u]) : absl::StrFormat("%.2f %s", b, units[u]);
}

std::string DTypeName(pg::DType d) {
  std::string n = pg::DType_Name(d);
  std::transform(n.begin(), n.end(), n.begin(), [](unsigned char c) { return std::tolower(c); });
  return n;
}

// Resolves an op's slot to the rank's communicator; InvalidArgument if absent.
absl::StatusOr<const pg::Communicator*> CommOf(const pg::Graph& g, const pg::Rank& r, uint32_t slot) {
  if (slot >= static_cast<uint32_t>(r.comm_slots_size()))
    return absl::InvalidArgumentError(absl::StrCat("rank ", r.rank(), " has no comm slot ", slot));
  const uint32_t id = r.comm_slots(slot);
  if (id >= static_cast<uint32_t>(g.communicators_size()))
    return absl::InvalidArgumentError(absl::StrCat("communicator ", id, " does not exist"));
  return &g.communicators(id);
}

// The comm rank and global rank of a send/recv peer.
absl::StatusOr<std::pair<uint32_t, uint32_t>> PeerOf(const pg::Communicator& c, uint32_t me, uint32_t peer,
                                                     bool relative) {
  const auto size = static_cast<uint32_t>(c.members_size());
  const auto it = std::find(c.members().begin(), c.members().end(), me);
  if (it == c.members().end() || size == 0)
    return absl::InvalidArgumentError(absl::StrCat("rank ", me, " is not a member of ", c.name()));
  const uint32_t mine = static_cast<uint32_t>(it - c.members().begin());
  const uint32_t p = relative ? (mine + peer) % size : peer;
  if (p >= size) return absl::InvalidArgumentError(absl::StrCat("peer ", p, " is outside ", c.name()));
  return std::make_pair(p, c.members(static_cast<int>(p)));
}

void AddComm(json& e, const pg::Program& p, uint32_t slot, const pg::Communicator& c) {
  e["slot"] = slot < static_cast<uint32_t>(p.comm_slot_names_size()) ? p.comm_slot_names(slot) : std::string("?");
  e["comm"] = c.id();
  e["comm_name"] = c.name();
}

absl::StatusOr<json> OpJson(const pg::Graph& g, const pg::Program& p, const pg::Rank& r, const pg::Op& op) {
  json e = {{"stream", op.stream()}, {"deps", std::vector<uint32_t>(op.deps().begin(), op.deps().end())}};
  switch (op.kind_case()) {
    case pg::Op::kCompute:
      e["type"] = "compute", e["label"] = op.compute().label(), e["duration_ns"] = op.compute().duration_ns();
      return e;
    case pg::Op::kCollective: {
      const pg::CollectiveOp& c = op.collective();
      auto comm = CommOf(g, r, c.comm_slot());
      if (!comm.ok()) return comm.status();
      e["type"] = "collective", e["kind"] = CollectiveName(c.kind()), e["bytes"] = c.bytes();
      e["dtype"] = DTypeName(c.dtype()), e["label"] = c.label();
      AddComm(e, p, c.comm_slot(), **comm);
      return e;
    }
    case pg::Op::kSend:
    case pg::Op::kRecv: {
      const bool send = op.kind_case() == pg::Op::kSend;
      const uint32_t slot = send ? op.send().comm_slot() : op.recv().comm_slot();
      auto comm = CommOf(g, r, slot);
      if (!comm.ok()) return comm.status();
      auto peer = send ? PeerOf(**comm, r.rank(), op.send().peer(), op.send().peer_relative())
                       : PeerOf(**comm, r.rank(), op.recv().peer(), op.recv().peer_relative());
      if (!peer.ok()) return peer.status();
      e["type"] = send ? "send" : "recv";
      e["bytes"] = send ? op.send().bytes() : op.recv().bytes();
      e["label"] = send ? op.send().label() : op.recv().label();
      e["peer"] = peer->first, e["peer_rank"] = peer->second;
      AddComm(e, p, slot, **comm);
      return e;
    }
    case pg::Op::kGroupStart: e["type"] = "group_start"; return e;
    case pg::Op::kGroupEnd: e["type"] = "group_end"; return e;
    default: e["type"] = "unknown"; return e;
  }
}

}  // namespace

absl::StatusOr<json> RankProgram(const pg::Graph& g, uint32_t rank) {
  if (rank >= static_cast<uint32_t>(g.ranks_size()))
    return absl::InvalidArgumentError(absl::StrCat("--ops ", rank, ": the graph has ranks 0 to ", g.ranks_size() - 1));
  const pg::Rank& r = g.ranks(static_cast<int>(rank));
  if (r.program() >= static_cast<uint32_t>(g.programs_size()))
    return absl::InvalidArgumentError(absl::StrCat("rank ", rank, " runs program ", r.program(), ", which is absent"));
  const pg::Program& p = g.programs(static_cast<int>(r.program()));
  json slots = json::array();
  for (uint32_t s = 0; s < static_cast<uint32_t>(r.comm_slots_size()); ++s) {
    auto comm = CommOf(g, r, s);
    if (!comm.ok()) return comm.status();
    json e;
    AddComm(e, p, s, **comm);
    e["members"] = std::vector<uint32_t>((*comm)->members().begin(), (*comm)->members().end());
    slots.push_back(std::move(e));
  }
  json ops = json::array();
  for (const pg::Op& op : p.ops()) {
    auto e = OpJson(g, p, r, op);
    if (!e.ok()) return e.status();
    ops.push_back(std::move(*e));
  }
  return json{{"schema", kRankProgramSchema}, {"rank", rank},     {"program", p.id()},
              {"name", p.name()},             {"slots", slots},   {"ops", std::move(ops)}};
}

namespace {

json ClassesOf(const pg::Graph& g, const std::vector<uint64_t>& ranks_of, const std::vector<uint32_t>& first_rank) {
  json classes = json::array();
  for (int i = 0; i < g.programs_size(); ++i)
    classes.push_back(ProgramClass(g.programs(i), ranks_of[i], first_rank[i], g.cluster().gpu().memory_bytes()));
  return classes;
}

}  // namespace

json InspectClasses(const pg::Graph& g) {
  std::vector<uint64_t> ranks_of(g.programs_size(), 0);
  std::vector<uint32_t> first_rank(g.programs_size(), UINT32_MAX);
  if (g.has_rules()) {
    uint32_t first = 0;
    for (const pg::RankBlock& b : g.rules().blocks()) {
      if (b.program() < ranks_of.size()) {
        ranks_of[b.program()] += b.ranks();
        first_rank[b.program()] = std::min(first_rank[b.program()], first);
      }
      first += b.ranks();
    }
    return {{"classes", ClassesOf(g, ranks_of, first_rank)}, {"gpu_memory_bytes", g.cluster().gpu().memory_bytes()}};
  }
  const json all = InspectGraph(g, false);
  return {{"classes", all.value("classes", json::array())}, {"gpu_memory_bytes", g.cluster().gpu().memory_bytes()}};
}

json InspectGraph(const pg::Graph& g, bool include_members) {
  const auto topology = pg::Topology::Of(g);
  if (!topology.ok()) return {{"schema", kInspectSchema}, {"error", std::string(topology.status().message())}};
  const pg::Topology& t = *topology;
  std::vector<uint64_t> ranks_of(g.programs_size(), 0);
  std::vector<uint32_t> first_rank(g.programs_size(), UINT32_MAX);
  for (uint32_t r = 0; r < t.ranks(); ++r) {
    const uint32_t program = t.program(r);
    if (program >= ranks_of.size()) continue;
    ++ranks_of[program];
    first_rank[program] = std::min(first_rank[program], g.has_rank_table() ? r : g.ranks(static_cast<int>(r)).rank());
  }
  json classes = ClassesOf(g, ranks_of, first_rank);
  const auto& l = g.layout();
  json attributes = json::object();
  for (const auto& [k, v] : g.job().attributes()) attributes[k] = v;
  return {{"schema", kInspectSchema},
          {"job",
           {{"name", g.job().name()},
            {"generator", g.job().generator()},
            {"model", g.job().model()},
            {"description", g.job().description()},
            {"world_size", g.job().world_size()},
            {"attributes", std::move(attributes)}}},
          {"ranks", t.ranks()},
          {"nodes", g.cluster().nodes()},
          {"gpus_per_node", g.cluster().gpus_per_node()},
          {"gpu_memory_bytes", g.cluster().gpu().memory_bytes()},
          {"nic",
           {{"count", g.cluster().nic().count()},
            {"bandwidth_bps", g.cluster().nic().bandwidth_bps()},
            {"latency_ns", g.cluster().nic().latency_ns()}}},
          {"layout",
           {{"tp", l.tp()}, {"pp", l.pp()}, {"dp", l.dp()}, {"cp", l.cp()}, {"ep", l.ep()}, {"vpp", l.vpp()},
            {"micro_batch", l.micro_batch()}, {"global_batch", l.global_batch()}, {"schedule", l.schedule()},
            {"sequence_parallel", l.sequence_parallel()}, {"distributed_optimizer", l.distributed_optimizer()},
            {"order", l.order()}}},
          {"iterations", Iterations(g)},
          {"communicators", Communicators(t, include_members)},
          {"process_groups", ProcessGroups(t, include_members)},
          {"classes", std::move(classes)}};
}

std::string MemoryWarning(const json& s) {
  const json* worst = nullptr;
  size_t over = 0;
  for (const json& c : s["classes"]) {
    if (!c["memory"].value("over_capacity", false)) continue;
    ++over;
    if (worst == nullptr || c["memory"]["peak_bytes"].get<double>() > (*worst)["memory"]["peak_bytes"].get<double>())
      worst = &c;
  }
  if (worst == nullptr) return "";
  const json& c = *worst;
  return absl::StrCat(c["name"].get<std::string>(), " (", c["ranks"].get<int64_t>(), " ranks) peaks at ",
                      HumanBytes(c["memory"]["peak_bytes"].get<double>()), ", over the GPU's ",
                      HumanBytes(s["gpu_memory_bytes"].get<double>()), " (cluster.gpu.memory_gib)",
                      over > 1 ? absl::StrCat(", and ", over - 1, " more program(s) are over it") : std::string(),
                      " (inspect lists them): set parallel.recompute: selective or full, raise parallel.tp or pp, "
                      "or lower parallel.micro_batch");
}

std::string FormatInspectText(const json& s) {
  std::string out;
  const json& job = s["job"];
  absl::StrAppend(&out, "graph: ", job["name"].get<std::string>(), " (", job["generator"].get<std::string>(), ")\n");
  absl::StrAppend(&out, "ranks: ", s["ranks"].get<uint64_t>(), " on ", s["nodes"].get<uint64_t>(), " nodes x ",
                  s["gpus_per_node"].get<uint64_t>(), " GPUs\n");
  const json& l = s["layout"];
  absl::StrAppend(&out, "layout: tp", l["tp"].get<uint64_t>(), " pp", l["pp"].get<uint64_t>(), " dp",
                  l["dp"].get<uint64_t>(), " cp", l["cp"].get<uint64_t>(), " ep", l["ep"].get<uint64_t>(), " vpp",
                  l["vpp"].get<uint64_t>(), ", micro ", l["micro_batch"].get<uint64_t>(), ", global ",
                  l["global_batch"].get<uint64_t>(), ", schedule ", l["schedule"].get<std::string>(),
                  l["sequence_parallel"].get<bool>() ? ", SP" : "",
                  l["distributed_optimizer"].get<bool>() ? ", distributed optimizer" : "", "\n");
  const json& comms = s["communicators"];
  absl::StrAppend(&out, "communicators: ", comms["count"].get<uint64_t>(), "\n");
  for (const json& k : comms["by_kind"]) {
    std::string sizes;
    for (const json& z : k["sizes"]) absl::StrAppend(&sizes, sizes.empty() ? "" : ",", z.get<uint64_t>());
    absl::StrAppend(&out, absl::StrFormat("  %-16s %7d groups of size %s\n", k["kind"].get<std::string>(),
                                          k["count"].get<int64_t>(), sizes));
  }
  const json& groups = s["process_groups"];
  if (groups["count"].get<uint64_t>() > 0) {
    absl::StrAppend(&out, "PyTorch process groups: ", groups["count"].get<uint64_t>(), " (",
                    groups["gloo"].get<uint64_t>(), " Gloo)\n");
  }
  absl::StrAppend(&out, "classes: ", s["classes"].size(), " programs\n");
  for (const json& c : s["classes"]) {
    const json& n = c["op_counts"];
    absl::StrAppend(&out, absl::StrFormat("  program %d %s: %d ranks (first %d), %d ops: %d compute, %d collective, "
                                          "%d send, %d recv\n",
                                          c["program"].get<int64_t>(), c["name"].get<std::string>(),
                                          c["ranks"].get<int64_t>(), c["first_rank"].get<int64_t>(),
                                          n["total"].get<int64_t>(), n["compute"].get<int64_t>(),
                                          n["collective"].get<int64_t>(), n["send"].get<int64_t>(),
                                          n["recv"].get<int64_t>()));
    if (n["startup"].get<int64_t>() > 0)
      absl::StrAppend(&out, "    start-up: ", n["startup"].get<int64_t>(),
                      " collectives before the first iteration (a run lets them through, not replayed)\n");
    std::string bytes;
    for (const auto& [k, v] : c["bytes_per_iteration"].items())
      absl::StrAppend(&bytes, bytes.empty() ? "" : ", ", k, " ", HumanBytes(v.get<double>()));
    absl::StrAppend(&out, "    bytes/iteration per rank: ", bytes.empty() ? "none" : bytes, "\n");
    const json& m = c["memory"];
    absl::StrAppend(&out, "    memory: static ", HumanBytes(m["static_bytes"].get<double>()), ", peak activations ",
                    HumanBytes(m["peak_activation_bytes"].get<double>()), ", peak ",
                    HumanBytes(m["peak_bytes"].get<double>()),
                    m.value("over_capacity", false)
                        ? absl::StrCat(" (OVER the GPU's ", HumanBytes(s["gpu_memory_bytes"].get<double>()), ")")
                        : std::string(),
                    "; compute ",
                    absl::StrFormat("%.3f", c["compute_ns_per_iteration"].get<double>() * 1e-6), " ms/iteration\n");
  }
  return out;
}

}  // namespace prism::graphgen
