#include "daemon/engine/nccl_algorithm.h"

#include <algorithm>
#include <array>
#include <optional>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "daemon/engine/engine_time.h"

namespace prism::engine {
namespace {

using graph::Algorithm;
using graph::CollectiveKind;

// Indices of NCCL's tables: algorithm rows tree, ring, PAT; protocol columns
// LL, LL128, Simple (NCCL v2.28.9-1 src/graph/tuning.cc, the tuner's
// default constants). Latencies in ns.
enum Row { kTree = 0, kRing = 1, kPat = 2 };
int Col(NcclProtocol p) { return p == NcclProtocol::kLL ? 0 : p == NcclProtocol::kLL128 ? 1 : 2; }

constexpr int64_t kBaseLatency[3][3] = {{6'800, 14'000, 8'400}, {6'600, 14'000, 8'400}, {8'000, 8'000, 8'000}};
constexpr int64_t kNvlinkLatency[3][3] = {{600, 1'250, 4'000}, {600, 1'900, 3'400}, {0, 0, 4'000}};
constexpr int64_t kPciLatency[3][3] = {{1'000, 1'900, 4'000}, {1'000, 2'500, 5'700}, {0, 0, 4'000}};
constexpr int64_t kNetLatency[3][3] = {{5'000, 8'500, 14'000}, {2'700, 4'000, 14'000}, {0, 0, 14'000}};

// Per-channel ceilings, MB/s, by node count (1, 2, more); Hopper's.
constexpr uint64_t kLlMaxIntel[3] = {39'000, 39'000, 20'400};
constexpr uint64_t kLlMaxAmd[3] = {87'700, 22'500, 19'000};
constexpr uint64_t kLlMaxHopperOneNode = 141'000;
constexpr uint64_t kRingLl128Max = 36'700;
constexpr uint64_t kTreeLl128Max[3] = {36'700, 36'700, 29'000};
constexpr uint64_t kTreeMax[3] = {38'700, 41'400, 36'000};

// The tree all-reduce's bandwidth correction by floor(log2(bytes / 64)),
// 0..22, per protocol, in hundredths.
constexpr std::array<std::array<uint8_t, 23>, 3> kTreeCorrection{{
    {100, 100, 100, 100, 90, 80, 70, 70, 70, 70, 60, 50, 40, 40, 50, 60, 70, 80, 90, 100, 100, 100, 100},
    {100, 100, 100, 100, 100, 90, 80, 80, 80, 70, 60, 60, 60, 60, 60, 60, 80, 90, 90, 90, 90, 100, 100},
    {90, 90, 90, 90, 90, 90, 90, 80, 70, 60, 60, 50, 50, 50, 50, 60, 70, 80, 70, 70, 80, 90, 90},
}};

// The per-channel speeds NCCL's topology search tries on Hopper, fastest
// first, MB/s (src/graph/search.cc): across nodes, and inside one node.
constexpr uint64_t kInterSpeeds[] = {48'000, 45'000, 42'000, 40'000, 30'000, 24'000, 22'000, 20'000, 17'500,
                                     15'000, 12'000, 6'000,  3'000,  2'400,  1'200,  240,    120};
constexpr uint64_t kIntraSpeeds[] = {60'000, 50'000, 40'000, 30'000, 24'000, 20'000,
                                     15'000, 12'000, 11'000, 6'000,  3'000};

// PCIe 5 x16, MB/s: an intra-node link faster than this is NVLink.
constexpr uint64_t kPcieMbps = 64'000;

template <size_t N>
uint64_t FastestNotAbove(const uint64_t (&speeds)[N], uint64_t limit) {
  for (uint64_t s : speeds)
    if (s <= limit) return s;
  return speeds[N - 1];
}

uint64_t Mbps(BitsPerSecond bw) { return bw.count() / 8'000'000; }

int Log2Floor(uint64_t v) {
  if (v == 0) return -1;
  int r = 0;
  while (v >>= 1) ++r;
  return r;
}

bool Allowed(Algorithm a, NcclProtocol p, const NcclAllowed& allowed) {
  const bool algo = a == graph::ALGORITHM_RING ? allowed.ring : a == graph::ALGORITHM_TREE ? allowed.tree : allowed.pat;
  const bool proto = p == NcclProtocol::kLL ? allowed.ll : p == NcclProtocol::kLL128 ? allowed.ll128 : allowed.simple;
  return algo && proto;
}

// Bandwidth in kB/s (MB/s * 1000: the fractions below keep their digits).
struct Candidate {
  int64_t latency_ns = 0;
  uint64_t bw_kbps = 0;
};

uint64_t Scale(uint64_t v, uint64_t num, uint64_t den) {
  return static_cast<uint64_t>(static_cast<unsigned __int128>(v) * num / den);
}

bool Applies(CollectiveKind kind, Algorithm a, NcclProtocol p, const NcclTopology& t) {
  switch (kind) {
    case graph::ALLREDUCE: return a == graph::ALGORITHM_RING || a == graph::ALGORITHM_TREE;
    case graph::ALLGATHER:
    case graph::REDUCESCATTER:
      if (a == graph::ALGORITHM_RING) return true;
      // PAT: Simple only, one GPU per node (NCCL's ncclPatEnable).
      return a == graph::ALGORITHM_PAT && p == NcclProtocol::kSimple && t.nodes == t.ranks && t.ranks > 1;
    case graph::BROADCAST:
    case graph::REDUCE: return a == graph::ALGORITHM_RING;
    default: return false;
  }
}

uint64_t NodeIndex(const NcclTopology& t) { return t.nodes <= 2 ? t.nodes - 1 : 2; }

uint64_t BusBandwidth(CollectiveKind kind, Algorithm a, NcclProtocol p, const NcclTopology& t) {
  const uint64_t idx = NodeIndex(t);
  const uint64_t ll_max = t.nodes == 1 ? kLlMaxHopperOneNode : t.amd_cpu ? kLlMaxAmd[idx] : kLlMaxIntel[idx];
  uint64_t bw = uint64_t{t.channels} * t.speed_mbps * 1000;
  const uint64_t ch = t.channels;
  if (a == graph::ALGORITHM_RING && p == NcclProtocol::kLL) bw = std::min(ll_max * 1000, bw / 2);
  if (a == graph::ALGORITHM_RING && p == NcclProtocol::kLL128) bw = std::min(Scale(bw, 92, 100), ch * kRingLl128Max * 1000);
  if (a == graph::ALGORITHM_TREE && kind == graph::ALLREDUCE) bw = std::min(Scale(bw, 92, 100), ch * kTreeMax[idx] * 1000);
  if (a == graph::ALGORITHM_TREE && p == NcclProtocol::kLL) bw = std::min(Scale(bw, 10, 38), ll_max * 1000);
  if (a == graph::ALGORITHM_TREE && p == NcclProtocol::kLL128)
    bw = std::min(t.nodes == 1 ? Scale(bw, 7, 9) : Scale(bw, 120, 128), ch * kTreeLl128Max[idx] * 1000);
  if (a == graph::ALGORITHM_TREE && t.one_gpu_per_node) bw = Scale(bw, 85, 100);
  if (a == graph::ALGORITHM_PAT) bw = Scale(bw, 75, 100);
  // Bus bandwidth to algorithm bandwidth.
  const uint64_t n = t.ranks;
  const uint64_t nsteps = kind == graph::ALLREDUCE                                          ? 2 * (n - 1)
                          : kind == graph::ALLGATHER || kind == graph::REDUCESCATTER ? n - 1
                                                                                          : n;
  if (a == graph::ALGORITHM_RING) bw = Scale(bw, n, std::max<uint64_t>(nsteps, 1));
  if (a == graph::ALGORITHM_TREE) bw /= 2;
  return bw;
}

int64_t Latency(CollectiveKind kind, Algorithm a, NcclProtocol p, const NcclTopology& t) {
  const int row = a == graph::ALGORITHM_TREE ? kTree : a == graph::ALGORITHM_RING ? kRing : kPat;
  const int col = Col(p);
  const int64_t n = t.ranks, nodes = t.nodes;
  int64_t lat = kBaseLatency[row][col];
  const int64_t intra = t.nvlink && !t.one_gpu_per_node ? kNvlinkLatency[row][col] : kPciLatency[row][col];
  int64_t inter = (n == nodes ? kNetLatency[kTree][col] : kNetLatency[row][col]) + t.net_latency.count();
  if (p == NcclProtocol::kSimple) inter += t.net_latency.count();
  const int64_t log_nodes = Log2Floor(static_cast<uint64_t>(nodes));
  if (a == graph::ALGORITHM_RING) {
    if (kind == graph::BROADCAST || kind == graph::REDUCE) return lat + (nodes == 1 ? intra : kNetLatency[kRing][col]);
    const int64_t nsteps = kind == graph::ALLREDUCE ? 2 * (n - 1) : n - 1;
    int64_t overhead = 0;
    if (nodes > 1) overhead = (t.amd_cpu ? 2'000 : 1'000) * (p == NcclProtocol::kSimple ? 3 : 1);
    const int64_t step_intra = std::max(intra, overhead);
    const int64_t inter_steps = nodes == 1 ? 0 : kind == graph::ALLREDUCE ? 2 * (nodes - 1) : nodes - 1;
    return lat + (nsteps - inter_steps) * step_intra + inter_steps * inter;
  }
  if (a == graph::ALGORITHM_TREE) return lat + 2 * ((n / nodes - 1) * intra + log_nodes * inter);
  return lat + log_nodes * inter * 2 / 7 + n * 2'800;  // PAT
}

}  // namespace

NcclTopology NcclTopologyOf(const LinkFigures& links, const CommShape& shape) {
  NcclTopology t;
  t.ranks = std::max<uint32_t>(shape.ranks, 1);
  t.nodes = std::clamp<uint32_t>(shape.nodes, 1, t.ranks);
  t.one_gpu_per_node = shape.max_per_node <= 1;
  t.nvlink = Mbps(links.intra_bw) > kPcieMbps;
  if (shape.SpansNodes()) {
    // One channel per NIC the communicator's GPUs of a node own (rail
    // optimised: nic_count / gpus_per_node each), at least one.
    const uint64_t gpus = std::max<uint32_t>(links.gpus_per_node, 1);
    const uint64_t owned = uint64_t{shape.min_per_node} * links.nic_count / gpus;
    t.channels = static_cast<uint32_t>(std::clamp<uint64_t>(owned, 1, std::max<uint32_t>(links.nic_count, 1)));
    t.speed_mbps = FastestNotAbove(kInterSpeeds, Mbps(links.nic_bw));
  } else {
    t.speed_mbps = FastestNotAbove(kIntraSpeeds, Mbps(links.intra_bw));
    t.channels = static_cast<uint32_t>(std::clamp<uint64_t>(Mbps(links.intra_bw) / t.speed_mbps, 1, 16));
  }
  t.comm_channels = std::min<uint32_t>(2 * t.channels, 64);
  return t;
}

std::optional<Nanoseconds> NcclPredictedTime(CollectiveKind kind, Algorithm a, NcclProtocol p, Bytes bytes,
                                             const NcclTopology& t) {
  if (kind == graph::BARRIER) {
    kind = graph::ALLREDUCE;
    bytes = Bytes(0);
  }
  if (t.ranks <= 1 || !Applies(kind, a, p, t)) return std::nullopt;
  if (p == NcclProtocol::kLL128 && !t.ll128) return std::nullopt;
  uint64_t bw = BusBandwidth(kind, a, p, t);
  int64_t lat = Latency(kind, a, p, t);
  const uint64_t size = bytes.count();
  const int log_size = Log2Floor(size >> 6);
  if (a == graph::ALGORITHM_TREE && kind == graph::ALLREDUCE && log_size >= 0 && log_size < 23)
    bw = Scale(bw, kTreeCorrection[Col(p)][log_size], 100);
  if (a == graph::ALGORITHM_RING && p == NcclProtocol::kSimple && t.nodes > 1 && kind == graph::ALLREDUCE &&
      size / (uint64_t{t.comm_channels} * t.ranks) >= 64)
    lat = lat * 14 / 10;  // the ring's plateau (Hopper)
  if (bw == 0) return std::nullopt;
  // bytes / (MB/s) = us; in ns with kB/s: bytes * 1e6 / kB/s.
  const unsigned __int128 wire = static_cast<unsigned __int128>(size) * 1'000'000 / bw;
  return Nanoseconds(lat + static_cast<int64_t>(std::min<unsigned __int128>(wire, kMaxTimeNs)));
}

NcclChoice ChooseNcclAlgorithm(CollectiveKind kind, Bytes bytes, const NcclTopology& topo,
                               const NcclAllowed& allowed) {
  NcclChoice best;
  bool found = false;
  // NCCL's order: tree, ring, ..., PAT; LL, LL128, Simple; the first
  // strictly cheapest wins.
  for (Algorithm a : {graph::ALGORITHM_TREE, graph::ALGORITHM_RING, graph::ALGORITHM_PAT})
    for (NcclProtocol p : {NcclProtocol::kLL, NcclProtocol::kLL128, NcclProtocol::kSimple}) {
      if (!Allowed(a, p, allowed)) continue;
      const std::optional<Nanoseconds> t = NcclPredictedTime(kind, a, p, bytes, topo);
      if (!t || (found && *t >= best.predicted)) continue;
      best = {a, p, *t};
      found = true;
    }
  if (!found) best = {graph::ALGORITHM_RING, NcclProtocol::kSimple, Nanoseconds(0)};
  return best;
}

absl::StatusOr<NcclAllowed> ParseNcclProto(const std::string& value, NcclAllowed base) {
  absl::string_view list = absl::StripAsciiWhitespace(value);
  if (list.empty()) return base;
  const bool exclude = absl::ConsumePrefix(&list, "^");
  bool ll = false, ll128 = false, simple = false;
  for (absl::string_view name : absl::StrSplit(list, ',', absl::SkipWhitespace())) {
    const std::string n = absl::AsciiStrToLower(absl::StripAsciiWhitespace(name));
    if (n == "ll") ll = true;
    else if (n == "ll128") ll128 = true;
    else if (n == "simple") simple = true;
    else
      return absl::InvalidArgumentError(absl::StrCat("NCCL_PROTO \"", value, "\": unknown protocol \"", name,
                                                     "\"; NCCL knows LL, LL128, Simple (a list, or ^list to exclude)"));
  }
  base.ll = exclude ? !ll : ll;
  base.ll128 = exclude ? !ll128 : ll128;
  base.simple = exclude ? !simple : simple;
  if (!base.ll && !base.ll128 && !base.simple)
    return absl::InvalidArgumentError(absl::StrCat("NCCL_PROTO \"", value, "\" leaves no protocol; allow LL, LL128 or Simple"));
  return base;
}

const char* NcclAlgorithmName(Algorithm a) {
  switch (a) {
    case graph::ALGORITHM_RING: return "Ring";
    case graph::ALGORITHM_TREE: return "Tree";
    case graph::ALGORITHM_PAT: return "PAT";
    case graph::ALGORITHM_PAIRWISE: return "Pairwise";
    default: return "Default";
  }
}

const char* NcclProtocolName(NcclProtocol p) {
  return p == NcclProtocol::kLL ? "LL" : p == NcclProtocol::kLL128 ? "LL128" : "Simple";
}

}  // namespace prism::engine
