// The objects the plugin hands to NCCL as opaque pointers: memory handles,
// requests and send/receive comms, for real (TCP) and virtual (prismd) peers.
//
// Threading contract (NCCL's): all calls on one comm and its requests come
// from one thread at a time (NCCL's proxy thread). Implementations may run a
// private progress thread and talk to it through lock-free rings.
#ifndef PRISM_PLUGIN_COMM_H_
#define PRISM_PLUGIN_COMM_H_

#include <cstddef>
#include <cstdint>

#include "plugin/cuda_copy.h"
#include "plugin/log.h"
#include "plugin/nccl_net_abi.h"
#include "plugin/settings.h"

namespace prism::plugin {

using Result = prism_ncclResult_t;

// What regMr returns: the region and where it lives.
struct MemRegion {
  void* base = nullptr;
  size_t size = 0;
  int type = kPrismPtrHost;  // NCCL_PTR_HOST / CUDA / DMABUF
  bool on_gpu() const { return type != kPrismPtrHost; }
};

// Shared, process-lifetime services every comm may use. Not owned by comms.
struct CommEnv {
  const Settings* settings = nullptr;
  const Logger* logger = nullptr;
  CudaCopier* cuda = nullptr;
};

// A request returned by isend/irecv. Test() completes it; once it reported
// done (or an error) the request is recycled and must not be tested again.
class Request {
 public:
  virtual ~Request() = default;
  virtual Result Test(int* done, int* sizes) = 0;
};

// A send or receive comm. Default implementations reject the wrong direction.
class NetComm {
 public:
  virtual ~NetComm() = default;
  virtual Result Isend(void* data, size_t size, int tag, const MemRegion* mr, void** request) {
    return prism_ncclInvalidUsage;
  }
  virtual Result Irecv(int n, void** data, const size_t* sizes, const int* tags,
                       const MemRegion* const* mrs, void** request) {
    return prism_ncclInvalidUsage;
  }
  // Stops all activity; the object is deleted right after.
  virtual void Close() = 0;
};

}  // namespace prism::plugin

#endif  // PRISM_PLUGIN_COMM_H_
