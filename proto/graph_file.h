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

namespace prism::graph {

inline constexpr char kGraphMagic[8] = {'P', 'R', 'I', 'S', 'M', 'G', 'R', 'F'};
// Format 1 holds ranks, communicators and process groups as records only;
// format 2 (this build's newest) adds their tables (graph.proto). A file is
// written with the oldest version that holds it (FormatVersionFor), so a
// graph of records stays readable by builds that know only format 1.
inline constexpr uint32_t kGraphFormatVersionRecords = 1;
inline constexpr uint32_t kGraphFormatVersion = 2;
inline constexpr size_t kGraphHeaderBytes = 16;
// Refuse files larger than this before reading them (hostile input).
inline constexpr uint64_t kMaxGraphFileBytes = limits::kMaxGraphFileBytes;

// 2 when `graph` holds any table, else 1.
uint32_t FormatVersionFor(const Graph& graph);

// Serialises `graph` with the header (version FormatVersionFor(graph)); the
// message's format_version field is written with that version.
absl::StatusOr<std::string> EncodeGraph(const Graph& graph);

struct ReadOptions {
  // Keep format 2's tables as they are (read them through graph::Topology)
  // instead of expanding them into records (graph_topology.h's
  // ExpandTables), which code reading Graph.ranks/.communicators/
  // .process_groups directly needs.
  bool keep_tables = false;
};

// Parses header + message from `data` and validates it (ValidateGraph).
// `origin` names the source in error messages (a path, "<memory>"). A graph
// with more ranks, or a program with more ops, than common/limits.h allows is
// refused (OutOfRange) by a scan of the bytes before the message is parsed.
// Versions 1 and 2 are read; a version-1 header over tables is refused.
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

// Structural checks, on records or tables alike (graph::Topology::Of's
// checks of the tables first): ids equal indices, every rank has a valid program and
// one comm slot per program slot, communicator members are distinct valid
// ranks and contain the ranks whose slots name them, split parents come
// earlier, ops reference valid slots/streams/earlier ops, peers and roots are
// in range, cluster sizes match the rank count, enum values (collective,
// algorithm, dtype, communicator kinds) are known, GroupStart/GroupEnd pair up
// on each stream (no nesting), and the k-th send from a rank to a peer on a
// communicator has the size of that peer's k-th receive from it; and the
// limits of common/limits.h hold (ranks, ops, streams, durations, sizes,
// memory, link figures, per-rank state). Returns the first problem found:
// InvalidArgument for a broken structure, OutOfRange (naming the limit) for a
// figure beyond a limit.
// Cost: linear in the graph (ranks x slots + membership + ops + distinct
// send/recv sequences).
absl::Status ValidateGraph(const Graph& graph);

}  // namespace prism::graph

#endif  // PRISM_PROTO_GRAPH_FILE_H_
