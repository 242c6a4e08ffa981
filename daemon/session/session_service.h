// prismd's side of the plugin sessions (proto/prism_service.proto,
// PluginSession): one bidirectional stream per plugin context. Implements
// the VirtualConnectionBroker the bootstrap emulation calls, and feeds the
// sessions' events to a ScheduleSource whose schedules it pushes back.
//
// Usage (prismd):
//   LinkModelScheduleSource source(FromGbps(100), FromMicroseconds(5));
//   PluginSessionService sessions({.daemon_version = "0.1"}, &source);
//   builder.RegisterService(sessions.service());
//   bootstrap.SetBroker(&sessions.broker());
//
// Threads: gRPC's sync-server threads run the streams (one per session);
// one keepalive thread (started by the constructor, joined by the
// destructor) writes an empty ScheduleBatch to sessions idle for
// `keepalive`. No thread is spawned inside a gRPC call. Every public method
// is thread-safe. Destroy only after the gRPC server has shut down.
#ifndef PRISM_DAEMON_SESSION_SESSION_SERVICE_H_
#define PRISM_DAEMON_SESSION_SESSION_SERVICE_H_

#include <grpcpp/grpcpp.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "common/units.h"
#include "daemon/session/nccl_version_gate.h"
#include "daemon/session/schedule_source.h"
#include "daemon/bootstrap/virtual_connections.h"
#include "proto/prism_service.grpc.pb.h"

namespace prism::daemon {

inline constexpr uint32_t kSessionProtocolVersion = 2;

// Observes listen announcements (e.g. a test daemon that connects a virtual
// sender to every listener). Called on the session's stream thread.
using ListenObserver = std::function<void(SessionId, uint64_t listen_id, int32_t dev)>;

class PluginSessionService final : public VirtualConnectionBroker, public ScheduleSink {
 public:
  struct Options {
    std::string daemon_version = "dev";
    Nanoseconds ring_step_cost{0};  // Welcome.ring_step_cost_ns (prismd's --step-cost-us)
    std::chrono::milliseconds keepalive{1000};
    ListenObserver on_listen;  // optional
    // Which NCCL prismd plays (--wire-profile or learnt from the first
    // rank): Announce and every Hello are admitted through it, a refusal
    // reaches the plugin at once with the fix. Null: not checked. Must
    // outlive the service.
    NcclVersionGate* nccl_gate = nullptr;
    // Called with the Hello of every admitted Announce (a real rank's plugin
    // at NCCL init), on a gRPC thread; optional, must be quick.
    std::function<void(const rpc::Hello&)> on_announce;
    // A session stream that sends no Hello within this is cancelled (its
    // server thread would otherwise wait for ever).
    std::chrono::milliseconds hello_timeout{10000};
    // A handle minted for a virtual receiver on the real sender's node
    // carries this link (VirtualHandle::same_node_*).
    SameNodeLink same_node;
  };

  // `source` is not owned and must outlive this object.
  PluginSessionService(Options options, ScheduleSource* source);
  ~PluginSessionService() override;
  PluginSessionService(const PluginSessionService&) = delete;
  PluginSessionService& operator=(const PluginSessionService&) = delete;

  // Register with grpc::ServerBuilder::RegisterService.
  grpc::Service* service();
  VirtualConnectionBroker& broker() { return *this; }

  // Sessions whose stream is open now.
  int connected_sessions() const { return connected_.load(std::memory_order_relaxed); }
  uint64_t sessions_total() const { return sessions_total_.load(std::memory_order_relaxed); }

  // The link a connection id was minted or connected for, if any.
  std::optional<VirtualLinkInfo> LinkOf(uint64_t conn_id) const;
  // Listen comms announced and not closed (a bounded table).
  size_t listeners() const;
  // Events dropped because they named a connection prismd never minted.
  uint64_t rejected_events() const { return rejected_events_.load(std::memory_order_relaxed); }

  // Tells every open plugin session that prismd ends it (a SessionError
  // with `why`; the plugin fails its virtual peers' requests with that
  // reason, so NCCL in the real rank reports an error). Any thread.
  void FailAll(const std::string& why);

  // ScheduleSink
  bool PushSchedules(SessionId id, rpc::ScheduleBatch batch) override;

  // VirtualConnectionBroker
  void CommunicatorKnown(const CommDescription& c) override {
    if (source_ != nullptr) source_->OnCommunicator(c);
  }
  VirtualHandle MintReceiveHandle(const VirtualLinkInfo& link) override;
  absl::Status ConnectToRealListener(const RealListenHandle& listen,
                                     const VirtualLinkInfo& link) override;

 private:
  class GrpcService;
  struct Session;

  // Why a plugin in NCCL `plugin_nccl` (its Hello; 0: unknown) cannot be
  // served, or "" when it can.
  // Empty when `hello`'s NCCL may be served, else the refusal (logged).
  std::string AdmitNccl(const rpc::Hello& hello, const char* what) const;
  grpc::Status RunAnnounce(const rpc::Hello& hello, rpc::Welcome* reply);
  grpc::Status RunSession(grpc::ServerContext* context,
                          grpc::ServerReaderWriter<rpc::DaemonMessage, rpc::PluginMessage>* stream);
  std::shared_ptr<Session> Register(
      grpc::ServerReaderWriter<rpc::DaemonMessage, rpc::PluginMessage>* stream);
  void Unregister(const std::shared_ptr<Session>& s);
  bool Write(Session& s, const rpc::DaemonMessage& msg);
  void HandleEvents(Session& s, const rpc::EventBatch& batch);
  // Copies `batch` without events on unknown connections into `*kept`;
  // false when nothing had to be dropped (then `*kept` is untouched).
  bool DropUnknownConnections(Session& s, const rpc::EventBatch& batch, rpc::EventBatch* kept);
  void KeepaliveMain();
  uint64_t NextConnId();

  Options options_;
  ScheduleSource* source_;
  std::unique_ptr<GrpcService> grpc_service_;
  std::atomic<int> connected_{0};
  std::atomic<uint64_t> sessions_total_{0};
  std::atomic<uint64_t> next_conn_{0};
  std::atomic<uint64_t> rejected_events_{0};

  mutable std::mutex mu_;  // guards the maps and stop_
  std::unordered_map<SessionId, std::shared_ptr<Session>> sessions_;
  std::unordered_map<uint64_t, SessionId> listen_owner_;  // listen_id -> session
  std::unordered_map<uint64_t, VirtualLinkInfo> links_;    // conn_id -> link
  SessionId next_session_ = 1;
  // Streams waiting for their Hello, with the time (MonoNs) they give up;
  // cancelled by the keepalive thread. Entries leave before their stream's
  // handler returns.
  std::unordered_map<grpc::ServerContext*, int64_t> awaiting_hello_;
  bool stop_ = false;
  std::condition_variable stop_cv_;
  std::thread keepalive_;
};

}  // namespace prism::daemon

#endif  // PRISM_DAEMON_SESSION_SESSION_SERVICE_H_
