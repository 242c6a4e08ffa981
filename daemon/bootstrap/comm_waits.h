// What a communicator of the bootstrap server still waits for, in words the
// watchdog logs and /status shows (WaitReport, bootstrap_service.h): never a
// silent wait. Pure functions of a communicator's state; loop thread (they
// read it).
#ifndef PRISM_DAEMON_BOOTSTRAP_COMM_WAITS_H_
#define PRISM_DAEMON_BOOTSTRAP_COMM_WAITS_H_

#include <optional>

#include "daemon/bootstrap/bootstrap_service.h"
#include "daemon/bootstrap/comm_state.h"

namespace prism::bootstrap {

// A communicator in its root phase: who has not checked in, or whose root
// has not answered. Nothing when its root's work is over.
std::optional<WaitReport> RootWait(const LiveComm& comm);

// A communicator in a ring all-gather: which real neighbours owe data.
// Nothing when none does.
std::optional<WaitReport> AllGatherWait(const LiveComm& comm);

}  // namespace prism::bootstrap

#endif  // PRISM_DAEMON_BOOTSTRAP_COMM_WAITS_H_
