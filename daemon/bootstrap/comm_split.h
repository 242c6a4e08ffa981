// ncclCommSplit of a live communicator (internal header). Loop thread only.
//
// Contract: when a parent's split all-gather ends, prismd computes the
// children as NCCL does (color, then key, then parent rank), compares them
// with the plan's next split call (a divergence if different; NCCL's result
// wins), creates every child with a real and a virtual member, sends
// COMMSPLIT from virtual ranks with a real child predecessor, and connects
// virtual ranks to the ring listener their real child successor sends.
// COMMSPLIT messages that arrive before prismd finished the split are kept
// and routed once it has (ReplayEarlyMessages).
#ifndef PRISM_DAEMON_BOOTSTRAP_COMM_SPLIT_H_
#define PRISM_DAEMON_BOOTSTRAP_COMM_SPLIT_H_

#include "daemon/bootstrap/comm_state.h"
#include "daemon/bootstrap/components.h"

namespace prism::bootstrap {

class SplitCoordinator {
 public:
  explicit SplitCoordinator(Components& c) : c_(c) {}

  // The parent's split all-gather (its slices still in parent.ag) ended.
  void OnSplitGathered(LiveComm& parent);
  // A COMMSPLIT bootstrap message from a real parent rank to a virtual one.
  void OnSplitMessage(LiveComm& parent, const PendingMsg& m);
  // Routes COMMSPLIT messages that came before the split ended.
  void ReplayEarlyMessages(LiveComm& parent);

 private:
  Components& c_;
};

}  // namespace prism::bootstrap

#endif  // PRISM_DAEMON_BOOTSTRAP_COMM_SPLIT_H_
