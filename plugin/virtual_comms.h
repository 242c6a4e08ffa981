// Send and receive comms whose peer is a virtual rank played by prismd. No
// payload travels; receive buffers are filled by PRISM_RECV_FILL.
//
// Completion times are decided locally in test(); no call waits for prismd
// (docs/timing.md; the rules themselves: plugin/arrival.h):
//  - a send completes when the NIC's shared transmit link (NicLinks) has
//    carried it;
//  - a receive that the profiler role tied to an NCCL operation completes by
//    that operation's schedule (OpScheduleBook): MIRROR (symmetric ring
//    collectives: the plugin's own send of the same operation, channel and
//    step plus the link latency, and not before the virtual members arrived)
//    or STREAM (the virtual sender streams from the time prismd's engine says
//    it was ready, at link rate);
//  - an explicit per-message schedule (tests, benchmarks) wins over both;
//  - a MIRROR receive without a schedule is timed by the mirror alone (the
//    virtual members are taken to be on time); a STREAM one waits for its
//    schedule. Waiting for MIRROR schedules too was tried: back-to-back
//    collectives then waited a gRPC round trip each (+9% and +28% on 1 MiB
//    all-gather and reduce-scatter at N=4 on the GPU host), and no step got
//    closer to its ground truth;
//  - a receive tied to no operation is a plain modelled link from its posting.
//
// Zero once: a zero fill of a collective's Simple host buffer writes only
// the bytes the plugin has not zeroed since it last wrote them
// (plugin/zeroed_ranges.h, PRISM_RECV_ZERO_ONCE); every other write of
// this comm into a buffer, and deregMr of a region, forgets its zeros.
//
// Threading: NCCL's one-thread-per-comm rule (comm.h). Requests are pooled,
// kPrismNetMaxRequests per comm; isend/irecv return a NULL request beyond.
#ifndef PRISM_PLUGIN_VIRTUAL_COMMS_H_
#define PRISM_PLUGIN_VIRTUAL_COMMS_H_

#include <array>
#include <deque>
#include <map>
#include <memory>
#include <string>

#include "plugin/arrival.h"
#include "plugin/comm.h"
#include "plugin/daemon_session.h"
#include "plugin/ll_lines.h"
#include "plugin/op_schedules.h"
#include "plugin/zeroed_ranges.h"

namespace prism::plugin {

class VirtualSendComm final : public NetComm {
 public:
  // `link`: the transmit side its sends are timed on, not owned, outlives
  // it: the node's link to a virtual peer on the same node (NicLinks::
  // SameNodeTx); null: NIC `dev`'s.
  VirtualSendComm(const CommEnv& env, std::shared_ptr<DaemonSession> session, uint64_t conn_id, int dev,
                  SharedLink* link = nullptr);
  ~VirtualSendComm() override;
  VirtualSendComm(const VirtualSendComm&) = delete;
  VirtualSendComm& operator=(const VirtualSendComm&) = delete;

  Result Isend(void* data, size_t size, int tag, const MemRegion* mr, const MessageTag& op,
               void** request) override;
  void Close() override;

 private:
  struct SendRequest final : Request {
    VirtualSendComm* owner = nullptr;
    bool in_use = false;
    uint64_t size = 0;
    int64_t done_at = 0;  // wire_done once the link decided it; INT64_MAX before
    // As posted, kept until the link decides its times (Launch).
    uint64_t seq = 0;
    int64_t posted_ns = 0;
    const void* data = nullptr;
    const MemRegion* mr = nullptr;
    MessageTag op;
    Result Test(int* done, int* sizes) override;
  };

  // Proxy thread: completes the posting of every request whose link times
  // are decided, oldest first (Launch).
  void LaunchDecided();
  // Records `req` as sent, leaving the wire at `t.wire_done`, and tells
  // prismd when it completes.
  void Launch(SendRequest* req, const LinkModel::Times& t);

