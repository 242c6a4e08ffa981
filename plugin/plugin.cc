#include "plugin/plugin.h"

#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <random>

#include "common/net_handles.h"
#include "common/version.h"
#include "plugin/daemon_session.h"
#include "plugin/host_identity.h"
#include "plugin/modelled_link.h"
#include "plugin/net_socket.h"
#include "plugin/real_comms.h"
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

std::string Plugin::DescribeBadComm(void* comm) const {
  if (comm == nullptr) return "a null comm";
  char text[96];
  std::snprintf(text, sizeof(text), "comm %p (kind %08x)", comm,
                static_cast<unsigned>(static_cast<NetComm*>(comm)->object_kind()));
  return text;
}

Result Plugin::BadArgument(const char* call, const std::string& what) const {
  PRISM_WARN(logger_, "%s: invalid argument from NCCL: %s", call, what.c_str());
  return prism_ncclInvalidArgument;
}

Plugin& ThePlugin() {
  static Plugin* plugin = new Plugin();  // never destroyed (see plugin.h)
  return *plugin;
}

Result Plugin::InitOnce() {
  std::call_once(once_, [this] {
    std::string warnings;
    settings_ = LoadSettings(&warnings);
    // Every connection of a device shares its transmit link: the modelled
    // link when shaped, else (virtual peers only) the NIC speed reported.
    const VirtualLink link = ModelledLink(settings_, nullptr);
    nics_ = std::make_unique<NicLinks>(settings_.nic.count, link.bandwidth.count(), link.latency.count(),
                                       settings_.link_order, Nanoseconds(settings_.link_decide_ahead_ns));
    env_ = CommEnv{&settings_, &logger_, &cuda_, nics_.get(), &schedules_, NcclVersionOfLogger(logger_.function()),
                   &link_hold_, &told_virtual_broadcast_, &host_load_};
    if (settings_.same_host_unix) env_.same_host_key = SameHostKey();
    PRISM_INFO(logger_, "plugin %s in NCCL version code %d, settings: %s", prism::kVersion, env_.nccl_version,
               DescribeSettings().c_str());
    if (!warnings.empty()) PRISM_WARN(logger_, "bad settings:\n%s", warnings.c_str());
    if (!settings_.op_times_dir.empty()) {
      op_times_ = std::make_unique<OpTimesLog>(settings_.op_times_dir, &logger_);
      tracker_.KeepOpTimes(op_times_.get());
      PRISM_INFO(logger_, "operation times (NCCL's kernel stamps) go to %s", op_times_->path().c_str());
    }
    for (int d = 0; d < settings_.nic.count; ++d) {
      nic_names_.push_back(FormatNicName(settings_.nic.name_pattern, d));
    }
    std::string why = NicPciPathProblem(settings_.nic.pci_path);
    if (!why.empty()) {
      PRISM_WARN(logger_, "%s", why.c_str());
      std::fprintf(stderr, "NET/Prism: NCCL init fails: %s\n", why.c_str());
      once_result_ = prism_ncclInvalidUsage;
      return;
    }
    if (settings_.daemon_configured) {
      // Before NCCL's bootstrap starts: prismd plays this release's bootstrap.
      if (std::string refused = AnnounceToDaemon(settings_, env_.nccl_version); !refused.empty()) {
        PRISM_WARN(logger_, "%s", refused.c_str());
        std::fprintf(stderr, "NET/Prism: NCCL init fails: %s\n", refused.c_str());  // seen without NCCL_DEBUG too
        once_result_ = prism_ncclInvalidUsage;
        return;
      }
    }
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
        settings_.progress_threads < 0 ? std::string("no progress threads (NCCL's proxy thread moves the bytes)")
        : settings_.progress_threads > 0
            ? std::to_string(settings_.progress_threads) + " progress thread(s) per context"
            : std::string("one progress thread per comm");
    // Who moves real-peer messages (real_comms.h), as the log should say it.
    const std::string movers =
        settings_.progress_threads < 0 ? std::string()
        : ", NCCL's proxy thread moves messages up to " + std::to_string(settings_.inline_bytes) + " B" +
              (settings_.idle_inline_bytes > 0
                   ? " (" + std::to_string(settings_.idle_inline_bytes) + " B while cores are idle)"
                   : std::string()) +
              ", progress threads the larger";
    PRISM_INFO(logger_, "%d NIC(s), real peers dial %s%s, %d socket(s) per comm, %s%s%s",
               settings_.nic.count, Ipv4ToString(local_ipv4_be_, 0).c_str(),
               env_.same_host_key != 0 ? " (Unix sockets on this host)" : "",
               settings_.socks_per_comm, threads.c_str(), movers.c_str(),
               settings_.link_bits_per_second > 0 || settings_.link_latency_ns > 0
                   ? ", links shaped"
                   : "");
  });
  return once_result_;
}

