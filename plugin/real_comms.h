// Send and receive comms between two plugin instances over TCP (real peers).
// Wire format: real_wire.h. Link shaping: shared_link.h (the sender's NIC
// link, shared by all its connections, is authoritative: it stamps the
// delivery time into each message header). Both directions record their
// transfers in the NCCL operation they belong to (op_tracker.h), so that a
// virtual peer's messages can mirror them.
//
// Who moves the bytes. NCCL's proxy thread, the only caller of a comm's
// isend/irecv/test, moves them itself inside those calls while every message
// in flight on the comm is at most PRISM_INLINE_BYTES (a receive: the size
// its header announces; the proxy thread reads headers): a message goes out in the isend that posts it when the socket
// takes it, and a receive completes in the test() that reads its last byte,
// with no hand-over to another thread and no wake-up; a call returns once
// one receive completed, while a send comm's call writes all the socket
// takes (PRISM_RETURN_ON_COMPLETE). A larger ("bulk")
// message is moved by the comm's progress thread (ProgressEngine, picked by the context's
// ProgressEnginePool), so that the bulk of several comms moves in parallel;
// while one is in flight the proxy thread leaves the comm to it. A progress
// thread polls a comm's sockets only while the comm has bulk in flight, so
// an idle or small-message comm never wakes it. Both threads step a comm
// under its step lock (try-lock: neither waits for the other); requests go
// through an SPSC ring whose consumer is whichever thread holds the lock.
// test() reads the request's atomics and the clock after that step. At most
// kPrismNetMaxRequests requests are in flight per comm: isend/irecv return a
// NULL request beyond that (NCCL retries later).
//
// Peers on one host (PRISM_SAME_HOST_RING > 0): the comm has one Unix socket,
// which carries the message headers, and a SharedRing (shared_ring.h), which
// carries the payloads in message order; no payload byte enters the kernel.
// NCCL's proxy thread copies a send's payload in and a receive's out, or,
// when the payload is larger than PRISM_INLINE_BYTES, the comm's progress
// thread does, which sleeps on the ring's bell while the ring is full
// (send) or the payload still coming (receive). A send completes
// once its payload is in the ring (as NCCL's does once its data is in the
// connection's buffers). A peer
// that goes away while the other end waits on the ring is noticed within a
// millisecond (its socket hangs up) and fails the comm.
#ifndef PRISM_PLUGIN_REAL_COMMS_H_
#define PRISM_PLUGIN_REAL_COMMS_H_

#include <sys/uio.h>

#include <array>
#include <atomic>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "plugin/comm.h"
#include "plugin/shared_link.h"
#include "plugin/ll_lines.h"
#include "plugin/progress_engine.h"
#include "plugin/real_wire.h"
#include "plugin/shared_ring.h"
#include "plugin/spsc_ring.h"

namespace prism::plugin {

inline constexpr int kMaxGroupedRecvs = 8;
// One sendmsg takes queued items (headers, payload chunks) of a socket until
// it holds kSendBatchBytes or kMaxSendIov items: many small messages per
// syscall, one large message per syscall (as NCCL Socket sends them). On a
// CPU-loaded host, 2 ranks streaming 512 KiB messages used 10-20% less CPU
// than with up to 8 such messages per sendmsg (docs/plugin.md).
inline constexpr int kMaxSendIov = 16;
inline constexpr size_t kSendBatchBytes = 256 * 1024;

// Fills `iov` (room for kMaxSendIov) for the next sendmsg from a socket's
// queue of items (each with `ptr` and `left`), by the rule above; returns
// how many it filled.
template <typename Queue>
int GatherSendIov(const Queue& q, iovec* iov) {
  int n = 0;
  size_t batched = 0;
  for (auto it = q.begin(); it != q.end() && n < kMaxSendIov && batched < kSendBatchBytes; ++it, ++n) {
    iov[n].iov_base = const_cast<char*>(it->ptr);
    iov[n].iov_len = it->left;
    batched += it->left;
  }
  return n;
}

// State shared by both directions: the broken flag and its reason. The
// first Set wins; any thread may call it (the proxy thread and the progress
// thread both move bytes).
class CommFailure {
 public:
  void Set(std::string why) {
    int expected = kOk;
    if (!state_.compare_exchange_strong(expected, kSetting, std::memory_order_acq_rel)) return;
    why_ = std::move(why);
    state_.store(kBroken, std::memory_order_release);
  }
  bool broken() const { return state_.load(std::memory_order_acquire) == kBroken; }
  const std::string& why() const { return why_; }  // valid once broken()

