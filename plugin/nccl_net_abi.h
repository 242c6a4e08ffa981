// The NCCL net plugin ABI that Prism implements: ncclNet_v11_t (NCCL 2.28 -
// 2.30), ncclNet_v10_t (2.26 - 2.27), ncclNet_v9_t (2.24 - 2.25) and
// ncclNet_v8_t (2.21 - 2.23), written from the layout of NCCL's public
// net plugin headers (offsets measured against the 2.28.9 headers;
// docs/nccl-releases.md lists what each release changes). Names carry a `prism_` prefix so that this header can
// never clash with NCCL's own headers in the same translation unit.
//
// Everything here is plain C layout: no virtuals, no C++ types. The
// static_asserts at the bottom pin the sizes and offsets measured.
#ifndef PRISM_PLUGIN_NCCL_NET_ABI_H_
#define PRISM_PLUGIN_NCCL_NET_ABI_H_

#include <cstddef>
#include <cstdint>

extern "C" {

// ncclResult_t values.
typedef enum {
  prism_ncclSuccess = 0,
  prism_ncclUnhandledCudaError = 1,
  prism_ncclSystemError = 2,
  prism_ncclInternalError = 3,
  prism_ncclInvalidArgument = 4,
  prism_ncclInvalidUsage = 5,
  prism_ncclRemoteError = 6,
  prism_ncclInProgress = 7,
} prism_ncclResult_t;

// ncclDebugLogLevel values.
typedef enum {
  PRISM_NCCL_LOG_NONE = 0,
  PRISM_NCCL_LOG_VERSION = 1,
  PRISM_NCCL_LOG_WARN = 2,
  PRISM_NCCL_LOG_INFO = 3,
  PRISM_NCCL_LOG_ABORT = 4,
  PRISM_NCCL_LOG_TRACE = 5,
} prism_ncclDebugLogLevel;

// Subsystem flag NCCL filters NET messages with (NCCL_DEBUG_SUBSYS=NET).
inline constexpr unsigned long kPrismNcclLogNet = 0x10;
inline constexpr unsigned long kPrismNcclLogInit = 0x1;

typedef void (*prism_ncclDebugLogger_t)(prism_ncclDebugLogLevel level, unsigned long flags,
                                        const char* file, int line, const char* fmt, ...);

// The profiler callback NCCL hands to init; Prism never calls it.
typedef prism_ncclResult_t (*prism_ncclProfilerCallback_t)(void** event_handle, int type,
                                                           void* parent_handle, int64_t plugin_id,
                                                           void* ext_data);

inline constexpr int kPrismNetHandleMaxSize = 128;    // NCCL_NET_HANDLE_MAXSIZE
inline constexpr int kPrismNetMaxRequests = 32;       // NCCL_NET_MAX_REQUESTS
inline constexpr int kPrismNetMaxDevsPerNic = 4;      // NCCL_NET_MAX_DEVS_PER_NIC
inline constexpr int kPrismPtrHost = 1;               // NCCL_PTR_HOST
inline constexpr int kPrismPtrCuda = 2;               // NCCL_PTR_CUDA
inline constexpr int kPrismPtrDmaBuf = 4;             // NCCL_PTR_DMABUF
inline constexpr uint64_t kPrismMaxNetSizeBytes = 1ull << 40;  // NCCL_MAX_NET_SIZE_BYTES

// ncclNetDeviceType: Prism always reports host (0).
inline constexpr int kPrismNetDeviceHost = 0;

typedef struct {
  int ndevs;
  int devs[kPrismNetMaxDevsPerNic];
} prism_ncclNetVDeviceProps_t;  // same layout in v10 and v11

typedef struct {
  char* name;
  char* pciPath;
  uint64_t guid;
  int ptrSupport;
  int regIsGlobal;
  int forceFlush;
  int speed;            // Mbps
  int port;
  float latency;        // microseconds
  int maxComms;
  int maxRecvs;
  int netDeviceType;
  int netDeviceVersion;
  prism_ncclNetVDeviceProps_t vProps;
  size_t maxP2pBytes;
  size_t maxCollBytes;
} prism_ncclNetProperties_v10_t;

typedef struct {
  char* name;
  char* pciPath;
  uint64_t guid;
  int ptrSupport;
  int regIsGlobal;
  int forceFlush;
  int speed;
  int port;
  float latency;
  int maxComms;
  int maxRecvs;
  int netDeviceType;
  int netDeviceVersion;
  prism_ncclNetVDeviceProps_t vProps;
  size_t maxP2pBytes;
  size_t maxCollBytes;
  int maxMultiRequestSize;
} prism_ncclNetProperties_v11_t;

typedef struct {
  int trafficClass;  // -1: undefined
} prism_ncclNetCommConfig_t;  // v10 and v11

typedef struct {
  int netDeviceType;
  int netDeviceVersion;
  void* handle;
  size_t size;
  int needsProxyProgress;
} prism_ncclNetDeviceHandle_t;  // v10 and v11

typedef struct {
  int32_t maxConcurrentPeers;
  int32_t minConcurrentPeers;
  int32_t maxFlowsPerPeer;
  int32_t minFlowsPerPeer;
} prism_ncclNetSemanticAttr_t;

typedef struct {
  prism_ncclNetSemanticAttr_t sendCommAttr;
  prism_ncclNetSemanticAttr_t recvCommAttr;
  uint32_t op;
  uint32_t algo;
  uint32_t proto;
} prism_ncclNetAttr_v11_t;

typedef struct {
  const char* name;
  prism_ncclResult_t (*init)(void** ctx, uint64_t commId, prism_ncclNetCommConfig_t* config,
                             prism_ncclDebugLogger_t logFunction,
                             prism_ncclProfilerCallback_t profFunction);
  prism_ncclResult_t (*devices)(int* ndev);
  prism_ncclResult_t (*getProperties)(int dev, prism_ncclNetProperties_v11_t* props);
  prism_ncclResult_t (*listen)(void* ctx, int dev, void* handle, void** listenComm);
  prism_ncclResult_t (*connect)(void* ctx, int dev, void* handle, void** sendComm,
                                prism_ncclNetDeviceHandle_t** sendDevComm);
  prism_ncclResult_t (*accept)(void* listenComm, void** recvComm,
                               prism_ncclNetDeviceHandle_t** recvDevComm);
  prism_ncclResult_t (*regMr)(void* comm, void* data, size_t size, int type, void** mhandle);
  prism_ncclResult_t (*regMrDmaBuf)(void* comm, void* data, size_t size, int type,
                                    uint64_t offset, int fd, void** mhandle);
  prism_ncclResult_t (*deregMr)(void* comm, void* mhandle);
  prism_ncclResult_t (*isend)(void* sendComm, void* data, size_t size, int tag, void* mhandle,
                              void* phandle, void** request);
  prism_ncclResult_t (*irecv)(void* recvComm, int n, void** data, size_t* sizes, int* tags,
                              void** mhandles, void** phandles, void** request);
  prism_ncclResult_t (*iflush)(void* recvComm, int n, void** data, int* sizes, void** mhandles,
                               void** request);
  prism_ncclResult_t (*test)(void* request, int* done, int* sizes);
  prism_ncclResult_t (*closeSend)(void* sendComm);
  prism_ncclResult_t (*closeRecv)(void* recvComm);
  prism_ncclResult_t (*closeListen)(void* listenComm);
  prism_ncclResult_t (*getDeviceMr)(void* comm, void* mhandle, void** dptr_mhandle);
  prism_ncclResult_t (*irecvConsumed)(void* recvComm, int n, void* request);
  prism_ncclResult_t (*makeVDevice)(int* d, prism_ncclNetVDeviceProps_t* props);
  prism_ncclResult_t (*finalize)(void* ctx);
  prism_ncclResult_t (*setNetAttr)(void* ctx, prism_ncclNetAttr_v11_t* attr);
} prism_ncclNet_v11_t;

typedef struct {
  const char* name;
  prism_ncclResult_t (*init)(prism_ncclDebugLogger_t logFunction,
                             prism_ncclProfilerCallback_t profFunction);
  prism_ncclResult_t (*devices)(int* ndev);
  prism_ncclResult_t (*getProperties)(int dev, prism_ncclNetProperties_v10_t* props);
  prism_ncclResult_t (*listen)(int dev, void* handle, void** listenComm);
  prism_ncclResult_t (*connect)(int dev, prism_ncclNetCommConfig_t* config, void* handle,
                                void** sendComm, prism_ncclNetDeviceHandle_t** sendDevComm);
  prism_ncclResult_t (*accept)(void* listenComm, void** recvComm,
                               prism_ncclNetDeviceHandle_t** recvDevComm);
  prism_ncclResult_t (*regMr)(void* comm, void* data, size_t size, int type, void** mhandle);
  prism_ncclResult_t (*regMrDmaBuf)(void* comm, void* data, size_t size, int type,
                                    uint64_t offset, int fd, void** mhandle);
  prism_ncclResult_t (*deregMr)(void* comm, void* mhandle);
  prism_ncclResult_t (*isend)(void* sendComm, void* data, size_t size, int tag, void* mhandle,
                              void* phandle, void** request);
  prism_ncclResult_t (*irecv)(void* recvComm, int n, void** data, size_t* sizes, int* tags,
                              void** mhandles, void** phandles, void** request);
  prism_ncclResult_t (*iflush)(void* recvComm, int n, void** data, int* sizes, void** mhandles,
                               void** request);
  prism_ncclResult_t (*test)(void* request, int* done, int* sizes);
  prism_ncclResult_t (*closeSend)(void* sendComm);
  prism_ncclResult_t (*closeRecv)(void* recvComm);
  prism_ncclResult_t (*closeListen)(void* listenComm);
  prism_ncclResult_t (*getDeviceMr)(void* comm, void* mhandle, void** dptr_mhandle);
  prism_ncclResult_t (*irecvConsumed)(void* recvComm, int n, void* request);
  prism_ncclResult_t (*makeVDevice)(int* d, prism_ncclNetVDeviceProps_t* props);
} prism_ncclNet_v10_t;

// NCCL 2.24 - 2.25 bind v9 first; 2.21 - 2.23 bind v8
// (docs/nccl-releases.md, "Net plugin ABI"). v9 is v10 without the
// profiler callback in init, the config in connect and the phandles in
// isend/irecv; its properties are v10's.
typedef prism_ncclNetProperties_v10_t prism_ncclNetProperties_v9_t;

typedef struct {
  const char* name;
  prism_ncclResult_t (*init)(prism_ncclDebugLogger_t logFunction);
  prism_ncclResult_t (*devices)(int* ndev);
  prism_ncclResult_t (*getProperties)(int dev, prism_ncclNetProperties_v9_t* props);
  prism_ncclResult_t (*listen)(int dev, void* handle, void** listenComm);
  prism_ncclResult_t (*connect)(int dev, void* handle, void** sendComm,
                                prism_ncclNetDeviceHandle_t** sendDevComm);
  prism_ncclResult_t (*accept)(void* listenComm, void** recvComm,
                               prism_ncclNetDeviceHandle_t** recvDevComm);
  prism_ncclResult_t (*regMr)(void* comm, void* data, size_t size, int type, void** mhandle);
  prism_ncclResult_t (*regMrDmaBuf)(void* comm, void* data, size_t size, int type,
                                    uint64_t offset, int fd, void** mhandle);
  prism_ncclResult_t (*deregMr)(void* comm, void* mhandle);
  prism_ncclResult_t (*isend)(void* sendComm, void* data, size_t size, int tag, void* mhandle,
                              void** request);
  prism_ncclResult_t (*irecv)(void* recvComm, int n, void** data, size_t* sizes, int* tags,
                              void** mhandles, void** request);
  prism_ncclResult_t (*iflush)(void* recvComm, int n, void** data, int* sizes, void** mhandles,
                               void** request);
  prism_ncclResult_t (*test)(void* request, int* done, int* sizes);
  prism_ncclResult_t (*closeSend)(void* sendComm);
  prism_ncclResult_t (*closeRecv)(void* recvComm);
  prism_ncclResult_t (*closeListen)(void* listenComm);
  prism_ncclResult_t (*getDeviceMr)(void* comm, void* mhandle, void** dptr_mhandle);
  prism_ncclResult_t (*irecvConsumed)(void* recvComm, int n, void* request);
  prism_ncclResult_t (*makeVDevice)(int* d, prism_ncclNetVDeviceProps_t* props);
} prism_ncclNet_v9_t;

// v8 properties: no forceFlush (everything after regIsGlobal sits 4 bytes
// lower than in v9), no virtual devices, no size limits.
typedef struct {
  char* name;
  char* pciPath;
  uint64_t guid;
  int ptrSupport;
  int regIsGlobal;
  int speed;
  int port;
  float latency;
  int maxComms;
  int maxRecvs;
  int netDeviceType;
  int netDeviceVersion;
} prism_ncclNetProperties_v8_t;

// v8: sizes are int in isend/irecv; no makeVDevice.
typedef struct {
  const char* name;
  prism_ncclResult_t (*init)(prism_ncclDebugLogger_t logFunction);
  prism_ncclResult_t (*devices)(int* ndev);
  prism_ncclResult_t (*getProperties)(int dev, prism_ncclNetProperties_v8_t* props);
  prism_ncclResult_t (*listen)(int dev, void* handle, void** listenComm);
  prism_ncclResult_t (*connect)(int dev, void* handle, void** sendComm,
                                prism_ncclNetDeviceHandle_t** sendDevComm);
  prism_ncclResult_t (*accept)(void* listenComm, void** recvComm,
                               prism_ncclNetDeviceHandle_t** recvDevComm);
  prism_ncclResult_t (*regMr)(void* comm, void* data, size_t size, int type, void** mhandle);
  prism_ncclResult_t (*regMrDmaBuf)(void* comm, void* data, size_t size, int type,
                                    uint64_t offset, int fd, void** mhandle);
  prism_ncclResult_t (*deregMr)(void* comm, void* mhandle);
  prism_ncclResult_t (*isend)(void* sendComm, void* data, int size, int tag, void* mhandle,
                              void** request);
  prism_ncclResult_t (*irecv)(void* recvComm, int n, void** data, int* sizes, int* tags,
                              void** mhandles, void** request);
  prism_ncclResult_t (*iflush)(void* recvComm, int n, void** data, int* sizes, void** mhandles,
                               void** request);
  prism_ncclResult_t (*test)(void* request, int* done, int* sizes);
  prism_ncclResult_t (*closeSend)(void* sendComm);
  prism_ncclResult_t (*closeRecv)(void* recvComm);
  prism_ncclResult_t (*closeListen)(void* listenComm);
  prism_ncclResult_t (*getDeviceMr)(void* comm, void* mhandle, void** dptr_mhandle);
  prism_ncclResult_t (*irecvConsumed)(void* recvComm, int n, void* request);
} prism_ncclNet_v8_t;

}  // extern "C"

