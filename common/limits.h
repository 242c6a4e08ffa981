// The one set of limits that prism-graphgen and prismd share.
//
// A graph file inside these limits is accepted by prismd; prism-graphgen never
// writes a graph outside them (it runs the same ValidateGraph before writing),
// and prismd refuses a crafted graph beyond them at load, with a message that
// names the limit, instead of replaying it into a silently wrong result.
// They also bound what prismd allocates for a graph (memory) and keep every
// modelled time below the engine's clock limit in normal use; a replay whose
// clock still saturates is an error (daemon/engine/simulation.h).
//
// Plain constants; include from any component.
#ifndef PRISM_COMMON_LIMITS_H_
#define PRISM_COMMON_LIMITS_H_

#include <cstdint>

namespace prism::limits {

// World size (ranks of one graph).
inline constexpr uint64_t kMaxRanks = uint64_t{1} << 22;  // 4,194,304
// Graph file size (header + message).
inline constexpr uint64_t kMaxGraphFileBytes = uint64_t{1} << 30;  // 1 GiB
// Iterations of one replay (prismd --iterations, graphgen's "iterations").
inline constexpr uint64_t kMaxIterations = 1'000'000;
// Streams one program may use (op.stream < kMaxStreams).
inline constexpr uint64_t kMaxStreams = 4096;
// Ops of one program.
inline constexpr uint64_t kMaxOpsPerProgram = 20'000'000;
// Per-rank state prismd allocates for a graph (comm slots, send/recv targets,
// op counters; about 4-8 bytes each).
inline constexpr uint64_t kMaxStateEntries = uint64_t{1} << 28;
// One compute op's duration: 2^42 ns, about 73 minutes.
inline constexpr uint64_t kMaxOpDurationNs = uint64_t{1} << 42;
// One collective's or send's/recv's size: 1 TiB (the plugin's maxCollBytes).
inline constexpr uint64_t kMaxOpBytes = uint64_t{1} << 40;
// A program's static memory and one op's memory delta (absolute): 1 PiB.
inline constexpr uint64_t kMaxMemoryBytes = uint64_t{1} << 50;
// A link's latency: 1 s per hop.
inline constexpr uint64_t kMaxLatencyNs = 1'000'000'000;
// A link's bandwidth: 1 Pbit/s.
inline constexpr uint64_t kMaxBandwidthBps = 1'000'000'000'000'000;
// A link's bandwidth when it has one (0 = no such link): 1 Gbit/s, below any
// NIC or GPU interconnect a training cluster has.
inline constexpr uint64_t kMinBandwidthBps = 1'000'000'000;
// GPUs of one node (one NVLink domain): 4096; the largest built hold 72.
inline constexpr uint64_t kMaxGpusPerNode = 4096;
// NICs of one node.
inline constexpr uint64_t kMaxNicsPerNode = 256;
// Text inputs of prism-graphgen (job YAML, compute tables).
inline constexpr uint64_t kMaxInputFileBytes = uint64_t{16} << 20;  // 16 MiB

}  // namespace prism::limits

#endif  // PRISM_COMMON_LIMITS_H_
