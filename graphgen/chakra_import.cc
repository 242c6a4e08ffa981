// Chakra trace set -> Prism graph (graphgen/chakra_et.h, docs/chakra.md).
#include <dirent.h>
#include <sys/stat.h>

#include <algorithm>
#include <map>
#include <queue>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/limits.h"
#include "common/status_macros.h"
#include "google/protobuf/util/json_util.h"
#include "google/protobuf/util/message_differencer.h"
#include "graphgen/chakra_et.h"
#include "graphgen/chakra_mapping.h"
#include "graphgen/input_file.h"
#include "graphgen/yaml_reader.h"
#include "nlohmann/json.hpp"
#include "proto/graph_file.h"

namespace prism::graphgen::chakra {
namespace {

namespace pg = prism::graph;
using ChakraProtoMsg::AttributeProto;
using ChakraProtoMsg::Node;

const InputKind kTraceFile{limits::kMaxGraphFileBytes, false, "a Chakra trace (NAME.<rank>.et)"};
const InputKind kJsonFile{limits::kMaxInputFileBytes, true, "a JSON file"};

absl::Status NodeError(const std::string& file, const Node& node, const std::string& what) {
  return absl::InvalidArgumentError(absl::StrCat(file, ": node ", node.id(), " ('", Excerpt(node.name()), "'): ",
                                                 what));
}

const AttributeProto* FindAttr(const Node& node, const char* name) {
  for (const AttributeProto& a : node.attr())
    if (a.name() == name) return &a;
  return nullptr;
}

// A trace file: its GlobalMetadata and its nodes, as written (varint32 length, message; repeated).
struct RankTrace {
  ChakraProtoMsg::GlobalMetadata meta;
  std::vector<Node> nodes;
};

absl::StatusOr<RankTrace> ParseTrace(const std::string& bytes, const std::string& file) {
  RankTrace trace;
  size_t pos = 0;
  bool have_meta = false;
  while (pos < bytes.size()) {
    uint64_t size = 0;
    int shift = 0;
    while (true) {
      if (pos >= bytes.size() || shift > 28)
        return absl::InvalidArgumentError(absl::StrCat(file, ": a message length at byte ", pos,
                                                       " is cut off or too long (not a Chakra trace?)"));
      const auto b = static_cast<unsigned char>(bytes[pos++]);
      size |= static_cast<uint64_t>(b & 0x7F) << shift;
      shift += 7;
      if (!(b & 0x80)) break;
    }
    if (size > bytes.size() - pos)
      return absl::InvalidArgumentError(absl::StrCat(file, ": a message of ", size, " bytes at byte ", pos,
                                                     " runs past the end of the file (truncated?)"));
    google::protobuf::Message* target = &trace.meta;
    if (have_meta) {
      if (trace.nodes.size() >= limits::kMaxOpsPerProgram)
        return absl::OutOfRangeError(absl::StrCat(file, ": more than ", limits::kMaxOpsPerProgram,
                                                  " nodes, Prism's limit of ops per program"));
      target = &trace.nodes.emplace_back();
    }
    if (!target->ParseFromArray(bytes.data() + pos, static_cast<int>(size)))
      return absl::InvalidArgumentError(absl::StrCat(file, ": the message at byte ", pos, " is not a Chakra ",
                                                     have_meta ? "Node" : "GlobalMetadata"));
    have_meta = true;
    pos += size;
  }
  if (!have_meta) return absl::InvalidArgumentError(absl::StrCat(file, ": empty; a Chakra trace starts with its "
                                                                  "GlobalMetadata"));
  return trace;
}

// Issue order: a topological order of data_deps, lowest id first among the ready.
absl::StatusOr<std::vector<size_t>> IssueOrder(const std::vector<Node>& nodes, const std::string& file,
                                               absl::flat_hash_map<uint64_t, uint32_t>* index_of_id) {
  absl::flat_hash_map<uint64_t, size_t> position;
  for (size_t i = 0; i < nodes.size(); ++i)
    if (!position.emplace(nodes[i].id(), i).second) return NodeError(file, nodes[i], "a second node with this id");
  std::vector<std::vector<size_t>> children(nodes.size());
  std::vector<size_t> waiting(nodes.size(), 0);
  for (size_t i = 0; i < nodes.size(); ++i)
    for (uint64_t d : nodes[i].data_deps()) {
      auto it = position.find(d);
      if (it == position.end())
        return NodeError(file, nodes[i], absl::StrCat("depends on node ", d, ", which the trace does not hold"));
      children[it->second].push_back(i);
      ++waiting[i];
    }
  using Ready = std::pair<uint64_t, size_t>;  // (id, position)
  std::priority_queue<Ready, std::vector<Ready>, std::greater<>> ready;
  for (size_t i = 0; i < nodes.size(); ++i)
    if (waiting[i] == 0) ready.emplace(nodes[i].id(), i);
  std::vector<size_t> order;
  while (!ready.empty()) {
    const size_t i = ready.top().second;
    ready.pop();
    (*index_of_id)[nodes[i].id()] = static_cast<uint32_t>(order.size());
    order.push_back(i);
    for (size_t c : children[i])
      if (--waiting[c] == 0) ready.emplace(nodes[c].id(), c);
  }
  if (order.size() != nodes.size())
    return absl::InvalidArgumentError(absl::StrCat(file, ": its data_deps form a cycle (", nodes.size() - order.size(),
                                                    " nodes never become ready)"));
  return order;
}

// Which communicator and program slot a node names, for one rank.
class RankSlots {
 public:
  // `fixed`: the rank's comm_slots are given (a Prism trace set); otherwise
  // slots are added as the rank's nodes name new communicators.
  RankSlots(std::vector<uint32_t> slots, bool fixed) : slots_(std::move(slots)), fixed_(fixed) {}

