// Which communicator is which, for HybridScheduler (docs/timing.md):
//  * NCCL commHash -> the graph's communicator and its members: from the
//    bootstrap (Bind), or, for a communicator whose members are all real
//    ranks (prismd's bootstrap never sees it), from the real ranks' own
//    reports: an operation on an unknown communicator is parked (Park) until
//    every member has reported one, then bound to the first graph
//    communicator with those members not bound to another NCCL communicator.
//  * The engine's communicator -> the (real rank, graph communicator) pairs
//    it stands for (BindWorld), to route the engine's times to real ranks.
//
// Ownership: holds copies of the descriptions and the parked reports; the
// programs are borrowed and must outlive the object. Pointers returned by
// Find and RealViews stay valid until the next Bind or BindWorld.
// Thread-safety: none of its own. HybridScheduler calls it only with its
// mutex (HybridScheduler::mu_) held, which guards this object's state too.
#ifndef PRISM_DAEMON_HYBRID_COMMUNICATOR_BINDING_H_
#define PRISM_DAEMON_HYBRID_COMMUNICATOR_BINDING_H_

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "daemon/bootstrap/virtual_connections.h"
#include "daemon/engine/replay_engine.h"
#include "daemon/hybrid/real_rank_programs.h"
#include "daemon/session/schedule_source.h"

namespace prism::daemon {

// Reports that waited for their communicator's membership, in arrival order.
struct ParkedOps {
  std::vector<std::pair<SessionId, rpc::OpStarted>> started;
  std::vector<std::pair<SessionId, rpc::OpFinished>> finished;
};

class CommunicatorBinding {
 public:
  explicit CommunicatorBinding(const RealRankPrograms* programs) : programs_(programs) {}

  // Binds `c` (replacing an earlier binding of its hash).
  void Bind(const CommDescription& c);
  // The communicator NCCL knows as `hash`; nullptr: not bound.
  const CommDescription* Find(uint64_t hash) const;
  // True when every member of `hash` is a real rank.
  bool AllReal(uint64_t hash) const { return all_real_hashes_.count(hash) != 0; }
  // The operations parked on `hash` (removed), once the bootstrap has told
  // of it after its members reported some; nullopt: none.
  std::optional<ParkedOps> TakeParked(uint64_t hash);

  struct Parking {
    bool parked = false;  // false: `s` cannot be on an all-real communicator (a divergence)
    // Set once every member has reported: the communicator to Bind (not bound
    // yet), its parked operations (removed) and, when the graph lacks it, a
    // divergence to report.
    std::optional<CommDescription> complete;
    ParkedOps ops;
    std::string divergence;
  };
  // Parks `s`, reported by session `id` of global rank `session_rank` (-1:
  // unknown) on a communicator not bound.
  Parking Park(SessionId id, int32_t session_rank, const rpc::OpStarted& s);
  // Keeps `f` with its parked start, if there is one.
  void ParkFinished(SessionId id, const rpc::OpFinished& f);

  // Rebuilds the engine communicators' real views from the engine's world.
  void BindWorld(const engine::EngineWorld& world);
  // (real rank, graph communicator) pairs the engine's `comm` stands for; nullptr: none.
  const std::vector<std::pair<uint32_t, uint32_t>>* RealViews(uint32_t comm) const;
  // The graph communicator the engine's `comm` is for `real_rank`.
  std::optional<uint32_t> GraphCommOf(uint32_t comm, uint32_t real_rank) const;

 private:
  struct PendingComm {
    int32_t size = 0;
    std::map<int32_t, uint32_t> members;  // communicator rank -> global rank
    ParkedOps ops;
  };

  const RealRankPrograms* programs_;
  std::unordered_map<uint64_t, CommDescription> comm_of_hash_;
  std::map<int64_t, uint64_t> hash_of_graph_comm_;
  std::unordered_map<uint64_t, PendingComm> pending_comms_;
  std::map<std::pair<SessionId, uint64_t>, uint64_t> parked_ops_;  // (session, op id) -> comm hash
  std::set<uint64_t> all_real_hashes_;                             // communicators without virtual members
  // Engine communicator -> (real rank, graph communicator) pairs it stands for.
  std::unordered_map<uint32_t, std::vector<std::pair<uint32_t, uint32_t>>> real_views_;
};

}  // namespace prism::daemon

#endif  // PRISM_DAEMON_HYBRID_COMMUNICATOR_BINDING_H_
