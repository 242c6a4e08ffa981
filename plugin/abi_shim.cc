// The exported C ABI: ncclNetPlugin_v11, _v10, _v9 and _v8 (NCCL takes the
// newest it knows: 2.28+ v11, 2.26-2.27 v10, 2.24-2.25 v9, 2.21-2.23 v8) and
// the profiler role's ncclProfiler_v5 (2.28+) and ncclProfiler_v4 (2.27). Every entry is a thin wrapper that forwards to
// Plugin and turns any C++ exception into an ncclResult_t (nothing may unwind
// into NCCL).
#include <array>
#include <cstring>
#include <exception>

#include "plugin/nccl_net_abi.h"
#include "plugin/plugin.h"
#include "plugin/profiler_abi.h"

namespace prism::plugin {
namespace {

template <typename Fn>
prism_ncclResult_t Guard(const char* what, Fn&& fn) noexcept {
  try {
    return fn();
  } catch (const std::bad_alloc&) {
    PRISM_WARN(ThePlugin().logger(), "%s: out of memory", what);
    return prism_ncclSystemError;
  } catch (const std::exception& e) {
    PRISM_WARN(ThePlugin().logger(), "%s: internal error: %s", what, e.what());
    return prism_ncclInternalError;
  } catch (...) {
    PRISM_WARN(ThePlugin().logger(), "%s: internal error (unknown exception)", what);
    return prism_ncclInternalError;
  }
}

#define PRISM_GUARD(name, expr) Guard(name, [&]() -> prism_ncclResult_t { return expr; })

// ---- shared between v10 and v11 ----
prism_ncclResult_t Devices(int* ndev) { return PRISM_GUARD("devices", ThePlugin().Devices(ndev)); }
prism_ncclResult_t Accept(void* l, void** rc, prism_ncclNetDeviceHandle_t** dev) {
  if (dev != nullptr) *dev = nullptr;
  return PRISM_GUARD("accept", ThePlugin().Accept(l, rc));
}
prism_ncclResult_t RegMr(void* comm, void* data, size_t size, int type, void** mh) {
  return PRISM_GUARD("regMr", ThePlugin().RegMr(comm, data, size, type, mh));
}
prism_ncclResult_t RegMrDmaBuf(void* comm, void* data, size_t size, int type, uint64_t offset,
                               int fd, void** mh) {
  return PRISM_GUARD("regMrDmaBuf", ThePlugin().RegMr(comm, data, size, type, mh));
}
prism_ncclResult_t DeregMr(void* comm, void* mh) {
  return PRISM_GUARD("deregMr", ThePlugin().DeregMr(comm, mh));
}
prism_ncclResult_t Isend(void* comm, void* data, size_t size, int tag, void* mh, void* ph,
                         void** req) {
  return PRISM_GUARD("isend", ThePlugin().Isend(comm, data, size, tag, mh, ph, req));
}
prism_ncclResult_t Irecv(void* comm, int n, void** data, size_t* sizes, int* tags, void** mhs,
                         void** phs, void** req) {
  return PRISM_GUARD("irecv", ThePlugin().Irecv(comm, n, data, sizes, tags, mhs, phs, req));
}
prism_ncclResult_t Iflush(void* comm, int n, void** data, int* sizes, void** mhs, void** req) {
  return PRISM_GUARD("iflush", ThePlugin().Iflush(comm, n, data, sizes, mhs, req));
}
prism_ncclResult_t Test(void* req, int* done, int* sizes) {
  return PRISM_GUARD("test", ThePlugin().Test(req, done, sizes));
}
prism_ncclResult_t CloseSend(void* comm) {
  return PRISM_GUARD("closeSend", ThePlugin().CloseComm(comm));
}
prism_ncclResult_t CloseRecv(void* comm) {
  return PRISM_GUARD("closeRecv", ThePlugin().CloseComm(comm));
}
prism_ncclResult_t CloseListen(void* comm) {
  return PRISM_GUARD("closeListen", ThePlugin().CloseListen(comm));
}

// ---- v11 ----
prism_ncclResult_t InitV11(void** ctx, uint64_t comm_id, prism_ncclNetCommConfig_t* config,
                           prism_ncclDebugLogger_t logger, prism_ncclProfilerCallback_t prof) {
  return PRISM_GUARD("init", ThePlugin().Init(logger, prof, comm_id, ctx));
}
prism_ncclResult_t GetPropertiesV11(int dev, prism_ncclNetProperties_v11_t* props) {
  return PRISM_GUARD("getProperties", ThePlugin().GetProperties(dev, props));
}
prism_ncclResult_t ListenV11(void* ctx, int dev, void* handle, void** lc) {
  return PRISM_GUARD("listen", ThePlugin().Listen(ctx, dev, handle, lc));
}
prism_ncclResult_t ConnectV11(void* ctx, int dev, void* handle, void** sc,
                              prism_ncclNetDeviceHandle_t** devc) {
  if (devc != nullptr) *devc = nullptr;
  return PRISM_GUARD("connect", ThePlugin().Connect(ctx, dev, handle, sc));
}
prism_ncclResult_t FinalizeV11(void* ctx) {
  return PRISM_GUARD("finalize", ThePlugin().Finalize(ctx));
}
prism_ncclResult_t SetNetAttrV11(void* ctx, prism_ncclNetAttr_v11_t* attr) {
  return prism_ncclSuccess;  // hints only; the modelled links do not depend on them
}

// ---- v10 ----
prism_ncclResult_t InitV10(prism_ncclDebugLogger_t logger, prism_ncclProfilerCallback_t prof) {
  return PRISM_GUARD("init", ThePlugin().Init(logger, prof, 0, nullptr));
}
prism_ncclResult_t GetPropertiesV10(int dev, prism_ncclNetProperties_v10_t* props) {
  return PRISM_GUARD("getProperties", [&] {
    prism_ncclNetProperties_v11_t p11;
    prism_ncclResult_t r = ThePlugin().GetProperties(dev, &p11);
    if (r == prism_ncclSuccess) {
      static_assert(sizeof(*props) <= sizeof(p11));
      std::memcpy(props, &p11, sizeof(*props));  // v10 is v11 without the last field
    }
    return r;
  }());
}
prism_ncclResult_t ListenV10(int dev, void* handle, void** lc) {
  return PRISM_GUARD("listen", ThePlugin().Listen(nullptr, dev, handle, lc));
}
prism_ncclResult_t ConnectV10(int dev, prism_ncclNetCommConfig_t* config, void* handle,
                              void** sc, prism_ncclNetDeviceHandle_t** devc) {
  if (devc != nullptr) *devc = nullptr;
  return PRISM_GUARD("connect", ThePlugin().Connect(nullptr, dev, handle, sc));
}

// ---- v9: no profiler callback, no connect config, no phandles ----
prism_ncclResult_t InitV9(prism_ncclDebugLogger_t logger) {
  return PRISM_GUARD("init", ThePlugin().Init(logger, nullptr, 0, nullptr));
}
prism_ncclResult_t ConnectV9(int dev, void* handle, void** sc, prism_ncclNetDeviceHandle_t** devc) {
  if (devc != nullptr) *devc = nullptr;
  return PRISM_GUARD("connect", ThePlugin().Connect(nullptr, dev, handle, sc));
}
prism_ncclResult_t IsendV9(void* comm, void* data, size_t size, int tag, void* mh, void** req) {
  return PRISM_GUARD("isend", ThePlugin().Isend(comm, data, size, tag, mh, nullptr, req));
}
prism_ncclResult_t IrecvV9(void* comm, int n, void** data, size_t* sizes, int* tags, void** mhs, void** req) {
  return PRISM_GUARD("irecv", ThePlugin().Irecv(comm, n, data, sizes, tags, mhs, nullptr, req));
}

// ---- v8: v9 with int sizes and its own properties layout ----
// Field by field: v8 has no forceFlush, so its later fields sit lower.
void CopyToV8(const prism_ncclNetProperties_v11_t& p, prism_ncclNetProperties_v8_t* out) {
  out->name = p.name;
  out->pciPath = p.pciPath;
  out->guid = p.guid;
  out->ptrSupport = p.ptrSupport;
  out->regIsGlobal = p.regIsGlobal;
  out->speed = p.speed;
  out->port = p.port;
  out->latency = p.latency;
  out->maxComms = p.maxComms;
  out->maxRecvs = p.maxRecvs;
  out->netDeviceType = p.netDeviceType;
  out->netDeviceVersion = p.netDeviceVersion;
}
prism_ncclResult_t GetPropertiesV8(int dev, prism_ncclNetProperties_v8_t* props) {
  return PRISM_GUARD("getProperties", [&] {
    prism_ncclNetProperties_v11_t p11;
    prism_ncclResult_t r = ThePlugin().GetProperties(dev, &p11);
    if (r == prism_ncclSuccess) CopyToV8(p11, props);
    return r;
  }());
}
prism_ncclResult_t IsendV8(void* comm, void* data, int size, int tag, void* mh, void** req) {
  if (size < 0) return prism_ncclInvalidArgument;
  return IsendV9(comm, data, static_cast<size_t>(size), tag, mh, req);
}
prism_ncclResult_t IrecvV8(void* comm, int n, void** data, int* sizes, int* tags, void** mhs, void** req) {
  // n is at most the maxRecvs this plugin reports (PRISM_NIC_MAX_RECVS <= 8).
  std::array<size_t, 8> wide{};
  if (n < 0 || n > static_cast<int>(wide.size()) || sizes == nullptr) return prism_ncclInvalidArgument;
  for (int i = 0; i < n; ++i) {
    if (sizes[i] < 0) return prism_ncclInvalidArgument;
    wide[i] = static_cast<size_t>(sizes[i]);
  }
  return IrecvV9(comm, n, data, wide.data(), tags, mhs, req);
}

// ---- profiler v5 (the same library as NCCL's profiler plugin) ----
prism_ncclResult_t ProfInit(void** context, uint64_t comm_id, int* mask, const char* comm_name, int nnodes,
                            int nranks, int rank, prism_ncclDebugLogger_t logger) {
  if (context != nullptr) *context = nullptr;
  if (context == nullptr) return prism_ncclInvalidArgument;
  return PRISM_GUARD("profiler init", ThePlugin().ProfilerInit(context, comm_id, mask, nranks, rank, logger));
}
prism_ncclResult_t ProfStart(void* context, void** handle, prism_ncclProfilerEventDescr_v5_t* descr) {
  if (handle != nullptr) *handle = nullptr;
  return PRISM_GUARD("profiler startEvent", ThePlugin().tracker().StartEvent(context, handle, descr));
}
prism_ncclResult_t ProfStop(void* handle) {
  return PRISM_GUARD("profiler stopEvent", ThePlugin().tracker().StopEvent(handle));
}
prism_ncclResult_t ProfRecord(void* handle, prism_ncclProfilerEventState_t state,
                              prism_ncclProfilerEventStateArgs_v5_t* args) {
  // Sizes and states come through the net side; only a kernel channel's stop
  // stamp is read here (PRISM_OP_TIMES). NCCL's proxy thread calls this for
  // every state of every network step: those return at once.
  if (state != kPrismProfilerKernelChStop) return prism_ncclSuccess;
  return PRISM_GUARD("profiler recordEventState", ThePlugin().tracker().RecordEventState(handle, state, args));
}
prism_ncclResult_t ProfFinalize(void* context) {
  return PRISM_GUARD("profiler finalize", ThePlugin().tracker().Finalize(context));
}

// ---- profiler v4 (NCCL 2.27): commHash after the mask; one-byte event type ----
prism_ncclResult_t ProfInitV4(void** context, int* mask, const char* comm_name, uint64_t comm_hash, int nnodes,
                              int nranks, int rank, prism_ncclDebugLogger_t logger) {
  return ProfInit(context, comm_hash, mask, comm_name, nnodes, nranks, rank, logger);
}
prism_ncclResult_t ProfStartV4(void* context, void** handle, prism_ncclProfilerEventDescr_v4_t* descr) {
  if (handle != nullptr) *handle = nullptr;
  if (descr == nullptr) return prism_ncclInvalidArgument;
  prism_ncclProfilerEventDescr_v5_t v5 = DescrFromV4(*descr);
  return ProfStart(context, handle, &v5);
}
prism_ncclResult_t ProfRecordV4(void* handle, prism_ncclProfilerEventState_t state,
                                prism_ncclProfilerEventStateArgs_v4_t* args) {
  return ProfRecord(handle, state, args);
}

}  // namespace
}  // namespace prism::plugin

