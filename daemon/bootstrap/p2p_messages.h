// Point-to-point bootstrap messages between real and virtual ranks
// (bootstrapSend/bootstrapRecv, docs/bootstrap.md) (internal header).
// Loop thread only.
//
// Contract:
//  * OnInput parses one message per connection (NCCL closes after sending)
//    and dispatches by tag: P2pSetup (tag (i<<8)|g) is answered per wire
//    notes 4.2 with handles from the VirtualConnectionBroker; its closing
//    sync (bit 7) with one empty reply; a global barrier (0xbeef) with every
//    virtual partner's message on the first message of each barrier;
//    COMMSPLIT goes to SplitEvents (components.h: the SplitCoordinator
//    above); anything else is a divergence,
//    never answered.
//  * SendToReal opens one connection per message (NCCL's bootstrapSend),
//    writes {ack len 8, from, tag, len, payload} and closes it.
#ifndef PRISM_DAEMON_BOOTSTRAP_P2P_MESSAGES_H_
#define PRISM_DAEMON_BOOTSTRAP_P2P_MESSAGES_H_

#include "daemon/bootstrap/comm_state.h"
#include "daemon/bootstrap/components.h"
#include "daemon/bootstrap/connection_table.h"

namespace prism::bootstrap {

class P2pMessages {
 public:
  explicit P2pMessages(Components& c) : c_(c) {}

  // Input on a bootstrapSend connection from a real rank (role kP2pIn).
  void OnInput(Conn& conn);
  // bootstrapSend from virtual `from` to real `to` of `comm`.
  void SendToReal(LiveComm& comm, int32_t from, int32_t to, int32_t tag, const Bytes& payload);

 private:
  void Dispatch(LiveComm& comm, const PendingMsg& m);
  void OnP2pSetup(LiveComm& comm, const PendingMsg& m);
  void OnBarrier(LiveComm& comm, const PendingMsg& m);
  void ConnectVirtualSender(LiveComm& comm, RealListenHandle handle, daemon::VirtualLinkInfo link, int attempt);

  Components& c_;
};

}  // namespace prism::bootstrap

#endif  // PRISM_DAEMON_BOOTSTRAP_P2P_MESSAGES_H_
