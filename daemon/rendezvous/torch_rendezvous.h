// Makes every way a PyTorch 2.11 program starts its process groups work with
// virtual ranks, by watching the store prismd hosts (store_server.h):
//
//  * a real rank WAITs for an NCCL id key whose communicator's rank 0 is
//    virtual: prismd mints the id, hosts that root (BootstrapService::
//    HostRoot) and SETs the key, so the real members proceed;
//  * a real comm rank 0 SETs an id key: the virtual members check in to that
//    real root (BootstrapService::JoinRoot); when the group has no virtual
//    member, prismd only learns which graph communicator the id's commHash
//    is (BootstrapService::RealRanksOnly): PyTorch's group number names it
//    exactly, also where several graph communicators have the same members;
//  * with follow_real_ranks, a real rank SETs a split_group announcement
//    (torch_groups.h, ParseSplitGroupAnnouncement): the bootstrap learns the
//    group of the split that follows (BootstrapService::AnnounceSplitGroup).
// This covers env://, store=, tcp://, torchrun's environment, eager
// (device_id: the world id only, subgroups are splits) and lazy start-up
// (one id per communicator at its first collective, any number at once),
// with rank 0 real or virtual and any subset of real ranks. Which graph
// communicator a key names: torch_groups.h.
//
// Never a silent wait: Reports() lists, after `report_after`, every real
// rank waiting in the store for something no real rank has brought (an id a
// real comm rank 0 owes, a key nobody sets; Gloo records are daemon/gloo's), every real rank of the graph
// that has not connected to the store `expect_ranks_within` after the first
// one did, and every mismatch between the program's groups and the graph.
//
// Threading: the StoreObserver callbacks come from the store thread;
// Reports()/Tick() from any thread (one mutex).
#ifndef PRISM_DAEMON_RENDEZVOUS_TORCH_RENDEZVOUS_H_
#define PRISM_DAEMON_RENDEZVOUS_TORCH_RENDEZVOUS_H_

#include <chrono>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "daemon/bootstrap/bootstrap_service.h"
#include "daemon/rendezvous/group_source.h"
#include "daemon/rendezvous/torch_groups.h"
#include "daemon/store/store_server.h"

namespace prism::rendezvous {

// What the rendezvous needs from the bootstrap emulation (BootstrapService
// implements it through BootstrapRoots; tests may fake it).
class CommRoots {
 public:
  virtual ~CommRoots() = default;
  virtual absl::StatusOr<bootstrap::UniqueId> HostRoot(const bootstrap::CommRequest& request) = 0;
  virtual absl::Status JoinRoot(const bootstrap::CommRequest& request, const bootstrap::UniqueId& id) = 0;
  // A real comm rank 0 made `id` for a planned communicator of real ranks only.
  virtual absl::Status RealRanksOnly(const bootstrap::CommRequest& request, const bootstrap::UniqueId& id) = 0;
  // prismd --follow: a real rank's split_group announcement
  // (BootstrapService::AnnounceSplitGroup).
  virtual absl::Status AnnounceSplitGroup(uint32_t rank, std::vector<uint32_t> members) = 0;
  virtual void EndJob(const std::string& why) = 0;
};

class BootstrapRoots : public CommRoots {
 public:
  explicit BootstrapRoots(bootstrap::BootstrapService* service) : service_(service) {}
  absl::StatusOr<bootstrap::UniqueId> HostRoot(const bootstrap::CommRequest& r) override {
    return service_->HostRoot(r);
  }
  absl::Status JoinRoot(const bootstrap::CommRequest& r, const bootstrap::UniqueId& id) override {
    return service_->JoinRoot(r, id);
  }
  absl::Status RealRanksOnly(const bootstrap::CommRequest& r, const bootstrap::UniqueId& id) override {
    return service_->RealRanksOnly(r, id);
  }
  absl::Status AnnounceSplitGroup(uint32_t rank, std::vector<uint32_t> members) override {
    return service_->AnnounceSplitGroup(rank, std::move(members));
  }
  void EndJob(const std::string& why) override { service_->EndJob(why); }

 private:
  bootstrap::BootstrapService* service_;
};

struct RendezvousOptions {
  std::chrono::milliseconds report_after{3000};
  std::chrono::milliseconds expect_ranks_within{3000};
  std::string store_address;  // for messages, e.g. "127.0.0.1:29500"
  bool follow_real_ranks = false;  // prismd --follow: groups per group_source.h
};

struct RendezvousReports {
  std::vector<bootstrap::WaitReport> waiting;
  std::vector<std::string> errors;   // mismatches, newest last (at most 32)
  std::vector<int> ranks_connected;  // real ranks seen in the store
};

class TorchRendezvous : public store::StoreObserver {
 public:
  // `plan` and `roots` must outlive it. SetStore() before the store starts
  // serving (the store needs the observer first; the rendezvous needs the
  // store to publish ids).
  TorchRendezvous(const bootstrap::BootstrapPlan& plan, CommRoots* roots, RendezvousOptions options);
  void SetStore(store::StoreServer* store) { store_ = store; }

  void OnConnected(const store::ClientInfo& client) override;
  void OnWait(const store::ClientInfo& client, const std::vector<std::string>& unset) override;
  void OnSet(const store::ClientInfo& client, const std::string& key, const std::string& value) override;
  void OnAllClientsGone() override;

  RendezvousReports Reports() const;
  // Logs reports that are new (or 30 s old); call about once a second.
  void Tick();

 private:
  using Clock = std::chrono::steady_clock;
  // One NCCL id key of this job.
  struct IdKey {
    NcclIdKey key;
    std::optional<ResolvedGroup> comm;   // the communicator it names
    std::set<int> waiters;               // real ranks waiting for it (-1: unknown rank)
    Clock::time_point first_wait;
    bool set = false;
    bool hosted = false;                 // prismd minted it
  };

  absl::StatusOr<ResolvedGroup> CommunicatorOf(const NcclIdKey& key);
  bootstrap::CommRequest RequestFor(const IdKey& k) const;
  void OnIdWait(const store::ClientInfo& client, const NcclIdKey& key);
  void OnSplitGroupAnnounced(const store::ClientInfo& client, const absl::StatusOr<SplitGroupAnnouncement>& a);
  void Error(const std::string& message);
  std::vector<bootstrap::WaitReport> WaitsLocked(Clock::time_point now) const;

  const bootstrap::BootstrapPlan& plan_;
  std::unique_ptr<GroupSource> groups_;
  CommRoots* roots_;
  RendezvousOptions options_;
  store::StoreServer* store_ = nullptr;

  mutable std::mutex mu_;
  std::map<std::string, IdKey> ids_;
  std::map<uint64_t, store::ClientInfo> clients_;
  std::optional<Clock::time_point> first_client_;
  std::vector<std::string> errors_;
  std::map<std::string, Clock::time_point> logged_;
};

}  // namespace prism::rendezvous

#endif  // PRISM_DAEMON_RENDEZVOUS_TORCH_RENDEZVOUS_H_
