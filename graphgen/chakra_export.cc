// Prism graph -> Chakra trace set (graphgen/chakra_et.h, docs/chakra.md).
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>

#include "absl/strings/str_cat.h"
#include "google/protobuf/util/json_util.h"
#include "graphgen/chakra_et.h"
#include "graphgen/chakra_mapping.h"
#include "nlohmann/json.hpp"
#include "proto/graph_file.h"

namespace prism::graphgen::chakra {
namespace {

namespace pg = prism::graph;
using ChakraProtoMsg::AttributeProto;
using ChakraProtoMsg::Node;

void AppendDelimited(const google::protobuf::Message& message, std::string* out) {
  const std::string bytes = message.SerializeAsString();
  uint64_t n = bytes.size();  // varint (Chakra's protolib reads it as a varint32)
  while (n >= 0x80) {
    out->push_back(static_cast<char>((n & 0x7F) | 0x80));
    n >>= 7;
  }
  out->push_back(static_cast<char>(n));
  out->append(bytes);
}

AttributeProto* Attr(Node& node, const char* name) {
  AttributeProto* a = node.add_attr();
  a->set_name(name);
  return a;
}

void SetCommunicator(Node& node, uint32_t comm_id, uint32_t slot) {
  Attr(node, kAttrPgName)->set_string_val(std::to_string(comm_id));
  Attr(node, kAttrSlot)->set_int64_val(slot);
}

// The global rank behind a send/recv peer of `rank` (ValidateGraph checked the range).
uint32_t PeerRank(const pg::Communicator& comm, uint32_t rank, uint32_t peer, bool relative) {
  const auto& m = comm.members();
  if (!relative) return m[static_cast<int>(peer)];
  int self = 0;
  while (self < m.size() && m[self] != rank) ++self;
  return m[static_cast<int>((static_cast<uint64_t>(self) + peer) % static_cast<uint64_t>(m.size()))];
}

template <typename P2p>
void SetPointToPoint(Node& node, const pg::Graph& g, const pg::Rank& r, const P2p& op, bool is_send) {
  const uint32_t comm_id = r.comm_slots(static_cast<int>(op.comm_slot()));
  const uint32_t peer = PeerRank(g.communicators(static_cast<int>(comm_id)), r.rank(), op.peer(), op.peer_relative());
  node.set_type(is_send ? ChakraProtoMsg::COMM_SEND_NODE : ChakraProtoMsg::COMM_RECV_NODE);
  node.set_name(op.label());
  Attr(node, kAttrCommSize)->set_int64_val(static_cast<int64_t>(op.bytes()));
  Attr(node, kAttrCommSrc)->set_int32_val(static_cast<int32_t>(is_send ? r.rank() : peer));
  Attr(node, kAttrCommDst)->set_int32_val(static_cast<int32_t>(is_send ? peer : r.rank()));
  Attr(node, kAttrCommTag)->set_int32_val(static_cast<int32_t>(comm_id));
  SetCommunicator(node, comm_id, op.comm_slot());
  Attr(node, kAttrPeer)->set_int64_val(op.peer());
  Attr(node, kAttrPeerRelative)->set_bool_val(op.peer_relative());
}

void FillNode(const pg::Graph& g, const pg::Rank& r, const pg::Op& op, Node& node) {
  switch (op.kind_case()) {
    case pg::Op::kCompute: {
      const pg::ComputeOp& c = op.compute();
      node.set_type(ChakraProtoMsg::COMP_NODE);
      node.set_name(c.label());
      node.set_duration_micros((c.duration_ns() + 500) / 1000);
      Attr(node, kAttrDurationNs)->set_uint64_val(c.duration_ns());
      if (c.flops() != 0) Attr(node, kAttrNumOps)->set_int64_val(static_cast<int64_t>(c.flops()));
      if (c.memory_delta_bytes() != 0) Attr(node, kAttrMemoryDelta)->set_int64_val(c.memory_delta_bytes());
      break;
    }
    case pg::Op::kCollective: {
      const pg::CollectiveOp& c = op.collective();
      node.set_type(ChakraProtoMsg::COMM_COLL_NODE);
      node.set_name(c.label());
      Attr(node, kAttrCommType)->set_int64_val(ChakraCollective(c.kind()));
      Attr(node, kAttrCommSize)->set_int64_val(static_cast<int64_t>(c.bytes()));
      SetCommunicator(node, r.comm_slots(static_cast<int>(c.comm_slot())), c.comm_slot());
      Attr(node, kAttrDtype)->set_int64_val(c.dtype());
      if (c.algorithm() != pg::ALGORITHM_DEFAULT) Attr(node, kAttrAlgorithm)->set_int64_val(c.algorithm());
      if (c.root() != 0) Attr(node, kAttrRoot)->set_int64_val(c.root());
      break;
    }
    case pg::Op::kSend: SetPointToPoint(node, g, r, op.send(), true); break;
    case pg::Op::kRecv:
      SetPointToPoint(node, g, r, op.recv(), false);
      if (!op.recv().payload().empty()) Attr(node, kAttrPayload)->set_bytes_val(op.recv().payload());
      break;
    case pg::Op::kGroupStart:
    case pg::Op::kGroupEnd: {
      const bool start = op.has_group_start();
      node.set_type(ChakraProtoMsg::COMP_NODE);  // zero time: every Chakra consumer runs it as a no-op
      node.set_name(start ? "ncclGroupStart" : "ncclGroupEnd");
      Attr(node, kAttrOp)->set_string_val(start ? kGroupStart : kGroupEnd);
      break;
    }
    default: break;
  }
  Attr(node, kAttrIsCpuOp)->set_bool_val(false);
  Attr(node, kAttrStream)->set_int64_val(op.stream());
}

// The op's explicit deps, then the implied ones it does not already name.
void SetDeps(const pg::Op& op, const std::vector<uint32_t>& implied, Node& node) {
  for (uint32_t d : op.deps()) node.add_data_deps(d);
  for (uint32_t d : implied) {
    bool named = false;
    for (uint32_t e : op.deps()) named = named || e == d;
    if (!named) node.add_data_deps(d);
  }
}

absl::Status WriteFile(const std::string& path, const std::string& bytes) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  f.close();
  if (!f) return absl::UnavailableError(absl::StrCat("cannot write ", path, ": ", std::strerror(errno)));
  return absl::OkStatus();
}

bool ValidName(const std::string& name) {
  if (name.empty() || name[0] == '.') return false;
  for (char c : name)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '.')) return false;
  return true;
}