// Layout facts measured against NCCL 2.28.9's headers (x86-64, g++).
static_assert(sizeof(prism_ncclNetVDeviceProps_t) == 20);
static_assert(offsetof(prism_ncclNetProperties_v11_t, ptrSupport) == 24);
static_assert(offsetof(prism_ncclNetProperties_v11_t, latency) == 44);
static_assert(offsetof(prism_ncclNetProperties_v11_t, netDeviceType) == 56);
static_assert(offsetof(prism_ncclNetProperties_v11_t, vProps) == 64);
static_assert(offsetof(prism_ncclNetProperties_v11_t, maxP2pBytes) == 88);
static_assert(offsetof(prism_ncclNetProperties_v11_t, maxMultiRequestSize) == 104);
static_assert(sizeof(prism_ncclNetProperties_v11_t) == 112);
static_assert(sizeof(prism_ncclNetProperties_v10_t) == 104);
static_assert(sizeof(prism_ncclNetAttr_v11_t) == 44);
static_assert(sizeof(prism_ncclNetDeviceHandle_t) == 32);
static_assert(sizeof(prism_ncclNet_v11_t) == 176);
static_assert(sizeof(prism_ncclNet_v10_t) == 160);
static_assert(offsetof(prism_ncclNet_v11_t, finalize) == 160);
static_assert(offsetof(prism_ncclNet_v10_t, makeVDevice) == 152);
static_assert(sizeof(prism_ncclNet_v9_t) == 160);
static_assert(sizeof(prism_ncclNet_v8_t) == 152);
static_assert(sizeof(prism_ncclNetProperties_v8_t) == 64);
static_assert(offsetof(prism_ncclNetProperties_v8_t, speed) == 32);
static_assert(offsetof(prism_ncclNetProperties_v8_t, netDeviceVersion) == 56);

#endif  // PRISM_PLUGIN_NCCL_NET_ABI_H_
