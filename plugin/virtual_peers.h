// The virtual-peer side of one plugin context: connections whose other end
// is a virtual rank played by prismd. Owns the context's gRPC session with
// prismd (created lazily, on first need) and the virtual comms.
//
// Thread-safety: all methods may be called from any thread (NCCL calls a
// context from its proxy threads); internally synchronised.
#ifndef PRISM_PLUGIN_VIRTUAL_PEERS_H_
#define PRISM_PLUGIN_VIRTUAL_PEERS_H_

#include <cstdint>
#include <memory>

#include "common/net_handles.h"
#include "plugin/comm.h"

namespace prism::plugin {

class VirtualPeers {
 public:
  virtual ~VirtualPeers() = default;

  // connect() on a prismd-minted handle: a send comm to a virtual receiver.
  virtual Result Connect(const VirtualHandle& handle, int dev,
                         std::unique_ptr<NetComm>* comm) = 0;

  // A real listen comm was opened; tell prismd so that virtual senders can
  // connect to it. Opens the session when PRISM_DAEMON is set explicitly.
  virtual void ListenOpened(uint64_t listen_id, int dev) = 0;
  virtual void ListenClosed(uint64_t listen_id) = 0;

  // accept() on a real listen comm: a receive comm for a virtual sender that
  // prismd announced on `listen_id`, or null.
  virtual std::unique_ptr<NetComm> Accept(uint64_t listen_id) = 0;
};

// The gRPC-backed implementation (virtual_session.cc).
std::shared_ptr<VirtualPeers> MakeVirtualPeers(const CommEnv& env, uint64_t comm_id);

}  // namespace prism::plugin

#endif  // PRISM_PLUGIN_VIRTUAL_PEERS_H_
