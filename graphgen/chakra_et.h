// Chakra execution traces (MLCommons Chakra, schema proto/chakra/et_def.proto)
// from and to Prism graphs, so ASTRA-sim and the field's tools read Prism
// graphs and Prism replays Chakra traces. The mapping is in docs/chakra.md.
//
// A trace set is a folder holding, for a graph named NAME:
//   NAME.<r>.et            one Chakra trace per rank r (Chakra's file naming):
//                          a varint32-length-prefixed GlobalMetadata, then one
//                          Node per op of the rank's program, node id = op index
//   NAME.comm_groups.json  {"<communicator id>": [global ranks, in communicator
//                          rank order], ...}: every communicator; a node's
//                          `pg_name` is one of these ids (ASTRA-sim's
//                          communicator-group file has this form)
//   NAME.prism.json        what Chakra has no field for (job, cluster, layout,
//                          communicator kinds, names and creation, programs'
//                          names, slots and static memory, every rank's
//                          program, placement and slots): protobuf's JSON form
//                          of the graph without its ops
// Export then import gives back the same graph (every field, durations to the
// nanosecond); a trace set without NAME.prism.json (a Chakra trace from
// elsewhere) is imported with defaults, docs/chakra.md says which.
//
// Pure functions apart from the files they name; thread-safe.
#ifndef PRISM_GRAPHGEN_CHAKRA_ET_H_
#define PRISM_GRAPHGEN_CHAKRA_ET_H_

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "proto/chakra/et_def.pb.h"
#include "proto/graph.pb.h"

namespace prism::graphgen::chakra {

inline constexpr char kChakraSchemaVersion[] = "1.0.0";  // GlobalMetadata.version written

// The bytes of NAME.<rank>.et for `rank` of `graph` (a valid graph).
// InvalidArgument when the rank is not in the graph.
absl::StatusOr<std::string> EncodeRankTrace(const prism::graph::Graph& graph, uint32_t rank);

// NAME.comm_groups.json and NAME.prism.json of `graph`.
std::string EncodeCommGroups(const prism::graph::Graph& graph);
absl::StatusOr<std::string> EncodeSkeleton(const prism::graph::Graph& graph);

// Writes the whole trace set into folder `dir`, which must not exist (its
// parent must): the files go to "<dir>.tmp.<pid>", created exclusively, and
// that folder is renamed to `dir` once every file is written; on any error
// nothing is left at `dir`. `name`: letters, digits, '-', '_', '.'.
absl::Status WriteTraceSet(const prism::graph::Graph& graph, const std::string& dir, const std::string& name);

// Reads the trace set NAME in folder `dir` back into a graph, and validates
// it (proto/graph_validate.h's ValidateGraph). Errors name the file and node.
absl::StatusOr<prism::graph::Graph> ReadTraceSet(const std::string& dir, const std::string& name);

// The trace set's name in `dir` when there is exactly one NAME.0.et there.
absl::StatusOr<std::string> FindTraceSetName(const std::string& dir);

}  // namespace prism::graphgen::chakra

#endif  // PRISM_GRAPHGEN_CHAKRA_ET_H_
