// The bootstrap protocol server behind BootstrapService (internal header):
// owns the loop thread and one of each component (components.h), routes
// connection events to them by role, and reports what it waits for.
//
// Threading: the constructor, Start(), Stop(), Stats(), HostRoot(),
// JoinRoot(), RealRanksOnly(), AnnounceSplitGroup() and EndJob() are called from other threads; everything else
// runs on the loop thread.
#ifndef PRISM_DAEMON_BOOTSTRAP_BOOTSTRAP_SERVER_H_
#define PRISM_DAEMON_BOOTSTRAP_BOOTSTRAP_SERVER_H_

#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "daemon/bootstrap/allgather_engine.h"
#include "daemon/bootstrap/bootstrap_service.h"
#include "daemon/bootstrap/comm_split.h"
#include "daemon/bootstrap/comm_table.h"
#include "daemon/bootstrap/components.h"
#include "daemon/bootstrap/split_source.h"
#include "daemon/bootstrap/connection_table.h"
#include "daemon/bootstrap/p2p_messages.h"
#include "daemon/bootstrap/reporter.h"
#include "daemon/bootstrap/root_checkin.h"
#include "daemon/bootstrap/wire_recorder.h"

namespace prism::bootstrap {

// The components' calls up (components.h: CommStarts, SplitEvents), each
// forwarded to the component that owns the work. BootstrapServer owns one
// and hands it to the components; loop thread only.
class UpwardCalls final : public CommStarts, public SplitEvents {
 public:
  UpwardCalls(RootCheckin& root, AllGatherEngine& allgather, SplitCoordinator& split)
      : root_(root), allgather_(allgather), split_(split) {}

  void ForgetSharedRoot() override { root_.Reset(); }
  void StartRoot(LiveComm& comm) override { root_.Start(comm); }
  void LinkVirtualNeighbour(LiveComm& comm, int32_t v, bool from_real_prev) override {
    allgather_.Link(comm, v, from_real_prev);
  }
  void OnSplitGathered(LiveComm& parent) override { split_.OnSplitGathered(parent); }
  void ReplayEarlyMessages(LiveComm& parent) override { split_.ReplayEarlyMessages(parent); }
  void OnSplitMessage(LiveComm& parent, const PendingMsg& m) override { split_.OnSplitMessage(parent, m); }

 private:
  RootCheckin& root_;
  AllGatherEngine& allgather_;
  SplitCoordinator& split_;
};

class BootstrapServer : public ConnEvents {
 public:
  BootstrapServer(BootstrapConfig config, BootstrapPlan plan, daemon::VirtualConnectionBroker* broker);
  ~BootstrapServer() override;
  BootstrapServer(const BootstrapServer&) = delete;
  BootstrapServer& operator=(const BootstrapServer&) = delete;

  absl::Status Start();  // binds, spawns the loop thread
  void Stop();
  BootstrapStats Stats() const { return reporter_.Snapshot(); }
  uint16_t port() const { return shared_port_; }

  absl::Status SetNcclVersion(int version_code);
  absl::StatusOr<UniqueId> HostRoot(const CommRequest& request);
  absl::Status JoinRoot(const CommRequest& request, const UniqueId& id);
  absl::Status RealRanksOnly(const CommRequest& request, const UniqueId& id);
  absl::Status AnnounceSplitGroup(uint32_t rank, std::vector<uint32_t> members);
  void EndJob(const std::string& why, int grace_ms);

  // ConnEvents (loop thread).
  void OnInput(Conn& c) override;
  void OnEof(Conn& c) override;
  void OnConnectFailed(Conn& c, const std::string& why, bool gave_up) override;
  void OnClosed(Conn& c) override;

 private:
  absl::Status Configure();
  absl::Status ListenShared();
  absl::Status ListenSharedRoot();
  void OnAcceptedHeader(Conn& c);
  // Runs `fn` on the loop thread and waits for its result.
  absl::Status RunOnLoop(const std::function<absl::Status()>& fn);
  absl::StatusOr<PlanComm> ResolveRequest(const CommRequest& request) const;
  absl::StatusOr<UniqueId> HostRootOnLoop(const PlanComm& pc, const std::string& key);
  // prismd plays comm rank 0 of `pc` with the root it minted (`id`, at `addr`).
  void ArmHostedRoot(const PlanComm& pc, const std::string& key, const UniqueId& id, const Ipv4Endpoint& addr);
  // The virtual members of `pc` check in at the real root of `id`.
  absl::Status ArmJoinedRoot(const PlanComm& pc, const std::string& key, const UniqueId& id);
  // The wire profile of NCCL `version_code` is played from now on; the work
  // that waited for it runs (loop thread).
  absl::Status ChooseProfileOnLoop(int version_code);
  // Runs `work` now if the wire profile is known, else once it is.
  void WhenProfileKnown(std::function<void()> work);
  absl::Status JoinRootOnLoop(const PlanComm& pc, const std::string& key, const UniqueId& id);
  // Tells the broker the commHash of `pc`, all real, made from `id` (profile known).
  void AnnounceRealRanksOnly(const PlanComm& pc, const UniqueId& id);
  // The live communicator made for request `key` (or plan entry) in this job.
  LiveComm* Requested(const PlanComm& pc, const std::string& key);
  void Watchdog();
  std::vector<WaitReport> CollectWaits() const;

  BootstrapConfig config_;
  BootstrapPlan plan_;
  Components c_;
  net::EventLoop loop_;
  Reporter reporter_;
  ConnectionTable conns_;
  CommTable comms_;
  RootCheckin root_;
  AllGatherEngine allgather_;
  SplitCoordinator split_;
  std::unique_ptr<SplitSource> splits_;  // grows plan_ in follow mode
  P2pMessages p2p_;
  UpwardCalls upward_{root_, allgather_, split_};
  std::unique_ptr<WireRecorder> recorder_;
  std::thread thread_;
  uint16_t shared_port_ = 0;
  uint32_t next_unplanned_ = 0;
  std::map<std::string, std::pair<uint64_t, uint32_t>> requested_;  // key -> (job gen, live id)
  std::map<std::string, SteadyTime> waits_logged_;  // report text -> last logged
  // Before the real ranks' NCCL is known (BootstrapConfig::nccl_version 0):
  // the work that needs its wire profile, in arrival order, since when, and
  // the ids already minted for requests (key or "plan:<id>") it holds.
  bool job_awaits_profile_ = false;  // the first job starts once it is known
  std::vector<std::function<void()>> await_profile_;
  SteadyTime awaiting_since_{};
  std::map<std::string, UniqueId> unarmed_ids_;
};

}  // namespace prism::bootstrap

#endif  // PRISM_DAEMON_BOOTSTRAP_BOOTSTRAP_SERVER_H_
