#include "graphgen/capture_recording.h"

#include <algorithm>
#include <optional>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/limits.h"
#include "google/protobuf/util/json_util.h"
#include "graphgen/input_file.h"
#include "graphgen/yaml_reader.h"

namespace prism::graphgen {
namespace {

namespace pg = prism::graph;

absl::Status LineError(const std::string& origin, size_t line, const std::string& what) {
  return absl::InvalidArgumentError(absl::StrCat(origin, ":", line, ": ", what));
}

// The communicator an op uses (comm_slot holds its id), or nullopt for compute and groups.
std::optional<uint32_t> CommOf(const pg::Op& op) {
  if (op.has_collective()) return op.collective().comm_slot();
  if (op.has_send()) return op.send().comm_slot();
  if (op.has_recv()) return op.recv().comm_slot();
  return std::nullopt;
}

absl::Status CheckComm(const Recording& r, const pg::Communicator& c, const std::string& origin, size_t line) {
  if (c.id() != r.comms.size())
    return LineError(origin, line, absl::StrCat("comm id ", c.id(), " where ", r.comms.size(),
                                                " was next (ids are creation indices)"));
  absl::flat_hash_set<uint32_t> seen;
  for (uint32_t m : c.members())
    if (m >= r.header.world_size() || !seen.insert(m).second)
      return LineError(origin, line, absl::StrCat("comm ", c.id(), ": member ", m,
                                                  " repeated or not below world_size ", r.header.world_size()));
  if (c.members().empty()) return LineError(origin, line, absl::StrCat("comm ", c.id(), " has no members"));
  if (c.has_split() && c.split().parent() >= c.id())
    return LineError(origin, line, absl::StrCat("comm ", c.id(), ": split of ", c.split().parent(),
                                                ", which is not created before it"));
  return absl::OkStatus();
}

absl::Status CheckOp(const Recording& r, const pg::Op& op, const std::string& origin, size_t line) {
  for (uint32_t d : op.deps())
    if (d >= r.ops.size()) return LineError(origin, line, absl::StrCat("dep ", d, " is not an earlier op"));
  if (op.kind_case() == pg::Op::KIND_NOT_SET) return LineError(origin, line, "an op without a kind");
  const std::optional<uint32_t> comm = CommOf(op);
  if (!comm) return absl::OkStatus();
  if (*comm >= r.comms.size()) return LineError(origin, line, absl::StrCat("comm ", *comm, " is not recorded"));
  const auto& members = r.comms[*comm].members();
  if (std::find(members.begin(), members.end(), r.header.rank()) == members.end())
    return LineError(origin, line, absl::StrCat("rank ", r.header.rank(), " is not a member of comm ", *comm));
  const bool p2p = op.has_send() || op.has_recv();
  const uint32_t peer = op.has_send() ? op.send().peer() : op.has_recv() ? op.recv().peer() : 0;
  const bool relative = op.has_send() ? op.send().peer_relative() : op.has_recv() && op.recv().peer_relative();
  if (p2p && (relative || peer >= static_cast<uint32_t>(members.size())))
    return LineError(origin, line, absl::StrCat("peer ", peer, " is not an absolute rank of comm ", *comm));
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<Recording> ParseRecording(std::string_view text, const std::string& origin) {
  Recording r;
  bool have_header = false;
  size_t line_no = 0;
  google::protobuf::util::JsonParseOptions options;
  for (absl::string_view line : absl::StrSplit(absl::string_view(text.data(), text.size()), '\n')) {
    ++line_no;
    if (line.empty()) continue;
    prism::capture::CaptureLine entry;
    if (auto s = google::protobuf::util::JsonStringToMessage(std::string(line), &entry, options); !s.ok())
      return LineError(origin, line_no, absl::StrCat("not a capture line: protobuf's JSON form of a CaptureLine "
                                                     "(proto/capture.proto) is expected; the parser says '",
                                                     Excerpt(std::string(s.message().substr(0, s.message().find('\n'))), 64), "'"));
    switch (entry.line_case()) {
      case prism::capture::CaptureLine::kHeader:
        if (have_header) return LineError(origin, line_no, "a second header");
        if (entry.header().format() != kCaptureFormat)
          return LineError(origin, line_no, absl::StrCat("format '", entry.header().format().substr(0, 32),
                                                         "'; this prism-graphgen reads ", kCaptureFormat));
        if (entry.header().world_size() == 0 || entry.header().world_size() > limits::kMaxRanks ||
            entry.header().rank() >= entry.header().world_size())
          return LineError(origin, line_no, "rank and world_size: need 0 <= rank < world_size <= 4,194,304");
        r.header = entry.header();
        have_header = true;
        break;
      case prism::capture::CaptureLine::kComm:
        if (!have_header || !r.ops.empty())
          return LineError(origin, line_no, "a comm line belongs after the header and before the ops");
        if (auto s = CheckComm(r, entry.comm(), origin, line_no); !s.ok()) return s;
        r.comms.push_back(entry.comm());
        break;
      case prism::capture::CaptureLine::kProcessGroup:
        if (!have_header || !r.ops.empty())
          return LineError(origin, line_no, "a process_group line belongs after the header and before the ops");
        if (entry.process_group().backend() == pg::ProcessGroup::NCCL &&
            entry.process_group().communicator() >= r.comms.size())
          return LineError(origin, line_no, "a process_group names a communicator no comm line before it has");
        r.process_groups.push_back(entry.process_group());
        break;
      case prism::capture::CaptureLine::kStartupOp:
        if (!have_header || !r.ops.empty())
          return LineError(origin, line_no, "a startup_op line belongs after the header and before the ops");
        if (!entry.startup_op().has_collective() || entry.startup_op().deps_size() != 0)
          return LineError(origin, line_no, "a startup_op is a collective without deps");
        if (r.startup_ops.size() >= limits::kMaxOpsPerProgram)
          return LineError(origin, line_no, "more start-up ops than Prism's limit per program");
        if (auto s = CheckOp(r, entry.startup_op(), origin, line_no); !s.ok()) return s;
        r.startup_ops.push_back(entry.startup_op());
        break;
      case prism::capture::CaptureLine::kOp:
        if (!have_header) return LineError(origin, line_no, "an op before the header");
        if (r.ops.size() >= limits::kMaxOpsPerProgram)
          return LineError(origin, line_no, "more ops than Prism's limit per program");
        if (auto s = CheckOp(r, entry.op(), origin, line_no); !s.ok()) return s;
        r.ops.push_back(entry.op());
        break;
      default: return LineError(origin, line_no, "neither header, comm, process_group, startup_op nor op");
    }
  }
  if (!have_header) return absl::InvalidArgumentError(absl::StrCat(origin, ": no header line; not a recording"));
  return r;
}

absl::StatusOr<Recording> ReadRecordingFile(const std::string& path) {
  auto text = ReadInputFile(path, "capture recording", InputKind{limits::kMaxGraphFileBytes, true,
                                                                "a capture recording (JSON lines)"});
  if (!text.ok()) return text.status();
  return ParseRecording(*text, path);
}

std::string EncodeRecording(const Recording& recording) {
  google::protobuf::util::JsonPrintOptions options;
  options.preserve_proto_field_names = true;
  std::string out;
  auto append = [&](const prism::capture::CaptureLine& line) {
    std::string json;
    (void)google::protobuf::util::MessageToJsonString(line, &json, options);  // cannot fail for these messages
    absl::StrAppend(&out, json, "\n");
  };
  prism::capture::CaptureLine line;
  *line.mutable_header() = recording.header;
  append(line);
  for (const pg::Communicator& c : recording.comms) {
    *line.mutable_comm() = c;
    append(line);
  }
  for (const pg::ProcessGroup& p : recording.process_groups) {
    *line.mutable_process_group() = p;
    append(line);
  }
  for (const pg::Op& op : recording.startup_ops) {
    *line.mutable_startup_op() = op;
    append(line);
  }
  for (const pg::Op& op : recording.ops) {
    *line.mutable_op() = op;
    append(line);
  }
  return out;
}

absl::StatusOr<Recording> RecordingFromGraph(const pg::Graph& graph, uint32_t rank) {
  if (rank >= static_cast<uint32_t>(graph.ranks_size()))
    return absl::InvalidArgumentError(absl::StrCat("rank ", rank, " is not in the graph (ranks 0 to ",
                                                   graph.ranks_size() - 1, ")"));
  const pg::Rank& r = graph.ranks(static_cast<int>(rank));
  const pg::Program& program = graph.programs(static_cast<int>(r.program()));
  Recording rec;
  rec.header.set_format(kCaptureFormat);
  rec.header.set_rank(rank);
  rec.header.set_world_size(static_cast<uint64_t>(graph.ranks_size()));
  rec.header.set_program(program.name());
  rec.header.set_static_memory_bytes(program.static_memory_bytes());
  rec.header.set_source("prism-graphgen capture-from-graph");
  rec.comms.assign(graph.communicators().begin(), graph.communicators().end());
  rec.process_groups.assign(graph.process_groups().begin(), graph.process_groups().end());
  auto to_comm = [&](uint32_t slot) { return r.comm_slots(static_cast<int>(slot)); };
  for (pg::Op op : program.startup_ops()) {
    op.mutable_collective()->set_comm_slot(to_comm(op.collective().comm_slot()));
    rec.startup_ops.push_back(std::move(op));
  }
  int64_t live = 0, peak = 0;
  for (pg::Op op : program.ops()) {
    auto absolute = [&](auto* p2p) {
      const auto& m = graph.communicators(static_cast<int>(to_comm(p2p->comm_slot()))).members();
      if (p2p->peer_relative()) {
        const int self = static_cast<int>(std::find(m.begin(), m.end(), rank) - m.begin());
        p2p->set_peer(static_cast<uint32_t>((static_cast<uint64_t>(self) + p2p->peer()) % m.size()));
        p2p->set_peer_relative(false);
      }
      p2p->set_comm_slot(to_comm(p2p->comm_slot()));
    };
    if (op.has_collective()) op.mutable_collective()->set_comm_slot(to_comm(op.collective().comm_slot()));
    if (op.has_send()) absolute(op.mutable_send());
    if (op.has_recv()) absolute(op.mutable_recv());
    if (op.has_compute()) peak = std::max(peak, live += op.compute().memory_delta_bytes());
    rec.ops.push_back(std::move(op));
  }
  rec.header.set_peak_memory_bytes(program.static_memory_bytes() + static_cast<uint64_t>(peak));
  return rec;
}

}  // namespace prism::graphgen
