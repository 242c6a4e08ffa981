// Root check-in of communicators created by ncclCommInitRank* (internal
// header). Loop thread only.
//
// Three ways a communicator's root is played (comm_state.h RootHost):
//  * kRealRank: a real comm rank 0 hosts the root at the id's address; every
//    virtual rank checks in there as a client (at most
//    max_concurrent_checkins connections at once) and then accepts the
//    root's delivery of its successor's ring address on its root endpoint;
//  * kDaemonShared: prismd hosts the root on the NCCL_COMM_ID listener (one
//    init at a time, the plan's order);
//  * kDaemonOwn: prismd hosts the root on an endpoint of this communicator
//    (ids minted by prismd, one root per communicator, any number at once).
// When prismd hosts the root it collects the real ranks' check-ins and,
// once every real rank checked in, delivers to each its successor's ring
// address and connects virtual ranks to their real successors.
// Check-ins are accepted only from ranks the plan says are real, of the
// right size, once per rank; anything else is a divergence, never a dial to
// an address the peer policy refuses. At a root prismd minted (kDaemonOwn)
// a check-in that does not fit the graph communicator is refused at once
// (its NCCL init fails) and the mismatch is kept for the waiting report.
#ifndef PRISM_DAEMON_BOOTSTRAP_ROOT_CHECKIN_H_
#define PRISM_DAEMON_BOOTSTRAP_ROOT_CHECKIN_H_

#include <optional>

#include "daemon/bootstrap/comm_state.h"
#include "daemon/bootstrap/components.h"
#include "daemon/bootstrap/connection_table.h"

namespace prism::bootstrap {

class RootCheckin {
 public:
  explicit RootCheckin(Components& c) : c_(c) {}

  // Starts the root phase of `comm` (root fields set by the creator) and
  // queues its init all-gathers.
  void Start(LiveComm& comm);
  // A new job: no communicator uses the shared root.
  void Reset() { shared_root_comm_.reset(); }
  // Input on a check-in accepted on a prismd-hosted root (role kRootIn).
  void OnCheckin(Conn& conn);
  // Input on a real root's delivery to a virtual rank (role kRootDeliveryIn).
  void OnDelivery(Conn& conn);
  // A virtual rank's check-in connection to a real root closed.
  void OnCheckinClosed(LiveComm& comm);

 private:
  void PumpCheckins(LiveComm& comm);
  bool TakeCheckinHeader(Conn& conn);
  LiveComm* CommOfCheckin(const Conn& conn);
  void RefuseOtherVersion(Conn& conn, int32_t len);
  void RefuseMismatch(LiveComm& comm, const Bytes& ext, const std::string& why);
  void Deliver(LiveComm& comm);

  Components& c_;
  std::optional<uint32_t> shared_root_comm_;  // live id using the NCCL_COMM_ID root
};

}  // namespace prism::bootstrap

#endif  // PRISM_DAEMON_BOOTSTRAP_ROOT_CHECKIN_H_
