// prismd's hybrid-mode services that face the real ranks: the plugin
// sessions (gRPC PluginSession), the NCCL bootstrap emulation of the
// virtual ranks, joined through the VirtualConnectionBroker seam, and
// PyTorch's store (hosted here so that NCCL ids of any start-up reach the
// bootstrap, daemon/rendezvous, and the real ranks' Gloo groups find their
// virtual ranks, daemon/gloo), with their counters exported as Prometheus
// metrics and what they wait for on /status.
//
// Lifetime: Create(), register session_service() with the gRPC server
// before it starts, Start() (binds the bootstrap listeners), Stop() before
// the gRPC server shuts down. The object must outlive the gRPC server's
// use of session_service(). Not copyable. Start/Stop from one thread.
#ifndef PRISM_DAEMON_HYBRID_CONTROL_PLANE_H_
#define PRISM_DAEMON_HYBRID_CONTROL_PLANE_H_

#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <set>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <grpcpp/grpcpp.h>

#include "absl/status/statusor.h"
#include "common/units.h"
#include "daemon/bootstrap/bootstrap_service.h"
#include "daemon/hybrid/divergence_watch.h"
#include "daemon/gloo/gloo_ranks.h"
#include "daemon/rendezvous/torch_rendezvous.h"
#include "daemon/server/metrics.h"
#include "daemon/server/status.h"
#include "daemon/store/store_server.h"
#include "daemon/session/schedule_source.h"
#include "daemon/session/session_service.h"
#include "proto/graph.pb.h"

namespace prism::daemon {

struct ControlPlaneOptions {
  std::vector<uint32_t> real_ranks;  // empty: no bootstrap emulation (sessions only)
  // The real ranks' NCCL_COMM_ID, "host:port": every init communicator from
  // that one id, one at a time (legacy). Empty: ids from PyTorch's store.
  std::string nccl_comm_id;
  // PyTorch's store hosted by prismd, "host:port" (the ranks' MASTER_ADDR/
  // MASTER_PORT). Required when nccl_comm_id is empty; empty = no store.
  std::string torch_store;
  // Non-empty: routable bootstrap endpoints (one port each) on this host, for
  // real ranks on other hosts; empty: loopback aliases (this host only).
  std::string bootstrap_routable_host;
  std::vector<std::string> bootstrap_allow;  // routable mode: peers accepted ("a.b.c.d[/len]")
  // The real ranks' NCCL version code (--wire-profile); 0: learnt from the
  // first real rank's plugin (its Announce at NCCL init).
  int nccl_version = 0;
  bool allow_unverified_profile = false;  // serve a partial wire profile (verifying it)
  bool runtime_connect = false;      // the real ranks' NCCL_RUNTIME_CONNECT (prism run sets 0)
  bool register_allgather = true;    // NCCL_LOCAL_REGISTER || NCCL_GRAPH_REGISTER
  uint16_t bootstrap_port = 0;       // 0: the kernel's choice
  std::string record_wire_dir;       // empty: no recording
  std::string version = "dev";
  Nanoseconds ring_step_cost{0};     // NCCL's cost per ring step (prismd's --step-cost-us), told to plugins
  // The graph's link inside a node, for a real rank's virtual peers on its
  // own node (RunHybrid gives the scheduler's: HybridSchedulerOptions::
  // ForCluster). Default: none, every virtual peer on the NIC link.
  SameNodeLink same_node;
  // prismd --follow: the graph lists only the world; the bootstrap and the
  // store follow the groups the real ranks make (split_source.h,
  // group_source.h).
  bool follow_real_ranks = false;
  // Where waits and start-up errors are shown (/status); nullable, must
  // outlive the ControlPlane.
  server::StatusBoard* status = nullptr;
  // Told every bootstrap divergence and store start-up error, within a
  // poll (0.5 s); nullable, must outlive the ControlPlane.
  DivergenceWatch* divergences = nullptr;
};

class ControlPlane {
 public:
  // `metrics` and `schedules` (who times the virtual peers: the hybrid
  // scheduler; nullable in tests) must outlive the object. Errors name the
  // flag to fix.
  static absl::StatusOr<std::unique_ptr<ControlPlane>> Create(const graph::Graph& graph,
                                                              ControlPlaneOptions options,
                                                              server::Metrics* metrics,
                                                              ScheduleSource* schedules);
  ~ControlPlane();
  ControlPlane(const ControlPlane&) = delete;
  ControlPlane& operator=(const ControlPlane&) = delete;

  grpc::Service* session_service() { return sessions_.service(); }

  // Ends every plugin session with `why` (the real ranks' NCCL then fails
  // its virtual peers' requests with that reason). Any thread.
  void FailSessions(const std::string& why) { sessions_.FailAll(why); }

  // Starts the bootstrap emulation (if real ranks were given) and the
  // metrics poller. Prints where the bootstrap listens.
  absl::Status Start();
  void Stop();

 private:
  ControlPlane(ControlPlaneOptions options, server::Metrics* metrics, ScheduleSource* schedules);
  absl::Status StartStore();
  void PollMetrics();
  void PublishWaits();
  // New bootstrap divergences and store start-up errors to options_.divergences (poller thread).
  void ReportDivergences(const bootstrap::BootstrapStats* stats, const std::vector<std::string>& errors);

  // The NCCL version of a plugin that announces one before the bootstrap
  // exists is checked against the profiles only.
  absl::Status ChooseNcclVersion(int code);
  void WarnIfUntimed(int code);

  ControlPlaneOptions options_;
  server::Metrics* metrics_;
  NcclVersionGate nccl_gate_;   // before sessions_, which uses it
  PluginSessionService sessions_;
  bootstrap::BootstrapPlan plan_;
  std::unique_ptr<bootstrap::BootstrapService> bootstrap_;
  std::unique_ptr<rendezvous::BootstrapRoots> roots_;
  std::unique_ptr<rendezvous::TorchRendezvous> rendezvous_;
  std::unique_ptr<gloo::GlooRanks> gloo_;  // the virtual ranks of the real ranks' Gloo groups
  std::unique_ptr<store::ObserverFanout> store_observers_;
  std::unique_ptr<store::StoreServer> store_;
  std::thread poller_;
  std::mutex stop_mu_;                // guards stop_
  std::condition_variable stop_cv_;   // wakes the poller at Stop()
  bool stop_ = false;
  uint64_t divergences_seen_ = 0;             // poller thread only
  std::set<std::string> errors_seen_;         // poller thread only
};

}  // namespace prism::daemon

#endif  // PRISM_DAEMON_HYBRID_CONTROL_PLANE_H_
