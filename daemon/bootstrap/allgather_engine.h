// The ring all-gathers of every communicator (internal header). Loop thread.
//
// Only links between a virtual rank and a real neighbour touch the wire. An
// all-gather's slices are kept once per communicator; on every boundary link
// the slice sent (received) at step s follows from the double-ring formula
// (docs/bootstrap.md), so a link sends step s as soon as that slice is known:
// virtual slices are synthesised (contributions.h), real slices are learnt
// from the wire. This is never later than a true virtual rank would have it,
// so it cannot deadlock; it costs O(n) memory and O(links x n) wire bytes.
//
// Contract: all-gathers of one communicator run one at a time in the order
// queued (QueueOps) or armed reactively when a real rank starts one after
// init (split: 8-byte slices; ring connect: 2-byte slices). When one ends the
// engine hands its result on: ringAllInfo -> real P2P addresses; split ->
// SplitEvents (components.h: the SplitCoordinator above); AG3 ->
// CommTable::Ready. A real rank that sends another
// size or closes a link that still owes steps fails the communicator.
#ifndef PRISM_DAEMON_BOOTSTRAP_ALLGATHER_ENGINE_H_
#define PRISM_DAEMON_BOOTSTRAP_ALLGATHER_ENGINE_H_

#include <string>
#include <vector>

#include "daemon/bootstrap/comm_state.h"
#include "daemon/bootstrap/components.h"
#include "daemon/bootstrap/connection_table.h"

namespace prism::bootstrap {

class AllGatherEngine {
 public:
  explicit AllGatherEngine(Components& c) : c_(c) {}

  // The ring link of virtual rank `v` with its real predecessor
  // (`from_real_prev`) or successor; created on first use.
  RingLink& Link(LiveComm& comm, int32_t v, bool from_real_prev);
  // Queues the init (or split child) operations and arms the first.
  void QueueOps(LiveComm& comm, const std::vector<RingOp>& ops);
  // Arms `kind` now, or after the running one.
  void ArmOrQueue(LiveComm& comm, AgKind kind);
  // Progress on every link of `comm` (new bytes, a known slice, a connection).
  void Pump(LiveComm& comm);
  // A real predecessor connected to virtual rank `v`'s ring listener.
  void AttachRealPrev(LiveComm& comm, int32_t v, Conn& conn);
  // Virtual rank `v` connects to its real successor's ring listener.
  void ConnectNext(LiveComm& comm, int32_t v, const Ipv4Endpoint& real_listener);
  // The real side closed a ring link (`leftover`: unread bytes remained).
  void OnLinkClosed(LiveComm& comm, int32_t v, bool from_real_prev, bool leftover);

 private:
  void Arm(LiveComm& comm, AgKind kind);
  void ArmNextQueued(LiveComm& comm);
  bool TryArmReactive(LiveComm& comm, RingLink& link, Conn& conn);
  void PumpLinkOut(LiveComm& comm, RingLink& l);
  void ParseLinkIn(LiveComm& comm, RingLink& l, Conn& conn);
  void FillVirtualSlices(LiveComm& comm, const Bytes* real_record);
  bool ReadyToFill(LiveComm& comm, int real_slice);
  bool EveryRealSliceKnown(const LiveComm& comm) const;
  void OnSliceReceived(LiveComm& comm, int slice, const uint8_t* data, int32_t from_real);
  bool Complete(const LiveComm& comm) const;
  void Finish(LiveComm& comm);
  void TakeResults(LiveComm& comm);
  void QueueOnLink(RingLink& l, const std::string& bytes);

  Components& c_;
};

}  // namespace prism::bootstrap

#endif  // PRISM_DAEMON_BOOTSTRAP_ALLGATHER_ENGINE_H_
