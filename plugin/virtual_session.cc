// VirtualPeers backed by a lazily opened DaemonSession.
#include <algorithm>
#include <mutex>

#include "plugin/daemon_session.h"
#include "plugin/virtual_comms.h"
#include "plugin/virtual_peers.h"

namespace prism::plugin {
namespace {

class SessionVirtualPeers final : public VirtualPeers {
 public:
  SessionVirtualPeers(const CommEnv& env, uint64_t comm_id) : env_(env), comm_id_(comm_id) {}

  Result Connect(const VirtualHandle& handle, int dev, std::unique_ptr<NetComm>* comm) override {
    std::shared_ptr<DaemonSession> s = Session();
    std::string why;
    if (!s->Healthy(false, &why)) {
      PRISM_WARN(*env_.logger, "connect to virtual rank %u: %s", handle.virtual_rank, why.c_str());
      return prism_ncclRemoteError;
    }
    SharedLink* link = handle.OnSenderNode()
                           ? &env_.nics->SameNodeTx(BitsPerSecond(handle.same_node_bits_per_second),
                                                    Nanoseconds(std::max<int64_t>(0, handle.same_node_latency_ns)))
                           : nullptr;  // NIC dev's
    *comm = std::make_unique<VirtualSendComm>(env_, s, handle.conn_id, dev, link);
    return prism_ncclSuccess;
  }

  void ListenOpened(uint64_t listen_id, int dev) override {
    SessionEvent e;
    e.kind = SessionEvent::kListenOpened;
    e.id = listen_id;
    e.dev = dev;
    Session()->Emit(e);
  }

  void ListenClosed(uint64_t listen_id) override {
    std::shared_ptr<DaemonSession> s = SessionIfOpen();
    if (!s) return;
    SessionEvent e;
    e.kind = SessionEvent::kListenClosed;
    e.id = listen_id;
    s->Emit(e);
  }

  std::unique_ptr<NetComm> Accept(uint64_t listen_id) override {
    std::shared_ptr<DaemonSession> s = SessionIfOpen();
    uint64_t conn_id = 0;
    if (!s || !s->TakeIncoming(listen_id, &conn_id)) return nullptr;
    return std::make_unique<VirtualRecvComm>(env_, s, conn_id, 0);
  }

 private:
  std::shared_ptr<DaemonSession> Session() {
    std::lock_guard<std::mutex> lock(mu_);
    if (!session_) {
      session_ = std::make_shared<DaemonSession>(env_, comm_id_);
      session_->Start();
    }
    return session_;
  }
  std::shared_ptr<DaemonSession> SessionIfOpen() {
    std::lock_guard<std::mutex> lock(mu_);
    return session_;
  }

  CommEnv env_;
  uint64_t comm_id_;
  std::mutex mu_;
  std::shared_ptr<DaemonSession> session_;
};

}  // namespace

std::shared_ptr<VirtualPeers> MakeVirtualPeers(const CommEnv& env, uint64_t comm_id) {
  return std::make_shared<SessionVirtualPeers>(env, comm_id);
}

}  // namespace prism::plugin
