// How the bootstrap server's components reach each other (internal header).
//
// BootstrapServer owns one of each component and this table of pointers;
// every component gets a reference at construction and uses only the other
// components' public methods. All of them run on the bootstrap loop thread.
//
//   ConnectionTable   sockets, endpoints, limits          connection_table.h
//   CommTable         communicators, jobs, init order      comm_table.h
//   RootCheckin       root check-in, root delivery         root_checkin.h
//   AllGatherEngine   ring links and ring all-gathers      allgather_engine.h
//   SplitCoordinator  ncclCommSplit children, COMMSPLIT    comm_split.h
//   P2pMessages       bootstrapSend/Recv with real ranks   p2p_messages.h
//   Reporter          counters, divergences, warnings      reporter.h
#ifndef PRISM_DAEMON_BOOTSTRAP_COMPONENTS_H_
#define PRISM_DAEMON_BOOTSTRAP_COMPONENTS_H_

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
class RootCheckin;
class SplitCoordinator;
class SplitSource;

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
  RootCheckin* root = nullptr;
  AllGatherEngine* allgather = nullptr;
  SplitCoordinator* split = nullptr;
  SplitSource* splits = nullptr;        // where split calls come from (split_source.h)
  P2pMessages* p2p = nullptr;
};

}  // namespace prism::bootstrap

#endif  // PRISM_DAEMON_BOOTSTRAP_COMPONENTS_H_
