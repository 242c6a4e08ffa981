// The objects the plugin hands to NCCL as opaque pointers: memory handles,
// requests and send/receive comms, for real (TCP) and virtual (prismd) peers.
//
// Every such object carries a kind tag, so that the C shim can
// refuse a NULL or wrong-kind pointer from NCCL with an error instead of
// crashing (ObjectKind, CheckedCast).
//
// Threading contract (NCCL's): all calls on one comm and its requests come
// from one thread at a time (NCCL's proxy thread). Implementations may run a
// private progress thread and talk to it through lock-free rings.
#ifndef PRISM_PLUGIN_COMM_H_
#define PRISM_PLUGIN_COMM_H_

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

#include "plugin/cuda_copy.h"
#include "plugin/host_load.h"
#include "plugin/link_hold.h"
#include "plugin/shared_link.h"
#include "plugin/ll_lines.h"
#include "plugin/log.h"
#include "plugin/nccl_net_abi.h"
#include "plugin/op_tracker.h"
#include "plugin/settings.h"

namespace prism::plugin {

using Result = prism_ncclResult_t;

class OpScheduleBook;

// Kinds of objects handed to NCCL; the first member of each (see Tagged).
enum class ObjectKind : uint32_t {
  kMemRegion = 0x50524d52,   // "PRMR"
  kRequest = 0x50525251,     // "PRRQ"
  kComm = 0x5052434d,        // "PRCM"
  kListenComm = 0x50524c43,  // "PRLC"
  kContext = 0x50524358,     // "PRCX"
  kDead = 0x44454144,
};

// Base of every object NCCL holds. CheckedCast reads the tag through the
// expected class's layout: a NULL pointer or an object of another kind (a
// listen comm passed to closeSend, a request passed twice after recycling
// into another kind) is refused; a wild pointer is not detectable.
class Tagged {
 public:
  explicit Tagged(ObjectKind kind) : kind_(kind) {}
  // A volatile store, so that the compiler keeps it although the object dies
  // right after: a stale pointer still tagged alive would pass CheckedCast
  // until the allocator reuses the memory. (Double closes are caught by
  // LiveHandles, which never reads freed memory.)
  ~Tagged() { *static_cast<volatile ObjectKind*>(&kind_) = ObjectKind::kDead; }
  ObjectKind object_kind() const { return kind_; }

 private:
  ObjectKind kind_;
};

// `p` as a T when it is non-null and tagged `kind`; else null.
template <typename T>
T* CheckedCast(void* p, ObjectKind kind) {
  if (p == nullptr) return nullptr;
  auto* t = static_cast<T*>(p);
  return t->object_kind() == kind ? t : nullptr;
}

// What regMr returns: the region and where it lives.
struct MemRegion : Tagged {
  MemRegion(void* b, size_t s, int t) : Tagged(ObjectKind::kMemRegion), base(b), size(s), type(t) {}
  void* base = nullptr;
  size_t size = 0;
  int type = kPrismPtrHost;  // NCCL_PTR_HOST / CUDA / DMABUF
  int device = -1;           // on_gpu(): the GPU its memory is on (CudaCopier::DeviceOf at regMr)
  bool on_gpu() const { return type != kPrismPtrHost; }
};

// A receive's NCCL protocol: the profiler role's for its operation, else
// told by the size of the buffer NCCL registered (one per protocol,
// ll_lines.h); Simple when neither says.
inline LineProtocol ReceiveProtocol(const MessageTag& op, const MemRegion* mr, const ProtocolBuffers& buffers) {
  if (op.valid()) return op.op->info().protocol;
  return mr != nullptr ? buffers.ProtocolOf(mr->size) : LineProtocol::kSimple;
}

// The NICs' shared transmit links (one per device), and the GPU's link to
// the virtual peers on its own node, owned by the Plugin. Thread-safe.
class NicLinks {
 public:
  // `order`, `decide_ahead`: every link's (PRISM_LINK_ORDER, PRISM_LINK_DECIDE_AHEAD_US).
  NicLinks(int count, uint64_t bits_per_second, int64_t latency_ns, LinkOrder order = LinkOrder::kPosted,
           Nanoseconds decide_ahead = Nanoseconds(0))
      : order_(order), decide_ahead_(decide_ahead) {
    for (int i = 0; i < count; ++i)
      links_.emplace_back(std::make_unique<SharedLink>(BitsPerSecond(bits_per_second), Nanoseconds(latency_ns),
                                                       order, decide_ahead));
  }
  SharedLink& Tx(int dev) { return *links_[dev >= 0 && dev < static_cast<int>(links_.size()) ? dev : 0]; }
  // The transmit side of this GPU's link inside its node (NVLink in the
  // model), which every send to a virtual peer of the same node shares: made
  // on first use with the figures prismd's handle carries (the graph's, the
  // same in every handle); later figures are ignored.
  SharedLink& SameNodeTx(BitsPerSecond bandwidth, Nanoseconds latency) {
    std::lock_guard<std::mutex> lock(mu_);
    if (!same_node_) same_node_ = std::make_unique<SharedLink>(bandwidth, latency, order_, decide_ahead_);
    return *same_node_;
  }

