// How the bootstrap server's components reach each other (internal header).
//
// BootstrapServer owns one of each component and this table of pointers;
// every component gets a reference at construction and uses only the public
// methods of the components below it, in this order from the bottom up:
//
//   Reporter          counters, divergences, warnings      reporter.h
//   ConnectionTable   sockets, endpoints, limits          connection_table.h
//   CommTable         communicators, jobs, init order      comm_table.h
//   AllGatherEngine   ring links and ring all-gathers      allgather_engine.h
//   RootCheckin       root check-in, root delivery         root_checkin.h
//   P2pMessages       bootstrapSend/Recv with real ranks   p2p_messages.h
//   SplitCoordinator  ncclCommSplit children, COMMSPLIT    comm_split.h
//
// A component tells one above it what happened through the small interfaces
// below (CommStarts, SplitEvents), never by a call up: the server implements
// them and forwards each call to the component that owns the work, so no
// component includes the header of one above it. All of them run on the
// bootstrap loop thread.
#ifndef PRISM_DAEMON_BOOTSTRAP_COMPONENTS_H_
#define PRISM_DAEMON_BOOTSTRAP_COMPONENTS_H_

#include <cstdint>

#include "daemon/bootstrap/bootstrap_plan.h"
#include "daemon/bootstrap/bootstrap_service.h"
#include "daemon/net/event_loop.h"
#include "daemon/bootstrap/nccl_ids.h"
#include "daemon/bootstrap/virtual_connections.h"
#include "daemon/bootstrap/wire_profile.h"

namespace prism::bootstrap {

class AllGatherEngine;
class CommTable;
class ConnectionTable;
class P2pMessages;
class Reporter;
class SplitSource;
struct LiveComm;
struct PendingMsg;

// What CommTable needs done when a job or a communicator starts; the work
// belongs to RootCheckin and AllGatherEngine (above it). Loop thread only.
class CommStarts {
 public:
  virtual ~CommStarts() = default;
  // A new job starts: the legacy shared root of the last job is forgotten.
  virtual void ForgetSharedRoot() = 0;
  // Starts the root phase of `comm` (RootCheckin::Start).
  virtual void StartRoot(LiveComm& comm) = 0;
  // Creates the ring link of virtual rank `v` with its real predecessor
  // (`from_real_prev`) or successor (AllGatherEngine::Link).
  virtual void LinkVirtualNeighbour(LiveComm& comm, int32_t v, bool from_real_prev) = 0;
};

// What AllGatherEngine and P2pMessages report about a split; the work
// belongs to SplitCoordinator (above both). Loop thread only.
class SplitEvents {
 public:
  virtual ~SplitEvents() = default;
  // The parent's split all-gather (its slices still in parent.ag) ended.
  virtual void OnSplitGathered(LiveComm& parent) = 0;
  // The split all-gather's state is gone: COMMSPLIT messages that came early
  // are routed now.
  virtual void ReplayEarlyMessages(LiveComm& parent) = 0;
  // A COMMSPLIT bootstrap message from a real parent rank to a virtual one.
  virtual void OnSplitMessage(LiveComm& parent, const PendingMsg& m) = 0;
};

struct Components {
  const BootstrapConfig* config = nullptr;
  const BootstrapPlan* plan = nullptr;
  const WireProfile* profile = nullptr;   // set by Start()
  UniqueId shared_id{};                   // the NCCL_COMM_ID id (legacy shared root)
  Ipv4Endpoint shared_root;               // its address
  daemon::VirtualConnectionBroker* broker = nullptr;  // may be null
  net::EventLoop* loop = nullptr;
  Reporter* reporter = nullptr;
  ConnectionTable* conns = nullptr;
  CommTable* comms = nullptr;
  AllGatherEngine* allgather = nullptr;
  SplitSource* splits = nullptr;        // where split calls come from (split_source.h)
  P2pMessages* p2p = nullptr;
  CommStarts* starts = nullptr;        // for CommTable
  SplitEvents* split_events = nullptr;  // for AllGatherEngine, P2pMessages
};

}  // namespace prism::bootstrap

#endif  // PRISM_DAEMON_BOOTSTRAP_COMPONENTS_H_
