// The live communicators of the current job and the job's lifecycle
// (internal header). Loop thread only.
//
// Contract:
//  * A "job" is one run of the real ranks. StartJob() forgets every
//    communicator and, with a shared NCCL_COMM_ID root, starts the plan's
//    init communicators one at a time (they share the root address);
//    FinishJob() closes every connection and starts the next job.
//  * Create() builds a communicator (endpoints, virtual nodes, ring links
//    through CommStarts, components.h); the caller then starts its root or
//    its split child operations. StartJob() starts a shared root through
//    CommStarts too.
//  * Anything that may finish or fail the job bumps job_gen(): callers that
//    keep references across such calls compare job_gen() before and after.
#ifndef PRISM_DAEMON_BOOTSTRAP_COMM_TABLE_H_
#define PRISM_DAEMON_BOOTSTRAP_COMM_TABLE_H_

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "daemon/bootstrap/comm_state.h"
#include "daemon/bootstrap/components.h"

namespace prism::bootstrap {

class CommTable {
 public:
  explicit CommTable(Components& c) : c_(c) {}

  LiveComm* Find(uint32_t live_id);
  const std::map<uint32_t, std::unique_ptr<LiveComm>>& all() const { return comms_; }
  uint64_t job_gen() const { return job_gen_; }
  bool job_active() const { return job_active_; }

  void StartJob();
  void FinishJob(bool failed, const std::string& why);

  // A communicator of plan entry `plan` with `members` (global ranks in comm
  // rank order). `parent`: the live split parent; nullopt = created by
  // ncclCommInitRank* (then `magic` is the id's magic).
  LiveComm& Create(const PlanComm& plan, std::vector<uint32_t> members, uint64_t hash, uint64_t magic,
                   std::optional<uint32_t> parent);
  // The live communicator of plan entry `plan_id` in this job, if any.
  LiveComm* FindByPlan(uint32_t plan_id);
  void MarkPlanDone(uint32_t plan_id);

  // Init (or split) finished: counts it and moves the init order on.
  void Ready(LiveComm& comm);
  // Destroyed when its real ranks closed every ring link; the job completes
  // when every communicator is done.
  void MaybeDone(LiveComm& comm);
  // A real rank failed mid-protocol: divergence, failure counted, job reset.
  void Fail(LiveComm& comm, const std::string& why);
  // Records progress on `comm` (for stall reports).
  static void Touch(LiveComm& comm);

 private:
  void AdvanceInitOrder();
  void FreeEndpoints(LiveComm& comm);
  void AllocEndpoints(LiveComm& comm, bool init);

  Components& c_;
  std::map<uint32_t, std::unique_ptr<LiveComm>> comms_;
  uint32_t next_live_id_ = 1;
  std::vector<std::optional<uint32_t>> live_of_plan_;  // plan id -> live id
  std::vector<uint8_t> plan_done_;                     // plan id -> initialized/skipped
  uint32_t next_init_plan_ = 0;
  bool job_active_ = false;
  uint64_t job_gen_ = 0;
};

}  // namespace prism::bootstrap

#endif  // PRISM_DAEMON_BOOTSTRAP_COMM_TABLE_H_