 private:
  static constexpr int kOk = 0, kSetting = 1, kBroken = 2;
  std::atomic<int> state_{kOk};
  std::string why_;
};

// What both directions of a real-peer comm share: its sockets, its failure,
// its step lock and the progress thread that moves its bulk messages (none
// in inline mode, PRISM_PROGRESS_THREADS=-1: NCCL's proxy thread moves
// everything). A subclass calls StartProgress last in its constructor (a
// progress thread may Step it from then on) and Close first in its
// destructor (no thread Steps it once Close returns).
class RealCommBase : public NetComm, protected ProgressClient {
 public:
  RealCommBase(const RealCommBase&) = delete;
  RealCommBase& operator=(const RealCommBase&) = delete;
  // Leaves the progress thread, then closes the sockets. Idempotent.
  void Close() final;

 protected:
  // Takes ownership of `fds` (connected, hellos written, non-blocking) and
  // `ring` (null: payloads go over the sockets; else `fds` holds one socket).
  // `is_send`: the direction (PRISM_RETURN_ON_COMPLETE treats them apart).
  RealCommBase(const CommEnv& env, std::vector<int> fds, std::unique_ptr<SharedRing> ring, std::string peer,
               bool is_send);
  ~RealCommBase() override = default;
  // Attaches the comm to a progress thread (none for a ring comm).
  void StartProgress(const std::shared_ptr<ProgressEnginePool>& engines);
  // Ring comms, while the ring is full (send) or empty (receive): whether the
  // peer closed its socket; asks the kernel at most once a millisecond.
  bool RingPeerGone();
  // Ring comms, progress thread about to sleep with ring work queued: arms
  // this end's bell (a send comm writes the ring, a receive comm reads it)
  // and adds it, and the socket for a hang-up, to `fds`.
  void PollRing(std::vector<pollfd>* fds);
  // Ring comms, at the start of a step: empties the bell PollRing armed.
  void DrainRingBell();

  // ProgressClient (progress thread): steps the comm while it has bulk in
  // flight, unless the proxy thread holds the step lock. A broken comm does
  // nothing more.
  void Step(bool* progressed) final;
  void FillPoll(std::vector<pollfd>* fds) final;
  bool HasInput() final { return bulk_in_flight() && HasQueuedRequests(); }
  void Failed(const std::string& why) final { failure_.Set(why); }
  // One step of the direction's work; false once it failed (failure_ set).
  // Called with the step lock held.
  virtual bool StepInner(bool* progressed) = 0;
  // The fds (and events) the direction waits for; step lock held.
  virtual void FillPollLocked(std::vector<pollfd>* fds) = 0;
  // New requests queued (the progress thread looks before it sleeps). Any thread.
  virtual bool HasQueuedRequests() const = 0;

  // Proxy thread, after posting a request and in test(): moves bytes now
  // unless bulk is in flight (then wakes the progress thread instead).
  void Advance();
  // PRISM_INLINE_BYTES=0 (with progress threads): every message is bulk.
  bool AllBulk() const { return engine_ != nullptr && env_.settings->inline_bytes == 0; }
  // Whether a message of `size` bytes is bulk (moved by the progress thread).
  bool IsBulk(uint64_t size) const { return AllBulk() || (engine_ != nullptr && size > InlineLimit()); }
  // PRISM_INLINE_BYTES, or PRISM_IDLE_INLINE_BYTES while the host has idle cores.
  uint64_t InlineLimit() const {
    const Settings& s = *env_.settings;
    if (s.idle_inline_bytes > 0 && env_.host_load != nullptr && env_.host_load->Idle()) return s.idle_inline_bytes;
    return s.inline_bytes;
  }
  // A bulk message started (before it is handed over) / finished (step lock held).
  void BeginBulk() { bulk_.fetch_add(1, std::memory_order_seq_cst); }
  void EndBulk() { bulk_.fetch_sub(1, std::memory_order_acq_rel); }
  bool bulk_in_flight() const { return bulk_.load(std::memory_order_acquire) > 0; }
  // Inside StepInner on the proxy thread once bulk is in flight: stop and
  // leave the comm to the progress thread (a receive's bulk payload).
  bool LeaveToHelper() const { return stepping_on_caller_ && bulk_in_flight(); }
  // A request of this direction completed and is due now (a shaped one not
  // due yet is no news for NCCL); step lock held.
  void NoteCompleted() { completed_in_step_ = true; }
  // Inside StepInner on NCCL's proxy thread (irecv/test) once a receive
  // completed in this call: stop and return to NCCL; the next call reads the
  // next message. NCCL Socket's test() moves no further than the request it
  // tests either. NCCL 2.28 tells the GPU of received steps in a call whose
  // test() completed nothing, so reading on while the next message was
  // still landing kept that news, and the proxy thread's other connections,
  // waiting for up to 7 more messages' copies (with 3 a receive comm reads
  // on only while the next message has wholly landed). A send comm
  // does not stop (PRISM_RETURN_ON_COMPLETE=1): an isend that stopped once
  // an older send's tail went out left its own message unsent until a later
  // test() of it, one or two passes of NCCL's proxy loop later, on every
  // message while the socket was full; and a send's completion only frees a
  // step buffer the GPU rarely waits for. A progress thread never stops
  // early (it tells nobody; test() reads ready_at).
  bool ReturnToCaller() const {
    return stepping_on_caller_ && completed_in_step_ && StopsAtCompletion(env_.settings->return_on_complete, is_send_);
  }
  // Whether a comm of this direction stops at a completion under `setting`.
  static bool StopsAtCompletion(ReturnOnComplete setting, bool is_send) {
    return setting == ReturnOnComplete::kAll ||
           (!is_send && (setting == ReturnOnComplete::kReceives || setting == ReturnOnComplete::kLanded));
  }
  // True when the comm is broken; warns once, e.g. "send to PEER failed: WHY"
  // for `direction` "send to".
  bool Broken(const char* direction);

