// The plugin's NCCL profiler role: which collective or point-to-point
// operation, channel and step every network transfer belongs to.
//
// NCCL (2.28+) loads the same library as its profiler plugin
// (NCCL_PROFILER_PLUGIN = the plugin's path; profiler_shim.cc exports
// ncclProfiler_v5) and reports, per communicator, the chain
//   Coll/P2p (one per call) -> ProxyOp (one per channel, peer, direction)
//   -> ProxyStep (one per network transfer).
// The net side asks NCCL, inside isend/irecv, to start a NetPlugin event for
// the transfer's phandle; NCCL does so synchronously with the transfer's
// ProxyStep as parent, and StartEvent fills the MessageTag the net side
// passed. So each transfer learns its operation before isend/irecv returns,
// with no guessing by size or timing. docs/plugin.md ("Profiler role") and
// NCCL's public profiler headers (v2.28.9-1) have the facts this relies on.
//
// Ownership and lifetime: handles returned to NCCL are owned by the tracker.
// NCCL may use a Coll/P2p handle as a parent after stopping it, so stopped
// operation handles are retired, not freed, and freed only long after
// (kRetiredOps later, or at the context's finalize). OpRecords are shared:
// held by live handles and by the plugin's in-flight requests.
//
// Thread-safety: every entry point may be called from any thread (NCCL's
// API, group and proxy threads, the plugin's own threads).
#ifndef PRISM_PLUGIN_OP_TRACKER_H_
#define PRISM_PLUGIN_OP_TRACKER_H_

#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "plugin/ll_lines.h"
#include "plugin/profiler_abi.h"

namespace prism::plugin {

// Values match rpc::OpKind and rpc::OpAlgorithm (prism_service.proto).
enum class OpKind : uint8_t {
  kUnknown = 0,
  kAllReduce = 1,
  kAllGather = 2,
  kReduceScatter = 3,
  kBroadcast = 4,
  kReduce = 5,
  kAllToAll = 6,
  kSend = 7,
  kRecv = 8,
  kOtherCollective = 9,
};
enum class OpAlgo : uint8_t { kUnknown = 0, kRing = 1, kTree = 2, kOther = 3 };

// One NCCL operation as the profiler described it.
struct OpInfo {
  uint64_t id = 0;             // process-unique, from 1
  uint64_t comm_hash = 0;      // the profiler context's commId (NCCL commHash)
  int32_t comm_rank = -1;
  int32_t comm_size = 0;
  OpKind kind = OpKind::kUnknown;
  uint64_t seq = 0;            // collectives: NCCL seqNumber; p2p: per (peer, direction) ordinal
  int32_t peer = -1;           // p2p peer (comm rank)
  int32_t root = -1;
  uint64_t bytes = 0;          // count * datatype size
  OpAlgo algo = OpAlgo::kUnknown;
  std::string algo_name;
  std::string proto_name;
  LineProtocol protocol = LineProtocol::kSimple;  // proto_name, parsed once (receives ask per message)
  uint8_t channels = 0;
  bool pat = false;            // NCCL ran it as PAT
  int64_t enqueued_ns = 0;     // CLOCK_REALTIME at the profiler's start event

  // Symmetric ring collectives: every rank's i-th receive on a channel is its
  // predecessor's i-th send there, timed like this rank's own i-th send.
  bool mirror_kind() const {
    return algo == OpAlgo::kRing &&
           (kind == OpKind::kAllReduce || kind == OpKind::kAllGather || kind == OpKind::kReduceScatter);
  }
  // PAT all-gathers and reduce-scatters: a receive on dimension d mirrors
  // this rank's own send on d (arrival.h, PatDimension).
  bool pat_kind() const { return pat && (kind == OpKind::kAllGather || kind == OpKind::kReduceScatter); }
};

// What the network transfers of one operation came to.
struct OpSummary {
  int64_t first_send_ns = 0;   // 0: no send
  int64_t end_ns = 0;          // latest transfer completion
  uint64_t bytes_sent = 0;
  uint64_t bytes_received = 0;
  uint32_t messages = 0;
};

// NCCL's kernel stamps of one operation (GPU %globaltimer, ns): KernelCh
// events, asked for only while a KernelTimesSink is kept (PRISM_OP_TIMES).
struct KernelSpan {
  uint64_t first_start_ns = 0;  // 0: no channel reported a start
  uint64_t last_stop_ns = 0;    // 0: no channel reported a stop
  int channels_started = 0;
  int channels_stopped = 0;
  bool complete = false;        // every started channel stopped, at least the op's channel count
};

// The shared record of one operation.
class OpRecord {
 public:
  explicit OpRecord(OpInfo info) : info_(std::move(info)) {}
  OpRecord(const OpRecord&) = delete;
  OpRecord& operator=(const OpRecord&) = delete;

  const OpInfo& info() const { return info_; }

