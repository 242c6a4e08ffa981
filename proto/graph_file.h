// Reading and writing execution-graph files (see graph.proto for the layout).
//
// All functions are thread-safe (no shared state). Errors are absl::Status
// values whose message names the file, what is wrong and what to do.
#ifndef PRISM_PROTO_GRAPH_FILE_H_
#define PRISM_PROTO_GRAPH_FILE_H_

#include <cstdint>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/limits.h"
#include "proto/graph.pb.h"
#include "proto/graph_validate.h"

namespace prism::graph {

inline constexpr char kGraphMagic[8] = {'P', 'R', 'I', 'S', 'M', 'G', 'R', 'F'};
// Format 1 holds ranks, communicators and process groups as records only;
// format 2 adds their tables, format 3 (this build's newest) their rules
// (graph.proto, graph_rules.h). A file is written with the oldest version
// that holds it (FormatVersionFor), so a graph of records stays readable by
// builds that know only format 1, one of tables by builds that know 2.
inline constexpr uint32_t kGraphFormatVersionRecords = 1;
inline constexpr uint32_t kGraphFormatVersionTables = 2;
inline constexpr uint32_t kGraphFormatVersion = 3;
inline constexpr size_t kGraphHeaderBytes = 16;
// Refuse files larger than this before reading them (hostile input).
inline constexpr uint64_t kMaxGraphFileBytes = limits::kMaxGraphFileBytes;

// 3 when `graph` holds rules, else 2 when it holds any table, else 1.
uint32_t FormatVersionFor(const Graph& graph);

// Serialises `graph` with the header (version FormatVersionFor(graph)); the
// message's format_version field is written with that version.
absl::StatusOr<std::string> EncodeGraph(const Graph& graph);

struct ReadOptions {
  // Keep format 2's tables (format 3's rules are expanded into them) as
  // they are (read them through graph::Topology)
  // instead of expanding them into records (graph_topology.h's
  // ExpandTables), which code reading Graph.ranks/.communicators/
  // .process_groups directly needs.
  bool keep_tables = false;
};

// Parses header + message from `data` and validates it (ValidateGraph).
// `origin` names the source in error messages (a path, "<memory>"). A graph
// with more ranks, or a program with more ops, than common/limits.h allows is
// refused (OutOfRange) by a scan of the bytes before the message is parsed.
// Versions 1 to 3 are read; a header older than what the message holds
// (tables under version 1, rules under 1 or 2) is refused. Rules are
// checked (graph_rules.h's CheckRules) and expanded into tables before the
// rest is validated: the result never holds rules.
absl::StatusOr<Graph> DecodeGraph(std::string_view data, std::string_view origin = "<memory>",
                                  ReadOptions options = {});

// Writes atomically: to TemporaryPathFor(path), created exclusively and never
// through a symlink (common/output_file.h), then rename. On any error no file
// is left at `path` (and the temporary is removed).
absl::Status WriteGraphFile(const Graph& graph, const std::string& path);

// "<path>.tmp.<pid>": where WriteGraphFile writes before renaming (a caller
// that handles signals removes it when interrupted).
std::string TemporaryPathFor(const std::string& path);

// Reads, decodes and validates a graph file. Only a regular file of at most
// kMaxGraphFileBytes is read; a directory, device or FIFO is refused by name.
absl::StatusOr<Graph> ReadGraphFile(const std::string& path);

// The same into `*out` (cleared first), which may live on a protobuf Arena:
// a 131,072-rank graph is then parsed without one heap allocation per rank
// and communicator, and freed with its arena. On error `*out` is unspecified.
absl::Status ReadGraphFileInto(const std::string& path, Graph* out, ReadOptions options = {});

// ValidateGraph (the structure and the limits) is graph_validate.h's.

}  // namespace prism::graph

#endif  // PRISM_PROTO_GRAPH_FILE_H_
