// Send and receive comms between two plugin instances over TCP (real peers).
// Wire format: real_wire.h. Link shaping: link_model.h (the sender's NIC
// link, shared by all its connections, is authoritative: it stamps the
// delivery time into each message header). Both directions record their
// transfers in the NCCL operation they belong to (op_tracker.h), so that a
// virtual peer's messages can mirror them.
//
// Each comm owns its sockets and is served by one of its context's progress
// threads (ProgressEngine, picked by the context's ProgressEnginePool). NCCL's proxy thread posts requests through a
// lock-free SPSC ring; the progress thread moves bytes and publishes
// completion through the request's atomics; test() only reads those atomics
// and the clock. At most kPrismNetMaxRequests requests
// are in flight per comm: isend/irecv return a NULL request beyond that
// (NCCL retries later).
#ifndef PRISM_PLUGIN_REAL_COMMS_H_
#define PRISM_PLUGIN_REAL_COMMS_H_

#include <sys/uio.h>

#include <array>
#include <atomic>
#include <deque>
#include <memory>
#include <string>
#include <vector>

#include "plugin/comm.h"
#include "plugin/link_model.h"
#include "plugin/ll_lines.h"
#include "plugin/progress_engine.h"
#include "plugin/real_wire.h"
#include "plugin/spsc_ring.h"

namespace prism::plugin {

inline constexpr int kMaxGroupedRecvs = 8;

// State shared by both directions: the broken flag and its reason.
class CommFailure {
 public:
  void Set(std::string why) {
    if (broken_.load(std::memory_order_acquire)) return;
    why_ = std::move(why);
    broken_.store(true, std::memory_order_release);
  }
  bool broken() const { return broken_.load(std::memory_order_acquire); }
  const std::string& why() const { return why_; }  // valid once broken()

 private:
  std::atomic<bool> broken_{false};
  std::string why_;
};

// What both directions of a real-peer comm share: its sockets, its failure
// and the progress thread (or, in inline mode, NCCL's proxy thread) that
// moves its bytes. A subclass calls StartProgress last in its constructor
// (a progress thread may Step it from then on) and Close first in its
// destructor (no thread Steps it once Close returns).
class RealCommBase : public NetComm, protected ProgressClient {
 public:
  RealCommBase(const RealCommBase&) = delete;
  RealCommBase& operator=(const RealCommBase&) = delete;
  // Leaves the progress thread, then closes the sockets. Idempotent.
  void Close() final;

 protected:
  // Takes ownership of `fds` (connected, hellos written, non-blocking).
  RealCommBase(const CommEnv& env, std::vector<int> fds, std::string peer);
  ~RealCommBase() override = default;
  void StartProgress(const std::shared_ptr<ProgressEnginePool>& engines);

  // ProgressClient: a broken comm does nothing more.
  void Step(bool* progressed) final {
    if (!failure_.broken()) StepInner(progressed);
  }
  void Failed(const std::string& why) final { failure_.Set(why); }
  // One step of the direction's work; false once it failed (failure_ set).
  virtual bool StepInner(bool* progressed) = 0;

  // New work was queued: wake the progress thread, or (inline mode, no
  // engine) move bytes now on the calling (NCCL proxy) thread.
  void Kick();
  // Inline mode only: one Step on the calling thread.
  void DriveInline();
  // True when the comm is broken; warns once, e.g. "send to PEER failed: WHY"
  // for `direction` "send to".
  bool Broken(const char* direction);

  CommEnv env_;
  std::string peer_;
  std::vector<int> fds_;
  CommFailure failure_;

 private:
  bool warned_ = false;
  std::shared_ptr<ProgressEngine> engine_;
  bool registered_ = false;
};

class RealSendComm final : public RealCommBase {
 public:
  // Takes ownership of `fds` (connected, hellos written, non-blocking).
  // `dev`: the local NIC (its shared transmit link shapes the sends).
  RealSendComm(const CommEnv& env, const std::shared_ptr<ProgressEnginePool>& engines,
               std::vector<int> fds, std::string peer, int dev);
  ~RealSendComm() override;

  Result Isend(void* data, size_t size, int tag, const MemRegion* mr, const MessageTag& op,
               void** request) override;

 private:
  struct SendRequest final : Request {
    RealSendComm* owner = nullptr;
    bool in_use = false;
    const char* data = nullptr;
    bool gpu = false;
    MessageHeader header{};
    int64_t wire_done_ns = 0;
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

  // ProgressClient
  void FillPoll(std::vector<pollfd>* fds) override;
  bool HasInput() override { return !submit_.Empty(); }

  bool StepInner(bool* progressed) override;
  bool StartRequest(SendRequest* req);
  bool Pump(size_t sock, bool* progressed);

  std::vector<std::deque<WriteItem>> queues_;
  std::array<SendRequest, kPrismNetMaxRequests> pool_;
  SpscRing<SendRequest*, 64> submit_;
  SharedLink* nic_;
  bool shaped_;
  uint64_t next_seq_ = 0;
};

class RealRecvComm final : public RealCommBase {
 public:
  RealRecvComm(const CommEnv& env, const std::shared_ptr<ProgressEnginePool>& engines,
               std::vector<int> fds,
               std::string peer);
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
    // LL/LL128: NCCL's kernel polls flags inside the data instead of waiting
    // for test(), so the bytes go to `staging` and reach the buffer only when
    // the request completes (at the modelled delivery), not when they land.
    bool held = false;
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

  // ProgressClient
  void FillPoll(std::vector<pollfd>* fds) override;
  bool HasInput() override { return !submit_.Empty(); }

  bool StepInner(bool* progressed) override;
  bool Pump(size_t sock, bool* progressed);
  bool TryMatchHeader(bool* matched);
  bool SlotFilled(RecvRequest* req, int slot);

  ProtocolBuffers buffers_;
  std::vector<std::deque<ReadItem>> queues_;
  std::array<RecvRequest, kPrismNetMaxRequests> pool_;
  SpscRing<RecvRequest*, 64> submit_;
  std::deque<RecvRequest*> posted_;   // progress thread: not fully matched yet
  MessageHeader header_{};
  size_t header_got_ = 0;             // bytes of header_ read so far
  bool eof_ = false;                  // sender closed between messages
};

}  // namespace prism::plugin

#endif  // PRISM_PLUGIN_REAL_COMMS_H_