  absl::StatusOr<uint32_t> SlotFor(uint32_t comm, const AttributeProto* slot_attr) {
    if (slot_attr != nullptr) {
      const int64_t s = slot_attr->int64_val();
      if (s >= 0 && static_cast<size_t>(s) < slots_.size() && slots_[static_cast<size_t>(s)] == comm)
        return static_cast<uint32_t>(s);
    }
    for (size_t s = 0; s < slots_.size(); ++s)
      if (slots_[s] == comm) return static_cast<uint32_t>(s);
    if (fixed_)
      return absl::InvalidArgumentError(absl::StrCat("communicator ", comm, " is not one of the rank's (",
                                                     slots_.size(), " slots in NAME.prism.json)"));
    slots_.push_back(comm);
    return static_cast<uint32_t>(slots_.size() - 1);
  }
  const std::vector<uint32_t>& slots() const { return slots_; }

 private:
  std::vector<uint32_t> slots_;
  bool fixed_;
};

struct ImportContext {
  const pg::Graph* skeleton;                                   // communicators with members
  const absl::flat_hash_map<std::string, uint32_t>* comm_ids;  // pg_name -> communicator id
};

absl::StatusOr<uint32_t> CommunicatorOf(const ImportContext& ctx, const Node& node, const std::string& file) {
  const AttributeProto* pg_name = FindAttr(node, kAttrPgName);
  if (pg_name == nullptr) return 0;  // no process group: the world
  auto it = ctx.comm_ids->find(pg_name->string_val());
  if (it == ctx.comm_ids->end())
    return NodeError(file, node, absl::StrCat("pg_name '", Excerpt(pg_name->string_val()),
                                              "' is not in NAME.comm_groups.json"));
  return it->second;
}

int64_t IntAttr(const Node& node, const char* name, int64_t fallback) {
  const AttributeProto* a = FindAttr(node, name);
  if (a == nullptr) return fallback;
  switch (a->value_case()) {
    case AttributeProto::kInt32Val: return a->int32_val();
    case AttributeProto::kUint32Val: return a->uint32_val();
    case AttributeProto::kUint64Val: return static_cast<int64_t>(a->uint64_val());
    default: return a->int64_val();
  }
}

template <typename P2p>
absl::Status FillPointToPoint(const ImportContext& ctx, uint32_t rank, const Node& node, const std::string& file,
                              RankSlots& slots, bool is_send, P2p* op) {
  PRISM_ASSIGN_OR_RETURN(const uint32_t comm, CommunicatorOf(ctx, node, file));
  auto slot = slots.SlotFor(comm, FindAttr(node, kAttrSlot));
  if (!slot.ok()) return NodeError(file, node, std::string(slot.status().message()));
  op->set_comm_slot(*slot);
  op->set_bytes(static_cast<uint64_t>(IntAttr(node, kAttrCommSize, 0)));
  op->set_label(node.name());
  if (const AttributeProto* peer = FindAttr(node, kAttrPeer)) {
    op->set_peer(static_cast<uint32_t>(peer->int64_val()));
    const AttributeProto* relative = FindAttr(node, kAttrPeerRelative);
    op->set_peer_relative(relative != nullptr && relative->bool_val());
    return absl::OkStatus();
  }
  const int64_t peer_rank = IntAttr(node, is_send ? kAttrCommDst : kAttrCommSrc, -1);
  const auto& members = ctx.skeleton->communicators(static_cast<int>(comm)).members();
  for (int i = 0; i < members.size(); ++i)
    if (members[i] == peer_rank) return op->set_peer(static_cast<uint32_t>(i)), absl::OkStatus();
  return NodeError(file, node, absl::StrCat(is_send ? "comm_dst " : "comm_src ", peer_rank,
                                            " is not a member of communicator ", comm, " (rank ", rank, ")"));
}

absl::Status FillOp(const ImportContext& ctx, uint32_t rank, const Node& node, const std::string& file,
                    RankSlots& slots, pg::Op* op) {
  const int64_t stream = IntAttr(node, kAttrStream, 0);
  if (stream < 0 || static_cast<uint64_t>(stream) >= limits::kMaxStreams)
    return NodeError(file, node, absl::StrCat("stream ", stream, " is beyond Prism's ", limits::kMaxStreams));
  op->set_stream(static_cast<uint32_t>(stream));
  switch (node.type()) {
    case ChakraProtoMsg::COMP_NODE: {
      const AttributeProto* what = FindAttr(node, kAttrOp);
      if (what != nullptr && what->string_val() == kGroupStart) return op->mutable_group_start(), absl::OkStatus();
      if (what != nullptr && what->string_val() == kGroupEnd) return op->mutable_group_end(), absl::OkStatus();
      pg::ComputeOp* c = op->mutable_compute();
      const AttributeProto* ns = FindAttr(node, kAttrDurationNs);
      c->set_duration_ns(ns != nullptr ? ns->uint64_val() : node.duration_micros() * 1000);
      c->set_label(node.name());
      c->set_flops(static_cast<uint64_t>(std::max<int64_t>(0, IntAttr(node, kAttrNumOps, 0))));
      c->set_memory_delta_bytes(IntAttr(node, kAttrMemoryDelta, 0));
      return absl::OkStatus();
    }
    case ChakraProtoMsg::COMM_COLL_NODE: {
      pg::CollectiveOp* c = op->mutable_collective();
      const auto kind = PrismCollective(IntAttr(node, kAttrCommType, -1));
      if (!kind)
        return NodeError(file, node, absl::StrCat("comm_type ", IntAttr(node, kAttrCommType, -1),
                                                  " has no Prism collective (Prism has all-reduce, reduce, "
                                                  "all-gather, broadcast, all-to-all, reduce-scatter, barrier)"));
      PRISM_ASSIGN_OR_RETURN(const uint32_t comm, CommunicatorOf(ctx, node, file));
      auto slot = slots.SlotFor(comm, FindAttr(node, kAttrSlot));
      if (!slot.ok()) return NodeError(file, node, std::string(slot.status().message()));
      c->set_comm_slot(*slot);
      c->set_kind(*kind);
      c->set_bytes(static_cast<uint64_t>(IntAttr(node, kAttrCommSize, 0)));
      c->set_dtype(static_cast<pg::DType>(IntAttr(node, kAttrDtype, pg::BF16)));
      c->set_algorithm(static_cast<pg::Algorithm>(IntAttr(node, kAttrAlgorithm, pg::ALGORITHM_DEFAULT)));
      c->set_root(static_cast<uint32_t>(IntAttr(node, kAttrRoot, 0)));
      c->set_label(node.name());
      return absl::OkStatus();
    }
    case ChakraProtoMsg::COMM_SEND_NODE:
      return FillPointToPoint(ctx, rank, node, file, slots, true, op->mutable_send());
    case ChakraProtoMsg::COMM_RECV_NODE: {
      PRISM_RETURN_IF_ERROR(FillPointToPoint(ctx, rank, node, file, slots, false, op->mutable_recv()));
      if (const AttributeProto* payload = FindAttr(node, kAttrPayload))
        op->mutable_recv()->set_payload(payload->bytes_val());
      return absl::OkStatus();
    }
    default:
      return NodeError(file, node, absl::StrCat("node type ", ChakraProtoMsg::NodeType_Name(node.type()),
                                                " has no Prism op (Prism reads COMP, COMM_COLL, COMM_SEND and "
                                                "COMM_RECV nodes)"));
  }
}

// The rank's ops in issue order; deps are data_deps less what the program implies.
absl::StatusOr<google::protobuf::RepeatedPtrField<pg::Op>> RankOps(const ImportContext& ctx, uint32_t rank,
                                                                   const RankTrace& trace, const std::string& file,
                                                                   RankSlots& slots) {
  absl::flat_hash_map<uint64_t, uint32_t> index_of_id;
  PRISM_ASSIGN_OR_RETURN(const std::vector<size_t> order, IssueOrder(trace.nodes, file, &index_of_id));
  google::protobuf::RepeatedPtrField<pg::Op> ops;
  for (size_t i : order) PRISM_RETURN_IF_ERROR(FillOp(ctx, rank, trace.nodes[i], file, slots, ops.Add()));
  const std::vector<std::vector<uint32_t>> implied = ImpliedDeps(ops);
  for (size_t k = 0; k < order.size(); ++k) {
    for (uint64_t d : trace.nodes[order[k]].data_deps()) {
      const uint32_t dep = index_of_id[d];
      if (std::find(implied[k].begin(), implied[k].end(), dep) == implied[k].end()) ops[static_cast<int>(k)].add_deps(dep);
    }
  }
  return ops;
}

absl::StatusOr<std::vector<std::pair<std::string, std::vector<uint32_t>>>> ReadCommGroups(const std::string& path) {
  PRISM_ASSIGN_OR_RETURN(const std::string text, ReadInputFile(path, "communicator groups", kJsonFile));
  const nlohmann::json groups = nlohmann::json::parse(text, nullptr, false);
  if (!groups.is_object())
    return absl::InvalidArgumentError(absl::StrCat(path, ": not a JSON object {\"<pg_name>\": [ranks], ...}"));
  std::vector<std::pair<std::string, std::vector<uint32_t>>> out;
  for (const auto& [key, members] : groups.items()) {
    std::vector<uint32_t> ranks;
    if (!members.is_array())
      return absl::InvalidArgumentError(absl::StrCat(path, ": group '", Excerpt(key), "' is not a list of ranks"));
    for (const auto& m : members) {
      if (!m.is_number_unsigned() || m.get<uint64_t>() >= limits::kMaxRanks)
        return absl::InvalidArgumentError(absl::StrCat(path, ": group '", Excerpt(key),
                                                       "' holds something that is not a rank"));
      ranks.push_back(m.get<uint32_t>());
    }
    out.emplace_back(key, std::move(ranks));
  }
  return out;
}

std::string PathOf(const std::string& dir, const std::string& file) { return absl::StrCat(dir, "/", file); }

bool Exists(const std::string& path) {
  struct stat st {};
  return stat(path.c_str(), &st) == 0;
}

// The graph without ops from NAME.prism.json, its members from the groups.
absl::StatusOr<pg::Graph> PrismSkeleton(const std::string& path,
                                        const std::vector<std::pair<std::string, std::vector<uint32_t>>>& groups,
                                        absl::flat_hash_map<std::string, uint32_t>* comm_ids) {
  PRISM_ASSIGN_OR_RETURN(const std::string text, ReadInputFile(path, "graph description", kJsonFile));
  pg::Graph g;
  if (auto s = google::protobuf::util::JsonStringToMessage(text, &g); !s.ok())
    return absl::InvalidArgumentError(absl::StrCat(
        path, ": not the JSON form of a graph without ops; the parser says '",
        Excerpt(std::string(s.message().substr(0, s.message().find('\n'))), 64), "'"));
  for (const auto& [key, members] : groups) {
    uint32_t id = 0;
    if (!absl::SimpleAtoi(key, &id) || id >= static_cast<uint32_t>(g.communicators_size()))
      return absl::InvalidArgumentError(absl::StrCat("comm_groups.json: group '", Excerpt(key),
                                                     "' names no communicator of ", path));
    *g.mutable_communicators(static_cast<int>(id))->mutable_members() = {members.begin(), members.end()};
    (*comm_ids)[key] = id;
  }
  return g;
}

// A graph for a trace set from elsewhere: the world (communicator 0, all
// ranks; a group of every rank is it), then every other group in
// comm_groups.json, created by init; one node per rank; defaults.
pg::Graph DefaultSkeleton(const std::string& name, uint32_t world,
                          const std::vector<std::pair<std::string, std::vector<uint32_t>>>& groups,
                          absl::flat_hash_map<std::string, uint32_t>* comm_ids) {
  pg::Graph g;
  g.mutable_job()->set_name(name);
  g.mutable_job()->set_generator("prism-graphgen chakra-import");
  g.mutable_job()->set_world_size(world);
  g.mutable_job()->mutable_attributes()->insert({"iterations", "1"});
  pg::Cluster* c = g.mutable_cluster();
  c->set_nodes(world);
  c->set_gpus_per_node(1);
  c->mutable_gpu()->set_name("H100");
  c->mutable_nic()->set_count(1);
  c->mutable_nic()->set_bandwidth_bps(400'000'000'000);
  c->mutable_nic()->set_latency_ns(5'000);
  c->mutable_intra_node()->set_bandwidth_bps(3'600'000'000'000);
  c->mutable_intra_node()->set_latency_ns(1'000);
  pg::Communicator* w = g.add_communicators();
  w->set_kind(pg::COMM_KIND_WORLD);
  w->set_name("world");
  w->mutable_init();
  for (uint32_t r = 0; r < world; ++r) w->add_members(r);
  for (const auto& [key, members] : groups) {
    bool is_world = members.size() == world;
    for (uint32_t i = 0; is_world && i < world; ++i) is_world = members[i] == i;
    if (is_world) {
      (*comm_ids)[key] = 0;  // the world itself
      continue;
    }
    pg::Communicator* comm = g.add_communicators();
    comm->set_id(static_cast<uint32_t>(g.communicators_size() - 1));
    comm->set_kind(pg::COMM_KIND_OTHER);
    comm->set_name(absl::StrCat("pg[", Excerpt(key), "]"));
    comm->mutable_init();
    *comm->mutable_members() = {members.begin(), members.end()};
    (*comm_ids)[key] = comm->id();
  }
  for (uint32_t r = 0; r < world; ++r) {
    pg::Rank* rank = g.add_ranks();
    rank->set_rank(r);
    rank->set_node(r);
  }
  return g;
}

uint32_t CountRankFiles(const std::string& dir, const std::string& name) {
  uint32_t n = 0;
  while (n < limits::kMaxRanks && Exists(PathOf(dir, absl::StrCat(name, ".", n, ".et")))) ++n;
  return n;
}

// The graph without ops: NAME.prism.json's (a Prism trace set) or the
// defaults; members and comm_ids from NAME.comm_groups.json when present.
absl::StatusOr<pg::Graph> LoadSkeleton(const std::string& dir, const std::string& name, uint32_t world, bool prism,
                                       absl::flat_hash_map<std::string, uint32_t>* comm_ids) {
  std::vector<std::pair<std::string, std::vector<uint32_t>>> groups;
  if (const std::string path = PathOf(dir, name + ".comm_groups.json"); Exists(path)) {
    PRISM_ASSIGN_OR_RETURN(groups, ReadCommGroups(path));
  }
  if (!prism) return DefaultSkeleton(name, world, groups, comm_ids);
  const std::string path = PathOf(dir, name + ".prism.json");
  PRISM_ASSIGN_OR_RETURN(pg::Graph g, PrismSkeleton(path, groups, comm_ids));
  if (static_cast<uint32_t>(g.ranks_size()) != world)
    return absl::InvalidArgumentError(absl::StrCat(dir, ": ", world, " rank traces (", name, ".0.et ...) but ", path,
                                                   " has ", g.ranks_size(), " ranks"));
  return g;
}

// A Prism trace set: rank r's ops are its program's; the first rank of a
// program sets them, every other must have the same.
absl::Status SetSharedProgram(pg::Graph& g, uint32_t r, google::protobuf::RepeatedPtrField<pg::Op> ops,
                              const std::string& file, const std::string& skeleton_path, std::vector<bool>& filled) {
  const uint32_t program = g.ranks(static_cast<int>(r)).program();
  if (program >= filled.size())
    return absl::InvalidArgumentError(absl::StrCat(skeleton_path, ": rank ", r, " names no program"));
  pg::Program* p = g.mutable_programs(static_cast<int>(program));
  if (!filled[program]) {
    *p->mutable_ops() = std::move(ops);
    filled[program] = true;
    return absl::OkStatus();
  }
  bool same = p->ops_size() == ops.size();
  for (int i = 0; same && i < ops.size(); ++i)
    same = google::protobuf::util::MessageDifferencer::Equals(p->ops(i), ops[i]);
  if (same) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(file, ": differs from the first trace of program '", p->name(),
                                                 "', which rank ", r, " shares in ", skeleton_path,
                                                 "; give the rank a program of its own there"));
}

// A trace set from elsewhere: ranks with the same ops on their own groups
// share a program (`program_of_key`: serialized program -> id).
void AddOwnProgram(pg::Graph& g, uint32_t r, google::protobuf::RepeatedPtrField<pg::Op> ops, const RankSlots& slots,
                   std::map<std::string, uint32_t>& program_of_key) {
  pg::Program candidate;
  *candidate.mutable_ops() = std::move(ops);
  uint32_t streams = 1;
  for (const pg::Op& op : candidate.ops()) streams = std::max(streams, op.stream() + 1);
  candidate.set_streams(streams);
  for (size_t s = 0; s < slots.slots().size(); ++s)  // by position: ranks of one program have other groups
    candidate.add_comm_slot_names(s == 0 ? std::string("world") : absl::StrCat("group", s));
  auto [it, added] = program_of_key.emplace(candidate.SerializeAsString(), static_cast<uint32_t>(g.programs_size()));
  if (added) {
    candidate.set_id(it->second);
    candidate.set_name(absl::StrCat("rank-", r));
    *g.add_programs() = std::move(candidate);
  }
  pg::Rank* rank = g.mutable_ranks(static_cast<int>(r));
  rank->set_program(it->second);
  *rank->mutable_comm_slots() = {slots.slots().begin(), slots.slots().end()};
}

}  // namespace

absl::StatusOr<std::string> FindTraceSetName(const std::string& dir) {
  DIR* d = opendir(dir.c_str());
  if (d == nullptr) return absl::NotFoundError(absl::StrCat("cannot open folder ", dir, ": ", std::strerror(errno)));
  std::vector<std::string> names;
  while (const dirent* e = readdir(d)) {
    const std::string f = e->d_name;
    if (absl::EndsWith(f, ".0.et") && f.size() > 5) names.push_back(f.substr(0, f.size() - 5));
  }
  closedir(d);
  if (names.size() == 1) return names[0];
  return absl::InvalidArgumentError(absl::StrCat(dir, ": ", names.empty() ? "no Chakra trace NAME.0.et there"
                                                                         : "several trace sets (NAME.0.et)",
                                                 "; name one with --name"));
}

absl::StatusOr<pg::Graph> ReadTraceSet(const std::string& dir, const std::string& name) {
  const uint32_t world = CountRankFiles(dir, name);
  if (world == 0)
    return absl::NotFoundError(absl::StrCat(PathOf(dir, name + ".0.et"), ": not found; a trace set has one trace "
                                            "per rank, NAME.0.et, NAME.1.et, ..."));
  absl::flat_hash_map<std::string, uint32_t> comm_ids;
  const std::string skeleton_path = PathOf(dir, name + ".prism.json");
  const bool prism = Exists(skeleton_path);
  PRISM_ASSIGN_OR_RETURN(pg::Graph g, LoadSkeleton(dir, name, world, prism, &comm_ids));
  const ImportContext ctx{&g, &comm_ids};
  std::vector<bool> filled(static_cast<size_t>(g.programs_size()), false);
  std::map<std::string, uint32_t> program_of_key;
  for (uint32_t r = 0; r < world; ++r) {
    const std::string file = PathOf(dir, absl::StrCat(name, ".", r, ".et"));
    PRISM_ASSIGN_OR_RETURN(const std::string bytes, ReadInputFile(file, "Chakra trace", kTraceFile));
    PRISM_ASSIGN_OR_RETURN(const RankTrace trace, ParseTrace(bytes, file));
    const pg::Rank& rank = g.ranks(static_cast<int>(r));
    RankSlots slots(prism ? std::vector<uint32_t>(rank.comm_slots().begin(), rank.comm_slots().end())
                          : std::vector<uint32_t>{0},
                    prism);
    PRISM_ASSIGN_OR_RETURN(auto ops, RankOps(ctx, r, trace, file, slots));
    if (prism) {
      PRISM_RETURN_IF_ERROR(SetSharedProgram(g, r, std::move(ops), file, skeleton_path, filled));
    } else {
      AddOwnProgram(g, r, std::move(ops), slots, program_of_key);
    }
  }
  PRISM_RETURN_IF_ERROR(pg::ValidateGraph(g));
  return g;
}

}  // namespace prism::graphgen::chakra
