// The plugin's behaviour behind the C ABI (abi_shim.cc is the only caller).
// One Plugin exists per process (NCCL's v10 ABI has no context argument);
// it is created on first use and deliberately never destroyed, so that exit
// and fork children never run its destructor.
//
// Thread-safety: every method may be called from any thread; per-comm calls
// follow NCCL's one-thread-per-comm rule (comm.h).
#ifndef PRISM_PLUGIN_PLUGIN_H_
#define PRISM_PLUGIN_PLUGIN_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "plugin/comm.h"
#include "plugin/cuda_copy.h"
#include "plugin/live_handles.h"
#include "plugin/log.h"
#include "plugin/nccl_net_abi.h"
#include "plugin/op_relay.h"
#include "plugin/op_schedules.h"
#include "plugin/op_times.h"
#include "plugin/op_tracker.h"
#include "plugin/profiler_abi.h"
#include "plugin/progress_engine.h"
#include "plugin/settings.h"
#include "plugin/virtual_peers.h"

namespace prism::plugin {

inline constexpr const char* kPluginName = "Prism";

// One NCCL net context (v11: one per communicator init; v10: one per process).
class NetContext : public Tagged {
 public:
  NetContext(const CommEnv& env, uint64_t comm_id)
      : Tagged(ObjectKind::kContext),
        env_(env),
        comm_id_(comm_id),
        engines_(std::make_shared<ProgressEnginePool>(env.settings->progress_threads,
                                                      env.settings->spin_ns)) {}
  NetContext(const NetContext&) = delete;
  NetContext& operator=(const NetContext&) = delete;

  uint64_t comm_id() const { return comm_id_; }
  // The progress threads of this context's real-peer comms
  // (PRISM_PROGRESS_THREADS; started as comms attach; comms share
  // ownership of theirs, so they may outlive the context).
  const std::shared_ptr<ProgressEnginePool>& engines() const { return engines_; }
  // Created on first call (no gRPC before a virtual peer may exist). Shared
  // with the listen comms that accept virtual senders, which may outlive
  // the context.
  std::shared_ptr<VirtualPeers> virtual_peers();

 private:
  CommEnv env_;
  uint64_t comm_id_;
  std::shared_ptr<ProgressEnginePool> engines_;
  std::mutex mu_;
  std::shared_ptr<VirtualPeers> virtual_peers_;
};

class Plugin {
 public:
  Plugin() = default;
  Plugin(const Plugin&) = delete;
  Plugin& operator=(const Plugin&) = delete;

  // v11: a fresh context per call; v10 (ctx == nullptr): the process context.
  // `prof_fn` is NCCL's profiler callback (kept for Isend/Irecv).
  Result Init(prism_ncclDebugLogger_t logger, prism_ncclProfilerCallback_t prof_fn, uint64_t comm_id,
              void** ctx);
  Result Devices(int* ndev);
  Result GetProperties(int dev, prism_ncclNetProperties_v11_t* props);
  Result Listen(void* ctx, int dev, void* handle, void** listen_comm);
  Result Connect(void* ctx, int dev, void* handle, void** send_comm);
  Result Accept(void* listen_comm, void** recv_comm);
  Result RegMr(void* comm, void* data, size_t size, int type, void** mhandle);
  Result DeregMr(void* comm, void* mhandle);
  // `phandle(s)`: NCCL's per-transfer profiler handles (may be null).
  Result Isend(void* comm, void* data, size_t size, int tag, void* mhandle, void* phandle,
               void** request);
  Result Irecv(void* comm, int n, void** data, size_t* sizes, int* tags, void** mhandles,
               void** phandles, void** request);
  Result Iflush(void* comm, int n, void** data, int* sizes, void** mhandles, void** request);
  Result Test(void* request, int* done, int* sizes);
  Result CloseComm(void* comm);
  Result CloseListen(void* listen_comm);
  Result Finalize(void* ctx);

  // The profiler role (profiler_shim.cc): the same library is NCCL's
  // profiler plugin; these forward to the OpTracker.
  Result ProfilerInit(void** context, uint64_t comm_id, int* activation_mask, int nranks, int rank,
                      prism_ncclDebugLogger_t logger);
  OpTracker& tracker() { return tracker_; }

  // The v10 process-wide context (created by the first v10 init).
  NetContext* process_context() { return process_context_; }
  const Logger& logger() const { return logger_; }

 private:
  Result InitOnce();
  NetContext* ContextOrDefault(void* ctx);
  // Logs what NCCL passed wrong and returns ncclInvalidArgument.
  Result BadArgument(const char* call, const std::string& what) const;
  std::string DescribeBadComm(void* comm) const;
  // Logs (and with PRISM_LINK_REPORT prints) how the shaped links held.
  void ReportLinkHold();
  // The abstract Unix listener beside a listen's TCP one, for real peers on
  // this host (host_identity.h); -1 when PRISM_SAME_HOST=tcp, the host's key
  // is unknown, or it cannot be opened (warned once: peers then dial TCP).
  int OpenSameHostListener(uint64_t listen_id);

  std::once_flag once_;
  Result once_result_ = prism_ncclSuccess;
  Settings settings_;
  Logger logger_;
  CudaCopier cuda_;
  std::unique_ptr<NicLinks> nics_;
  OpScheduleBook schedules_;
  LinkHoldStats link_hold_;
  HostLoad host_load_;
  std::atomic<bool> told_virtual_broadcast_{false};  // CommEnv::told_virtual_broadcast
  CommEnv env_;
  OpRelay relay_{&env_};
  OpTracker tracker_{&relay_};
  std::unique_ptr<OpTimesLog> op_times_;  // PRISM_OP_TIMES; set in InitOnce, then only read
  std::atomic<prism_ncclProfilerCallback_t> prof_fn_{nullptr};
  std::vector<std::string> nic_names_;
  uint32_t local_ipv4_be_ = 0;
  std::atomic<uint64_t> listen_counter_{0};
  uint64_t listen_id_base_ = 0;
  std::atomic<bool> warned_same_host_{false};
  std::mutex mu_;
  NetContext* process_context_ = nullptr;
  int live_contexts_ = 0;  // contexts from init(ctx) not yet finalized; under mu_
  LiveHandles handles_;    // comms, listen comms and contexts handed to NCCL
};

// The process's Plugin (never destroyed).
Plugin& ThePlugin();

}  // namespace prism::plugin

#endif  // PRISM_PLUGIN_PLUGIN_H_
