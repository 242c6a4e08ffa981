// The NCCL profiler plugin ABI that Prism implements beside the net plugin:
// ncclProfiler_v5_t (NCCL 2.28, accepted by 2.29 and 2.30) and
// ncclProfiler_v4_t (NCCL 2.27: see DescrFromV4 below), written from the
// facts in docs/plugin.md ("Profiler role") and NCCL's public headers at
// v2.28.9-1 (src/include/plugin/profiler/profiler_v5.h, nccl_profiler.h).
// Names carry a `prism_` prefix so this header never clashes with NCCL's.
//
// Plain C layout; the static_asserts pin what the plugin relies on.
#ifndef PRISM_PLUGIN_PROFILER_ABI_H_
#define PRISM_PLUGIN_PROFILER_ABI_H_

#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "plugin/nccl_net_abi.h"

extern "C" {

// Event type bits (the activation mask is an OR of them).
enum : uint64_t {
  kPrismProfileGroup = 1u << 0,
  kPrismProfileColl = 1u << 1,
  kPrismProfileP2p = 1u << 2,
  kPrismProfileProxyOp = 1u << 3,
  kPrismProfileProxyStep = 1u << 4,
  kPrismProfileProxyCtrl = 1u << 5,
  kPrismProfileKernelCh = 1u << 6,
  kPrismProfileNetPlugin = 1u << 7,
};

// ncclProfilerEventState_t: a plain int enum. Prism reads one value:
// ncclProfilerKernelChStop (22 in 2.27 to 2.30), whose args carry the
// channel's GPU stop time (kernelCh.pTimer).
typedef int prism_ncclProfilerEventState_t;
inline constexpr prism_ncclProfilerEventState_t kPrismProfilerKernelChStop = 22;

// The net plugin's callback into NCCL's profiler front end (the `profFn`
// argument of the net plugin's init). `type`: 0 start, 1 stop, 2 update,
// 3 update and stop.
inline constexpr int kPrismNetEventStart = 0;

typedef struct {
  uint64_t type;
  void* parentObj;
  int rank;
  union {
    struct {
      bool graphCaptured;
      int groupDepth;
    } groupApi;
    struct {
      const char* func;
      size_t count;
      const char* datatype;
      int root;
      void* stream;
      bool graphCaptured;
    } collApi;
    struct {
      const char* func;
      size_t count;
      const char* datatype;
      void* stream;
      bool graphCaptured;
    } p2pApi;
    struct {
      void* stream;
    } kernelLaunch;
    struct {
      uint64_t seqNumber;
      const char* func;
      void const* sendBuff;
      void* recvBuff;
      size_t count;
      int root;
      const char* datatype;
      uint8_t nChannels;
      uint8_t nWarps;
      const char* algo;
      const char* proto;
      void* parentGroup;
    } coll;
    struct {
      const char* func;
      void* buff;
      const char* datatype;
      size_t count;
      int peer;
      uint8_t nChannels;
      void* parentGroup;
    } p2p;
    struct {
      pid_t pid;
      uint8_t channelId;
      int peer;
      int nSteps;
      int chunkSize;
      int isSend;
    } proxyOp;
    struct {
      int step;
    } proxyStep;
    struct {
      uint8_t channelId;
      uint64_t pTimer;
    } kernelCh;
    struct {
      int64_t id;
      void* data;
    } netPlugin;
  };
} prism_ncclProfilerEventDescr_v5_t;

typedef union {
  struct {
    size_t transSize;
  } proxyStep;
  struct {
    int appendedProxyOps;
  } proxyCtrl;
  struct {
    void* data;
  } netPlugin;
  struct {
    uint64_t pTimer;
  } kernelCh;
} prism_ncclProfilerEventStateArgs_v5_t;

typedef struct {
  const char* name;
  prism_ncclResult_t (*init)(void** context, uint64_t commId, int* eActivationMask,
                             const char* commName, int nNodes, int nranks, int rank,
                             prism_ncclDebugLogger_t logfn);
  prism_ncclResult_t (*startEvent)(void* context, void** eHandle,
                                   prism_ncclProfilerEventDescr_v5_t* eDescr);
  prism_ncclResult_t (*stopEvent)(void* eHandle);
  prism_ncclResult_t (*recordEventState)(void* eHandle, prism_ncclProfilerEventState_t eState,
                                         prism_ncclProfilerEventStateArgs_v5_t* eStateArgs);
  prism_ncclResult_t (*finalize)(void* context);
} prism_ncclProfiler_v5_t;

// v4 (NCCL 2.27; docs/nccl-releases.md, "Profiler ABI"): the
// event type is one byte (the rest of its 8-byte slot is padding NCCL may
// leave uninitialised), the Coll/P2p members lack parentGroup, and the
// descriptor is 104 bytes; every other member sits where v5 has it.
typedef struct {
  uint8_t type;
  uint8_t padding[7];
  void* parentObj;
  int rank;
  int padding2;
  unsigned char members[80];  // v5's union up to (not including) coll.parentGroup
} prism_ncclProfilerEventDescr_v4_t;

typedef prism_ncclProfilerEventStateArgs_v5_t prism_ncclProfilerEventStateArgs_v4_t;  // same 8-byte union

typedef struct {
  const char* name;
  prism_ncclResult_t (*init)(void** context, int* eActivationMask, const char* commName, uint64_t commHash,
                             int nNodes, int nranks, int rank, prism_ncclDebugLogger_t logfn);
  prism_ncclResult_t (*startEvent)(void* context, void** eHandle,
                                   prism_ncclProfilerEventDescr_v4_t* eDescr);
  prism_ncclResult_t (*stopEvent)(void* eHandle);
  prism_ncclResult_t (*recordEventState)(void* eHandle, prism_ncclProfilerEventState_t eState,
                                         prism_ncclProfilerEventStateArgs_v4_t* eStateArgs);
  prism_ncclResult_t (*finalize)(void* context);
} prism_ncclProfiler_v4_t;

}  // extern "C"

