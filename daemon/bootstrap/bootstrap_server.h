// The single-threaded bootstrap protocol server behind BootstrapService.
// All methods except the constructor, Stats() and RequestStop() must run on
// the loop thread (Run()). Internal header: use bootstrap_service.h.
#ifndef PRISM_DAEMON_BOOTSTRAP_BOOTSTRAP_SERVER_H_
#define PRISM_DAEMON_BOOTSTRAP_BOOTSTRAP_SERVER_H_

#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "daemon/bootstrap/bootstrap_service.h"
#include "daemon/bootstrap/server_state.h"
#include "daemon/bootstrap/wire_recorder.h"
#include "daemon/session/virtual_connections.h"

namespace prism::bootstrap {

class BootstrapServer {
 public:
  BootstrapServer(BootstrapConfig config, BootstrapPlan plan,
                  daemon::VirtualConnectionBroker* broker);
  ~BootstrapServer();
  BootstrapServer(const BootstrapServer&) = delete;
  BootstrapServer& operator=(const BootstrapServer&) = delete;

  absl::Status Start();   // binds, spawns the loop thread
  void Stop();
  BootstrapStats Stats() const;
  uint16_t port() const { return shared_port_; }

  // Connection events (loop thread).
  void OnConnIo(Conn* c, uint32_t events);

 private:
  struct Listener : IoHandler {
    BootstrapServer* server = nullptr;
    int fd = -1;
    bool is_root = false;
    void OnIo(uint32_t events) override;
  };

  // ---- server_io.cc: sockets, connections, recording.
  absl::StatusOr<int> ListenOn(const Ipv4Endpoint& at);
  void OnAccept(Listener* l);
  Conn* NewConn(int fd, ConnRole role, const std::string& note);
  Conn* ConnectOut(const Ipv4Endpoint& to, ConnRole role, uint64_t magic, std::string payload,
                   uint32_t comm, int32_t rank, const std::string& note,
                   int32_t socket_type = kSocketTypeBootstrap);
  void StartConnect(Conn* c);
  void RetryConnect(Conn* c);
  void Send(Conn* c, const std::string& bytes);
  void Flush(Conn* c);
  void CloseConn(Conn* c);
  void ReapDead();
  Conn* FindConn(uint64_t id);
  void HandleInput(Conn* c);
  void HandleAcceptedHeader(Conn* c);
  void HandleEof(Conn* c);
  absl::StatusOr<Ipv4Endpoint> AllocEndpoint(uint32_t comm, int32_t rank, EndpointKind kind);
  void FreeEndpoints(LiveComm& comm);
  // One-shot bootstrapSend from virtual `from` to real `to` of `comm`.
  void SendP2p(LiveComm& comm, int32_t from, int32_t to, int32_t tag, const Bytes& payload);

  // ---- server_comm.cc: job and communicator lifecycle.
  void StartJob();
  void FinishJob(bool failed, const std::string& why);
  void AdvanceInitOrder();
  LiveComm* Comm(uint32_t live_id);
  LiveComm& CreateComm(const PlanComm& plan, std::vector<uint32_t> global_members,
                       uint64_t hash, std::optional<uint32_t> parent);
  void CommReady(LiveComm& c);
  void MaybeCommDone(LiveComm& c);
  void FailComm(LiveComm& c, const std::string& why);
  void Diverge(const std::string& message);
  void CompleteSplit(LiveComm& parent);
  void HandleSplitMessage(LiveComm& parent, const PendingMsg& m);

  // ---- server_root.cc: root check-in (both root modes) and ring connect.
  void StartRoot(LiveComm& c);
  void PumpCheckins(LiveComm& c);
  void OnRootCheckin(Conn* conn);
  void RefuseOtherVersionCheckin(Conn* conn, int32_t len);
  void OnRootDelivery(Conn* conn);
  void DeliverFromDaemonRoot(LiveComm& c);
  void ConnectRingNext(LiveComm& c, int32_t v, const Ipv4Endpoint& real_listener);
  RingLink& Link(LiveComm& c, int32_t v, bool from_real_prev);
  void StartRingOps(LiveComm& c, const std::vector<RingOp>& ops);

  // ---- server_allgather.cc: the all-gather engine over boundary links.
  void ArmAllGather(LiveComm& c, AgKind kind);
  void ArmNextQueued(LiveComm& c);
  bool TryArmReactive(LiveComm& c, RingLink& link, Conn* conn);
  void PumpAllGather(LiveComm& c);
  void PumpLinkOut(LiveComm& c, RingLink& l);
  void ParseLinkIn(LiveComm& c, RingLink& l, Conn* conn);
  void FillVirtualSlices(LiveComm& c, const Bytes* real_record, int real_slice = -1);
  bool ReadyToFill(const LiveComm& c, int real_slice) const;
  void OnSliceReceived(LiveComm& c, int slice, const uint8_t* data, int32_t from_real);
  bool AllGatherComplete(const LiveComm& c) const;
  void FinishAllGather(LiveComm& c);
  void QueueOnLink(LiveComm& c, RingLink& l, const std::string& bytes);

  // ---- server_p2p.cc: P2P bootstrap messages from real ranks.
  void OnP2pInput(Conn* conn);
  void DispatchP2p(LiveComm& c, const PendingMsg& m);
  void HandleP2pSetup(LiveComm& c, const PendingMsg& m);
  void HandleBarrier(LiveComm& c, const PendingMsg& m);
  void ConnectVirtualSender(LiveComm& c, RealListenHandle handle, daemon::VirtualLinkInfo link,
                            int attempt);

  BootstrapConfig config_;
  BootstrapPlan plan_;
  daemon::VirtualConnectionBroker* broker_;
  const WireProfile* profile_ = nullptr;
  UniqueId unique_id_{};
  Ipv4Endpoint root_addr_;
  Ipv4Endpoint advertise_;
  EventLoop loop_;
  std::thread thread_;
  Listener shared_listener_;
  Listener root_listener_;
  uint16_t shared_port_ = 0;
  std::unique_ptr<WireRecorder> recorder_;

  std::map<uint64_t, std::unique_ptr<Conn>> conns_;
  std::vector<std::unique_ptr<Conn>> graveyard_;
  bool reap_scheduled_ = false;
  uint64_t next_conn_id_ = 1;
  std::map<std::pair<uint32_t, uint16_t>, EndpointRef> endpoints_;
  std::map<std::pair<uint32_t, uint16_t>, std::unique_ptr<Listener>> endpoint_listeners_;
  uint32_t next_alias_ = 1;

  std::map<uint32_t, std::unique_ptr<LiveComm>> comms_;
  uint32_t next_live_id_ = 1;
  std::vector<std::optional<uint32_t>> live_of_plan_;  // plan id -> live id
  std::vector<uint8_t> plan_done_;                     // plan id -> initialized/skipped
  uint32_t next_init_plan_ = 0;
  std::optional<uint32_t> current_root_comm_;          // live id served by the daemon root
  bool job_active_ = false;
  uint64_t job_gen_ = 0;                              // bumped by StartJob()

  mutable std::mutex stats_mu_;
  BootstrapStats stats_;
};

}  // namespace prism::bootstrap

#endif  // PRISM_DAEMON_BOOTSTRAP_BOOTSTRAP_SERVER_H_
