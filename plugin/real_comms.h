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

class RealSendComm final : public NetComm, private ProgressClient {
 public:
  // Takes ownership of `fds` (connected, hellos written, non-blocking).
  // `dev`: the local NIC (its shared transmit link shapes the sends).
  RealSendComm(const CommEnv& env, const std::shared_ptr<ProgressEnginePool>& engines,
               std::vector<int> fds, std::string peer, int dev);
  ~RealSendComm() override;
  RealSendComm(const RealSendComm&) = delete;
  RealSendComm& operator=(const RealSendComm&) = delete;

  Result Isend(void* data, size_t size, int tag, const MemRegion* mr, const MessageTag& op,
               void** request) override;
  void Close() override;

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
  void Step(bool* progressed) override;
  void FillPoll(std::vector<pollfd>* fds) override;
  bool HasInput() override { return !submit_.Empty(); }
  void Failed(const std::string& why) override { failure_.Set(why); }
  // New work was queued: wake the progress thread, or (inline mode, no
  // engine) move bytes now on the calling (NCCL proxy) thread.
  void Kick();
  void DriveInline();

  bool StepInner(bool* progressed);
  bool StartRequest(SendRequest* req);
  bool Pump(size_t sock, bool* progressed);

  CommEnv env_;
  std::string peer_;
  std::vector<int> fds_;
  std::vector<std::deque<WriteItem>> queues_;
  std::array<SendRequest, kPrismNetMaxRequests> pool_;
  SpscRing<SendRequest*, 64> submit_;
  SharedLink* nic_;
  bool shaped_;
  uint64_t next_seq_ = 0;
  CommFailure failure_;
  bool warned_ = false;
  std::shared_ptr<ProgressEngine> engine_;
  bool registered_ = false;
};

class RealRecvComm final : public NetComm, private ProgressClient {
 public:
  RealRecvComm(const CommEnv& env, const std::shared_ptr<ProgressEnginePool>& engines,
               std::vector<int> fds,
               std::string peer);
  ~RealRecvComm() override;
  RealRecvComm(const RealRecvComm&) = delete;
  RealRecvComm& operator=(const RealRecvComm&) = delete;

  Result Irecv(int n, void** data, const size_t* sizes, const int* tags,
               const MemRegion* const* mrs, const MessageTag* ops, void** request) override;
  void Close() override;

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
  void Step(bool* progressed) override;
  void FillPoll(std::vector<pollfd>* fds) override;
  bool HasInput() override { return !submit_.Empty(); }
  void Failed(const std::string& why) override { failure_.Set(why); }
  // New work was queued: wake the progress thread, or (inline mode, no
  // engine) move bytes now on the calling (NCCL proxy) thread.
  void Kick();
  void DriveInline();

  bool StepInner(bool* progressed);
  bool Pump(size_t sock, bool* progressed);
  bool TryMatchHeader(bool* matched);
  bool SlotFilled(RecvRequest* req, int slot);

  CommEnv env_;
  ProtocolBuffers buffers_;
  std::string peer_;
  std::vector<int> fds_;
  std::vector<std::deque<ReadItem>> queues_;
  std::array<RecvRequest, kPrismNetMaxRequests> pool_;
  SpscRing<RecvRequest*, 64> submit_;
  std::deque<RecvRequest*> posted_;   // progress thread: not fully matched yet
  MessageHeader header_{};
  size_t header_got_ = 0;             // bytes of header_ read so far
  bool eof_ = false;                  // sender closed between messages
  CommFailure failure_;
  bool warned_ = false;
  std::shared_ptr<ProgressEngine> engine_;
  bool registered_ = false;
};

}  // namespace prism::plugin

#endif  // PRISM_PLUGIN_REAL_COMMS_H_