  CommEnv env_;
  std::string peer_;
  std::vector<int> fds_;
  std::unique_ptr<SharedRing> ring_;  // payloads of a same-host comm; null: over the sockets
  CommFailure failure_;

 private:
  bool warned_ = false;
  int64_t next_hangup_check_ns_ = 0;  // RingPeerGone
  bool bell_armed_ = false;           // PollRing armed it; step lock held
  bool is_send_;
  std::shared_ptr<ProgressEngine> engine_;
  bool registered_ = false;
  std::mutex step_mu_;               // held by whichever thread steps the comm
  bool stepping_on_caller_ = false;  // guarded by step_mu_
  bool completed_in_step_ = false;   // guarded by step_mu_: NoteCompleted in this StepInner
  std::atomic<int> bulk_{0};         // bulk messages posted or matched, not yet moved
};

class RealSendComm final : public RealCommBase {
 public:
  // Takes ownership of `fds` (connected, hellos written, non-blocking).
  // `dev`: the local NIC (its shared transmit link shapes the sends).
  // `ring`: see RealCommBase.
  RealSendComm(const CommEnv& env, const std::shared_ptr<ProgressEnginePool>& engines,
               std::vector<int> fds, std::string peer, int dev, std::unique_ptr<SharedRing> ring = nullptr);
  ~RealSendComm() override;

  Result Isend(void* data, size_t size, int tag, const MemRegion* mr, const MessageTag& op,
               void** request) override;

 private:
  struct SendRequest final : Request {
    RealSendComm* owner = nullptr;
    bool in_use = false;
    const char* data = nullptr;
    bool gpu = false;
    int device = -1;  // gpu: MemRegion::device
    MessageHeader header{};
    bool bulk = false;           // more than PRISM_INLINE_BYTES: the progress thread sends it
    int64_t wire_done_ns = 0;
    // As posted, kept until the NIC's arbiter decides its times (Launch).
    uint64_t size = 0;
    int tag = 0;
    int64_t posted_ns = 0;
    const MemRegion* mr = nullptr;
    MessageTag op;
    std::vector<char> staging;   // GPU payload copied to host (progress thread)
    int items_left = 0;          // progress thread
    std::atomic<int64_t> ready_at{-1};
    Result Test(int* done, int* sizes) override;
  };
  struct WriteItem {
    SendRequest* req;
    const char* ptr;
    size_t left;
  };

  void FillPollLocked(std::vector<pollfd>* fds) override;
  bool HasQueuedRequests() const override { return !submit_.Empty() || !headers_.Empty(); }
  bool StepInner(bool* progressed) override;
  // Proxy thread: hands the requests whose NIC times are decided, in
  // posting order, to the progress side (Launch).
  void LaunchDecided();
  // Proxy thread: stamps `req` with its link times `t` (unshaped: none),
  // records it as this rank's send and queues its bytes.
  void Launch(SendRequest* req, const LinkModel::Times* t);
  // A message's header onto socket 0's queue; on a ring connection counted in the
  // ring first (SharedRing::AnnounceHeader).
  void QueueHeader(SendRequest* req);
  bool StartRequest(SendRequest* req);
  bool Pump(size_t sock, bool* progressed);
  // Payloads into the ring, as far as it has room.
  bool PumpRing(bool* progressed);
  // One of the request's items (header, chunk, ring payload) went out.
  void ItemDone(SendRequest* req);