Result Plugin::Init(prism_ncclDebugLogger_t logger, prism_ncclProfilerCallback_t prof_fn, uint64_t comm_id,
                    void** ctx) {
  if (logger != nullptr) logger_.Set(logger);
  if (prof_fn != nullptr) prof_fn_.store(prof_fn, std::memory_order_release);
  Result r = InitOnce();
  if (r != prism_ncclSuccess) return r;
  std::lock_guard<std::mutex> lock(mu_);
  if (ctx == nullptr) {
    if (process_context_ == nullptr) process_context_ = new NetContext(env_, 0);
    return prism_ncclSuccess;
  }
  *ctx = new NetContext(env_, comm_id);
  handles_.Add(*ctx);
  ++live_contexts_;
  return prism_ncclSuccess;
}

Result Plugin::ProfilerInit(void** context, uint64_t comm_id, int* activation_mask, int nranks, int rank,
                            prism_ncclDebugLogger_t logger) {
  if (logger != nullptr) logger_.Set(logger);
  Result r = InitOnce();
  if (r != prism_ncclSuccess) return r;
  return tracker_.Init(context, comm_id, activation_mask, nranks, rank);
}

NetContext* Plugin::ContextOrDefault(void* ctx) {
  if (ctx != nullptr) return handles_.Contains(ctx) ? CheckedCast<NetContext>(ctx, ObjectKind::kContext) : nullptr;
  std::lock_guard<std::mutex> lock(mu_);
  if (process_context_ == nullptr) process_context_ = new NetContext(env_, 0);
  return process_context_;
}

Result Plugin::Finalize(void* ctx) {
  if (ctx == nullptr) return prism_ncclSuccess;
  if (!handles_.Take(ctx))
    return BadArgument("finalize", "the context is not one init returned, or was finalized already");
  delete CheckedCast<NetContext>(ctx, ObjectKind::kContext);
  std::lock_guard<std::mutex> lock(mu_);
  if (live_contexts_ > 0 && --live_contexts_ == 0) ReportLinkHold();
  return prism_ncclSuccess;
}

void Plugin::ReportLinkHold() {
  const std::string summary = link_hold_.Summary();
  if (summary.empty()) return;
  PRISM_INFO(logger_, "%s", summary.c_str());
  if (settings_.link_report) std::fprintf(stderr, "NET/Prism: pid %d: %s\n", static_cast<int>(getpid()), summary.c_str());
  const std::string unheld = link_hold_.UnheldWarning();
  if (unheld.empty()) return;
  PRISM_WARN(logger_, "%s", unheld.c_str());
  std::fprintf(stderr, "NET/Prism: pid %d: %s\n", static_cast<int>(getpid()), unheld.c_str());  // seen without NCCL_DEBUG too
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
  if (dev < 0 || dev >= settings_.nic.count || handle == nullptr)
    return BadArgument("listen", "device " + std::to_string(dev) + " or a null handle");
  NetContext* context = ContextOrDefault(ctx);
  if (context == nullptr) return BadArgument("listen", "unknown net context");
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
  const int unix_fd = OpenSameHostListener(h.listen_id);
  if (unix_fd >= 0) h.host_key = env_.same_host_key;
  std::memset(handle, 0, kNetHandleBytes);
  std::memcpy(handle, &h, sizeof(h));
  std::shared_ptr<VirtualPeers> vp;
  if (settings_.daemon_configured) {
    vp = context->virtual_peers();
    vp->ListenOpened(h.listen_id, dev);
  }
  *listen_comm = new ListenComm(env_, context->engines(), fd, unix_fd, h, std::move(vp));
  handles_.Add(*listen_comm);
  return prism_ncclSuccess;
}

