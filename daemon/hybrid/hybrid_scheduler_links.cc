// HybridScheduler: the link a real rank's operations are timed on (the
// cluster's NIC share, or a node's link for a communicator inside one node)
// and how virtual senders stream an operation (hybrid_scheduler.h).
#include "daemon/engine/network_model.h"
#include "daemon/hybrid/hybrid_scheduler.h"

#include "absl/strings/match.h"

namespace prism::daemon {

HybridScheduler::Link HybridScheduler::LinkOf(uint64_t comm_hash) const {
  if (one_node_comms_.count(comm_hash) != 0) return Link{options_.same_node.bandwidth, options_.same_node.latency};
  return Link{options_.link_bandwidth, Max(Nanoseconds(0), options_.link_latency)};
}

HybridSchedulerOptions HybridSchedulerOptions::ForCluster(const graph::Cluster& cluster) {
  const engine::LinkFigures links = engine::NetworkModel::LinkFiguresFromCluster(cluster);
  HybridSchedulerOptions o;
  o.link_bandwidth = links.GpuNicShare();
  o.link_latency = links.nic_latency;
  o.same_node = SameNodeLink{links.gpus_per_node, links.intra_bw, links.intra_latency};
  return o;
}

HybridSchedulerOptions HybridSchedulerOptions::ForGraph(const graph::Graph& graph) {
  HybridSchedulerOptions o = ForCluster(graph.cluster());
  o.graph_leaves_out_startup = absl::StartsWith(graph.job().generator(), "prism-graphgen extrapolate");
  return o;
}

engine::StreamShape HybridScheduler::StreamShapeOf(const rpc::OpStarted& s) const {
  const Link comm_link = LinkOf(s.key().comm_hash());
  const uint64_t link = comm_link.bandwidth.count();
  const bool tree_all_reduce = s.algorithm() == rpc::OP_ALGO_TREE && s.key().kind() == rpc::OP_ALL_REDUCE;
  if (!tree_all_reduce) return engine::StreamShape{BitsPerSecond(link), Nanoseconds(0)};
  const engine::StreamShape half{BitsPerSecond(link / 2), Nanoseconds(0)};
  if (link == 0 || s.proto_name() != "SIMPLE" || s.comm_size() < 2 || s.bytes() == 0) return half;
  const auto key = std::make_tuple(s.comm_size(), s.comm_rank(), s.bytes(), static_cast<int>(s.channels()), link);
  if (const auto it = tree_shapes_.find(key); it != tree_shapes_.end()) return it->second;
  const engine::TreeAllReduce op{s.comm_size(),
                                 std::max(1, static_cast<int>(s.channels())),
                                 Bytes(s.bytes()),
                                 engine::kNcclSimpleStepBytes,
                                 BitsPerSecond(link),
                                 comm_link.latency};
  engine::StreamShape shape = half;
  const std::optional<engine::TreeArrivals> a =
      engine::PlayTreeAllReduce(op, s.comm_rank(), engine::kMaxPlayedTreeTransfers);
  if (const std::optional<engine::StreamShape> stream = a ? engine::StreamOf(*a, op.latency) : std::nullopt)
    shape = *stream;
  tree_shapes_.emplace(key, shape);
  return shape;
}

}  // namespace prism::daemon