// The v5 descriptor a v4 one stands for: the type's low byte, every member
// copied in place, parentGroup null.
inline prism_ncclProfilerEventDescr_v5_t DescrFromV4(const prism_ncclProfilerEventDescr_v4_t& v4) {
  prism_ncclProfilerEventDescr_v5_t v5{};
  v5.type = v4.type;
  v5.parentObj = v4.parentObj;
  v5.rank = v4.rank;
  static_assert(sizeof(v4.members) <= sizeof(v5) - offsetof(prism_ncclProfilerEventDescr_v5_t, coll));
  std::memcpy(reinterpret_cast<unsigned char*>(&v5) + offsetof(prism_ncclProfilerEventDescr_v5_t, coll),
              v4.members, sizeof(v4.members));
  if (v5.type == kPrismProfileP2p) v5.p2p.parentGroup = nullptr;  // v4's p2p ends before it
  return v5;
}

static_assert(sizeof(prism_ncclProfilerEventDescr_v4_t) == 104);
static_assert(offsetof(prism_ncclProfilerEventDescr_v4_t, members) == 24);
static_assert(offsetof(prism_ncclProfilerEventDescr_v5_t, coll.parentGroup) == 104);
static_assert(offsetof(prism_ncclProfilerEventDescr_v5_t, p2p.nChannels) == 60);
static_assert(sizeof(prism_ncclProfiler_v4_t) == 48);
static_assert(offsetof(prism_ncclProfilerEventDescr_v5_t, rank) == 16);
static_assert(offsetof(prism_ncclProfilerEventDescr_v5_t, coll) == 24);
static_assert(sizeof(prism_ncclProfilerEventDescr_v5_t) == 24 + 88);
static_assert(sizeof(prism_ncclProfiler_v5_t) == 48);

#endif  // PRISM_PLUGIN_PROFILER_ABI_H_
