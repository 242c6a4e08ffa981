// Non-blocking connection setup between real peers (wire format: real_wire.h).
// Neither class ever blocks: NCCL's proxy thread calls accept()/connect()
// again while they report "not yet" (NULL comm).
#ifndef PRISM_PLUGIN_REAL_HANDSHAKE_H_
#define PRISM_PLUGIN_REAL_HANDSHAKE_H_

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "common/net_handles.h"
#include "plugin/comm.h"
#include "plugin/progress_engine.h"
#include "plugin/shared_ring.h"
#include "plugin/real_wire.h"
#include "plugin/virtual_peers.h"

namespace prism::plugin {

// A listen comm: the TCP listener behind a RealListenHandle and, for peers
// on this host, its abstract Unix listener (host_identity.h), plus a hook the
// virtual-peer layer uses to hand out receive comms for virtual senders.
// Used by one thread at a time (NCCL's proxy thread).
class ListenComm : public Tagged {
 public:
  // Takes ownership of `listen_fd` and `unix_fd` (-1: none). A comm's
  // sockets may come through either. `virtual_peers` (nullable: no prismd)
  // was told about the listener (ListenOpened) and hands out receive comms
  // for virtual senders; the destructor tells it ListenClosed.
  ListenComm(const CommEnv& env, std::shared_ptr<ProgressEnginePool> engines, int listen_fd, int unix_fd,
             const RealListenHandle& handle, std::shared_ptr<VirtualPeers> virtual_peers);
  ~ListenComm();
  ListenComm(const ListenComm&) = delete;
  ListenComm& operator=(const ListenComm&) = delete;

  // Sets `*comm` to a new receive comm when one is ready, else null. Without
  // prismd (no virtual peers, which may hold a connection back for long), an
  // accept that has gone on for half of PRISM_CONNECT_TIMEOUT_MS without a
  // comm says so once (WARN: the sockets and hellos it has so far), so that a
  // peer which never connects is named rather than a silent hang.
  Result Accept(std::unique_ptr<NetComm>* comm);
  const RealListenHandle& handle() const { return handle_; }

 private:
  struct Incoming {
    int fd = -1;
    SocketHello hello{};
    size_t got = 0;
    bool same_host = false;  // came through the Unix listener
    std::vector<int> ring_fds;  // a SharedRing's fds passed with the hello (same host only)
  };
  static void CloseIncoming(Incoming& in);
  Result AcceptPending(int listen_fd);
  Result ReadHellos();
  // A receive comm for the first group whose sockets all came, else null.
  // An error when the group's ring cannot be mapped (its sender would wait
  // on it forever).
  Result TakeCompleteGroup(std::unique_ptr<NetComm>* comm);
  // After an Accept that gave no comm: the once-only warning above.
  void NoteWaiting();

  CommEnv env_;
  std::shared_ptr<ProgressEnginePool> engines_;
  int listen_fd_;
  int unix_fd_;
  RealListenHandle handle_;
  std::shared_ptr<VirtualPeers> virtual_peers_;
  std::vector<Incoming> incoming_;                 // hello not complete yet
  std::map<uint64_t, std::vector<Incoming>> groups_;  // by comm_nonce
  int64_t waiting_since_ns_ = 0;  // the first Accept since the last comm it gave; 0: none yet
  bool told_waiting_ = false;
};

// The sender side of one connection being set up: over Unix sockets when the
// handle's host key is this process's (CommEnv::same_host_key), else TCP.
// Over a Unix socket with PRISM_SAME_HOST_RING > 0 it opens one socket (not
// PRISM_SOCKS_PER_COMM) and passes a new SharedRing with socket 0's hello;
// a ring that cannot be created leaves the payload on the socket (INFO line).
class PendingConnect {
 public:
  // `dev`: the local NIC the connection leaves through (its shared link).
  PendingConnect(const CommEnv& env, std::shared_ptr<ProgressEnginePool> engines,
                 const RealListenHandle& handle, int dev);
  ~PendingConnect();
  PendingConnect(const PendingConnect&) = delete;
  PendingConnect& operator=(const PendingConnect&) = delete;

  // Advances without blocking. Success with null `*comm`: call again.
  // Success with `*comm`: done (this object may be deleted). Error: failed,
  // with a warning logged.
  Result Step(std::unique_ptr<NetComm>* comm);

 private:
  struct Sock {
    int fd = -1;
    bool connected = false;
    size_t hello_sent = 0;
    int64_t retry_at_ns = 0;
  };
  Result StepSocket(Sock& s, uint32_t index);
  // Dials the listener's Unix socket for `s` (connected at once, or retried).
  Result StartSameHost(Sock& s);
  // Writes the rest of `index`'s hello, with the ring's fd on socket 0's first bytes.
  Result WriteHello(Sock& s, uint32_t index);

  CommEnv env_;
  std::shared_ptr<ProgressEnginePool> engines_;
  RealListenHandle handle_;
  int dev_;
  bool same_host_;   // dial the listener's Unix socket (falls back to TCP if it is not there)
  std::string peer_;
  uint64_t nonce_;
  int64_t deadline_ns_;
  std::vector<Sock> socks_;
  std::unique_ptr<SharedRing> ring_;  // created once socket 0 is connected over Unix
};

}  // namespace prism::plugin

#endif  // PRISM_PLUGIN_REAL_HANDSHAKE_H_
