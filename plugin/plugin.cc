#include "plugin/plugin.h"

#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <random>

#include "common/net_handles.h"
#include "plugin/net_socket.h"
#include "plugin/real_handshake.h"

namespace prism::plugin {
namespace {

// Where connect() keeps its in-progress state: the last 16 bytes of the
// (writable, persistent across retries) handle NCCL passes back each call.
constexpr size_t kStageOffset = kNetHandleBytes - 16;
constexpr uint64_t kStageMagic = 0x4e4e4f43534d5250ull;  // "PRMSCONN"
struct ConnectStage {
  uint64_t magic;
  PendingConnect* pending;
};
static_assert(sizeof(RealListenHandle) <= kStageOffset);

ConnectStage* StageOf(void* handle) {
  return reinterpret_cast<ConnectStage*>(static_cast<char*>(handle) + kStageOffset);
}

}  // namespace

std::shared_ptr<VirtualPeers> NetContext::virtual_peers() {
  std::lock_guard<std::mutex> lock(mu_);
  if (!virtual_peers_) virtual_peers_ = MakeVirtualPeers(env_, comm_id_);
  return virtual_peers_;
}

Plugin& ThePlugin() {
  static Plugin* plugin = new Plugin();  // never destroyed (see plugin.h)
  return *plugin;
}

Result Plugin::InitOnce() {
  std::call_once(once_, [this] {
    std::string warnings;
    settings_ = LoadSettings(&warnings);
    env_ = CommEnv{&settings_, &logger_, &cuda_};
    PRISM_INFO(logger_, "plugin %s, settings: %s", kPluginVersion, DescribeSettings().c_str());
    if (!warnings.empty()) PRISM_WARN(logger_, "bad settings:\n%s", warnings.c_str());
    for (int d = 0; d < settings_.nic.count; ++d) {
      char name[128];
      std::snprintf(name, sizeof(name), settings_.nic.name_pattern.c_str(), d);
      nic_names_.emplace_back(name);
    }
    std::string why;
    if (!ChooseLocalIpv4(settings_.socket_ifaddr, &local_ipv4_be_, &why)) {
      PRISM_WARN(logger_, "%s", why.c_str());
      once_result_ = prism_ncclInvalidArgument;
      return;
    }
    if (settings_.nic.gdr || settings_.nic.dmabuf) {
      if (!cuda_.Load(&why)) {
        PRISM_WARN(logger_, "%s", why.c_str());
        once_result_ = prism_ncclSystemError;
        return;
      }
    }
    listen_id_base_ = (uint64_t{std::random_device{}()} << 32) ^
                      (uint64_t{static_cast<uint32_t>(getpid())} << 16);
    const std::string threads =
        settings_.progress_threads > 0
            ? std::to_string(settings_.progress_threads) + " progress thread(s) per context"
            : std::string("one progress thread per comm");
    PRISM_INFO(logger_, "%d NIC(s), real peers dial %s, %d socket(s) per comm, %s%s",
               settings_.nic.count, Ipv4ToString(local_ipv4_be_, 0).c_str(),
               settings_.socks_per_comm, threads.c_str(),
               settings_.link_bits_per_second > 0 || settings_.link_latency_ns > 0
                   ? ", links shaped"
                   : "");
  });
  return once_result_;
}

Result Plugin::Init(prism_ncclDebugLogger_t logger, uint64_t comm_id, void** ctx) {
  if (logger != nullptr) logger_.Set(logger);
  Result r = InitOnce();
  if (r != prism_ncclSuccess) return r;
  std::lock_guard<std::mutex> lock(mu_);
  if (ctx == nullptr) {
    if (process_context_ == nullptr) process_context_ = new NetContext(env_, 0);
    return prism_ncclSuccess;
  }
  *ctx = new NetContext(env_, comm_id);
  return prism_ncclSuccess;
}

NetContext* Plugin::ContextOrDefault(void* ctx) {
  if (ctx != nullptr) return static_cast<NetContext*>(ctx);
  std::lock_guard<std::mutex> lock(mu_);
  if (process_context_ == nullptr) process_context_ = new NetContext(env_, 0);
  return process_context_;
}

Result Plugin::Finalize(void* ctx) {
  delete static_cast<NetContext*>(ctx);
  return prism_ncclSuccess;
}

Result Plugin::Devices(int* ndev) {
  Result r = InitOnce();
  if (r != prism_ncclSuccess) return r;
  *ndev = settings_.nic.count;
  return prism_ncclSuccess;
}

Result Plugin::GetProperties(int dev, prism_ncclNetProperties_v11_t* props) {
  if (dev < 0 || dev >= settings_.nic.count) return prism_ncclInvalidArgument;
  const NicSettings& n = settings_.nic;
  std::memset(props, 0, sizeof(*props));
  props->name = const_cast<char*>(nic_names_[static_cast<size_t>(dev)].c_str());
  props->pciPath = n.pci_path.empty() ? nullptr : const_cast<char*>(n.pci_path.c_str());
  props->guid = 0x5052534d00000000ull | static_cast<uint64_t>(dev);
  props->ptrSupport = kPrismPtrHost | (n.gdr ? kPrismPtrCuda : 0) |
                      (n.dmabuf ? kPrismPtrDmaBuf : 0);
  props->regIsGlobal = n.reg_is_global;
  props->forceFlush = n.force_flush;
  props->speed = n.speed_mbps;
  props->port = n.port;
  props->latency = n.latency_us;
  props->maxComms = n.max_comms;
  props->maxRecvs = n.max_recvs;
  props->netDeviceType = kPrismNetDeviceHost;
  props->netDeviceVersion = 0;
  props->vProps.ndevs = 1;
  props->vProps.devs[0] = dev;
  props->maxP2pBytes = n.max_p2p_bytes;
  props->maxCollBytes = n.max_coll_bytes;
  props->maxMultiRequestSize = n.max_multi_request_size;
  return prism_ncclSuccess;
}

Result Plugin::Listen(void* ctx, int dev, void* handle, void** listen_comm) {
  *listen_comm = nullptr;
  if (dev < 0 || dev >= settings_.nic.count) return prism_ncclInvalidArgument;
  NetContext* context = ContextOrDefault(ctx);
  std::string why;
  RealListenHandle h;
  int fd = OpenListener(local_ipv4_be_, &h.port_be, &why);
  if (fd < 0) {
    PRISM_WARN(logger_, "listen failed: %s (set PRISM_SOCKET_IFADDR to a local address)",
               why.c_str());
    return prism_ncclSystemError;
  }
  h.listen_id = listen_id_base_ + listen_counter_.fetch_add(1) + 1;
  h.ipv4_be = local_ipv4_be_;
  h.pid = static_cast<uint32_t>(getpid());
  h.dev = static_cast<uint32_t>(dev);
  std::memset(handle, 0, kNetHandleBytes);
  std::memcpy(handle, &h, sizeof(h));
  ListenComm::VirtualAcceptFn virtual_accept;
  if (settings_.daemon_configured) {
    std::shared_ptr<VirtualPeers> vp = context->virtual_peers();
    vp->ListenOpened(h.listen_id, dev);
    virtual_accept = [vp](uint64_t id) { return vp->Accept(id); };
  }
  *listen_comm = new ListenComm(env_, context->engines(), fd, h, std::move(virtual_accept));
  return prism_ncclSuccess;
}

Result Plugin::Connect(void* ctx, int dev, void* handle, void** send_comm) {
  *send_comm = nullptr;
  NetContext* context = ContextOrDefault(ctx);
  const uint64_t magic = HandleMagic(handle);
  std::unique_ptr<NetComm> comm;
  if (magic == kVirtualHandleMagic) {
    VirtualHandle vh;
    std::memcpy(&vh, handle, sizeof(vh));
    Result r = context->virtual_peers()->Connect(vh, dev, &comm);
    *send_comm = comm.release();
    return r;
  }
  if (magic != kRealHandleMagic) {
    PRISM_WARN(logger_, "connect: the handle is not a Prism handle (magic %016llx); every rank "
               "must use the Prism plugin (NCCL_NET_PLUGIN, NCCL_NET=Prism)",
               static_cast<unsigned long long>(magic));
    return prism_ncclInvalidUsage;
  }
  ConnectStage* stage = StageOf(handle);
  if (stage->magic != kStageMagic) {
    RealListenHandle h;
    std::memcpy(&h, handle, sizeof(h));
    stage->pending = new PendingConnect(env_, context->engines(), h);
    stage->magic = kStageMagic;
  }
  Result r = stage->pending->Step(&comm);
  if (r != prism_ncclSuccess || comm) {
    delete stage->pending;
    stage->pending = nullptr;
    stage->magic = 0;
  }
  *send_comm = comm.release();
  return r;
}

Result Plugin::Accept(void* listen_comm, void** recv_comm) {
  std::unique_ptr<NetComm> comm;
  Result r = static_cast<ListenComm*>(listen_comm)->Accept(&comm);
  *recv_comm = comm.release();
  return r;
}

Result Plugin::CloseListen(void* listen_comm) {
  auto* l = static_cast<ListenComm*>(listen_comm);
  delete l;
  return prism_ncclSuccess;
}

Result Plugin::RegMr(void* comm, void* data, size_t size, int type, void** mhandle) {
  *mhandle = nullptr;
  if (type != kPrismPtrHost) {
    std::string why;
    if (!cuda_.Load(&why)) {
      PRISM_WARN(logger_, "regMr of a GPU buffer: %s", why.c_str());
      return prism_ncclSystemError;
    }
  }
  *mhandle = new MemRegion{data, size, type};
  return prism_ncclSuccess;
}

Result Plugin::DeregMr(void* comm, void* mhandle) {
  delete static_cast<MemRegion*>(mhandle);
  return prism_ncclSuccess;
}

Result Plugin::Isend(void* comm, void* data, size_t size, int tag, void* mhandle,
                     void** request) {
  return static_cast<NetComm*>(comm)->Isend(data, size, tag,
                                            static_cast<const MemRegion*>(mhandle), request);
}

Result Plugin::Irecv(void* comm, int n, void** data, size_t* sizes, int* tags, void** mhandles,
                     void** request) {
  return static_cast<NetComm*>(comm)->Irecv(
      n, data, sizes, tags, reinterpret_cast<const MemRegion* const*>(mhandles), request);
}

Result Plugin::Iflush(void* comm, int n, void** data, int* sizes, void** mhandles,
                      void** request) {
  // GPU receives are copied into place before they complete: nothing to flush.
  *request = nullptr;
  return prism_ncclSuccess;
}

Result Plugin::Test(void* request, int* done, int* sizes) {
  if (request == nullptr) {
    *done = 1;
    return prism_ncclSuccess;
  }
  return static_cast<Request*>(request)->Test(done, sizes);
}

Result Plugin::CloseComm(void* comm) {
  auto* c = static_cast<NetComm*>(comm);
  c->Close();
  delete c;
  return prism_ncclSuccess;
}

}  // namespace prism::plugin
