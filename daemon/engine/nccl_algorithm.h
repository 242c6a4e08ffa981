// NCCL's own choice of algorithm and protocol for one collective, as NCCL
// 2.28.9's tuning model makes it, from what the job's NCCL would see of the
// graph's cluster. Source of every figure and formula below: NCCL at tag
// v2.28.9-1, src/graph/tuning.cc (ncclTopoTuneModel, ncclTopoGetAlgoTime, the
// tuner's default constants), src/enqueue.cc (topoGetAlgoInfo: the cheapest
// predicted time wins; getAlgoInfo: the byte count it predicts for) and
// src/graph/search.cc (the per-channel speeds a topology search settles on).
// This file restates them; docs/network-model.md ("NCCL's algorithm choice")
// explains them.
//
// Candidates (NVLS and CollNet are off on the targets: no NVSwitch
// multicast across nodes, no SHARP): allreduce: ring, tree; allgather and
// reducescatter: ring, PAT (Simple only, and only with one rank per node);
// broadcast, reduce: ring. Protocols LL, LL128, Simple. For each:
//
//   predicted(a, p) = lat(a, p) + nBytes / bw(a, p)          (us, bytes/us)
//
// nBytes: the all-reduce's bytes, the all-gather's output, the
// reduce-scatter's input. n ranks on N nodes, ppn = n / N, D = floor(log2 N).
//
// bw(a, p) = channels(a) * speed(a) (speed: bwIntra when N <= 2, else
// bwInter), then: ring LL: min(llMax, bw/2); ring LL128: min(0.92 bw,
// channels * 36.7); tree all-reduce: min(0.92 bw, channels * treeMax); tree
// LL: min(bw/3.8, llMax); tree LL128: min(bw * (N = 1 ? 7/9 : 120/128),
// channels * treeLL128Max); a tree whose nodes hold one GPU (NCCL's plain
// TREE pattern): * 0.85; PAT: * 0.75. Ring (every kind): * n / nsteps (nsteps
// = 2(n-1) for all-reduce, n-1 for all-gather and reduce-scatter, n for
// broadcast and reduce); tree all-reduce: * 1/2. The per-channel ceilings
// are Hopper's (llMax by CPU vendor and N, treeMax and treeLL128Max by N).
//
// lat(a, p) = base(a, p) +
//   ring:       (nsteps - m) * max(intra(p), o) + m * inter(p),
//               m = 2(N-1) for all-reduce, N-1 otherwise (0 on one node),
//               o = net overhead, 1 us (Intel) or 2 us (AMD), x3 for Simple;
//               broadcast and reduce: + hw(ring, p) once
//   tree:       2 * ((n/N - 1) * intra(p) + D * inter(p))
//   PAT:        D * inter(p) / 3.5 + n * 2.8 us
// where intra(p) is the NVLink (or PCI) hardware latency of the algorithm,
// inter(p) = (ppn = 1 ? the tree's : the algorithm's) network hardware
// latency + the NIC's reported latency (twice for Simple). base, hw:
// NCCL's tables (nccl_algorithm.cc). The tree all-reduce's bandwidth is
// scaled by NCCL's per-size correction (powers of two from 64 B), and a ring
// Simple all-reduce over nodes moving at least 64 B per channel and rank has
// its latency * 1.4 (Hopper).
//
// What is approximated (NCCL measures the machine; the graph only describes
// it): one channel per NIC the communicator's GPUs of a node own (at least
// one), each at the fastest speed of NCCL's Hopper speed list not above
// one NIC's speed (across nodes) or the NVLink bandwidth (one node); the
// tree graph is taken as the ring's; the communicator runs twice that many
// channels (NCCL duplicates them); NVLink inside a node when its bandwidth
// exceeds PCIe 5's 64 GB/s; the NIC reports no latency (NCCL's IB plugin
// and `prism run`'s plugin settings do not); an Intel CPU; LL128 enabled
// (NCCL's default on Hopper with NICs close to the GPU); one operation per
// launch (no aggregation). Floats become integers: latencies in ns,
// bandwidths in MB/s, factors as fractions.
//
// Pure functions; thread-safe.
#ifndef PRISM_DAEMON_ENGINE_NCCL_ALGORITHM_H_
#define PRISM_DAEMON_ENGINE_NCCL_ALGORITHM_H_

#include <cstdint>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "common/units.h"
#include "daemon/engine/link_figures.h"
#include "daemon/engine/nccl_tuning.h"
#include "proto/graph.pb.h"

namespace prism::engine {

// The algorithms and protocols NCCL may choose from (NCCL_ALGO, NCCL_PROTO).
struct NcclAllowed {
  bool ring = true;
  bool tree = true;
  bool pat = true;
  bool ll = true;
  bool ll128 = true;
  bool simple = true;
};

// What NCCL's tuning reads of one communicator's topology (see the file
// comment for how the cluster maps to it).
struct NcclTopology {
  uint32_t ranks = 1;
  uint32_t nodes = 1;
  uint32_t channels = 1;        // channels of the ring (and tree) graph NCCL's search found
  uint64_t speed_mbps = 0;      // per channel, MB/s (bwIntra = bwInter)
  uint32_t comm_channels = 2;   // channels the communicator runs (PAT, the ring plateau)
  bool nvlink = true;           // intra-node hops over NVLink (else PCI)
  bool one_gpu_per_node = false;
  Nanoseconds net_latency{0};   // what the NIC reports (NCCL's latencyInter)
  bool amd_cpu = false;
  bool ll128 = true;            // LL128 usable on this topology
};

NcclTopology NcclTopologyOf(const LinkFigures& links, const CommShape& shape);

struct NcclChoice {
  graph::Algorithm algorithm = graph::ALGORITHM_RING;
  NcclProtocol protocol = NcclProtocol::kSimple;
  Nanoseconds predicted;        // NCCL's own predicted time (not the engine's)
};

// NCCL's choice for `kind` (allreduce, barrier as a 0-byte all-reduce,
// allgather, reducescatter, broadcast, reduce) of `bytes`. When `allowed`
// leaves nothing for this kind (NCCL would fail the call) the ring with
// Simple, as the model resolved such calls before. Other kinds: the ring.
NcclChoice ChooseNcclAlgorithm(graph::CollectiveKind kind, Bytes bytes, const NcclTopology& topo,
                               const NcclAllowed& allowed);

// NCCL's predicted time of one candidate; nullopt when NCCL would not
// consider it (not applicable, not allowed or no bandwidth).
std::optional<Nanoseconds> NcclPredictedTime(graph::CollectiveKind kind, graph::Algorithm algorithm,
                                             NcclProtocol protocol, Bytes bytes, const NcclTopology& topo);

// Parses an NCCL_PROTO value (LL, LL128, Simple; a list, ^list excludes;
// case-insensitive). An unknown name or a list that leaves no protocol is an
// error naming the value and the names accepted.
absl::StatusOr<NcclAllowed> ParseNcclProto(const std::string& value, NcclAllowed base = NcclAllowed());

const char* NcclAlgorithmName(graph::Algorithm algorithm);  // "Ring", "Tree", "PAT", ...
const char* NcclProtocolName(NcclProtocol protocol);        // "LL", "LL128", "Simple"

}  // namespace prism::engine

#endif  // PRISM_DAEMON_ENGINE_NCCL_ALGORITHM_H_
