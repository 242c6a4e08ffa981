// Summaries of an execution graph for people (text) and tools (JSON)
// (module: inspect). The JSON form is documented in docs/inspect-json.md;
// its field names are stable within schema "prism-graphgen-inspect/1".
// Pure functions of the graph; thread-safe.
#ifndef PRISM_GRAPHGEN_INSPECT_H_
#define PRISM_GRAPHGEN_INSPECT_H_

#include <string>

#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"
#include "proto/graph.pb.h"

namespace prism::graphgen {

inline constexpr char kInspectSchema[] = "prism-graphgen-inspect/1";

// The summary. With include_members, communicators.by_kind[].groups[] lists
// every communicator with its members; without, only counts and sizes.
nlohmann::json InspectGraph(const prism::graph::Graph& graph, bool include_members);

inline constexpr char kRankProgramSchema[] = "prism-graphgen-rank-program/1";

// The program one rank runs, op by op, with every communicator slot resolved
// to the rank's communicator (id, name, members) and every send/recv peer to
// a communicator rank and a global rank (`inspect --ops RANK`, documented in
// docs/inspect-json.md). InvalidArgument when `rank` is not in the graph or
// the graph is inconsistent (a slot or peer out of range).
absl::StatusOr<nlohmann::json> RankProgram(const prism::graph::Graph& graph, uint32_t rank);

// One line when a program class's peak memory (static + activations) is
// above the GPU's memory: the worst one, how many more, and the job-file keys
// that reduce it; empty when all fit or the graph gives no GPU memory.
// `summary` is InspectGraph's, or InspectClasses'.
std::string MemoryWarning(const nlohmann::json& summary);

// InspectGraph's "classes" (one per program: its ranks, first rank, memory)
// and "gpu_memory_bytes" alone, for any form of the graph (rules too, read
// by their blocks: no rank or communicator walked). What prism-graphgen job
// needs for its memory warning.
nlohmann::json InspectClasses(const prism::graph::Graph& graph);

// A human-readable rendering of InspectGraph(graph, false).
std::string FormatInspectText(const nlohmann::json& summary);

}  // namespace prism::graphgen

#endif  // PRISM_GRAPHGEN_INSPECT_H_