int Plugin::OpenSameHostListener(uint64_t listen_id) {
  if (env_.same_host_key == 0) return -1;
  std::string why;
  const int fd = OpenUnixListener(SameHostSocketName(listen_id), &why);
  if (fd < 0 && !warned_same_host_.exchange(true)) {
    PRISM_WARN(logger_, "real peers on this host connect over TCP: %s (PRISM_SAME_HOST=tcp silences this)",
               why.c_str());
  }
  return fd;
}

Result Plugin::Connect(void* ctx, int dev, void* handle, void** send_comm) {
  *send_comm = nullptr;
  NetContext* context = ContextOrDefault(ctx);
  if (context == nullptr || handle == nullptr) return BadArgument("connect", "unknown net context or null handle");
  const uint64_t magic = HandleMagic(handle);
  std::unique_ptr<NetComm> comm;
  if (magic == kVirtualHandleMagic) {
    VirtualHandle vh;
    std::memcpy(&vh, handle, sizeof(vh));
    Result r = context->virtual_peers()->Connect(vh, dev, &comm);
    *send_comm = comm.release();
    if (*send_comm != nullptr) handles_.Add(*send_comm);
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
    stage->pending = new PendingConnect(env_, context->engines(), h, dev);
    stage->magic = kStageMagic;
  }
  Result r = stage->pending->Step(&comm);
  if (r != prism_ncclSuccess || comm) {
    delete stage->pending;
    stage->pending = nullptr;
    stage->magic = 0;
  }
  *send_comm = comm.release();
  if (*send_comm != nullptr) handles_.Add(*send_comm);
  return r;
}

Result Plugin::Accept(void* listen_comm, void** recv_comm) {
  *recv_comm = nullptr;
  auto* l = CheckedCast<ListenComm>(listen_comm, ObjectKind::kListenComm);
  if (l == nullptr) return BadArgument("accept", "the listen comm is not one listen returned");
  std::unique_ptr<NetComm> comm;
  Result r = l->Accept(&comm);
  *recv_comm = comm.release();
  if (*recv_comm != nullptr) handles_.Add(*recv_comm);
  if (*recv_comm != nullptr)
    PRISM_INFO(logger_, "accept on listen %llx: receive comm %p", static_cast<unsigned long long>(l->handle().listen_id),
               *recv_comm);
  return r;
}

Result Plugin::CloseListen(void* listen_comm) {
  if (listen_comm == nullptr) return prism_ncclSuccess;  // NCCL's own transports accept NULL
  if (!handles_.Take(listen_comm))
    return BadArgument("closeListen", "the listen comm is not one listen returned, or was closed already");
  auto* l = CheckedCast<ListenComm>(listen_comm, ObjectKind::kListenComm);
  if (l == nullptr) {
    handles_.Add(listen_comm);  // another kind of live object: leave it as it was
    return BadArgument("closeListen", "the listen comm is not one listen returned");
  }
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
  auto* mr = new MemRegion(data, size, type);
  if (mr->on_gpu()) mr->device = cuda_.DeviceOf(data);  // once, not per copy
  *mhandle = mr;
  return prism_ncclSuccess;
}