  std::vector<std::deque<WriteItem>> queues_;
  std::deque<WriteItem> ring_queue_;  // payloads still to go into ring_
  std::array<SendRequest, kPrismNetMaxRequests> pool_;
  SpscRing<SendRequest*, 64> submit_;
  // Posted on the NIC's link, times not yet decided (PRISM_LINK_ORDER=
  // round-robin), oldest first. Proxy thread.
  std::deque<SendRequest*> awaiting_link_;
  std::unique_ptr<LinkConnection> nic_;  // null: unshaped
  // A ring comm under PRISM_LINK_ORDER=round-robin: a message's payload
  // goes into the ring at its isend (submit_), its header, which carries its
  // times, once the NIC decided them at its last slice (headers_).
  const bool header_later_;
  SpscRing<SendRequest*, 64> headers_;
  uint64_t next_seq_ = 0;
};

class RealRecvComm final : public RealCommBase {
 public:
  // `ring`: see RealCommBase.
  RealRecvComm(const CommEnv& env, const std::shared_ptr<ProgressEnginePool>& engines,
               std::vector<int> fds, std::string peer, std::unique_ptr<SharedRing> ring = nullptr);
  ~RealRecvComm() override;

  Result Irecv(int n, void** data, const size_t* sizes, const int* tags,
               const MemRegion* const* mrs, const MessageTag* ops, void** request) override;

 private:
  struct Slot {
    MessageTag op;               // proxy thread only
    char* user = nullptr;
    uint64_t max_size = 0;
    int tag = 0;
    bool gpu = false;
    int device = -1;  // gpu: MemRegion::device
    // LL/LL128: NCCL's kernel polls flags inside the data instead of waiting
    // for test(). On a shaped link (the header carries a delivery time) the
    // bytes go to `staging` and reach the buffer only when the request
    // completes (at the modelled delivery), not when they land; unshaped they
    // land in the buffer directly.
    bool lines = false;
    bool held = false;           // set when the message's header is matched
    bool bulk = false;           // payload larger than PRISM_INLINE_BYTES: the progress thread's
    bool matched = false;
    uint64_t size = 0;
    int chunks_left = 0;
    std::vector<char> staging;   // GPU or held payload
  };
  struct RecvRequest final : Request {
    RealRecvComm* owner = nullptr;
    bool in_use = false;
    int n = 0;
    std::array<Slot, kMaxGroupedRecvs> slots;
    bool bulk = false;           // PRISM_INLINE_BYTES=0: the progress thread reads all of it
    int unmatched = 0;           // progress thread
    int slots_left = 0;          // progress thread
    int64_t deliver_ns = 0;      // progress thread
    int64_t posted_ns = 0;       // when NCCL posted it (irecv)
    std::atomic<int64_t> ready_at{-1};
    Result Test(int* done, int* sizes) override;
    bool Publish();  // held slots into NCCL's buffers (proxy thread)
  };
  struct ReadItem {
    RecvRequest* req;
    int slot;
    char* ptr;
    size_t left;
  };

  void FillPollLocked(std::vector<pollfd>* fds) override;
  bool HasQueuedRequests() const override { return !submit_.Empty(); }
  bool StepInner(bool* progressed) override;
  bool Pump(size_t sock, bool* progressed);
  // Matched payloads out of the ring, as far as they have arrived.
  bool PumpRing(bool* progressed);
  bool TryMatchHeader(bool* matched);
  // Whether socket 0 may hold a header not read yet: always without a ring;
  // with one, when the sender announced more than were read, or (checked
  // once a millisecond) when it hung up, whose end of stream a read must see.
  bool HeaderMayBeWaiting();
  // PRISM_RETURN_ON_COMPLETE=3, after a completion: whether socket `sock`
  // already holds the rest of its next message (one ioctl), so that reading
  // on completes it without waiting for bytes still on their way.
  bool NextMessageLanded(size_t sock) const;
  bool SlotFilled(RecvRequest* req, int slot);

  ProtocolBuffers buffers_;
  std::vector<std::deque<ReadItem>> queues_;
  std::deque<ReadItem> ring_queue_;   // matched payloads still to come out of ring_
  std::array<RecvRequest, kPrismNetMaxRequests> pool_;
  SpscRing<RecvRequest*, 64> submit_;
  std::deque<RecvRequest*> posted_;   // progress thread: not fully matched yet
  MessageHeader header_{};
  size_t header_got_ = 0;             // bytes of header_ read so far
  uint64_t headers_read_ = 0;         // ring connections: whole headers read (SharedRing::HeadersAnnounced)
  bool eof_ = false;                  // sender closed between messages
};

}  // namespace prism::plugin

#endif  // PRISM_PLUGIN_REAL_COMMS_H_
