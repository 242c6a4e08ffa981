// Send and receive comms whose peer is a virtual rank played by prismd. No
// payload travels: sends complete at the time the local link model gives;
// receives complete at the time prismd's schedule gives (DaemonSession) and
// their buffers are filled by PRISM_RECV_FILL. Completion times are decided
// locally in test(); no call waits for prismd.
//
// Threading: NCCL's one-thread-per-comm rule (comm.h). Requests are pooled,
// kPrismNetMaxRequests per comm; isend/irecv return a NULL request beyond.
#ifndef PRISM_PLUGIN_VIRTUAL_COMMS_H_
#define PRISM_PLUGIN_VIRTUAL_COMMS_H_

#include <array>
#include <memory>
#include <string>

#include "plugin/comm.h"
#include "plugin/daemon_session.h"
#include "plugin/link_model.h"

namespace prism::plugin {

class VirtualSendComm final : public NetComm {
 public:
  VirtualSendComm(const CommEnv& env, std::shared_ptr<DaemonSession> session, uint64_t conn_id,
                  int dev);
  ~VirtualSendComm() override;
  VirtualSendComm(const VirtualSendComm&) = delete;
  VirtualSendComm& operator=(const VirtualSendComm&) = delete;

  Result Isend(void* data, size_t size, int tag, const MemRegion* mr, void** request) override;
  void Close() override;

 private:
  struct SendRequest final : Request {
    VirtualSendComm* owner = nullptr;
    bool in_use = false;
    uint64_t seq = 0;
    uint64_t size = 0;
    int64_t done_at = 0;
    Result Test(int* done, int* sizes) override;
  };

  CommEnv env_;
  std::shared_ptr<DaemonSession> session_;
  std::shared_ptr<ConnState> conn_;
  uint64_t conn_id_;
  LinkModel link_;
  uint64_t next_seq_ = 0;
  bool closed_ = false;
  std::array<SendRequest, kPrismNetMaxRequests> pool_;
};

class VirtualRecvComm final : public NetComm {
 public:
  VirtualRecvComm(const CommEnv& env, std::shared_ptr<DaemonSession> session, uint64_t conn_id,
                  int dev);
  ~VirtualRecvComm() override;
  VirtualRecvComm(const VirtualRecvComm&) = delete;
  VirtualRecvComm& operator=(const VirtualRecvComm&) = delete;

  Result Irecv(int n, void** data, const size_t* sizes, const int* tags,
               const MemRegion* const* mrs, void** request) override;
  void Close() override;

 private:
  static constexpr int kMaxSlots = 8;
  struct Slot {
    char* data = nullptr;
    uint64_t max_size = 0;
    bool gpu = false;
    uint64_t seq = 0;
    bool resolved = false;     // schedule known and complete time computed
    uint64_t bytes = 0;
    int64_t done_at = 0;
    Schedule schedule;
    bool has_schedule = false;
  };
  struct RecvRequest final : Request {
    VirtualRecvComm* owner = nullptr;
    bool in_use = false;
    int n = 0;
    int64_t posted_at = 0;
    std::array<Slot, kMaxSlots> slots;
    Result Test(int* done, int* sizes) override;
  };
  // Tries to compute slot's completion time; false when something is still
  // unknown. Sets *error on a bad schedule.
  bool Resolve(RecvRequest& req, Slot& slot, Result* error);
  bool Fill(const Slot& slot);
  Result Fail(const std::string& why);

  CommEnv env_;
  std::shared_ptr<DaemonSession> session_;
  std::shared_ptr<ConnState> conn_;
  uint64_t conn_id_;
  uint64_t next_seq_ = 0;
  uint64_t next_resolve_seq_ = 0;  // the link model runs in receive order
  int64_t link_wire_end_ = 0;
  bool closed_ = false;
  bool warned_ = false;
  std::array<RecvRequest, kPrismNetMaxRequests> pool_;
};

}  // namespace prism::plugin

#endif  // PRISM_PLUGIN_VIRTUAL_COMMS_H_
