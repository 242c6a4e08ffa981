// The seam between NCCL connection setup for virtual ranks (daemon/bootstrap)
// and the plugin sessions (daemon/session). It lives on the bootstrap side:
// bootstrap calls it, the session service implements it.
//
// When a real rank R sets up a NET connection with a virtual rank V, R's
// NCCL exchanges 128-byte net handles with V over bootstrap (docs/bootstrap.md):
//  - V receives from R: V must hand R a handle that R's plugin connect()
//    recognises as virtual -> MintReceiveHandle.
//  - V sends to R: R hands V its plugin's real listen handle; V must make
//    R's plugin accept() return a comm -> ConnectToRealListener.
// The bootstrap emulation calls these; the session service implements them.
#ifndef PRISM_DAEMON_BOOTSTRAP_VIRTUAL_CONNECTIONS_H_
#define PRISM_DAEMON_BOOTSTRAP_VIRTUAL_CONNECTIONS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "common/net_handles.h"
#include "common/units.h"

namespace prism::daemon {

// Identifies one directed connection for the models and logs.
struct VirtualLinkInfo {
  uint64_t comm_hash = 0;        // NCCL commHash of the communicator
  uint32_t virtual_rank = 0;     // global rank in that communicator
  uint32_t real_rank = 0;
  int32_t channel = 0;
};

// The graph's GPU-to-GPU link inside a node, for a real rank's virtual peers on
// its own node (rank r is on node r / gpus_per_node): the model's link
// between them (docs/network-model.md).
struct SameNodeLink {
  uint32_t gpus_per_node = 1;
  BitsPerSecond bandwidth;  // 0: none (every handle leaves the plugin's NIC link)
  Nanoseconds latency;
  bool OneNode(uint32_t a, uint32_t b) const {
    return gpus_per_node > 1 && bandwidth.count() > 0 && a / gpus_per_node == b / gpus_per_node;
  }
  // Every one of `ranks` (global ranks; at least two) on one node.
  bool OneNode(const std::vector<uint32_t>& ranks) const {
    if (ranks.size() < 2) return false;
    for (uint32_t r : ranks)
      if (!OneNode(ranks.front(), r)) return false;
    return true;
  }
};

// A communicator the bootstrap plays virtual ranks of: NCCL operations that
// real ranks report on `comm_hash` belong to it.
struct CommDescription {
  uint64_t comm_hash = 0;
  int64_t graph_comm = -1;         // the graph's communicator id; -1 when unplanned (a lazy send/recv pair)
  std::string name;
  std::vector<uint32_t> members;   // global ranks, communicator-rank order
};

// Implementations are thread-safe: the bootstrap server calls from its own
// thread, the gRPC session streams run elsewhere.
class VirtualConnectionBroker {
 public:
  virtual ~VirtualConnectionBroker() = default;

  // The bootstrap created communicator `c` (before any operation on it).
  virtual void CommunicatorKnown(const CommDescription& c) {}

  // Returns a fresh handle (unique conn_id) for the virtual receiver of
  // `link`. Never fails; the plugin reports ConnOpened with that conn_id
  // when the real sender's connect() sees it.
  virtual VirtualHandle MintReceiveHandle(const VirtualLinkInfo& link) = 0;

  // Tells the plugin session that announced `listen.listen_id` to accept a
  // connection from the virtual sender of `link`. FailedPrecondition when no
  // live session announced that listen id yet (callers may retry briefly:
  // ListenOpened can race the bootstrap message that carried the handle).
  virtual absl::Status ConnectToRealListener(const RealListenHandle& listen,
                                             const VirtualLinkInfo& link) = 0;
};

}  // namespace prism::daemon

#endif  // PRISM_DAEMON_BOOTSTRAP_VIRTUAL_CONNECTIONS_H_
