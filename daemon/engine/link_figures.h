// What the engine's cost model knows of the cluster and of a communicator's
// placement: the link figures (bandwidths, latencies, NICs per node) and a
// communicator's shape. Plain values, no state; safe from any thread.
#ifndef PRISM_DAEMON_ENGINE_LINK_FIGURES_H_
#define PRISM_DAEMON_ENGINE_LINK_FIGURES_H_

#include <algorithm>
#include <compare>
#include <cstdint>

#include "common/units.h"

namespace prism::engine {

// The cluster's link figures the engine's cost model reads (bandwidths,
// latencies, NICs per node). Not the plugin's per-connection link shaper
// (plugin/link_model.h), which times one connection's messages.
struct LinkFigures {
  BitsPerSecond intra_bw;       // per GPU, inside a node
  Nanoseconds intra_latency;
  BitsPerSecond nic_bw;         // one NIC
  uint32_t nic_count = 0;       // per node
  uint32_t gpus_per_node = 1;
  Nanoseconds nic_latency;
  // NIC bandwidth one GPU owns: nic_count * nic_bw / gpus_per_node.
  BitsPerSecond GpuNicShare() const {
    if (gpus_per_node == 0) return BitsPerSecond(0);
    const unsigned __int128 total = static_cast<unsigned __int128>(nic_bw.count()) * nic_count;
    return BitsPerSecond(static_cast<uint64_t>(std::min<unsigned __int128>(total / gpus_per_node, UINT64_MAX)));
  }
};

// Placement of a communicator's members, all the model needs to know.
struct CommShape {
  uint32_t ranks = 1;
  uint32_t nodes = 1;
  uint32_t min_per_node = 1;    // fewest members on one of its nodes
  uint32_t max_per_node = 1;
  bool SpansNodes() const { return nodes > 1; }
  auto operator<=>(const CommShape&) const = default;
};

}  // namespace prism::engine

#endif  // PRISM_DAEMON_ENGINE_LINK_FIGURES_H_
