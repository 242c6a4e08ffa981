// prismd plays the virtual ranks of the real ranks' Gloo groups (PyTorch's
// ProcessGroupGloo: `init_process_group()` without a backend, i.e.
// cpu:gloo,cuda:nccl, and `new_group(backend="gloo")`), by watching the
// store prismd hosts (store_server.h) and speaking Gloo's TCP pair protocol
// (gloo_wire.h, virtual_pair.h):
//
//  * a real rank SETs its rank record of a Gloo context
//    (rendezvous/gloo_keys.h): prismd keeps it (its listener, its pair sequences);
//  * a real rank reads (WAIT/GET/MULTI_GET) the record of a group rank the
//    graph plays virtually: prismd SETs that record (the highest address of
//    the real rank's family, so the real rank is always the listening end
//    of the pair, and one pair sequence per group rank when the real rank
//    publishes its own) and connects a VirtualPair to the real rank's
//    listener, which then answers every message the real rank sends.
// This serves eager full-mesh start-up (every pair at creation) and lazy
// init (TORCH_GLOO_LAZY_INIT: a pair at its first use) alike.
//
// Which ranks of a Gloo group are virtual comes from the graph: the group's
// PyTorch name resolves to a graph communicator as for NCCL
// (rendezvous::GroupResolver); a group the graph cannot name is an error in
// Reports() and the real rank waits (the store's wait report names it).
// In loopback mode (`loopback_only`) prismd connects only to listeners on
// this host.
//
// Threading: store callbacks arrive on the store's thread and may Set() on
// the store at once; the pairs live on a PairPool's own thread (started by
// Start(), joined by Stop() and the destructor). Reports() from
// any thread. `plan` and the store must outlive the object (SetStore before
// the store serves).
#ifndef PRISM_DAEMON_GLOO_GLOO_RANKS_H_
#define PRISM_DAEMON_GLOO_GLOO_RANKS_H_

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "daemon/bootstrap/bootstrap_plan.h"
#include "daemon/bootstrap/bootstrap_service.h"
#include "daemon/rendezvous/gloo_keys.h"
#include "daemon/gloo/gloo_wire.h"
#include "daemon/gloo/pair_pool.h"
#include "daemon/gloo/virtual_pair.h"
#include "daemon/rendezvous/torch_groups.h"
#include "daemon/store/store_server.h"

namespace prism::gloo {

struct GlooOptions {
  bool loopback_only = true;       // connect only to listeners on this host
  std::string hostname = "prism-virtual";  // in virtual records (never a real host's name)
  uint64_t max_message_bytes = uint64_t{16} << 30;
  PairPoolOptions pairs;           // connect attempts, retry delay, connects in flight
  std::chrono::milliseconds report_after{3000};  // a real rank waiting this long for a Gloo record is reported
};

struct GlooReports {
  // Real ranks waiting in the store for a Gloo record (report_after or
  // longer), with why: a real member not there yet, a group the graph does
  // not list, a reader that has not published its own record.
  std::vector<bootstrap::WaitReport> waiting;
  std::vector<std::string> errors;  // newest last (at most 32)
  size_t contexts = 0;              // Gloo contexts seen this job
  uint64_t records_published = 0;   // virtual records prismd set
  uint64_t pairs_opened = 0;
  uint64_t pairs_open = 0;
  uint64_t pairs_failed = 0;
  PairCounters traffic;             // summed over every pair, closed ones included
};

class GlooRanks : public store::StoreObserver {
 public:
  static absl::StatusOr<std::unique_ptr<GlooRanks>> Start(const bootstrap::BootstrapPlan& plan,
                                                          GlooOptions options);
  ~GlooRanks() override;
  GlooRanks(const GlooRanks&) = delete;
  GlooRanks& operator=(const GlooRanks&) = delete;

  void SetStore(store::StoreServer* store) { store_ = store; }
  void Stop();

  void OnConnected(const store::ClientInfo&) override {}
  void OnWait(const store::ClientInfo&, const std::vector<std::string>&) override {}
  void OnRead(const store::ClientInfo& client, const std::vector<std::string>& keys) override;
  void OnSet(const store::ClientInfo& client, const std::string& key, const std::string& value) override;
  void OnAllClientsGone() override;

  GlooReports Reports() const;
  // Logs waits that are new (or 30 s old); call about once a second.
  void Tick();

 private:
  // One Gloo context (a group's Gloo backend on one device) of this job.
  struct Context {
    std::string group_name;                         // "0", "3", ...
    int64_t last_real = -1;                         // the highest group rank the graph has real
    std::map<uint32_t, int64_t> real_group_rank;    // real global rank -> its group rank
    absl::StatusOr<rendezvous::ResolvedGroup> group = absl::UnknownError("unresolved");
    std::map<int64_t, RankRecord> real_records;     // group rank -> record
    std::set<int64_t> real_elsewhere;               // real ranks whose listener is not on this host
    std::map<uint64_t, int64_t> client_rank;        // store client -> group rank it set
    std::set<int64_t> published;                    // virtual records set
    std::set<std::pair<int64_t, int64_t>> dialled;  // (virtual, real) group ranks
  };
  GlooRanks(const bootstrap::BootstrapPlan& plan, GlooOptions options);
  Context& ContextOf(const rendezvous::GlooKey& key);
  void OnReadKey(const store::ClientInfo& client, const rendezvous::GlooKey& key);
  // The group rank of a reader that set its record (by store client, or by
  // its RANK when it reads through another connection, e.g. a cloned store).
  std::optional<int64_t> ReaderRank(const store::ClientInfo& client, const Context& c) const;
  absl::Status CheckRealRecord(const store::ClientInfo& client, const rendezvous::GlooKey& key, const Context& c,
                               const RankRecord& record) const;
  absl::StatusOr<PairTarget> TargetFor(const rendezvous::GlooKey& key, const Context& c, int64_t real_rank) const;
  std::string PairName(const rendezvous::GlooKey& key, const Context& c, int64_t virtual_rank, int64_t real_rank) const;
  void Error(const std::string& message);  // mu_ held
  std::vector<bootstrap::WaitReport> Waits(const std::vector<store::BlockedWait>& blocked,
                                           std::chrono::steady_clock::time_point now) const;  // mu_ held
  std::string WaitReason(const store::BlockedWait& b, const rendezvous::GlooKey& key, bootstrap::WaitReport* w) const;


  const bootstrap::BootstrapPlan& plan_;
  rendezvous::GroupResolver groups_;
  GlooOptions options_;
  store::StoreServer* store_ = nullptr;

  mutable std::mutex mu_;
  std::map<std::string, Context> contexts_;
  std::vector<std::string> errors_;
  std::map<std::string, std::chrono::steady_clock::time_point> logged_;  // wait line -> last logged
  uint64_t records_published_ = 0;

  std::unique_ptr<PairPool> pool_;  // the pairs, on their own thread
};

}  // namespace prism::gloo

#endif  // PRISM_DAEMON_GLOO_GLOO_RANKS_H_