  // The plugin's own send of (channel, step) leaves the wire at
  // `wire_done_ns` (the mirror source for receives of the same step).
  void RecordSend(uint8_t channel, int32_t step, int64_t posted_ns, int64_t wire_done_ns,
                  uint64_t bytes);
  // False while that send has not been posted.
  bool SendOf(uint8_t channel, int32_t step, int64_t* wire_done_ns, uint64_t* bytes) const;
  // The highest step of this rank's sends of the operation on `channel` so
  // far; -1: none (diagnostics: how far this rank's kernel got).
  int32_t LastSendStep(uint8_t channel) const;
  // When this rank posted its first send of the operation (any channel); 0: none yet.
  int64_t FirstSendPostedNs() const;
  // PAT: the same per (channel, dimension, step); a PAT rank has one send
  // connection per dimension, each with its own steps.
  void RecordPatSend(uint8_t channel, int dim, int32_t step, int64_t wire_done_ns, uint64_t bytes);
  bool PatSendOf(uint8_t channel, int dim, int32_t step, int64_t* wire_done_ns, uint64_t* bytes) const;
  void RecordReceive(int64_t done_ns, uint64_t bytes);

  // All-gather payloads for PRISM_RECV_FILL=own (homogeneous ranks: every
  // rank's chunk equals this rank's). Keeps a copy of this rank's own send
  // of (channel, step), raw as NCCL wrote it (LL/LL128: its lines), when it
  // is at most kKeptPayloadBytes; the first send, of any size, also gives
  // the rank's own chunk (its first min(info().bytes, kKeptPayloadBytes)
  // bytes). No-op for other kinds.
  // 4 KiB: what start-up checks exchange (counts, shapes) fits; larger
  // messages would put copies on the ring's critical path (measured: with a
  // 64 KiB cap, 256 KiB all-gathers of a hybrid run took 45% longer).
  static constexpr uint64_t kKeptPayloadBytes = 4 * 1024;
  void KeepSendPayload(uint8_t channel, int32_t step, const char* data, uint64_t bytes);
  // Copies the kept payload of (channel, step) into `dst` (at most `max`
  // bytes); its size, 0 when there is none.
  size_t CopySendPayload(uint8_t channel, int32_t step, char* dst, size_t max) const;
  // The first send's first min(its size, info().bytes, kKeptPayloadBytes)
  // bytes: this rank's own chunk (NCCL counts all-gather bytes per rank);
  // false when none was kept (no send yet, or its buffer was GPU memory).
  bool OwnChunk(std::vector<char>* out) const;
  bool HasOwnChunk() const;

  // NCCL's kernel stamps (KernelCh events, GPU %globaltimer ns; op_times.h),
  // one start and one stop per channel the kernel ran the operation on.
  void RecordKernelStart(uint64_t gpu_ns);
  // True exactly once: when the span became complete (every channel that
  // started stopped, and at least info().channels did); fills `*out`.
  // `gpu_ns` 0: a stop without a stamp (counted, not timed).
  bool RecordKernelStop(uint64_t gpu_ns, KernelSpan* out);
  // The span so far, for an operation whose line was not written yet (its
  // communicator is finalized, or its handle retired): true once, never
  // after RecordKernelStop returned true.
  bool TakeUnloggedKernelSpan(KernelSpan* out);

  // Proxy-op accounting (the profiler's ProxyOp start/stop).
  void ProxyOpStarted();
  // True exactly once: when the last live proxy op stopped; fills `*out`.
  bool ProxyOpStopped(OpSummary* out);

 private:
  struct SendStamp {
    int64_t wire_done_ns = -1;
    uint64_t bytes = 0;
  };
  OpInfo info_;
  mutable std::mutex mu_;
  std::vector<std::vector<SendStamp>> sends_;  // [channel][step]
  std::vector<std::vector<SendStamp>> pat_sends_;  // [channel * kPatDims + dim][step]
  static constexpr int kPatDims = 32;
  std::vector<std::vector<std::vector<char>>> payloads_;  // [channel][step], all-gather only
  std::vector<char> own_chunk_;                           // the first kept payload
  OpSummary summary_;
  KernelSpan kernel_;
  bool kernel_logged_ = false;
  int live_proxy_ops_ = 0;
  bool finished_ = false;
};

// What a transfer learned from the profiler (valid() false when the profiler
// role is not active, or the transfer is not NCCL's data path).
struct MessageTag {
  std::shared_ptr<OpRecord> op;
  uint8_t channel = 0;
  int32_t step = 0;
  int32_t steps = 0;           // steps of its proxy op
  int32_t peer = -1;           // comm rank of its proxy op's peer
  bool is_send = false;
  bool valid() const { return op != nullptr; }
};

// PAT: the dimension of the tagged transfer's connection (arrival.h
// PatDimension); -1 for any other transfer.
int PatDimensionOf(const MessageTag& tag);
// Records a send under its PAT dimension (no-op for other transfers).
void RecordPatSend(const MessageTag& tag, int64_t wire_done_ns, uint64_t bytes);
// The own send a mirrored receive closes on: a ring's of the same channel and
// step, a PAT's of the same channel, dimension and step. False while not sent.
bool MirrorSendOf(const MessageTag& tag, int64_t* wire_done_ns, uint64_t* bytes);

// Receives each operation's kernel span once (op_times.h writes it).
class KernelTimesSink {
 public:
  virtual ~KernelTimesSink() = default;
  virtual void OnKernelSpan(const OpInfo& info, const KernelSpan& span) = 0;
};

// Receives operation boundaries (the plugin forwards them to prismd).
class OpListener {
 public:
  virtual ~OpListener() = default;
  virtual void OnOpStarted(const OpInfo& info) = 0;
  virtual void OnOpFinished(const OpInfo& info, const OpSummary& summary) = 0;
};

class OpTracker {
 public:
  // `listener` (nullable) must outlive the tracker.
  explicit OpTracker(OpListener* listener) : listener_(listener) {}
  OpTracker(const OpTracker&) = delete;
  OpTracker& operator=(const OpTracker&) = delete;

