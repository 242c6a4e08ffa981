// Test/bench side of the plugin: loads libnccl-net-prism.so with dlopen the
// way NCCL does and drives its v11 table like NCCL's proxy thread
// (non-blocking connect/accept loops, isend/irecv/test polling).
// Header-only; used by test/plugin_*.cc and bench/plugin_*.cc.
#ifndef PRISM_TEST_PLUGIN_DRIVER_H_
#define PRISM_TEST_PLUGIN_DRIVER_H_

#include <dlfcn.h>
#include <sched.h>
#include <time.h>

#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

#include "plugin/nccl_net_abi.h"

namespace prism::testing {

inline int64_t NowNs() {
  timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return int64_t{ts.tv_sec} * 1000000000 + ts.tv_nsec;
}

inline void DriverLogger(prism_ncclDebugLogLevel level, unsigned long flags, const char* file,
                         int line, const char* fmt, ...) {
  const char* verbose = std::getenv("PRISM_TEST_VERBOSE");
  if (level > PRISM_NCCL_LOG_WARN && (verbose == nullptr || verbose[0] != '1')) return;
  va_list args;
  va_start(args, fmt);
  std::fprintf(stderr, "[pid %d %s] ", static_cast<int>(getpid()),
               level == PRISM_NCCL_LOG_WARN ? "WARN" : "INFO");
  std::vfprintf(stderr, fmt, args);
  std::fprintf(stderr, "\n");
  va_end(args);
}

class PluginError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

#define PRISM_DRV_CHECK(call)                                                              \
  do {                                                                                     \
    prism_ncclResult_t r_ = (call);                                                        \
    if (r_ != prism_ncclSuccess) {                                                         \
      throw ::prism::testing::PluginError(std::string(#call) + " returned " + std::to_string(r_)); \
    }                                                                                      \
  } while (0)

class PluginDriver {
 public:
  explicit PluginDriver(const std::string& path) {
    lib_ = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (lib_ == nullptr) throw PluginError(std::string("dlopen: ") + dlerror());
    net_ = static_cast<prism_ncclNet_v11_t*>(dlsym(lib_, "ncclNetPlugin_v11"));
    if (net_ == nullptr) throw PluginError("no ncclNetPlugin_v11");
  }
  PluginDriver(const PluginDriver&) = delete;
  PluginDriver& operator=(const PluginDriver&) = delete;

  const prism_ncclNet_v11_t& net() const { return *net_; }
  void* lib() const { return lib_; }

  void* Init(uint64_t comm_id = 0x1234) {
    void* ctx = nullptr;
    prism_ncclNetCommConfig_t config{-1};
    PRISM_DRV_CHECK(net_->init(&ctx, comm_id, &config, DriverLogger, nullptr));
    int n = 0;
    PRISM_DRV_CHECK(net_->devices(&n));
    if (n < 1) throw PluginError("devices() < 1");
    return ctx;
  }

  // Returns the listen comm; `handle` gets the 128 bytes.
  void* Listen(void* ctx, std::vector<char>* handle, int dev = 0) {
    handle->assign(kPrismNetHandleMaxSize, 0);
    void* lc = nullptr;
    PRISM_DRV_CHECK(net_->listen(ctx, dev, handle->data(), &lc));
    return lc;
  }

  // Connects to `peer_handle` and accepts on `lc` at once, interleaving the
  // two non-blocking loops (as two NCCL proxies would), until both are done.
  void ConnectAccept(void* ctx, std::vector<char> peer_handle, void* lc, void** send_comm,
                     void** recv_comm, int64_t timeout_ns = 30000000000) {
    *send_comm = nullptr;
    *recv_comm = nullptr;
    const int64_t deadline = NowNs() + timeout_ns;
    prism_ncclNetDeviceHandle_t* dev = nullptr;
    while (*send_comm == nullptr || *recv_comm == nullptr) {
      if (*send_comm == nullptr) {
        PRISM_DRV_CHECK(net_->connect(ctx, 0, peer_handle.data(), send_comm, &dev));
      }
      if (*recv_comm == nullptr) PRISM_DRV_CHECK(net_->accept(lc, recv_comm, &dev));
      if (NowNs() > deadline) throw PluginError("connect/accept timed out");
    }
  }

  // Polls test() until done; returns sizes[0].
  int Wait(void* request, int* sizes = nullptr, int64_t timeout_ns = 60000000000) {
    int done = 0;
    int local[8] = {};
    int* s = sizes != nullptr ? sizes : local;
    const int64_t deadline = NowNs() + timeout_ns;
    while (!done) {
      PRISM_DRV_CHECK(net_->test(request, &done, s));
      if (done) break;
      if (NowNs() > deadline) throw PluginError("request timed out");
      sched_yield();  // as NCCL's proxy thread does when idle
    }
    return s[0];
  }

  // Polls test() of both requests in turn until both are done, as NCCL's
  // proxy thread tests every request in flight: a peer's send may complete
  // only once this side's receive read it (a Unix socket between real peers
  // on one host buffers about 200 KiB); returns sizes[0] of `recv`.
  int WaitBoth(void* send, void* recv, int* sizes = nullptr, int64_t timeout_ns = 60000000000) {
    int send_done = 0, recv_done = 0;
    int local[8] = {}, ignored[8] = {};
    int* s = sizes != nullptr ? sizes : local;
    const int64_t deadline = NowNs() + timeout_ns;
    while (!send_done || !recv_done) {
      if (!send_done) PRISM_DRV_CHECK(net_->test(send, &send_done, ignored));
      if (!recv_done) PRISM_DRV_CHECK(net_->test(recv, &recv_done, s));
      if (send_done && recv_done) break;
      if (NowNs() > deadline) throw PluginError("request timed out");
      sched_yield();
    }
    return s[0];
  }

  // isend, retrying while the plugin returns a NULL request.
  void* Send(void* comm, void* data, size_t size, int tag, void* mh) {
    void* req = nullptr;
    while (req == nullptr) PRISM_DRV_CHECK(net_->isend(comm, data, size, tag, mh, nullptr, &req));
    return req;
  }
  void* Recv(void* comm, int n, void** data, size_t* sizes, int* tags, void** mhs) {
    void* req = nullptr;
    while (req == nullptr) {
      PRISM_DRV_CHECK(net_->irecv(comm, n, data, sizes, tags, mhs, nullptr, &req));
    }
    return req;
  }

 private:
  void* lib_ = nullptr;
  prism_ncclNet_v11_t* net_ = nullptr;
};

// Connected pairs come out of accept() in any order. Each side sends every
// send comm's index k over it and reorders its receive comms by the index
// received: afterwards recvs[k] receives what the peer sends on its sends[k].
// Both sides must call it (it uses tag 1, 4-byte messages).
inline void OrderRecvsByPeerIndex(PluginDriver& drv, const std::vector<void*>& sends,
                                  std::vector<void*>* recvs) {
  const size_t n = sends.size();
  std::vector<uint32_t> out_ids(n), in_ids(n, 0xffffffffu);
  std::vector<void*> sreq(n), rreq(n);
  for (size_t k = 0; k < n; ++k) {
    out_ids[k] = static_cast<uint32_t>(k);
    sreq[k] = drv.Send(sends[k], &out_ids[k], sizeof(uint32_t), 1, nullptr);
    void* d[1] = {&in_ids[k]};
    size_t m[1] = {sizeof(uint32_t)};
    int t[1] = {1};
    void* mh[1] = {nullptr};
    rreq[k] = drv.Recv((*recvs)[k], 1, d, m, t, mh);
  }
  std::vector<void*> ordered(n, nullptr);
  for (size_t k = 0; k < n; ++k) {
    drv.WaitBoth(sreq[k], rreq[k]);
    if (in_ids[k] >= n || ordered[in_ids[k]] != nullptr) throw PluginError("bad link index");
    ordered[in_ids[k]] = (*recvs)[k];
  }
  *recvs = std::move(ordered);
}

inline std::string HexEncode(const std::vector<char>& bytes) {
  static const char* digits = "0123456789abcdef";
  std::string out;
  for (char c : bytes) {
    out += digits[(static_cast<unsigned char>(c) >> 4) & 0xf];
    out += digits[static_cast<unsigned char>(c) & 0xf];
  }
  return out;
}

inline std::vector<char> HexDecode(const std::string& hex) {
  std::vector<char> out;
  for (size_t i = 0; i + 1 < hex.size(); i += 2) {
    out.push_back(static_cast<char>(std::stoi(hex.substr(i, 2), nullptr, 16)));
  }
  return out;
}

// Deterministic payload bytes for message (tag, seq).
inline unsigned char PatternByte(size_t k, int tag, uint64_t seq) {
  return static_cast<unsigned char>((k * 131u) ^ (seq * 7u + static_cast<unsigned>(tag) * 29u) ^
                                    (k >> 9));
}

}  // namespace prism::testing

#endif  // PRISM_TEST_PLUGIN_DRIVER_H_