 private:
  const LinkOrder order_;
  const Nanoseconds decide_ahead_;
  std::vector<std::unique_ptr<SharedLink>> links_;
  std::mutex mu_;
  std::unique_ptr<SharedLink> same_node_;
};

// Shared, process-lifetime services every comm may use. Not owned by comms.
struct CommEnv {
  const Settings* settings = nullptr;
  const Logger* logger = nullptr;
  CudaCopier* cuda = nullptr;
  NicLinks* nics = nullptr;            // modelled NIC transmit sides
  OpScheduleBook* schedules = nullptr; // prismd's per-operation schedules
  int nccl_version = 0;                // NCCL's version code (ncclGetVersion); 0: unknown
  LinkHoldStats* link_hold = nullptr;  // shaped real-peer receives against the model
  // Set once this process was told that a broadcast reached it through a
  // virtual peer (virtual_comms.h, NoteBroadcastThroughVirtual).
  std::atomic<bool>* told_virtual_broadcast = nullptr;
  HostLoad* host_load = nullptr;       // idle cores now (PRISM_IDLE_INLINE_BYTES)
  // This host's key (host_identity.h) when PRISM_SAME_HOST=unix and known:
  // real peers with the same key connect over Unix sockets; 0: TCP always.
  uint64_t same_host_key = 0;
};

// PRISM_RECV_FILL=own: keeps what this rank sends in step (channel, step)
// of its operation, for the virtual peers that repeat it (OpRecord keeps
// small all-gather sends only; GPU memory is not read). Called by both
// isend paths, real and virtual peers alike: a ring's own sends go to either.
inline void KeepSendForOwnFill(const CommEnv& env, const MessageTag& op, const MemRegion* mr, const void* data,
                               size_t size) {
  if (!op.valid() || env.settings->recv_fill != RecvFill::kOwn || (mr != nullptr && mr->on_gpu())) return;
  op.op->KeepSendPayload(op.channel, op.step, static_cast<const char*>(data), size);
}

// What both isend paths (real and virtual peers) record of this rank's own
// send posted at `posted_ns` that leaves the wire at `wire_done_ns`: the
// stamp a ring receive of the same (channel, step) mirrors, the stamp a PAT
// receive of the same (channel, dimension, step) mirrors, and the payload
// PRISM_RECV_FILL=own repeats. A PAT send to a real peer is a virtual
// receive's mirror too (two real ranks: rank 1's all-gather sends on
// dimension 0 go to rank 0). No-op for an untagged send.
inline void RecordOwnSend(const CommEnv& env, const MessageTag& op, const MemRegion* mr, const void* data,
                          size_t size, int64_t posted_ns, int64_t wire_done_ns) {
  if (!op.valid()) return;
  op.op->RecordSend(op.channel, op.step, posted_ns, wire_done_ns, size);
  RecordPatSend(op, wire_done_ns, size);
  KeepSendForOwnFill(env, op, mr, data, size);
}

// The version code of the NCCL whose function `logger` is (its logger, which
// NCCL hands to every plugin init): the ncclGetVersion of the library that
// holds it; 0 when unknown (no logger, not a library, no such symbol).
int NcclVersionOfLogger(prism_ncclDebugLogger_t logger);

// A request returned by isend/irecv. Test() completes it; once it reported
// done (or an error) the request is recycled and must not be tested again.
class Request : public Tagged {
 public:
  Request() : Tagged(ObjectKind::kRequest) {}
  virtual ~Request() = default;
  virtual Result Test(int* done, int* sizes) = 0;
};

// A send or receive comm. Default implementations reject the wrong direction.
// `tag` / `tags` say which NCCL operation, channel and step each transfer
// belongs to (invalid when the profiler role is not active).
class NetComm : public Tagged {
 public:
  NetComm() : Tagged(ObjectKind::kComm) {}
  virtual ~NetComm() = default;
  virtual Result Isend(void* data, size_t size, int tag, const MemRegion* mr, const MessageTag& op,
                       void** request) {
    return prism_ncclInvalidUsage;
  }
  virtual Result Irecv(int n, void** data, const size_t* sizes, const int* tags,
                       const MemRegion* const* mrs, const MessageTag* ops, void** request) {
    return prism_ncclInvalidUsage;
  }
  // Stops all activity; the object is deleted right after.
  virtual void Close() = 0;
  // deregMr of `mr` on this comm, just before the region is deleted (its
  // memory may be freed and reused afterwards).
  virtual void Deregistering(const MemRegion& mr) {}
};

}  // namespace prism::plugin

#endif  // PRISM_PLUGIN_COMM_H_