// Removes the files of a half-written temporary folder, then the folder.
void RemoveTemporary(const std::string& tmp, const std::vector<std::string>& written) {
  for (const std::string& f : written) std::remove(f.c_str());
  rmdir(tmp.c_str());
}

}  // namespace

absl::StatusOr<std::string> EncodeRankTrace(const pg::Graph& graph, uint32_t rank) {
  if (rank >= static_cast<uint32_t>(graph.ranks_size()))
    return absl::InvalidArgumentError(absl::StrCat("rank ", rank, " is not in the graph (", graph.ranks_size(),
                                                   " ranks)"));
  const pg::Rank& r = graph.ranks(static_cast<int>(rank));
  const pg::Program& program = graph.programs(static_cast<int>(r.program()));
  std::string out;
  ChakraProtoMsg::GlobalMetadata meta;
  meta.set_version(kChakraSchemaVersion);
  AttributeProto* a = meta.add_attr();
  a->set_name(kMetaRank);
  a->set_int64_val(rank);
  a = meta.add_attr();
  a->set_name(kMetaProgram);
  a->set_string_val(program.name());
  AppendDelimited(meta, &out);
  const std::vector<std::vector<uint32_t>> implied = ImpliedDeps(program.ops());
  Node node;
  for (int i = 0; i < program.ops_size(); ++i) {
    node.Clear();
    node.set_id(static_cast<uint64_t>(i));
    FillNode(graph, r, program.ops(i), node);
    SetDeps(program.ops(i), implied[static_cast<size_t>(i)], node);
    AppendDelimited(node, &out);
  }
  return out;
}

std::string EncodeCommGroups(const pg::Graph& graph) {
  nlohmann::ordered_json groups = nlohmann::ordered_json::object();
  for (const pg::Communicator& c : graph.communicators())
    groups[std::to_string(c.id())] = std::vector<uint32_t>(c.members().begin(), c.members().end());
  return groups.dump() + "\n";
}

absl::StatusOr<std::string> EncodeSkeleton(const pg::Graph& graph) {
  pg::Graph skeleton = graph;
  for (pg::Program& p : *skeleton.mutable_programs()) p.clear_ops();
  for (pg::Communicator& c : *skeleton.mutable_communicators()) c.clear_members();  // in comm_groups.json
  std::string json;
  google::protobuf::util::JsonPrintOptions options;
  options.preserve_proto_field_names = true;
  if (auto s = google::protobuf::util::MessageToJsonString(skeleton, &json, options); !s.ok())
    return absl::InternalError(absl::StrCat("cannot write the graph's JSON form: ", s.ToString()));
  return json + "\n";
}

absl::Status WriteTraceSet(const pg::Graph& graph, const std::string& dir, const std::string& name) {
  if (!ValidName(name))
    return absl::InvalidArgumentError(absl::StrCat("--name '", name, "': use letters, digits, '-', '_' and '.' "
                                                   "(not first)"));
  if (auto s = pg::ValidateGraph(graph); !s.ok()) return s;
  struct stat st {};
  if (lstat(dir.c_str(), &st) == 0)
    return absl::AlreadyExistsError(absl::StrCat("-o ", dir, ": already exists; remove it or name a new folder"));
  const std::string tmp = absl::StrCat(dir, ".tmp.", getpid());
  if (mkdir(tmp.c_str(), 0755) != 0)
    return absl::UnavailableError(absl::StrCat("cannot create folder ", tmp, ": ", std::strerror(errno)));
  std::vector<std::string> written;
  auto write = [&](const std::string& file, const std::string& bytes) {
    written.push_back(absl::StrCat(tmp, "/", file));
    return WriteFile(written.back(), bytes);
  };
  absl::Status status = write(absl::StrCat(name, ".comm_groups.json"), EncodeCommGroups(graph));
  if (status.ok()) {
    auto skeleton = EncodeSkeleton(graph);
    status = skeleton.ok() ? write(absl::StrCat(name, ".prism.json"), *skeleton) : skeleton.status();
  }
  for (uint32_t r = 0; status.ok() && r < static_cast<uint32_t>(graph.ranks_size()); ++r) {
    auto trace = EncodeRankTrace(graph, r);
    status = trace.ok() ? write(absl::StrCat(name, ".", r, ".et"), *trace) : trace.status();
  }
  if (status.ok() && rename(tmp.c_str(), dir.c_str()) != 0)
    status = absl::UnavailableError(absl::StrCat("cannot rename ", tmp, " to ", dir, ": ", std::strerror(errno)));
  if (!status.ok()) RemoveTemporary(tmp, written);
  return status;
}

}  // namespace prism::graphgen::chakra
