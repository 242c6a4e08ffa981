// Which ranks a trace shows by default, and how large a trace would be
// before the replay that writes it (prismd --trace).
// Pure functions of the graph; thread-safe.
#ifndef PRISM_DAEMON_ENGINE_TRACE_BUDGET_H_
#define PRISM_DAEMON_ENGINE_TRACE_BUDGET_H_

#include <cstdint>
#include <vector>

#include "proto/graph.pb.h"

namespace prism::engine {

// Bytes of trace JSON per traced op instance, measured on job graphs
// (a duration event, plus the flow arrows of sends and receives).
inline constexpr uint64_t kTraceBytesPerOp = 160;

// The default --trace-ranks: the lowest rank of each program (of a job
// graph: one rank per pipeline stage, so pipeline flows show), at most
// `max_ranks` of them, in rank order.
std::vector<uint32_t> OneRankPerProgram(const graph::Graph& graph, size_t max_ranks);

// An estimate of the trace's size: the traced ranks' ops times the
// iterations times kTraceBytesPerOp (metadata left out).
uint64_t EstimateTraceBytes(const graph::Graph& graph, const std::vector<uint32_t>& ranks, uint64_t iterations);

}  // namespace prism::engine

#endif  // PRISM_DAEMON_ENGINE_TRACE_BUDGET_H_