  CommEnv env_;
  std::shared_ptr<DaemonSession> session_;
  std::shared_ptr<ConnState> conn_;
  uint64_t conn_id_;
  LinkConnection link_;
  std::deque<SendRequest*> awaiting_link_;  // posted, times not yet decided (PRISM_LINK_ORDER)
  uint64_t next_seq_ = 0;
  bool closed_ = false;
  std::array<SendRequest, kPrismNetMaxRequests> pool_;
};

// Tells the user, once per process (stderr and NCCL's log, through
// env.told_virtual_broadcast), that a broadcast from comm rank `root`
// reached this rank through a virtual peer: its timing is modelled, but its
// bytes are the fill policy's, not the root's, so a program that checks them
// (DDP's start-up parameter check) stops. Thread-safe.
void NoteBroadcastThroughVirtual(const CommEnv& env, int root);

class VirtualRecvComm final : public NetComm {
 public:
  VirtualRecvComm(const CommEnv& env, std::shared_ptr<DaemonSession> session, uint64_t conn_id,
                  int dev);
  ~VirtualRecvComm() override;
  VirtualRecvComm(const VirtualRecvComm&) = delete;
  VirtualRecvComm& operator=(const VirtualRecvComm&) = delete;

  Result Irecv(int n, void** data, const size_t* sizes, const int* tags,
               const MemRegion* const* mrs, const MessageTag* ops, void** request) override;
  void Close() override;
  void Deregistering(const MemRegion& mr) override;

 private:
  static constexpr int kMaxSlots = 8;
  struct Slot {
    char* data = nullptr;
    uint64_t max_size = 0;
    bool gpu = false;
    int device = -1;           // gpu: MemRegion::device
    bool zero_once = false;    // a zero fill may skip bytes still zero (ZeroOnceFor)
    uint64_t seq = 0;
    MessageTag op;
    LineProtocol protocol = LineProtocol::kSimple;  // LL/LL128: lines with flags
    uint64_t step = 0;         // the connection's absolute step (flags)
    bool bytes_exact = false;  // `bytes` is the message's wire size (MIRROR: my own send's)
    bool resolved = false;     // completion time computed
    // A test() found its operation's schedule missing or held, or (STREAM)
    // the schedule came after the receive's time: the receive waited for
    // prismd (Completed.waited_for_schedule).
    bool waited_for_schedule = false;
    uint64_t bytes = 0;
    int64_t done_at = 0;
  };
  struct RecvRequest final : Request {
    VirtualRecvComm* owner = nullptr;
    bool in_use = false;
    int n = 0;
    int64_t posted_at = 0;
    int64_t waiting_since = 0; // first test() that found a slot unresolvable
    std::array<Slot, kMaxSlots> slots;
    Result Test(int* done, int* sizes) override;
  };
  // How a slot's completion is decided (see the file comment).
  enum class Outcome { kResolved, kWait, kError };
  Outcome Resolve(RecvRequest& req, Slot& slot);
  // The protocol and the connection step of a posted receive.
  void TrackStep(Slot& s, const MemRegion* mr);
  // The buffer of an LL/LL128 receive: lines with zero data and its flags.
  // PRISM_RECV_FILL=own (virtual_comms.cc says what a virtual peer sends).
  static constexpr int64_t kOwnChunkWaitNs = 2'000'000;
  bool FillsOwn(const Slot& slot) const;
  bool OwnChunkPending(const Slot& slot, int64_t now) const;
  bool FillOwnSimple(const Slot& slot);
  bool FillLines(const Slot& slot);
  // The wire bytes of the message the virtual sender puts into an LL/LL128
  // receive (0: unknown, the whole buffer): MIRROR's own send of the step,
  // and for a ring all-reduce at least its longest chunk
  // (RingAllReduceStepWireBound), empty own sends included.
  uint64_t LineMessageBytes(const Slot& slot) const;
  // That bound for a ring all-reduce of known size and ranks; else 0.
  uint64_t RingAllReduceBound(const Slot& slot) const;
  Outcome ResolveExplicit(RecvRequest& req, Slot& slot, const Schedule& s);
  Outcome ResolveMirror(RecvRequest& req, Slot& slot, const std::optional<OpSchedule>& s);
  // PAT's floor (arrival.h, PatFloor) of a PAT receive timed by `in` and the
  // schedule `s` (null: none): prismd's play of the operation as NCCL ran it
  // here (ranks, bytes, channels) on the link of `in`, each hop at the
  // link's latency plus the model's PAT hop cost (PatStepCost of its step
  // cost), from when every member arrived (the schedule's ready time, else
  // this rank's first send, in.own_first_send).
  // 0 (none) when the receive has no dimension or the link no bandwidth.
  // The play is looked up once per operation and link (pat_play_*), not per
  // message.
  Nanoseconds PatFloorOf(const Slot& slot, const ArrivalInput& in, const OpSchedule* s);
  Outcome ResolveStream(RecvRequest& req, Slot& slot, const OpSchedule& s);
  void ResolvePlainLink(RecvRequest& req, Slot& slot);
  uint64_t StreamBytes(const Slot& slot);
  bool Fill(const Slot& slot);
  bool ZeroOnce(const Slot& slot);
  // True when a zero fill of `s` (registered as `mr`) may skip the bytes
  // zeroed_ holds: host or GPU memory, the Simple protocol's own buffer of a
  // collective's connection (registered with that protocol's size; a p2p
  // pool is shared with other comms), the message inside it.
  bool ZeroOnceFor(const Slot& s, const MemRegion* mr) const;
  Result Fail(const std::string& why);
  void WarnWaiting(const RecvRequest& req, const Slot& slot);
  std::string MirrorProgress(const Slot& slot) const;
  // The virtual sender's link: the schedule's where it gives one, else the
  // plugin's link settings, else the NIC's advertised speed and latency.
  VirtualLink LinkOf(const OpSchedule* s) const;
  // An ArrivalInput of `form` for `slot` (its bytes) posted by `req`.
  static ArrivalInput Input(ArrivalForm form, const RecvRequest& req, const Slot& slot, VirtualLink link);
  // Resolves `in` on this connection's link (advancing wire_end_); the done time.
  int64_t Arrive(const ArrivalInput& in);
  // Resolves `in` for an operation's receive on the link its virtual sender
  // shares across the operation's channels (OpScheduleBook) and on this
  // connection's; the done time.
  int64_t ArriveShared(const Slot& slot, const ArrivalInput& in);

