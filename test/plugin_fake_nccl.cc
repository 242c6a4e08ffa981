#include "test/plugin_fake_nccl.h"

#include <unistd.h>

#include <catch2/catch.hpp>

namespace prism::test {
namespace {

// Event types of NCCL 2.28's v5 API beyond the ones profiler_abi.h names.
constexpr uint64_t kProfileGroupApi = 1u << 8;
constexpr uint64_t kProfileCollApi = 1u << 9;
constexpr uint64_t kProfileP2pApi = 1u << 10;

int Divup(int a, int b) { return (a + b - 1) / b; }

}  // namespace

FakeNccl::FakeNccl(plugin::OpTracker* tracker, uint64_t comm_hash, int nranks, int rank)
    : tracker_(tracker), rank_(rank) {
  REQUIRE(tracker_->Init(&context_, comm_hash, &mask_, nranks, rank) == prism_ncclSuccess);
}

FakeNccl::~FakeNccl() {
  tracker_->Finalize(context_);
}

void* FakeNccl::StartUntracked(uint64_t type) {
  prism_ncclProfilerEventDescr_v5_t d{};
  d.type = type;
  d.rank = rank_;
  void* handle = reinterpret_cast<void*>(0x1);  // NCCL's slot may hold anything before
  tracker_->StartEvent(context_, &handle, &d);
  return handle;
}

std::vector<void*> FakeNccl::StartTasks(const std::vector<FakeColl>& colls, const std::vector<FakeP2p>& p2ps) {
  // The API and group events come first; the tracker keeps none of them.
  CHECK(StartUntracked(kProfileGroupApi) == nullptr);
  for (size_t i = 0; i < colls.size(); ++i) CHECK(StartUntracked(kProfileCollApi) == nullptr);
  for (size_t i = 0; i < p2ps.size(); ++i) CHECK(StartUntracked(kProfileP2pApi) == nullptr);
  // A group gets a handle (NCCL 2.26/2.27 start no task events under a
  // group without one); it carries nothing.
  void* group = StartUntracked(kPrismProfileGroup);
  CHECK(group != nullptr);

  std::vector<void*> handles;
  for (const FakeColl& c : colls) {
    prism_ncclProfilerEventDescr_v5_t d{};
    d.type = kPrismProfileColl;
    d.parentObj = nullptr;  // the CollApi event: NULL from this tracker
    d.rank = rank_;
    d.coll.seqNumber = c.seq;
    d.coll.func = c.func;
    d.coll.count = c.count;
    d.coll.root = c.root;
    d.coll.datatype = c.datatype;
    d.coll.nChannels = c.channels;
    d.coll.nWarps = 16;
    d.coll.algo = c.algo;
    d.coll.proto = c.proto;
    d.coll.parentGroup = group;
    void* handle = nullptr;
    tracker_->StartEvent(context_, &handle, &d);
    handles.push_back(handle);
  }
  for (const FakeP2p& p : p2ps) {
    prism_ncclProfilerEventDescr_v5_t d{};
    d.type = kPrismProfileP2p;
    d.parentObj = nullptr;
    d.rank = rank_;
    d.p2p.func = p.func;
    d.p2p.count = p.count;
    d.p2p.datatype = p.datatype;
    d.p2p.peer = p.peer;
    d.p2p.nChannels = p.channels;
    d.p2p.parentGroup = group;
    void* handle = nullptr;
    tracker_->StartEvent(context_, &handle, &d);
    handles.push_back(handle);
  }
  return handles;
}

void FakeNccl::StopTasks(const std::vector<void*>& handles) {
  for (void* h : handles) {
    if (h != nullptr) tracker_->StopEvent(h);
  }
}

FakeSub FakeNccl::Sub(void* task, uint8_t channel, int peer, int nsteps, int slice_steps, bool is_send) const {
  FakeSub s;
  s.profiler = tracker_;
  s.profilerContext = context_;
  s.taskEventHandle = task;
  s.eActivationMask = mask_;
  s.rank = rank_;
  s.pid = getpid();
  s.channelId = channel;
  s.peer = peer;
  s.nsteps = nsteps;
  s.sliceSteps = slice_steps;
  s.isSend = is_send;
  return s;
}

void FakeNccl::StartProxyOp(FakeSub* sub) {
  if ((sub->eActivationMask & (kPrismProfileProxyOp | kPrismProfileProxyStep | kPrismProfileNetPlugin)) == 0) return;
  prism_ncclProfilerEventDescr_v5_t d{};
  d.type = kPrismProfileProxyOp;
  d.parentObj = sub->taskEventHandle;
  d.rank = sub->rank;
  d.proxyOp.pid = sub->pid;
  d.proxyOp.channelId = sub->channelId;
  d.proxyOp.peer = sub->peer;
  d.proxyOp.nSteps = Divup(sub->nsteps, sub->sliceSteps);
  d.proxyOp.chunkSize = sub->chunkSize * sub->sliceSteps;
  d.proxyOp.isSend = sub->isSend ? 1 : 0;
  tracker_->StartEvent(sub->profilerContext, &sub->opEventHandle, &d);
}

void FakeNccl::StopProxyOp(FakeSub* sub) {
  if (sub->opEventHandle == nullptr) return;
  tracker_->StopEvent(sub->opEventHandle);
  sub->opEventHandle = nullptr;
}

void FakeNccl::StartKernelCh(FakeSub* sub, uint64_t gpu_start_ns) {
  if ((sub->eActivationMask & kPrismProfileKernelCh) == 0) return;
  prism_ncclProfilerEventDescr_v5_t d{};
  d.type = kPrismProfileKernelCh;
  d.parentObj = sub->taskEventHandle;
  d.kernelCh.channelId = sub->channelId;
  d.kernelCh.pTimer = gpu_start_ns;
  tracker_->StartEvent(sub->profilerContext, &sub->kernelEventHandle, &d);
}

void FakeNccl::StopKernelCh(FakeSub* sub, uint64_t gpu_stop_ns) {
  if (sub->kernelEventHandle == nullptr) return;
  prism_ncclProfilerEventStateArgs_v5_t a{};
  a.kernelCh.pTimer = gpu_stop_ns;
  tracker_->RecordEventState(sub->kernelEventHandle, kPrismProfilerKernelChStop, &a);
  tracker_->StopEvent(sub->kernelEventHandle);
  sub->kernelEventHandle = nullptr;
}

void FakeNccl::StartStep(FakeSub* sub, int step_id) {
  const int step = Divup(step_id, sub->sliceSteps);
  FakeProxyEventHandle& p = sub->pHandles[step % kNcclSteps];
  if (sub->eActivationMask & (kPrismProfileProxyStep | kPrismProfileNetPlugin)) {
    prism_ncclProfilerEventDescr_v5_t d{};
    d.type = kPrismProfileProxyStep;
    d.parentObj = sub->opEventHandle;
    d.rank = sub->rank;
    d.proxyStep.step = step;
    tracker_->StartEvent(sub->profilerContext, &p.stepEventHandle, &d);
  }
  p.subArgPtr = sub;
}

void FakeNccl::StopStep(FakeSub* sub, int step_id) {
  FakeProxyEventHandle& p = sub->pHandles[Divup(step_id, sub->sliceSteps) % kNcclSteps];
  if (p.stepEventHandle == nullptr) return;
  tracker_->StopEvent(p.stepEventHandle);
  p.stepEventHandle = nullptr;
}

void* FakeNccl::PHandle(FakeSub* sub, int step_id) {
  return &sub->pHandles[Divup(step_id, sub->sliceSteps) % kNcclSteps];
}

plugin::MessageTag FakeNccl::Transfer(FakeSub* sub, int step_id) {
  plugin::MessageTag tag;
  plugin::OpTracker::Resolve(&FakeNccl::ProfCallback, PHandle(sub, step_id), &tag);
  return tag;
}

prism_ncclResult_t FakeNccl::ProfCallback(void** event_handle, int type, void* phandle, int64_t plugin_id,
                                          void* ext_data) {
  if (type == kPrismNetEventStart) {
    auto* p = static_cast<FakeProxyEventHandle*>(phandle);  // NCCL dereferences it unchecked
    FakeSub* sub = p->subArgPtr;
    if (sub->eActivationMask & kPrismProfileNetPlugin) {
      prism_ncclProfilerEventDescr_v5_t d{};
      d.type = kPrismProfileNetPlugin;
      d.parentObj = p->stepEventHandle;
      d.rank = sub->rank;
      d.netPlugin.id = plugin_id;
      d.netPlugin.data = ext_data;
      return sub->profiler->StartEvent(sub->profilerContext, event_handle, &d);
    }
  }
  // Stop and update name only *event_handle, which this tracker leaves NULL.
  return prism_ncclSuccess;
}

}  // namespace prism::test
