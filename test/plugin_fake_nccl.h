// A stand-in for NCCL 2.28.9's profiler front end, driving the plugin's
// OpTracker with the calls, arguments and order NCCL itself makes (read from
// NCCL's public source at tag v2.28.9-1):
//  - src/plugin/profiler.cc: ncclProfilerStartTaskEvents (one Coll/P2p event
//    per task of a kernel plan, parent = the CollApi/P2pApi event), the
//    ProxyOp events (parent = the task event; nSteps = DIVUP(nsteps,
//    sliceSteps)), the ProxyStep events (parent = the ProxyOp event; step =
//    DIVUP(stepId, sliceSteps); handle kept in pHandles[step % NCCL_STEPS])
//    and ncclProfilerCallback, the `profFn` the net plugin gets (Start: a
//    NetPlugin event whose parent is the phandle's step event).
//  - src/enqueue.cc hostStreamPlanTask: task events start, the proxy ops are
//    posted, the task events stop -- before the proxy thread starts the
//    ProxyOps that name them as parents.
//  - src/plugin/profiler.cc ncclProfiler{Start,Stop}KernelChEvent (parent =
//    the task event; channelId and pTimer; stop = recordEventState
//    KernelChStop with the stop stamp, then stopEvent), called by the
//    profiler proxy (src/transport/profiler.cc) once the kernel stamped.
//  - src/transport/net.cc send/recvProxyProgress: per step, start the step
//    event, then isend/irecv with phandle = &pHandles[step % NCCL_STEPS],
//    ..., stop the step event; stop every ProxyOp of the args once all are done.
//
// Thread-compatible.
#ifndef PRISM_TEST_PLUGIN_FAKE_NCCL_H_
#define PRISM_TEST_PLUGIN_FAKE_NCCL_H_

#include <sys/types.h>

#include <cstdint>
#include <string>
#include <vector>

#include "plugin/op_tracker.h"
#include "plugin/profiler_abi.h"

namespace prism::test {

inline constexpr int kNcclSteps = 8;  // NCCL_STEPS

struct FakeSub;

// struct ncclProxyEventHandle (src/include/proxy.h): what a phandle points to.
struct FakeProxyEventHandle {
  void* stepEventHandle = nullptr;
  FakeSub* subArgPtr = nullptr;
};

// The fields of one ncclProxySubArgs that the profiler front end reads: one
// (channel, peer, direction) of one task.
struct FakeSub {
  plugin::OpTracker* profiler = nullptr;  // NCCL's loaded profiler plugin
  void* profilerContext = nullptr;
  void* taskEventHandle = nullptr;  // the Coll/P2p event (maybe stopped already)
  void* opEventHandle = nullptr;    // the ProxyOp event
  void* kernelEventHandle = nullptr;  // the KernelCh event
  int eActivationMask = 0;
  int rank = 0;
  pid_t pid = 0;
  uint8_t channelId = 0;
  int peer = 0;
  int nsteps = 0;        // NCCL steps; a network transfer is sliceSteps of them
  int sliceSteps = 1;
  int chunkSize = 1 << 19;
  bool isSend = false;
  FakeProxyEventHandle pHandles[kNcclSteps];
};

// One collective as ncclProfilerStartTaskEvents describes it.
struct FakeColl {
  uint64_t seq = 0;
  const char* func = "AllReduce";
  size_t count = 0;
  const char* datatype = "ncclFloat32";
  int root = 0;
  uint8_t channels = 1;
  const char* algo = "RING";
  const char* proto = "SIMPLE";
};

// One send or receive as ncclProfilerStartTaskEvents describes it.
struct FakeP2p {
  const char* func = "Send";
  size_t count = 0;
  const char* datatype = "ncclInt8";
  int peer = 0;
  uint8_t channels = 1;
};

class FakeNccl {
 public:
  // ncclProfilerPluginInit for one communicator: init(&context, commHash, &mask, ...).
  FakeNccl(plugin::OpTracker* tracker, uint64_t comm_hash, int nranks, int rank);
  // finalize(context).
  ~FakeNccl();
  FakeNccl(const FakeNccl&) = delete;
  FakeNccl& operator=(const FakeNccl&) = delete;

  void* context() const { return context_; }
  int activation_mask() const { return mask_; }

  // ncclProfilerStartTaskEvents for a plan of these tasks, preceded by the
  // GroupApi/CollApi/P2pApi/Group events NCCL starts first (the tracker
  // answers those with NULL handles, which become the tasks' parents).
  // Returns the task event handles, in order.
  std::vector<void*> StartTasks(const std::vector<FakeColl>& colls, const std::vector<FakeP2p>& p2ps);
  // ncclProfilerStopTaskEvents: stops every non-NULL handle.
  void StopTasks(const std::vector<void*>& handles);

  // A proxy sub of `task` (pid: this process).
  FakeSub Sub(void* task, uint8_t channel, int peer, int nsteps, int slice_steps, bool is_send) const;
  // ncclProfilerStartProxyOpEvent / StopProxyOpEvent.
  void StartProxyOp(FakeSub* sub);
  void StopProxyOp(FakeSub* sub);
  // ncclProfilerStart{Send,Recv}ProxyStepEvent / StopProxyStepEvent for the
  // NCCL step `step_id` (a multiple of sub->sliceSteps).
  void StartStep(FakeSub* sub, int step_id);
  void StopStep(FakeSub* sub, int step_id);

  // ncclProfilerStartKernelChEvent / StopKernelChEvent: the profiler proxy
  // reports the kernel's stamps (GPU %globaltimer) for `sub`'s channel; the
  // stop is recordEventState(KernelChStop, stamp) and then stopEvent.
  void StartKernelCh(FakeSub* sub, uint64_t gpu_start_ns);
  void StopKernelCh(FakeSub* sub, uint64_t gpu_stop_ns);

  // What isend/irecv of step `step_id` gets as its phandle.
  static void* PHandle(FakeSub* sub, int step_id);
  // The net plugin side of isend/irecv: OpTracker::Resolve with NCCL's
  // callback and that phandle.
  static plugin::MessageTag Transfer(FakeSub* sub, int step_id);

  // ncclProfilerCallback (src/plugin/profiler.cc): NCCL finds the profiler
  // through the phandle's sub.
  static prism_ncclResult_t ProfCallback(void** event_handle, int type, void* phandle, int64_t plugin_id,
                                         void* ext_data);

 private:
  void* StartUntracked(uint64_t type);

  plugin::OpTracker* tracker_;
  void* context_ = nullptr;
  int mask_ = 0;
  int rank_;
};

}  // namespace prism::test

#endif  // PRISM_TEST_PLUGIN_FAKE_NCCL_H_
