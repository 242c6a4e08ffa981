#include "plugin/virtual_comms.h"

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "plugin/arrival.h"
#include "plugin/clock.h"
#include "plugin/modelled_link.h"
#include "plugin/ring_loops.h"

namespace prism::plugin {
namespace {

// A STREAM-kind receive that has waited this long for its schedule is
// reported once (prismd's engine may be behind, or the graph lacks the op).
constexpr int64_t kWaitWarnNs = 2'000'000'000;

// Tells prismd that a virtual connection opened or closed (batched by the session).
void EmitConnEvent(DaemonSession& session, SessionEvent::Kind kind, uint64_t conn_id, bool is_send, int dev) {
  SessionEvent e;
  e.kind = kind;
  e.is_send = is_send;
  e.dev = dev;
  e.id = conn_id;
  e.at_ns = WallNowNs();
  session.Emit(e);
}

SessionEvent MessageEvent(SessionEvent::Kind kind, uint64_t conn_id, uint64_t seq, uint64_t bytes, int64_t at,
                          const MessageTag& op) {
  SessionEvent e;
  e.kind = kind;
  e.id = conn_id;
  e.seq = seq;
  e.bytes = bytes;
  e.at_ns = at;
  if (op.valid()) {
    e.op_id = op.op->info().id;
    e.channel = op.channel;
    e.step = op.step;
  }
  return e;
}

}  // namespace

// ---- send ----

VirtualSendComm::VirtualSendComm(const CommEnv& env, std::shared_ptr<DaemonSession> session,
                                 uint64_t conn_id, int dev, SharedLink* link)
    : env_(env),
      session_(std::move(session)),
      conn_(session_->Conn(conn_id)),
      conn_id_(conn_id),
      link_(link != nullptr ? link : &env.nics->Tx(dev), /*whole_messages=*/false) {
  for (SendRequest& r : pool_) r.owner = this;
  EmitConnEvent(*session_, SessionEvent::kConnOpened, conn_id, /*is_send=*/true, dev);
}

VirtualSendComm::~VirtualSendComm() { Close(); }

void VirtualSendComm::Close() {
  if (closed_) return;
  closed_ = true;
  EmitConnEvent(*session_, SessionEvent::kConnClosed, conn_id_, /*is_send=*/true, 0);
}

Result VirtualSendComm::Isend(void* data, size_t size, int tag, const MemRegion* mr, const MessageTag& op,
                              void** request) {
  *request = nullptr;
  std::string why;
  if (!session_->Healthy(false, &why)) {
    PRISM_WARN(*env_.logger, "send on virtual connection %llx: %s",
               static_cast<unsigned long long>(conn_id_), why.c_str());
    return prism_ncclRemoteError;
  }
  SendRequest* req = nullptr;
  for (SendRequest& r : pool_) {
    if (!r.in_use) {
      req = &r;
      break;
    }
  }
  if (req == nullptr) return prism_ncclSuccess;
  req->in_use = true;
  req->size = size;
  req->done_at = INT64_MAX;
  req->seq = next_seq_++;
  req->posted_ns = WallNowNs();
  req->data = data;
  req->mr = mr;
  req->op = op;
  SessionEvent e = MessageEvent(SessionEvent::kPosted, conn_id_, req->seq, size, req->posted_ns, op);
  e.tag = tag;
  session_->Emit(e);
  *request = req;
  if (const std::optional<LinkModel::Times> t = link_.Post(Bytes(size), Nanoseconds(req->posted_ns))) {
    Launch(req, *t);  // decided at once (nothing of this comm's awaits before it)
    return prism_ncclSuccess;
  }
  awaiting_link_.push_back(req);
  LaunchDecided();
  return prism_ncclSuccess;
}

void VirtualSendComm::LaunchDecided() {
  while (!awaiting_link_.empty()) {
    const std::optional<LinkModel::Times> t = link_.NextDecided(Nanoseconds(WallNowNs()));
    if (!t) return;
    SendRequest* req = awaiting_link_.front();
    awaiting_link_.pop_front();
    Launch(req, *t);
  }
}

void VirtualSendComm::Launch(SendRequest* req, const LinkModel::Times& t) {
  const int64_t wire_done = t.wire_done.count();  // CLOCK_REALTIME ns, as every stamp on the wire
  req->done_at = wire_done;
  conn_->RecordSent(req->seq, wire_done);
  RecordOwnSend(env_, req->op, req->mr, req->data, req->size, req->posted_ns, wire_done);
  // The completion time is known now: report it at once.
  session_->Emit(MessageEvent(SessionEvent::kCompleted, conn_id_, req->seq, req->size, wire_done, req->op));
}

Result VirtualSendComm::SendRequest::Test(int* done, int* sizes) {
  *done = 0;
  if (done_at == INT64_MAX) owner->LaunchDecided();
  if (WallNowNs() < done_at) return prism_ncclSuccess;
  *done = 1;
  if (sizes != nullptr) sizes[0] = static_cast<int>(size);
  in_use = false;
  return prism_ncclSuccess;
}

// ---- receive ----

VirtualRecvComm::VirtualRecvComm(const CommEnv& env, std::shared_ptr<DaemonSession> session,
                                 uint64_t conn_id, int dev)
    : env_(env), session_(std::move(session)), conn_(session_->Conn(conn_id)), conn_id_(conn_id) {
  for (RecvRequest& r : pool_) r.owner = this;
  EmitConnEvent(*session_, SessionEvent::kConnOpened, conn_id, /*is_send=*/false, dev);
}

VirtualRecvComm::~VirtualRecvComm() { Close(); }

void VirtualRecvComm::Close() {
  if (closed_) return;
  closed_ = true;
  EmitConnEvent(*session_, SessionEvent::kConnClosed, conn_id_, /*is_send=*/false, 0);
  session_->ForgetConn(conn_id_);
}

void VirtualRecvComm::Deregistering(const MemRegion& mr) {
  zeroed_.Written(static_cast<const char*>(mr.base), mr.size);
}

bool VirtualRecvComm::ZeroOnceFor(const Slot& s, const MemRegion* mr) const {
  if (!env_.settings->recv_zero_once || mr == nullptr) return false;
  if (s.protocol != LineProtocol::kSimple || mr->size != buffers_.simple || !s.op.valid()) return false;
  const OpKind kind = s.op.op->info().kind;
  if (kind == OpKind::kSend || kind == OpKind::kRecv) return false;
  const uintptr_t base = reinterpret_cast<uintptr_t>(mr->base), data = reinterpret_cast<uintptr_t>(s.data);
  return data >= base && s.max_size <= mr->size && data - base <= mr->size - s.max_size;
}

Result VirtualRecvComm::Fail(const std::string& why) {
  if (!warned_) {
    PRISM_WARN(*env_.logger, "receive on virtual connection %llx: %s",
               static_cast<unsigned long long>(conn_id_), why.c_str());
  }
  warned_ = true;
  return prism_ncclRemoteError;
}

Result VirtualRecvComm::Irecv(int n, void** data, const size_t* sizes, const int* tags,
                              const MemRegion* const* mrs, const MessageTag* ops, void** request) {
  *request = nullptr;
  if (n < 1 || n > kMaxSlots) {
    PRISM_WARN(*env_.logger, "irecv of %d buffers on a virtual connection (1..%d)", n, kMaxSlots);
    return prism_ncclInvalidArgument;
  }
  std::string why;
  if (!session_->Healthy(false, &why)) return Fail(why);
  RecvRequest* req = nullptr;
  for (RecvRequest& r : pool_) {
    if (!r.in_use) {
      req = &r;
      break;
    }
  }
  if (req == nullptr) return prism_ncclSuccess;
  req->in_use = true;
  req->n = n;
  req->posted_at = WallNowNs();
  req->waiting_since = 0;
  for (int i = 0; i < n; ++i) {
    Slot& s = req->slots[i];
    s = Slot{};
    s.data = static_cast<char*>(data[i]);
    s.max_size = sizes[i];
    s.gpu = mrs != nullptr && mrs[i] != nullptr && mrs[i]->on_gpu();
    s.device = s.gpu ? mrs[i]->device : -1;
    s.seq = next_seq_++;
    if (ops != nullptr) s.op = ops[i];
    TrackStep(s, mrs != nullptr ? mrs[i] : nullptr);
    s.zero_once = ZeroOnceFor(s, mrs != nullptr ? mrs[i] : nullptr);
    SessionEvent e = MessageEvent(SessionEvent::kPosted, conn_id_, s.seq, sizes[i], req->posted_at, s.op);
    e.tag = tags != nullptr ? tags[i] : 0;
    session_->Emit(e);
  }
  *request = req;
  return prism_ncclSuccess;
}

void NoteBroadcastThroughVirtual(const CommEnv& env, int root) {
  std::atomic<bool>* told = env.told_virtual_broadcast;
  if (told == nullptr || told->load(std::memory_order_relaxed) || told->exchange(true)) return;
  const std::string root_name = root >= 0 ? "rank " + std::to_string(root) : "its root";
  const std::string text =
      "a broadcast from " + root_name + " of its communicator reached this rank through a virtual peer: its "
      "timing is modelled, but its bytes are not " + root_name + "'s (PRISM_RECV_FILL: the plugin does not "
      "read GPU memory). A program that checks what it received may stop; DistributedDataParallel's "
      "start-up parameter check does. Run the broadcast's root as the real rank (for DDP: rank 0; "
      "docs/limitations.md).";
  PRISM_WARN(*env.logger, "%s", text.c_str());
  std::fprintf(stderr, "NET/Prism: %s\n", text.c_str());
}

// LL/LL128 receives carry flags of the connection's step (ll_lines.h). The
// profiler role names the protocol; without it, the registered buffer does.
// A Simple p2p receive lands in a shared pool: its address says nothing.
void VirtualRecvComm::TrackStep(Slot& s, const MemRegion* mr) {
  s.protocol = ReceiveProtocol(s.op, mr, buffers_);
  if (s.op.valid()) {
    const OpInfo& info = s.op.op->info();
    if (info.kind == OpKind::kBroadcast) NoteBroadcastThroughVirtual(env_, info.root);
    const bool p2p = info.kind == OpKind::kSend || info.kind == OpKind::kRecv;
    const int slot = mr != nullptr && (s.protocol != LineProtocol::kSimple || !p2p)
                         ? StepSlotOf(mr->base, mr->size, s.data)
                         : -1;
    s.step = steps_[s.op.channel].StepOf(info.id, s.op.step, slot);
    return;
  }
  if (mr == nullptr) return;
  const int slot = buffers_.IsProtocolBuffer(mr->size) ? StepSlotOf(mr->base, mr->size, s.data) : -1;
  s.step = steps_[0].StepOf(0, 0, slot);
}

// PRISM_RECV_FILL=own: a virtual peer of an all-gather sends what this rank
// sends (homogeneous ranks). In a ring each rank's message of a step is its
// predecessor's of that step, so with equal chunks everywhere it equals this
// rank's own send of the same channel and step; elsewhere (PAT) it is this
// rank's own chunk, repeated over the message's first kKeptPayloadBytes.
// Larger ring messages (above what OpRecord keeps) get zeros, written before
// their arrival as under PRISM_RECV_FILL=zeros: a copy at arrival would sit
// on the ring's critical path. Other collectives, a broadcast from a virtual
// root included, get zeros: this rank's own copy of that data is in its GPU
// buffer, which the plugin does not read (reading it from NCCL's proxy
// thread while the broadcast's kernel ran hung a rank on the GPU host).
bool VirtualRecvComm::FillsOwn(const Slot& slot) const {
  if (env_.settings->recv_fill != RecvFill::kOwn || !slot.op.valid()) return false;
  const OpInfo& info = slot.op.op->info();
  if (info.kind != OpKind::kAllGather) return false;
  return !info.mirror_kind() || slot.bytes <= OpRecord::kKeptPayloadBytes;
}

// An all-gather outside a ring (PAT) takes this rank's own chunk from its
// first send: wait for that send a little (every rank sends its own chunk
// first), but never long: 2 ms past the message's arrival, then zeros. Once
// this rank has sent anything in the operation there is nothing to wait
// for: its chunk was kept then, or never will be (GPU memory). (A PAT
// receive mirrors an own send, so it never waits; waiting for a chunk that
// was never kept held every PAT all-gather receive of more than 4 KiB 2 ms
// past its arrival: +542% at 1 MiB on the GPU host, 2026-12-02.)
bool VirtualRecvComm::OwnChunkPending(const Slot& slot, int64_t now) const {
  if (!FillsOwn(slot) || slot.protocol != LineProtocol::kSimple) return false;
  if (slot.op.op->info().mirror_kind()) return false;  // a ring takes its own send of the step
  const OpRecord& op = *slot.op.op;
  return !op.HasOwnChunk() && op.FirstSendPostedNs() == 0 && now < slot.done_at + kOwnChunkWaitNs;
}

// A ring all-reduce's predecessor may send a longer chunk than this rank's
// own send of the step (ll_lines.h, RingAllReduceStepWireBound): lines its
// kernel reads that nobody wrote leave it polling for ever (what stalled
// TorchTitan's first step at 8 ranks on the GPU host on 2026-12-02, by the
// reading of that run's one warning), so the bound wins, also over an
// empty own send: the kernel reads no more than the bound from any step
// (NCCL v2.28.9-1 prims_ll.h / prims_ll128.h read divUp(nelem, per line)
// lines, none for nelem <= 0). Filling the whole 64 KiB LL step there cost
// 6 us per step on the proxy thread, 100 ms per 4-byte all-reduce over
// 8192 ranks (bench/ll_fill_bench.cc, 2026-12-02). Every other ring
// collective's chunks are equal on every rank in a step; where the bound
// is unknown (no op, its size or ranks unknown) an empty own send (0)
// still means the whole buffer.
uint64_t VirtualRecvComm::LineMessageBytes(const Slot& slot) const {
  if (!slot.bytes_exact) return 0;  // STREAM sizes are payload shares, not wire bytes
  const uint64_t bound = RingAllReduceBound(slot);
  if (bound > 0) return std::max(slot.bytes, bound);
  return slot.bytes;  // 0: the whole buffer
}

// The wire bound of a ring all-reduce's step under LL/LL128 when the
// operation's size and ranks are known; 0 otherwise.
uint64_t VirtualRecvComm::RingAllReduceBound(const Slot& slot) const {
  if (!slot.op.valid()) return 0;
  const OpInfo& info = slot.op.op->info();
  if (info.kind != OpKind::kAllReduce || !info.mirror_kind()) return 0;
  if (info.bytes == 0 || info.comm_size < 2) return 0;
  return RingAllReduceStepWireBound(slot.protocol, info.bytes, info.comm_size);
}

bool VirtualRecvComm::FillLines(const Slot& slot) {
  // The lines the virtual sender sends (the message's size, in whole lines;
  // the kernel reads as many as its data needs), else the whole buffer NCCL
  // gave. Writing a whole LL128 slot (600 KiB) per step would cost more than
  // the message's time on the link.
  const size_t line = slot.protocol == LineProtocol::kLL ? kLlLineBytes : kLl128LineBytes;
  const size_t bytes = LineFillBytes(LineMessageBytes(slot), slot.max_size, line);
  last_fill_ = LastFill{slot.seq, slot.op.valid() ? slot.op.step : 0, slot.step, slot.bytes, bytes};
  std::vector<char> host;
  char* dst = slot.data;
  zeroed_.Written(slot.data, bytes);
  if (slot.gpu) {
    host.resize(bytes);
    dst = host.data();
  }
  const bool ll = slot.protocol == LineProtocol::kLL;
  // PRISM_RECV_FILL=own: this rank's own lines of the step first, with this
  // connection's flags; zero-data lines for the rest.
  size_t copied = 0;
  if (FillsOwn(slot) && slot.op.op->info().mirror_kind())
    copied = slot.op.op->CopySendPayload(slot.op.channel, slot.op.step, dst, bytes) / line * line;
  (ll ? SetLlFlags : SetLl128Flags)(dst, copied, slot.step);
  (ll ? WriteLlLines : WriteLl128Lines)(dst + copied, bytes - copied, slot.step);
  std::string why;
  return !slot.gpu || env_.cuda->Copy(slot.data, host.data(), bytes, slot.device, &why);
}

// Simple, PRISM_RECV_FILL=own, an all-gather (FillsOwn), at arrival: a ring
// receive gets this rank's own send of the step; any other (PAT) repeats
// this rank's own chunk over the message. Zeros when this rank has not sent
// yet (or its sends were too large to keep).
bool VirtualRecvComm::FillOwnSimple(const Slot& slot) {
  if (slot.bytes == 0) return true;
  std::vector<char> host(std::min<uint64_t>(slot.bytes, OpRecord::kKeptPayloadBytes), 0);
  std::vector<char> own;
  if (slot.op.op->info().mirror_kind()) {
    slot.op.op->CopySendPayload(slot.op.channel, slot.op.step, host.data(), host.size());
  } else if (slot.op.op->OwnChunk(&own) && !own.empty()) {
    for (size_t off = 0; off < host.size(); off += own.size())
      std::memcpy(host.data() + off, own.data(), std::min(own.size(), host.size() - off));
  }
  std::string why;
  zeroed_.Written(slot.data, host.size());
  if (!slot.gpu) {
    std::memcpy(slot.data, host.data(), host.size());
    return true;
  }
  return env_.cuda->Copy(slot.data, host.data(), host.size(), slot.device, &why);
}

// A zero fill of a buffer only this comm writes (Slot::zero_once): only the
// bytes not zeroed since the plugin last wrote them; GPU memory gap by gap.
bool VirtualRecvComm::ZeroOnce(const Slot& slot) {
  if (!slot.gpu) {
    zeroed_.Zero(slot.data, slot.bytes);
    return true;
  }
  std::string why;
  for (const auto& [offset, length] : zeroed_.Gaps(slot.data, slot.bytes)) {
    if (!env_.cuda->Memset(slot.data + offset, 0, length, slot.device, &why)) return false;
  }
  zeroed_.Remember(slot.data, slot.bytes);
  return true;
}

bool VirtualRecvComm::Fill(const Slot& slot) {
  if (slot.protocol != LineProtocol::kSimple) return true;  // lines at completion (Test)
  if (FillsOwn(slot)) return true;                          // at completion too (Test): own sends come first
  const RecvFill policy = env_.settings->recv_fill;
  if (policy == RecvFill::kNone || slot.bytes == 0) return true;
  std::string why;
  if (policy == RecvFill::kZeros || policy == RecvFill::kOwn) {
    if (slot.zero_once) return ZeroOnce(slot);
    if (!slot.gpu) {
      std::memset(slot.data, 0, slot.bytes);
      return true;
    }
    return env_.cuda->Memset(slot.data, 0, slot.bytes, slot.device, &why);
  }
  // Pattern: byte k of receive seq is (seq * 31 + k) mod 256.
  std::vector<char> host;
  char* dst = slot.data;
  zeroed_.Written(slot.data, slot.bytes);
  if (slot.gpu) {
    host.resize(slot.bytes);
    dst = host.data();
  }
  for (uint64_t k = 0; k < slot.bytes; ++k) dst[k] = static_cast<char>((slot.seq * 31 + k) & 0xff);
  return !slot.gpu || env_.cuda->Copy(slot.data, host.data(), slot.bytes, slot.device, &why);
}

VirtualLink VirtualRecvComm::LinkOf(const OpSchedule* s) const { return ModelledLink(*env_.settings, s); }

// One receive timed by `in` on this connection's modelled link.
int64_t VirtualRecvComm::Arrive(const ArrivalInput& in) {
  const Arrival a = ResolveArrival(in, wire_end_);
  wire_end_ = a.wire_end;
  return a.done.count();
}

// One receive of an operation, on the virtual sender's link that all the
// operation's channels share.
int64_t VirtualRecvComm::ArriveShared(const Slot& slot, const ArrivalInput& in) {
  return env_.schedules->ResolveOnSenderLink(OpKey::Of(slot.op.op->info()), in, &wire_end_).done.count();
}

ArrivalInput VirtualRecvComm::Input(ArrivalForm form, const RecvRequest& req, const Slot& slot,
                                    VirtualLink link) {
  ArrivalInput in;
  in.form = form;
  in.posted = Nanoseconds(req.posted_at);
  in.bytes = Bytes(slot.bytes);
  in.link = link;
  return in;
}

// An explicit per-message schedule (ReceiveSchedule): tests and benchmarks.
VirtualRecvComm::Outcome VirtualRecvComm::ResolveExplicit(RecvRequest& req, Slot& slot, const Schedule& s) {
  int64_t at = s.earliest_ns;
  if (s.has_after_send) {
    int64_t sent = 0;
    std::shared_ptr<ConnState> other = s.after_send_conn == conn_id_ ? conn_ : session_->Conn(s.after_send_conn);
    if (!other->SentAt(s.after_send_seq, &sent)) return Outcome::kWait;  // that send is not out yet
    at = std::max(at, sent + s.delay_ns);
  }
  slot.bytes = s.bytes > 0 ? s.bytes : slot.max_size;
  if (s.link_bits_per_second > 0 || s.link_latency_ns > 0) {  // and not before its own link delivers it
    const VirtualLink link{BitsPerSecond(s.link_bits_per_second), Nanoseconds(s.link_latency_ns)};
    at = std::max(at, Arrive(Input(ArrivalForm::kPlainLink, req, slot, link)));
  }
  slot.done_at = at;
  return Outcome::kResolved;
}

// Symmetric ring collective: my predecessor's i-th send on this channel is
// timed like my own i-th send on this channel (docs/design.md, "Virtual ranks are on time").
VirtualRecvComm::Outcome VirtualRecvComm::ResolveMirror(RecvRequest& req, Slot& slot,
                                                        const std::optional<OpSchedule>& s) {
  int64_t sent = 0;
  uint64_t bytes = 0;
  if (!MirrorSendOf(slot.op, &sent, &bytes)) return Outcome::kWait;
  const OpSchedule* sched = s ? &*s : nullptr;
  slot.bytes = std::min<uint64_t>(bytes, slot.max_size);
  slot.bytes_exact = true;
  const ArrivalForm form = slot.op.op->info().pat_kind() ? ArrivalForm::kPatMirror : ArrivalForm::kMirror;
  ArrivalInput in = Input(form, req, slot, LinkOf(sched));
  in.ready = Nanoseconds(sched != nullptr ? sched->ready_ns : 0);  // the virtual members arrived only then
  in.own_send_done = Nanoseconds(sent);
  // The ring's lockstep (arrival.h): it starts once every member arrived,
  // the virtual ones at the schedule's ready time (on time without one),
  // and each step costs them the link latency plus NCCL's step cost (the
  // schedule's, else what prismd's Welcome said) and the model's wire time
  // of a step, W/h (the op's bytes on the link). PAT has its own chain
  // (PatFloorOf).
  if (form == ArrivalForm::kPatMirror) in.own_first_send = Nanoseconds(slot.op.op->FirstSendPostedNs());
  if (env_.settings->ring_lockstep && form == ArrivalForm::kPatMirror) in.pat_floor = PatFloorOf(slot, in, sched);
  if (env_.settings->ring_lockstep && form == ArrivalForm::kMirror) {
    const OpRecord& op = *slot.op.op;
    in.ring_start = Max(in.ready, Nanoseconds(op.FirstSendPostedNs()));
    in.ring_step = RingStepOfMessage(op.info().protocol == LineProtocol::kSimple,
                                     static_cast<uint32_t>(std::max(0, slot.op.step)));
    in.step_cost = sched != nullptr ? Nanoseconds(sched->step_cost_ns) : env_.schedules->ring_step_cost();
    const uint64_t bps = static_cast<uint64_t>(in.link.bandwidth.count());
    if (step_wire_op_ != op.info().id || step_wire_bps_ != bps) {
      step_wire_op_ = op.info().id, step_wire_bps_ = bps;
      const bool all_reduce = op.info().kind == OpKind::kAllReduce;
      const uint64_t n = static_cast<uint64_t>(std::max(1, op.info().comm_size));
      step_wire_ = RingStepWireOf(all_reduce, op.info().bytes, n, in.link.bandwidth);
      // A Simple ring NCCL runs in several loops takes loops x the model's
      // steps, each 1/loops of its wire (ring_loops.h); LL and LL128 as before.
      if (op.info().protocol == LineProtocol::kSimple) {
        const uint64_t loops = RingLoopsOf(all_reduce, op.info().bytes, n,
                                           static_cast<uint64_t>(std::max<int>(1, op.info().channels)),
                                           kRingSlicesPerSimpleStep, bytes);
        step_wire_ = Nanoseconds(step_wire_.count() / static_cast<int64_t>(loops));
      }
    }
    in.step_wire = step_wire_;
    if (env_.settings->ring_floor_end)
      in.ring_floor_from = RingLastStep(op.info().kind == OpKind::kAllReduce,
                                        static_cast<uint64_t>(std::max(1, op.info().comm_size)));
  }
  slot.done_at = ArriveShared(slot, in);
  return Outcome::kResolved;
}

// Bytes a virtual sender puts into this receive step: the posted size, but
// no more than what is left of the operation's share on this connection.
// NCCL counts an all-gather's and a reduce-scatter's bytes per rank; a rank
// receives the other ranks' (PAT: from several peers).
uint64_t VirtualRecvComm::StreamBytes(const Slot& slot) {
  const OpInfo& info = slot.op.op->info();
  if (stream_op_ != info.id) {
    stream_op_ = info.id;
    stream_bytes_ = 0;
  }
  const bool per_rank = info.kind == OpKind::kAllGather || info.kind == OpKind::kReduceScatter;
  const uint64_t op_bytes = per_rank ? info.bytes * static_cast<uint64_t>(std::max(1, info.comm_size - 1)) : info.bytes;
  const uint64_t bytes = StreamStepBytes(op_bytes, info.channels, stream_bytes_, slot.max_size);
  stream_bytes_ += bytes;
  return bytes;
}

// The virtual sender streams this operation's messages from s.ready_ns.
VirtualRecvComm::Outcome VirtualRecvComm::ResolveStream(RecvRequest& req, Slot& slot, const OpSchedule& s) {
  slot.bytes = StreamBytes(slot);
  ArrivalInput in = Input(ArrivalForm::kStream, req, slot, LinkOf(&s));
  in.ready = Nanoseconds(s.ready_ns);
  slot.done_at = ArriveShared(slot, in);
  // The schedule came after this receive's time: it waited for prismd, even
  // if no test() of it found the schedule missing (NCCL's proxy tests a
  // connection's receives in order, so the later ones of an operation are
  // first tested once the first is done, and find the schedule there).
  if (s.put_at_ns > std::max(slot.done_at, req.posted_at)) slot.waited_for_schedule = true;
  return Outcome::kResolved;
}

// No identity and no schedule: a plain modelled link from the posting time.
void VirtualRecvComm::ResolvePlainLink(RecvRequest& req, Slot& slot) {
  slot.bytes = slot.max_size;
  slot.done_at = Arrive(Input(ArrivalForm::kPlainLink, req, slot, LinkOf(nullptr)));
}

VirtualRecvComm::Outcome VirtualRecvComm::Resolve(RecvRequest& req, Slot& slot) {
  if (slot.seq != next_resolve_seq_) return Outcome::kWait;  // an earlier receive resolves first
  Outcome out = Outcome::kResolved;
  Schedule explicit_schedule;
  if (conn_->TakeSchedule(slot.seq, &explicit_schedule)) {
    out = ResolveExplicit(req, slot, explicit_schedule);
    if (out == Outcome::kWait) conn_->PutSchedule(slot.seq, explicit_schedule);  // keep it for the next try
  } else if (slot.op.valid()) {
    // The operation NCCL ran decides the form; the schedule gives the times.
    // A forecast is made plain once, in the book (its later receives find it plain).
    bool anchor_pending = false;
    std::optional<OpSchedule> s = env_.schedules->GetResolved(OpKey::Of(slot.op.op->info()), &anchor_pending);
    if (anchor_pending) return Outcome::kWait;  // a forecast: its anchor has not ended
    // PRISM_RING_WAITS_FOR_SCHEDULE: a ring receive, too, waits for its members' schedule.
    // PAT: mirrored per dimension when the proxy op's peer names one, else STREAM.
    const bool mirror = slot.op.op->info().mirror_kind() || PatDimensionOf(slot.op) >= 0;
    if (mirror && s && s->hold) out = Outcome::kWait;  // prismd: the virtual members are not there yet
    else if (mirror && (s || !env_.settings->ring_waits_for_schedule)) out = ResolveMirror(req, slot, s);
    else if (s && !mirror) out = ResolveStream(req, slot, *s);
    else out = Outcome::kWait;  // the engine has not timed this operation's sender yet
    // It waited for prismd under a hold, or for a missing schedule it needs;
    // a MIRROR receive resolved without one waited only for this rank's own send.
    const bool needs_schedule = !mirror || env_.settings->ring_waits_for_schedule;
    if (out == Outcome::kWait && (s ? s->hold : needs_schedule)) slot.waited_for_schedule = true;
  } else {
    ResolvePlainLink(req, slot);
  }
  if (out != Outcome::kResolved) return out;
  if (slot.bytes > slot.max_size) {
    Fail("prismd scheduled " + std::to_string(slot.bytes) + " bytes into a " + std::to_string(slot.max_size) +
         "-byte buffer (receive " + std::to_string(slot.seq) + "); the graph and this run disagree on sizes");
    return Outcome::kError;
  }
  if (!Fill(slot)) {
    Fail("cannot fill a GPU receive buffer (CUDA runtime)");
    return Outcome::kError;
  }
  slot.done_at = std::max(slot.done_at, req.posted_at);
  slot.resolved = true;
  ++next_resolve_seq_;
  return Outcome::kResolved;
}

Result VirtualRecvComm::RecvRequest::Test(int* done, int* sizes) {
  *done = 0;
  VirtualRecvComm& c = *owner;
  int64_t done_at = 0;
  for (int i = 0; i < n; ++i) {
    Slot& s = slots[i];
    if (!s.resolved) {
      const Outcome o = c.Resolve(*this, s);
      if (o == Outcome::kError) return prism_ncclRemoteError;
      if (o == Outcome::kWait) {
        const int64_t now = WallNowNs();
        if (waiting_since == 0) waiting_since = now;
        if (now - waiting_since > kWaitWarnNs) c.WarnWaiting(*this, s);
        std::string why;
        if (!c.session_->Healthy(true, &why)) return c.Fail(why);
        return prism_ncclSuccess;
      }
    }
    done_at = std::max(done_at, s.done_at);
  }
  const int64_t now = WallNowNs();
  if (now < done_at) return prism_ncclSuccess;
  for (int i = 0; i < n; ++i)
    if (c.OwnChunkPending(slots[i], now)) return prism_ncclSuccess;
  // LL/LL128: NCCL's kernel reads the flags as soon as they are in the
  // buffer, so they go in only now, when the message has arrived.
  for (int i = 0; i < n; ++i) {
    const bool lines = slots[i].protocol != LineProtocol::kSimple;
    if (lines ? !c.FillLines(slots[i]) : c.FillsOwn(slots[i]) && !c.FillOwnSimple(slots[i])) {
      return c.Fail("cannot fill a GPU receive buffer (CUDA runtime)");
    }
  }
  *done = 1;
  for (int i = 0; i < n; ++i) {
    Slot& s = slots[i];
    if (sizes != nullptr) sizes[i] = static_cast<int>(s.bytes);
    if (s.op.valid()) s.op.op->RecordReceive(done_at, s.bytes);
    SessionEvent e = MessageEvent(SessionEvent::kCompleted, c.conn_id_, s.seq, s.bytes, done_at, s.op);
    e.late_ns = now - done_at;
    e.waited_for_schedule = s.waited_for_schedule;
    c.session_->Emit(e);
    s.op = MessageTag{};  // drop the operation reference now
  }
  in_use = false;
  return prism_ncclSuccess;
}

}  // namespace prism::plugin
