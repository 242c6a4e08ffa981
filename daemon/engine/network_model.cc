#include "daemon/engine/network_model.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "daemon/engine/pat_play.h"
#include "daemon/engine/tree_pipeline.h"

namespace prism::engine {
namespace {

using graph::Algorithm;
using graph::CollectiveKind;

Nanoseconds Clamp(unsigned __int128 ns) {
  return Nanoseconds(ns >= static_cast<unsigned __int128>(kMaxTimeNs) ? kMaxTimeNs : static_cast<int64_t>(ns));
}

// k * latency, saturating.
Nanoseconds Times(Nanoseconds latency, uint64_t k) {
  return Clamp(static_cast<unsigned __int128>(std::max<int64_t>(latency.count(), 0)) * k);
}

uint32_t CeilLog2(uint32_t v) {
  uint32_t r = 0;
  while ((uint64_t{1} << r) < v) ++r;
  return r;
}

}  // namespace


LinkFigures NetworkModel::LinkFiguresFromCluster(const graph::Cluster& cluster) {
  LinkFigures m;
  m.intra_bw = BitsPerSecond(cluster.intra_node().bandwidth_bps());
  m.intra_latency = Nanoseconds(static_cast<int64_t>(std::min<uint64_t>(cluster.intra_node().latency_ns(), 1ull << 40)));
  m.nic_bw = BitsPerSecond(cluster.nic().bandwidth_bps());
  m.nic_count = cluster.nic().count();
  m.gpus_per_node = std::max<uint32_t>(cluster.gpus_per_node(), 1);
  m.nic_latency = Nanoseconds(static_cast<int64_t>(std::min<uint64_t>(cluster.nic().latency_ns(), 1ull << 40)));
  return m;
}

absl::Status NetworkModel::CheckShape(const CommShape& shape) const {
  if (shape.max_per_node > 1 && links_.intra_bw.count() == 0)
    return absl::InvalidArgumentError(
        "cluster.intra_node.bandwidth_bps is zero but a communicator has several ranks on one node; "
        "set the intra-node link in the job description");
  if (shape.SpansNodes() && links_.GpuNicShare().count() == 0)
    return absl::InvalidArgumentError(
        "a communicator spans nodes but the cluster has no NIC bandwidth (cluster.nic.count or "
        "bandwidth_bps is zero); describe the NICs in the job description");
  return absl::OkStatus();
}

absl::Status NetworkModel::CheckP2P(bool same_node) const {
  CommShape s;
  s.ranks = 2;
  s.nodes = same_node ? 1 : 2;
  s.min_per_node = s.max_per_node = same_node ? 2 : 1;
  return CheckShape(s);
}

BitsPerSecond NetworkModel::RingBandwidth(const CommShape& shape) const {
  uint64_t bw = UINT64_MAX;
  if (shape.max_per_node > 1) bw = std::min(bw, links_.intra_bw.count());
  if (shape.SpansNodes()) {
    const unsigned __int128 nic = static_cast<unsigned __int128>(links_.GpuNicShare().count()) * shape.min_per_node;
    bw = std::min<uint64_t>(bw, static_cast<uint64_t>(std::min<unsigned __int128>(nic, UINT64_MAX)));
  }
  if (bw == UINT64_MAX) bw = links_.intra_bw.count() > 0 ? links_.intra_bw.count() : UINT64_MAX;  // one rank
  return BitsPerSecond(bw);
}

Nanoseconds NetworkModel::HopLatency(const CommShape& shape) const {
  return shape.SpansNodes() ? Max(links_.nic_latency, links_.intra_latency) : links_.intra_latency;
}

Nanoseconds NetworkModel::StepLatency(const CommShape& shape) const {
  return SatAdd(HopLatency(shape), nccl_.step_cost);
}

bool NetworkModel::LatencyBoundRing(CollectiveKind kind, Bytes size, const CommShape& shape) const {
  if (kind != graph::ALLREDUCE && kind != graph::ALLGATHER && kind != graph::REDUCESCATTER) return false;
  const uint64_t n = shape.ranks, steps = kind == graph::ALLREDUCE ? 2 * (n - 1) : n - 1;
  if (n < 2 || steps < kLatencyBoundMinSteps || !CheckShape(shape).ok()) return false;
  return RingStepWire(RingWireTime(kind, size, shape), steps) <= StepLatency(shape);
}

Nanoseconds NetworkModel::RingWireTime(CollectiveKind kind, Bytes size, const CommShape& shape) const {
  const uint64_t n = shape.ranks;
  if (n <= 1) return Nanoseconds(0);
  const BitsPerSecond bw = RingBandwidth(shape);
  switch (kind) {
    case graph::ALLREDUCE:
    case graph::BARRIER: return FractionTransferTime(size, 2 * (n - 1), n, bw);
    case graph::ALLGATHER:
    case graph::REDUCESCATTER: return FractionTransferTime(size, n - 1, n, bw);
    default: return FractionTransferTime(size, 1, 1, bw);  // broadcast, reduce: pipelined chain
  }
}

Nanoseconds NetworkModel::Ring(CollectiveKind kind, Bytes size, const CommShape& shape) const {
  const uint64_t n = shape.ranks;
  uint64_t hops = n - 1;
  if (kind == graph::ALLREDUCE || kind == graph::BARRIER) hops = 2 * (n - 1);
  const Nanoseconds wire = RingWireTime(kind, size, shape);
  const Nanoseconds hop = shape.SpansNodes() ? SatAdd(HopLatency(shape), nccl_.step_turnaround) : HopLatency(shape);
  const Nanoseconds once = shape.SpansNodes() ? nccl_.collective_turnaround : Nanoseconds(0);
  const Nanoseconds link_bound = SatAdd(SatAdd(wire, Times(hop, hops)), once);
  if (kind != graph::ALLREDUCE && kind != graph::BARRIER && kind != graph::ALLGATHER &&
      kind != graph::REDUCESCATTER)
    return link_bound;  // broadcast, reduce: a pipelined chain
  return Max(link_bound, RingStepBound(wire, StepLatency(shape), hops, kNcclRingSlicesPerStep));
}

Nanoseconds RingStepBound(Nanoseconds wire, Nanoseconds step_latency, uint64_t hops, uint64_t slices) {
  return RingStepsTime(RingStepWire(wire, hops), step_latency, hops, slices);
}

Nanoseconds NetworkModel::Tree(Bytes size, const CommShape& shape) const {
  if (shape.max_per_node != 1 || shape.nodes < 2 || size.count() == 0) return TreeFormula(size, shape);
  const std::pair<uint32_t, uint64_t> key{shape.nodes, size.count()};
  {
    std::lock_guard<std::mutex> lock(played_trees_->mu);
    const auto it = played_trees_->end.find(key);
    if (it != played_trees_->end.end())
      return it->second.count() > 0 ? it->second : TreeFormula(size, shape);
  }
  const TreeAllReduce op{static_cast<int>(shape.nodes), kModelTreeChannels, size, kNcclSimpleStepBytes,
                         RingBandwidth(shape), HopLatency(shape)};
  // Played outside the lock: two threads may play the same tree once each.
  const std::optional<TreeArrivals> played = PlayTreeAllReduce(op, 0, kMaxPlayedTreeTransfers);
  const Nanoseconds end = played ? Max(played->operation_end, Nanoseconds(1)) : Nanoseconds(0);
  std::lock_guard<std::mutex> lock(played_trees_->mu);
  played_trees_->end.emplace(key, end);
  return end.count() > 0 ? end : TreeFormula(size, shape);
}

Nanoseconds NetworkModel::TreeFormula(Bytes size, const CommShape& shape) const {
  const BitsPerSecond bw = RingBandwidth(shape);
  const Nanoseconds up = SatAdd(Times(links_.nic_latency, CeilLog2(shape.nodes)),
                                Times(links_.intra_latency, shape.max_per_node - 1));
  return SatAdd(FractionTransferTime(size, 20, 9, bw), Times(up, 2));
}

Nanoseconds NetworkModel::Pairwise(Bytes size, const CommShape& shape) const {
  const uint64_t n = shape.ranks;
  const uint64_t k = shape.max_per_node;
  Nanoseconds intra(0), inter(0);
  if (k > 1) intra = FractionTransferTime(size, k - 1, n, links_.intra_bw);
  if (n > k) inter = FractionTransferTime(size, n - k, n, links_.GpuNicShare());
  return SatAdd(Max(intra, inter), Times(HopLatency(shape), n - 1));
}

Nanoseconds NetworkModel::Pat(CollectiveKind kind, Bytes size, const CommShape& shape) const {
  const std::tuple<int, uint32_t, uint64_t> key{kind, shape.nodes, size.count()};
  {
    std::lock_guard<std::mutex> lock(played_trees_->mu);
    const auto it = played_trees_->pat_end.find(key);
    if (it != played_trees_->pat_end.end()) return it->second;
  }
  // NCCL's cost per PAT hop; with it, NCCL's kernel walked in its order.
  const Nanoseconds cost = PatStepCost(nccl_.step_cost, prism::PatDimensions(shape.ranks));
  const Nanoseconds hop = SatAdd(HopLatency(shape), cost);
  const PatOperation op{kind, shape.ranks, size, NcclTopologyOf(links_, shape).comm_channels, RingBandwidth(shape), hop};
  const std::optional<Nanoseconds> played = cost > Nanoseconds(0) ? PlayPatKernelOf(op) : PlayPat(op);
  // Too many steps to play: the wire time plus one step latency per dimension.
  const Nanoseconds end = played.value_or(SatAdd(RingWireTime(kind, size, shape), Times(hop, CutPat(op).dims)));
  std::lock_guard<std::mutex> lock(played_trees_->mu);
  played_trees_->pat_end.emplace(key, end);
  return end;
}

NcclChoice NetworkModel::ChooseNccl(CollectiveKind kind, Bytes size, const CommShape& shape) const {
  if (kind == graph::ALLTOALL) return {graph::ALGORITHM_PAIRWISE, NcclProtocol::kSimple, Nanoseconds(0)};
  return ChooseNcclAlgorithm(kind, size, NcclTopologyOf(links_, shape), nccl_.Allowed());
}

Algorithm NetworkModel::Choose(CollectiveKind kind, Bytes size, const CommShape& shape) const {
  if (kind == graph::ALLTOALL) return graph::ALGORITHM_PAIRWISE;
  if (!nccl_.nccl_choice) return ModelChoice(kind, size, shape);
  return ChooseNccl(kind, size, shape).algorithm;
}

Algorithm NetworkModel::ModelChoice(CollectiveKind kind, Bytes size, const CommShape& shape) const {
  if ((kind == graph::ALLREDUCE || kind == graph::BARRIER) && shape.SpansNodes() && nccl_.tree &&
      (!nccl_.ring || Tree(size, shape) < Ring(kind, size, shape)))
    return graph::ALGORITHM_TREE;
  return graph::ALGORITHM_RING;
}

Nanoseconds NetworkModel::CollectiveTime(CollectiveKind kind, Algorithm algorithm, Bytes size,
                                         const CommShape& shape) const {
  if (shape.ranks <= 1) return Nanoseconds(0);
  if (algorithm == graph::ALGORITHM_DEFAULT) algorithm = Choose(kind, size, shape);
  if (kind == graph::BARRIER) size = Bytes(0);
  if (algorithm == graph::ALGORITHM_TREE && (kind == graph::ALLREDUCE || kind == graph::BARRIER))
    return Tree(size, shape);
  // PAT needs one rank per node (NCCL does not enable it otherwise): else the ring.
  if (algorithm == graph::ALGORITHM_PAT && (kind == graph::ALLGATHER || kind == graph::REDUCESCATTER) &&
      shape.max_per_node == 1 && shape.SpansNodes())
    return Pat(kind, size, shape);
  if (kind == graph::ALLTOALL) return Pairwise(size, shape);
  return Ring(kind, size, shape);
}

Nanoseconds NetworkModel::PointToPointTime(Bytes size, bool same_node) const {
  if (same_node) return SatAdd(links_.intra_latency, FractionTransferTime(size, 1, 1, links_.intra_bw));
  return SatAdd(links_.nic_latency, FractionTransferTime(size, 1, 1, links_.GpuNicShare()));
}

Nanoseconds NetworkModel::SendHeldTime(Bytes size, bool same_node) const {
  if (same_node) return PointToPointTime(size, true);
  if (nccl_.p2p_buffer.count() == 0) return PointToPointTime(size, false);
  if (size <= nccl_.p2p_buffer) return Nanoseconds(0);
  return FractionTransferTime(Bytes(size.count() - nccl_.p2p_buffer.count()), 1, 1, links_.GpuNicShare());
}

}  // namespace prism::engine