Result Plugin::DeregMr(void* comm, void* mhandle) {
  if (mhandle == nullptr) return prism_ncclSuccess;
  auto* mr = CheckedCast<MemRegion>(mhandle, ObjectKind::kMemRegion);
  if (mr == nullptr) return BadArgument("deregMr", "the memory handle is not one regMr returned");
  if (auto* c = CheckedCast<NetComm>(comm, ObjectKind::kComm)) c->Deregistering(*mr);
  delete mr;
  return prism_ncclSuccess;
}

Result Plugin::Isend(void* comm, void* data, size_t size, int tag, void* mhandle, void* phandle,
                     void** request) {
  if (request == nullptr) return BadArgument("isend", "no request pointer");
  *request = nullptr;
  auto* c = CheckedCast<NetComm>(comm, ObjectKind::kComm);
  if (c == nullptr) return BadArgument("isend", DescribeBadComm(comm) + " is not a send comm this plugin made");
  MessageTag op;
  OpTracker::Resolve(prof_fn_.load(std::memory_order_acquire), phandle, &op);
  return c->Isend(data, size, tag, CheckedCast<MemRegion>(mhandle, ObjectKind::kMemRegion), op, request);
}

Result Plugin::Irecv(void* comm, int n, void** data, size_t* sizes, int* tags, void** mhandles,
                     void** phandles, void** request) {
  if (request == nullptr || n < 1 || n > kMaxGroupedRecvs || data == nullptr || sizes == nullptr)
    return BadArgument("irecv", "n=" + std::to_string(n) + " (1.." + std::to_string(kMaxGroupedRecvs) +
                                    ") or a null request/data/sizes pointer");
  *request = nullptr;
  auto* c = CheckedCast<NetComm>(comm, ObjectKind::kComm);
  if (c == nullptr)
    return BadArgument("irecv", DescribeBadComm(comm) + " is not a receive comm this plugin made");
  const prism_ncclProfilerCallback_t prof_fn = prof_fn_.load(std::memory_order_acquire);
  MessageTag ops[kMaxGroupedRecvs];
  const MemRegion* mrs[kMaxGroupedRecvs] = {};
  for (int i = 0; i < n; ++i) {
    if (phandles != nullptr) OpTracker::Resolve(prof_fn, phandles[i], &ops[i]);
    if (mhandles != nullptr) mrs[i] = CheckedCast<MemRegion>(mhandles[i], ObjectKind::kMemRegion);
  }
  return c->Irecv(n, data, sizes, tags, mrs, ops, request);
}

Result Plugin::Iflush(void* comm, int n, void** data, int* sizes, void** mhandles,
                      void** request) {
  // GPU receives are copied into place before they complete: nothing to flush.
  *request = nullptr;
  return prism_ncclSuccess;
}

Result Plugin::Test(void* request, int* done, int* sizes) {
  if (done == nullptr) return BadArgument("test", "no done pointer");
  if (request == nullptr) {
    *done = 1;
    return prism_ncclSuccess;
  }
  auto* r = CheckedCast<Request>(request, ObjectKind::kRequest);
  if (r == nullptr) return BadArgument("test", "the request is not one isend/irecv returned");
  return r->Test(done, sizes);
}

Result Plugin::CloseComm(void* comm) {
  if (comm == nullptr) return prism_ncclSuccess;  // NCCL's own transports accept NULL
  if (!handles_.Take(comm)) return BadArgument("close", "the comm is not one this plugin made, or was closed already");
  auto* c = CheckedCast<NetComm>(comm, ObjectKind::kComm);
  if (c == nullptr) {
    handles_.Add(comm);  // another kind of live object: leave it as it was
    return BadArgument("close", "the comm is not one this plugin made");
  }
  PRISM_INFO(logger_, "close comm %p", comm);
  c->Close();
  delete c;
  return prism_ncclSuccess;
}

}  // namespace prism::plugin