  // PRISM_OP_TIMES: every later Init also asks NCCL for its kernel events
  // (KernelCh), and each operation's span goes to `sink` once (op_times.h
  // writes it as a line). `sink` (nullable: off) must outlive the tracker.
  // Call before the first Init, on the thread that then calls it or one
  // that happens-before it (the plugin calls it inside its once-only init).
  void KeepOpTimes(KernelTimesSink* sink) { op_times_ = sink; }

  // The profiler ABI, one call each (profiler_shim.cc forwards; NCCL's
  // arguments as given). Unknown or foreign handles are ignored.
  prism_ncclResult_t Init(void** context, uint64_t comm_id, int* activation_mask, int nranks,
                          int rank);
  prism_ncclResult_t StartEvent(void* context, void** handle,
                                const prism_ncclProfilerEventDescr_v5_t* descr);
  prism_ncclResult_t StopEvent(void* handle);
  // Reads only KernelChStop (its GPU stamp); every other state is ignored.
  prism_ncclResult_t RecordEventState(void* handle, prism_ncclProfilerEventState_t state,
                                      const prism_ncclProfilerEventStateArgs_v5_t* args);
  prism_ncclResult_t Finalize(void* context);

  // The net side: asks NCCL (through `prof_fn`, the callback its init got)
  // to start a NetPlugin event for `phandle`, which fills `*tag`. No-op when
  // either is null (NCCL's bootstrap passes null phandles).
  static void Resolve(prism_ncclProfilerCallback_t prof_fn, void* phandle, MessageTag* tag);

  // Operations started so far, finished or not (tests, logs).
  uint64_t ops_started() const;

  // The NetPlugin event id Prism passes (low 16 bits version, next 16 type).
  static constexpr int64_t kNetPluginId = (0x50 << 16) | 1;
  // Stopped operation handles kept alive per context before reuse.
  static constexpr size_t kRetiredOps = 1 << 14;

 private:
  struct Context;
  struct OpHandle;
  struct ProxyOpHandle;
  struct StepHandle;
  struct KernelHandle;
  // The one handle every Group event gets: NCCL 2.26 and 2.27 start no
  // collective or p2p events under a group without one. It carries nothing;
  // stopping it does nothing. `tag` is the .cc's kGroupTag.
  struct GroupHandle {
    uint32_t tag;
  };

  void* StartOp(Context* ctx, const prism_ncclProfilerEventDescr_v5_t& d);
  void* StartProxyOp(const prism_ncclProfilerEventDescr_v5_t& d);
  void* StartStep(const prism_ncclProfilerEventDescr_v5_t& d);
  void* StartKernel(const prism_ncclProfilerEventDescr_v5_t& d);
  void FillTag(const prism_ncclProfilerEventDescr_v5_t& d);
  void FinishIfDone(const std::shared_ptr<OpRecord>& op);
  // Writes the line of a retired operation that has none yet.
  void LogUnlogged(OpRecord& op);

  OpListener* listener_;
  KernelTimesSink* op_times_ = nullptr;
  mutable std::mutex mu_;      // guards next_id_ and ops_started_
  uint64_t next_id_ = 1;
  uint64_t ops_started_ = 0;
  GroupHandle group_handle_{0x50475250};  // "PGRP"
};

// NCCL's names ("AllReduce", "RING", ...) to Prism's enums.
OpKind OpKindFromNccl(const char* func);
OpAlgo OpAlgoFromNccl(const char* algo);
// Bytes of one element of NCCL's datatype name ("ncclFloat32" -> 4); 1 when unknown.
uint64_t DatatypeBytes(const char* datatype);

}  // namespace prism::plugin

#endif  // PRISM_PLUGIN_OP_TRACKER_H_