  CommEnv env_;
  std::shared_ptr<DaemonSession> session_;
  std::shared_ptr<ConnState> conn_;
  uint64_t conn_id_;
  uint64_t next_seq_ = 0;
  uint64_t next_resolve_seq_ = 0;  // receives resolve in order (links are FIFO)
  // NCCL's step counter of each connection this comm carries (one per
  // channel; several when NCCL shares a net comm between channels).
  std::map<uint8_t, ConnStepCounter> steps_;
  const ProtocolBuffers buffers_ = ProtocolBuffers::FromEnv();  // NCCL's buffer sizes, read once
  Nanoseconds wire_end_;           // the modelled virtual sender's link
  uint64_t stream_op_ = 0;         // operation whose bytes stream_bytes_ counts
  uint64_t stream_bytes_ = 0;
  // The model's W/h of a MIRROR ring (RingStepWireOf), once per operation
  // and link bandwidth, not per message.
  uint64_t step_wire_op_ = 0;
  uint64_t step_wire_bps_ = 0;
  Nanoseconds step_wire_{0};
  // The PAT play of the operation whose receives PatFloorOf times, likewise
  // once per operation, link bandwidth and step latency.
  uint64_t pat_play_op_ = 0;
  uint64_t pat_play_bps_ = 0;
  int64_t pat_play_step_ns_ = -1;
  std::shared_ptr<const PatPlay> pat_play_;
  // The last LL/LL128 receive this comm filled (WarnWaiting names it).
  struct LastFill {
    uint64_t seq = 0;
    int32_t op_step = -1;      // the profiler's step; -1: no fill yet
    uint64_t conn_step = 0;    // the connection's absolute step (flag - 1)
    uint64_t own_bytes = 0;    // the size MIRROR took from this rank's own send
    size_t line_bytes = 0;     // bytes of lines written
  };
  LastFill last_fill_;
  // Host bytes of this comm's buffers that are zero (Zero once, above).
  ZeroedRanges zeroed_;
  bool closed_ = false;
  bool warned_ = false;
  bool warned_waiting_ = false;
  std::array<RecvRequest, kPrismNetMaxRequests> pool_;
};

}  // namespace prism::plugin

#endif  // PRISM_PLUGIN_VIRTUAL_COMMS_H_