namespace pp = prism::plugin;

extern "C" {

__attribute__((visibility("default"))) prism_ncclNet_v11_t ncclNetPlugin_v11 = {
    pp::kPluginName, pp::InitV11,   pp::Devices,     pp::GetPropertiesV11, pp::ListenV11,
    pp::ConnectV11,  pp::Accept,    pp::RegMr,       pp::RegMrDmaBuf,      pp::DeregMr,
    pp::Isend,       pp::Irecv,     pp::Iflush,      pp::Test,             pp::CloseSend,
    pp::CloseRecv,   pp::CloseListen,
    /*getDeviceMr=*/nullptr, /*irecvConsumed=*/nullptr, /*makeVDevice=*/nullptr,
    pp::FinalizeV11, pp::SetNetAttrV11,
};

__attribute__((visibility("default"))) prism_ncclNet_v10_t ncclNetPlugin_v10 = {
    pp::kPluginName, pp::InitV10,   pp::Devices,     pp::GetPropertiesV10, pp::ListenV10,
    pp::ConnectV10,  pp::Accept,    pp::RegMr,       pp::RegMrDmaBuf,      pp::DeregMr,
    pp::Isend,       pp::Irecv,     pp::Iflush,      pp::Test,             pp::CloseSend,
    pp::CloseRecv,   pp::CloseListen,
    /*getDeviceMr=*/nullptr, /*irecvConsumed=*/nullptr, /*makeVDevice=*/nullptr,
};

__attribute__((visibility("default"))) prism_ncclNet_v9_t ncclNetPlugin_v9 = {
    pp::kPluginName, pp::InitV9,    pp::Devices,     pp::GetPropertiesV10, pp::ListenV10,
    pp::ConnectV9,   pp::Accept,    pp::RegMr,       pp::RegMrDmaBuf,      pp::DeregMr,
    pp::IsendV9,     pp::IrecvV9,   pp::Iflush,      pp::Test,             pp::CloseSend,
    pp::CloseRecv,   pp::CloseListen,
    /*getDeviceMr=*/nullptr, /*irecvConsumed=*/nullptr, /*makeVDevice=*/nullptr,
};

__attribute__((visibility("default"))) prism_ncclNet_v8_t ncclNetPlugin_v8 = {
    pp::kPluginName, pp::InitV9,    pp::Devices,     pp::GetPropertiesV8,  pp::ListenV10,
    pp::ConnectV9,   pp::Accept,    pp::RegMr,       pp::RegMrDmaBuf,      pp::DeregMr,
    pp::IsendV8,     pp::IrecvV8,   pp::Iflush,      pp::Test,             pp::CloseSend,
    pp::CloseRecv,   pp::CloseListen,
    /*getDeviceMr=*/nullptr, /*irecvConsumed=*/nullptr,
};

__attribute__((visibility("default"))) prism_ncclProfiler_v5_t ncclProfiler_v5 = {
    pp::kPluginName, pp::ProfInit, pp::ProfStart, pp::ProfStop, pp::ProfRecord, pp::ProfFinalize,
};

// NCCL 2.27 loads profilers v4..v1 only (2.28+ take v5 first).
__attribute__((visibility("default"))) prism_ncclProfiler_v4_t ncclProfiler_v4 = {
    pp::kPluginName, pp::ProfInitV4, pp::ProfStartV4, pp::ProfStop, pp::ProfRecordV4, pp::ProfFinalize,
};

}  // extern "C"
