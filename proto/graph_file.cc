#include "proto/graph_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <vector>

#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/wire_format_lite.h>

#include "absl/strings/str_cat.h"
#include "common/output_file.h"
#include "proto/graph_check_errors.h"
#include "proto/graph_rules.h"
#include "proto/graph_topology.h"
#include "proto/graph_validate.h"

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

using check::OverLimit;

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
                                                   " to ", kGraphFormatVersion,
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
        FormatVersionFor(g), "'s ", g.has_rules() ? "rules" : "tables",
        "; the file is corrupt: regenerate it with this build's prism-graphgen"));
  ValidateOptions checks;
  if (g.has_rules()) {
    absl::Status s = CheckRules(g);
    if (s.ok()) s = CheckRuleGroups(g);
    if (!s.ok()) return absl::Status(s.code(), absl::StrCat(std::string(origin), ": ", s.message()));
    ExpandRules(g);
    checks.membership_proven = true;
  }
  if (auto s = ValidateGraph(g, checks); !s.ok())
    return absl::InvalidArgumentError(absl::StrCat(std::string(origin), ": ", s.message()));
  if (!options.keep_tables) ExpandTables(g);
  if (version > kGraphFormatVersionRecords)
    g.set_format_version(FormatVersionFor(g));  // tables or records now: the version they would be written with
  return absl::OkStatus();
}

}  // namespace

uint32_t FormatVersionFor(const Graph& graph) {
  if (graph.has_rules()) return kGraphFormatVersion;
  const bool tables = graph.has_rank_table() || graph.has_communicator_table() || graph.has_process_group_table();
  return tables ? kGraphFormatVersionTables : kGraphFormatVersionRecords;
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
