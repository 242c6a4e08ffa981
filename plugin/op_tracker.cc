#include "plugin/op_tracker.h"

#include <unistd.h>

#include <algorithm>
#include <cstring>

#include "plugin/arrival.h"
#include "plugin/clock.h"

namespace prism::plugin {
namespace {

// Every handle the tracker gives NCCL starts with one of these tags, so a
// handle of the wrong kind (or a foreign pointer) is recognised, not cast.
enum HandleTag : uint32_t {
  kContextTag = 0x50435458,   // "PCTX"
  kOpTag = 0x504f5052,        // "POPR"
  kProxyOpTag = 0x50505859,   // "PPXY"
  kStepTag = 0x50535450,      // "PSTP"
  kGroupTag = 0x50475250,     // "PGRP"
  kKernelTag = 0x504b4348,    // "PKCH"
  kDeadTag = 0x44454144,      // "DEAD"
};

uint32_t TagOf(const void* handle) {
  uint32_t tag = 0;
  if (handle != nullptr) std::memcpy(&tag, handle, sizeof(tag));
  return tag;
}

bool Is(const char* a, const char* b) { return a != nullptr && std::strcmp(a, b) == 0; }

}  // namespace

// ---- NCCL names ----

OpKind OpKindFromNccl(const char* f) {
  if (Is(f, "AllReduce")) return OpKind::kAllReduce;
  if (Is(f, "AllGather")) return OpKind::kAllGather;
  if (Is(f, "ReduceScatter")) return OpKind::kReduceScatter;
  if (Is(f, "Broadcast")) return OpKind::kBroadcast;
  if (Is(f, "Reduce")) return OpKind::kReduce;
  if (Is(f, "AlltoAll")) return OpKind::kAllToAll;
  if (Is(f, "Send")) return OpKind::kSend;
  if (Is(f, "Recv")) return OpKind::kRecv;
  return f != nullptr ? OpKind::kOtherCollective : OpKind::kUnknown;
}

OpAlgo OpAlgoFromNccl(const char* a) {
  if (a == nullptr) return OpAlgo::kUnknown;
  if (Is(a, "RING")) return OpAlgo::kRing;
  if (Is(a, "TREE")) return OpAlgo::kTree;
  return OpAlgo::kOther;
}

uint64_t DatatypeBytes(const char* t) {
  if (t == nullptr) return 1;
  for (const char* four : {"ncclInt32", "ncclUint32", "ncclFloat32"})
    if (Is(t, four)) return 4;
  for (const char* eight : {"ncclInt64", "ncclUint64", "ncclFloat64"})
    if (Is(t, eight)) return 8;
  if (Is(t, "ncclFloat16") || Is(t, "ncclBfloat16")) return 2;
  return 1;  // ncclInt8, fp8 types, and names NCCL leaves "Unknown" (ncclUint8)
}

// ---- OpRecord ----

void OpRecord::RecordSend(uint8_t channel, int32_t step, int64_t posted_ns, int64_t wire_done_ns,
                          uint64_t bytes) {
  if (step < 0) return;
  std::lock_guard<std::mutex> lock(mu_);
  if (finished_) return;
  if (sends_.size() <= channel) sends_.resize(channel + 1u);
  std::vector<SendStamp>& ch = sends_[channel];
  if (ch.size() <= static_cast<size_t>(step)) ch.resize(static_cast<size_t>(step) + 1);
  ch[static_cast<size_t>(step)] = SendStamp{wire_done_ns, bytes};
  if (summary_.first_send_ns == 0 || posted_ns < summary_.first_send_ns) summary_.first_send_ns = posted_ns;
  summary_.end_ns = std::max(summary_.end_ns, wire_done_ns);
  summary_.bytes_sent += bytes;
  ++summary_.messages;
}

bool OpRecord::SendOf(uint8_t channel, int32_t step, int64_t* wire_done_ns, uint64_t* bytes) const {
  std::lock_guard<std::mutex> lock(mu_);
  if (step < 0 || channel >= sends_.size() || static_cast<size_t>(step) >= sends_[channel].size()) return false;
  const SendStamp& s = sends_[channel][static_cast<size_t>(step)];
  if (s.wire_done_ns < 0) return false;
  *wire_done_ns = s.wire_done_ns;
  *bytes = s.bytes;
  return true;
}

int32_t OpRecord::LastSendStep(uint8_t channel) const {
  std::lock_guard<std::mutex> lock(mu_);
  if (channel >= sends_.size()) return -1;
  const std::vector<SendStamp>& ch = sends_[channel];
  for (size_t k = ch.size(); k > 0; --k)
    if (ch[k - 1].wire_done_ns >= 0) return static_cast<int32_t>(k - 1);
  return -1;
}

int64_t OpRecord::FirstSendPostedNs() const {
  std::lock_guard<std::mutex> lock(mu_);
  return summary_.first_send_ns;
}

void OpRecord::RecordPatSend(uint8_t channel, int dim, int32_t step, int64_t wire_done_ns, uint64_t bytes) {
  if (step < 0 || dim < 0 || dim >= kPatDims) return;
  std::lock_guard<std::mutex> lock(mu_);
  if (finished_) return;
  const size_t lane = size_t{channel} * kPatDims + static_cast<size_t>(dim);
  if (pat_sends_.size() <= lane) pat_sends_.resize(lane + 1);
  std::vector<SendStamp>& l = pat_sends_[lane];
  if (l.size() <= static_cast<size_t>(step)) l.resize(static_cast<size_t>(step) + 1);
  l[static_cast<size_t>(step)] = SendStamp{wire_done_ns, bytes};
}

bool OpRecord::PatSendOf(uint8_t channel, int dim, int32_t step, int64_t* wire_done_ns, uint64_t* bytes) const {
  if (step < 0 || dim < 0 || dim >= kPatDims) return false;
  const size_t lane = size_t{channel} * kPatDims + static_cast<size_t>(dim);
  std::lock_guard<std::mutex> lock(mu_);
  if (lane >= pat_sends_.size() || static_cast<size_t>(step) >= pat_sends_[lane].size()) return false;
  const SendStamp& s = pat_sends_[lane][static_cast<size_t>(step)];
  if (s.wire_done_ns < 0) return false;
  *wire_done_ns = s.wire_done_ns;
  *bytes = s.bytes;
  return true;
}

int PatDimensionOf(const MessageTag& tag) {
  if (!tag.valid() || !tag.op->info().pat_kind()) return -1;
  const OpInfo& info = tag.op->info();
  return PatDimension(info.kind == OpKind::kAllGather, tag.is_send, info.comm_rank, info.comm_size, tag.peer);
}

void RecordPatSend(const MessageTag& tag, int64_t wire_done_ns, uint64_t bytes) {
  const int dim = PatDimensionOf(tag);
  if (dim >= 0) tag.op->RecordPatSend(tag.channel, dim, tag.step, wire_done_ns, bytes);
}

bool MirrorSendOf(const MessageTag& tag, int64_t* wire_done_ns, uint64_t* bytes) {
  if (!tag.valid()) return false;
  if (!tag.op->info().pat_kind()) return tag.op->SendOf(tag.channel, tag.step, wire_done_ns, bytes);
  const int dim = PatDimensionOf(tag);
  return dim >= 0 && tag.op->PatSendOf(tag.channel, dim, tag.step, wire_done_ns, bytes);
}

void OpRecord::KeepSendPayload(uint8_t channel, int32_t step, const char* data, uint64_t bytes) {
  if (info_.kind != OpKind::kAllGather || step < 0 || data == nullptr || bytes == 0) return;
  std::lock_guard<std::mutex> lock(mu_);
  if (finished_) return;
  if (own_chunk_.empty())  // the first send, whatever its size: at most kKeptPayloadBytes of it
    own_chunk_.assign(data, data + std::min({bytes, std::max<uint64_t>(info_.bytes, 1), kKeptPayloadBytes}));
  if (bytes > kKeptPayloadBytes) return;
  if (payloads_.size() <= channel) payloads_.resize(channel + 1u);
  auto& ch = payloads_[channel];
  if (ch.size() <= static_cast<size_t>(step)) ch.resize(static_cast<size_t>(step) + 1);
  ch[static_cast<size_t>(step)].assign(data, data + bytes);
}

size_t OpRecord::CopySendPayload(uint8_t channel, int32_t step, char* dst, size_t max) const {
  std::lock_guard<std::mutex> lock(mu_);
  if (step < 0 || channel >= payloads_.size() || static_cast<size_t>(step) >= payloads_[channel].size()) return 0;
  const std::vector<char>& p = payloads_[channel][static_cast<size_t>(step)];
  const size_t n = std::min(p.size(), max);
  if (n > 0) std::memcpy(dst, p.data(), n);
  return n;
}

bool OpRecord::HasOwnChunk() const {
  std::lock_guard<std::mutex> lock(mu_);
  return !own_chunk_.empty();
}

bool OpRecord::OwnChunk(std::vector<char>* out) const {
  std::lock_guard<std::mutex> lock(mu_);
  if (own_chunk_.empty()) return false;
  *out = own_chunk_;
  return true;
}

void OpRecord::RecordReceive(int64_t done_ns, uint64_t bytes) {
  std::lock_guard<std::mutex> lock(mu_);
  summary_.end_ns = std::max(summary_.end_ns, done_ns);
  summary_.bytes_received += bytes;
  ++summary_.messages;
}

void OpRecord::RecordKernelStart(uint64_t gpu_ns) {
  std::lock_guard<std::mutex> lock(mu_);
  ++kernel_.channels_started;
  if (gpu_ns != 0 && (kernel_.first_start_ns == 0 || gpu_ns < kernel_.first_start_ns)) kernel_.first_start_ns = gpu_ns;
}

bool OpRecord::RecordKernelStop(uint64_t gpu_ns, KernelSpan* out) {
  std::lock_guard<std::mutex> lock(mu_);
  ++kernel_.channels_stopped;
  kernel_.last_stop_ns = std::max(kernel_.last_stop_ns, gpu_ns);
  if (kernel_logged_ || kernel_.channels_stopped < kernel_.channels_started ||
      kernel_.channels_stopped < int{info_.channels})
    return false;
  kernel_.complete = true;
  kernel_logged_ = true;
  *out = kernel_;
  return true;
}

bool OpRecord::TakeUnloggedKernelSpan(KernelSpan* out) {
  std::lock_guard<std::mutex> lock(mu_);
  if (kernel_logged_) return false;
  kernel_logged_ = true;
  *out = kernel_;
  return true;
}

void OpRecord::ProxyOpStarted() {
  std::lock_guard<std::mutex> lock(mu_);
  ++live_proxy_ops_;
}

bool OpRecord::ProxyOpStopped(OpSummary* out) {
  std::lock_guard<std::mutex> lock(mu_);
  if (live_proxy_ops_ > 0) --live_proxy_ops_;
  if (live_proxy_ops_ > 0 || finished_) return false;
  finished_ = true;
  *out = summary_;
  sends_.clear();  // the mirror needs them no longer; retired handles keep only the shell
  sends_.shrink_to_fit();
  return true;
}

// ---- profiler handles ----

struct OpTracker::Context {
  uint32_t tag = kContextTag;
  uint64_t comm_hash = 0;
  int rank = -1;
  int nranks = 0;
  std::mutex mu;                                  // guards the members below
  std::map<std::pair<int, int>, uint64_t> p2p_next;  // (peer, is_send) -> next ordinal
  std::deque<std::unique_ptr<OpHandle>> retired;
};

struct OpTracker::OpHandle {
  uint32_t tag = kOpTag;
  Context* ctx = nullptr;
  std::shared_ptr<OpRecord> op;
};

struct OpTracker::StepHandle {
  uint32_t tag = kStepTag;
  ProxyOpHandle* parent = nullptr;
  int32_t step = 0;
};

struct OpTracker::KernelHandle {
  uint32_t tag = kKernelTag;
  std::shared_ptr<OpRecord> op;
  uint64_t stop_ns = 0;  // KernelChStop's stamp, read at stop
};

struct OpTracker::ProxyOpHandle {
  uint32_t tag = kProxyOpTag;
  std::shared_ptr<OpRecord> op;
  uint8_t channel = 0;
  int32_t steps = 0;
  int32_t peer = -1;
  bool is_send = false;
  StepHandle step_slots[8];  // NCCL_STEPS: in-flight steps of one proxy op use distinct slots
};

prism_ncclResult_t OpTracker::Init(void** context, uint64_t comm_id, int* activation_mask, int nranks,
                                   int rank) {
  auto* ctx = new Context();
  ctx->comm_hash = comm_id;
  ctx->rank = rank;
  ctx->nranks = nranks;
  *context = ctx;
  // NetPlugin alone enables the whole chain (Coll/P2p, ProxyOp, ProxyStep).
  // KernelCh (op_times.h) adds a profiler proxy op per channel of every
  // operation: asked for only while the times are kept.
  if (activation_mask != nullptr) {
    *activation_mask |= static_cast<int>(kPrismProfileColl | kPrismProfileP2p | kPrismProfileProxyOp |
                                         kPrismProfileProxyStep | kPrismProfileNetPlugin);
    if (op_times_ != nullptr) *activation_mask |= static_cast<int>(kPrismProfileKernelCh);
  }
  return prism_ncclSuccess;
}

prism_ncclResult_t OpTracker::Finalize(void* context) {
  if (TagOf(context) != kContextTag) return prism_ncclSuccess;
  auto* ctx = static_cast<Context*>(context);
  {
    std::lock_guard<std::mutex> lock(ctx->mu);
    for (auto& h : ctx->retired) {
      if (h->op) LogUnlogged(*h->op);
      h->tag = kDeadTag;
    }
    ctx->retired.clear();
  }
  ctx->tag = kDeadTag;
  delete ctx;
  return prism_ncclSuccess;
}

prism_ncclResult_t OpTracker::StartEvent(void* context, void** handle,
                                         const prism_ncclProfilerEventDescr_v5_t* descr) {
  if (handle == nullptr || descr == nullptr) return prism_ncclSuccess;
  switch (descr->type) {
    case kPrismProfileColl:
    case kPrismProfileP2p:
      *handle = TagOf(context) == kContextTag ? StartOp(static_cast<Context*>(context), *descr) : nullptr;
      break;
    case kPrismProfileProxyOp:
      *handle = StartProxyOp(*descr);
      break;
    case kPrismProfileProxyStep:
      *handle = StartStep(*descr);
      break;
    case kPrismProfileNetPlugin:
      FillTag(*descr);
      *handle = nullptr;  // nothing to stop: the net side never stops it
      break;
    case kPrismProfileKernelCh:
      *handle = op_times_ != nullptr ? StartKernel(*descr) : nullptr;
      break;
    case kPrismProfileGroup:
      static_assert(kGroupTag == 0x50475250);
      *handle = &group_handle_;
      break;
    default:
      *handle = nullptr;  // API events, proxy control: not needed
      break;
  }
  return prism_ncclSuccess;
}

void* OpTracker::StartOp(Context* ctx, const prism_ncclProfilerEventDescr_v5_t& d) {
  OpInfo info;
  info.comm_hash = ctx->comm_hash;
  info.comm_rank = d.rank;
  info.comm_size = ctx->nranks;
  info.enqueued_ns = WallNowNs();
  if (d.type == kPrismProfileColl) {
    info.kind = OpKindFromNccl(d.coll.func);
    info.seq = d.coll.seqNumber;
    info.root = d.coll.root;
    // AllGather and Broadcast counts arrive in bytes with type ncclInt8 already.
    info.bytes = static_cast<uint64_t>(d.coll.count) * DatatypeBytes(d.coll.datatype);
    info.algo = OpAlgoFromNccl(d.coll.algo);
    info.algo_name = d.coll.algo != nullptr ? d.coll.algo : "";
    info.proto_name = d.coll.proto != nullptr ? d.coll.proto : "";
    info.protocol = LineProtocolOf(info.proto_name);
    info.channels = d.coll.nChannels;
    info.pat = d.coll.algo != nullptr && Is(d.coll.algo, "PAT");
  } else {
    info.kind = OpKindFromNccl(d.p2p.func);
    info.peer = d.p2p.peer;
    info.bytes = static_cast<uint64_t>(d.p2p.count) * DatatypeBytes(d.p2p.datatype);
    info.channels = d.p2p.nChannels;
    std::lock_guard<std::mutex> lock(ctx->mu);
    info.seq = ctx->p2p_next[{d.p2p.peer, info.kind == OpKind::kSend ? 1 : 0}]++;
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    info.id = next_id_++;
    ++ops_started_;
  }
  auto h = std::make_unique<OpHandle>();
  h->ctx = ctx;
  h->op = std::make_shared<OpRecord>(info);
  if (listener_ != nullptr) listener_->OnOpStarted(h->op->info());
  return h.release();
}

void* OpTracker::StartProxyOp(const prism_ncclProfilerEventDescr_v5_t& d) {
  if (d.proxyOp.pid != getpid()) return nullptr;  // PXN: another process's operation
  if (TagOf(d.parentObj) != kOpTag) return nullptr;
  const auto* parent = static_cast<const OpHandle*>(d.parentObj);
  if (!parent->op) return nullptr;
  auto* h = new ProxyOpHandle();
  h->op = parent->op;
  h->channel = d.proxyOp.channelId;
  h->steps = d.proxyOp.nSteps;
  h->peer = d.proxyOp.peer;
  h->is_send = d.proxyOp.isSend != 0;
  for (StepHandle& s : h->step_slots) s.parent = h;
  h->op->ProxyOpStarted();
  return h;
}

void* OpTracker::StartStep(const prism_ncclProfilerEventDescr_v5_t& d) {
  if (TagOf(d.parentObj) != kProxyOpTag) return nullptr;
  auto* parent = static_cast<ProxyOpHandle*>(d.parentObj);
  StepHandle& s = parent->step_slots[static_cast<uint32_t>(d.proxyStep.step) % 8];
  s.step = d.proxyStep.step;  // a retried start of the same step reuses its slot
  return &s;
}

void* OpTracker::StartKernel(const prism_ncclProfilerEventDescr_v5_t& d) {
  // The parent is the Coll/P2p event (NCCL's taskEventHandle), stopped and
  // retired by now: retired handles stay alive for kRetiredOps more ops.
  if (TagOf(d.parentObj) != kOpTag) return nullptr;
  const auto* parent = static_cast<const OpHandle*>(d.parentObj);
  if (!parent->op) return nullptr;
  auto* h = new KernelHandle();
  h->op = parent->op;
  h->op->RecordKernelStart(d.kernelCh.pTimer);
  return h;
}

void OpTracker::LogUnlogged(OpRecord& op) {
  KernelSpan span;
  if (op_times_ != nullptr && op.TakeUnloggedKernelSpan(&span)) op_times_->OnKernelSpan(op.info(), span);
}

void OpTracker::FillTag(const prism_ncclProfilerEventDescr_v5_t& d) {
  if (d.netPlugin.id != kNetPluginId || d.netPlugin.data == nullptr) return;
  if (TagOf(d.parentObj) != kStepTag) return;
  const auto* step = static_cast<const StepHandle*>(d.parentObj);
  const ProxyOpHandle* p = step->parent;
  auto* tag = static_cast<MessageTag*>(d.netPlugin.data);
  tag->op = p->op;
  tag->channel = p->channel;
  tag->step = step->step;
  tag->steps = p->steps;
  tag->peer = p->peer;
  tag->is_send = p->is_send;
}

prism_ncclResult_t OpTracker::StopEvent(void* handle) {
  switch (TagOf(handle)) {
    case kOpTag: {
      auto* h = static_cast<OpHandle*>(handle);
      Context* ctx = h->ctx;
      std::lock_guard<std::mutex> lock(ctx->mu);  // NCCL may still name it as a parent: retire
      ctx->retired.emplace_back(h);
      if (ctx->retired.size() > kRetiredOps) {
        OpHandle* oldest = ctx->retired.front().get();
        if (oldest->op) LogUnlogged(*oldest->op);
        oldest->tag = kDeadTag;
        ctx->retired.pop_front();
      }
      break;
    }
    case kKernelTag: {
      auto* h = static_cast<KernelHandle*>(handle);
      KernelSpan span;
      if (h->op && h->op->RecordKernelStop(h->stop_ns, &span) && op_times_ != nullptr)
        op_times_->OnKernelSpan(h->op->info(), span);
      h->tag = kDeadTag;
      delete h;
      break;
    }
    case kProxyOpTag: {
      auto* h = static_cast<ProxyOpHandle*>(handle);
      std::shared_ptr<OpRecord> op = std::move(h->op);
      h->tag = kDeadTag;
      delete h;
      FinishIfDone(op);
      break;
    }
    default:
      break;  // steps live inside their proxy op; other kinds were never handed out
  }
  return prism_ncclSuccess;
}

prism_ncclResult_t OpTracker::RecordEventState(void* handle, prism_ncclProfilerEventState_t state,
                                               const prism_ncclProfilerEventStateArgs_v5_t* args) {
  if (state != kPrismProfilerKernelChStop || args == nullptr || TagOf(handle) != kKernelTag) return prism_ncclSuccess;
  static_cast<KernelHandle*>(handle)->stop_ns = args->kernelCh.pTimer;
  return prism_ncclSuccess;
}

void OpTracker::FinishIfDone(const std::shared_ptr<OpRecord>& op) {
  OpSummary summary;
  if (op && op->ProxyOpStopped(&summary) && listener_ != nullptr) listener_->OnOpFinished(op->info(), summary);
}

void OpTracker::Resolve(prism_ncclProfilerCallback_t prof_fn, void* phandle, MessageTag* tag) {
  if (prof_fn == nullptr || phandle == nullptr) return;
  void* event = nullptr;
  prof_fn(&event, kPrismNetEventStart, phandle, kNetPluginId, tag);
}

uint64_t OpTracker::ops_started() const {
  std::lock_guard<std::mutex> lock(mu_);
  return ops_started_;
}

}  // namespace prism::plugin
