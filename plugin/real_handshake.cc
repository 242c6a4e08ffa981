#include "plugin/real_handshake.h"

#include <unistd.h>

#include <random>

#include "plugin/clock.h"
#include "plugin/host_identity.h"
#include "plugin/net_socket.h"
#include "plugin/real_comms.h"

namespace prism::plugin {

ListenComm::ListenComm(const CommEnv& env, std::shared_ptr<ProgressEnginePool> engines,
                       int listen_fd, int unix_fd, const RealListenHandle& handle,
                       std::shared_ptr<VirtualPeers> virtual_peers)
    : Tagged(ObjectKind::kListenComm),
      env_(env),
      engines_(std::move(engines)),
      listen_fd_(listen_fd),
      unix_fd_(unix_fd),
      handle_(handle),
      virtual_peers_(std::move(virtual_peers)) {}

ListenComm::~ListenComm() {
  if (virtual_peers_) virtual_peers_->ListenClosed(handle_.listen_id);
  close(listen_fd_);
  if (unix_fd_ >= 0) close(unix_fd_);
  for (Incoming& in : incoming_) CloseIncoming(in);
  for (auto& [nonce, group] : groups_) {
    for (Incoming& in : group) CloseIncoming(in);
  }
}

void ListenComm::CloseIncoming(Incoming& in) {
  if (in.fd >= 0) close(in.fd);
  for (int fd : in.ring_fds) close(fd);
  in.fd = -1;
  in.ring_fds.clear();
}

namespace {

// PRISM_SAME_HOST_SNDBUF on a Unix socket to a real peer on this host (each
// end sizes its own: a Unix stream socket's sender is limited by its own
// send buffer). A refusal costs speed, not correctness: logged, not fatal.
void SizeSameHostSocket(const CommEnv& env, int fd) {
  const int bytes = env.settings->same_host_send_buffer;
  if (bytes <= 0) return;
  std::string why;
  if (SetSendBuffer(fd, bytes, &why) < 0) PRISM_INFO(*env.logger, "Unix socket send buffer left as is: %s", why.c_str());
}

}  // namespace

Result ListenComm::AcceptPending(int listen_fd) {
  for (;;) {
    bool again = false;
    std::string why;
    int fd = AcceptOne(listen_fd, &again, &why);
    if (fd >= 0) {
      const bool same_host = listen_fd == unix_fd_;
      if (same_host) SizeSameHostSocket(env_, fd);
      incoming_.push_back(Incoming{fd, {}, 0, same_host, {}});
      continue;
    }
    if (again) return prism_ncclSuccess;
    PRISM_WARN(*env_.logger, "accept on %s failed: %s",
               Ipv4ToString(handle_.ipv4_be, handle_.port_be).c_str(), why.c_str());
    return prism_ncclSystemError;
  }
}

Result ListenComm::ReadHellos() {
  for (size_t i = 0; i < incoming_.size();) {
    Incoming& in = incoming_[i];
    std::string why;
    char* rest = reinterpret_cast<char*>(&in.hello) + in.got;
    const size_t want = sizeof(SocketHello) - in.got;
    long got = in.same_host ? ReadSomeWithFds(in.fd, rest, want, &in.ring_fds, &why) : ReadSome(in.fd, rest, want, &why);
    bool drop = got < 0;
    if (got > 0) in.got += static_cast<size_t>(got);
    if (in.got == sizeof(SocketHello)) {
      const SocketHello& h = in.hello;
      const bool ring = h.magic == kRingHelloMagic;
      if ((h.magic != kRealHandleMagic && !ring) || h.listen_id != handle_.listen_id || h.nsocks == 0 ||
          h.nsocks > 16 || h.index >= h.nsocks || ring != !in.ring_fds.empty() || (ring && h.nsocks != 1)) {
        PRISM_WARN(*env_.logger, "dropping a connection with a wrong hello on listen id %llx",
                   static_cast<unsigned long long>(handle_.listen_id));
        drop = true;
      } else {
        groups_[h.comm_nonce].push_back(in);
        incoming_.erase(incoming_.begin() + static_cast<long>(i));
        continue;
      }
    }
    if (drop) {
      CloseIncoming(in);
      incoming_.erase(incoming_.begin() + static_cast<long>(i));
      continue;
    }
    ++i;
  }
  return prism_ncclSuccess;
}

Result ListenComm::TakeCompleteGroup(std::unique_ptr<NetComm>* comm) {
  for (auto it = groups_.begin(); it != groups_.end(); ++it) {
    std::vector<Incoming>& g = it->second;
    const uint32_t nsocks = g.front().hello.nsocks;
    if (g.size() < nsocks) continue;
    std::vector<int> fds(nsocks, -1);
    std::vector<int> ring_fds;
    for (Incoming& in : g) {
      fds[in.hello.index] = in.fd;
      if (!in.ring_fds.empty()) ring_fds = std::move(in.ring_fds);
    }
    const bool same_host = g.front().same_host;
    groups_.erase(it);
    std::string peer = "listen " + Ipv4ToString(handle_.ipv4_be, handle_.port_be);
    std::unique_ptr<SharedRing> ring;
    if (!ring_fds.empty()) {
      std::string why;
      ring = SharedRing::Attach(std::move(ring_fds), &why);  // owns the fds from here
      if (ring == nullptr) {
        for (int fd : fds) close(fd);
        PRISM_WARN(*env_.logger,
                   "a real peer on this host connected to %s with a shared-memory ring this process cannot use: %s. "
                   "Run every rank with the same Prism build, or set PRISM_SAME_HOST_RING=0 on every rank to send "
                   "payloads over the Unix socket",
                   peer.c_str(), why.c_str());
        return prism_ncclSystemError;
      }
      peer += " (shared memory)";
    } else if (same_host) {
      peer += " (Unix socket)";
    }
    *comm = std::make_unique<RealRecvComm>(env_, engines_, std::move(fds), peer, std::move(ring));
    return prism_ncclSuccess;
  }
  return prism_ncclSuccess;
}

Result ListenComm::Accept(std::unique_ptr<NetComm>* comm) {
  comm->reset();
  if (virtual_peers_) {
    *comm = virtual_peers_->Accept(handle_.listen_id);
    if (*comm) return prism_ncclSuccess;
  }
  Result r = AcceptPending(listen_fd_);
  if (r == prism_ncclSuccess && unix_fd_ >= 0) r = AcceptPending(unix_fd_);
  if (r != prism_ncclSuccess) return r;
  r = ReadHellos();
  if (r != prism_ncclSuccess) return r;
  r = TakeCompleteGroup(comm);
  if (r == prism_ncclSuccess && !*comm) NoteWaiting();
  if (*comm) {
    waiting_since_ns_ = 0;
    told_waiting_ = false;
  }
  return r;
}

void ListenComm::NoteWaiting() {
  if (virtual_peers_ != nullptr || told_waiting_) return;
  const int64_t now = MonoNowNs();
  if (waiting_since_ns_ == 0) waiting_since_ns_ = now;
  const int64_t waited_ms = (now - waiting_since_ns_) / 1000000;
  if (waited_ms < env_.settings->connect_timeout_ms / 2) return;
  told_waiting_ = true;
  size_t grouped = 0;
  for (const auto& [nonce, group] : groups_) grouped += group.size();
  PRISM_WARN(*env_.logger,
             "accept on listen %s (id %llx) has waited %lld ms for its peer: %zu connection(s) with their hello "
             "read, %zu without; NCCL keeps calling accept while the peer never connects (is the rank that "
             "should connect here alive and past its own connect? half of PRISM_CONNECT_TIMEOUT_MS=%lld)",
             Ipv4ToString(handle_.ipv4_be, handle_.port_be).c_str(), static_cast<unsigned long long>(handle_.listen_id),
             static_cast<long long>(waited_ms), grouped, incoming_.size(),
             static_cast<long long>(env_.settings->connect_timeout_ms));
}

PendingConnect::PendingConnect(const CommEnv& env, std::shared_ptr<ProgressEnginePool> engines,
                               const RealListenHandle& handle, int dev)
    : env_(env),
      engines_(std::move(engines)),
      handle_(handle),
      dev_(dev),
      same_host_(handle.host_key != 0 && handle.host_key == env.same_host_key),
      peer_(Ipv4ToString(handle.ipv4_be, handle.port_be) + (same_host_ ? " (Unix socket)" : "")),
      nonce_(std::random_device{}() * 0x100000001ull ^ static_cast<uint64_t>(MonoNowNs())),
      deadline_ns_(MonoNowNs() + env.settings->connect_timeout_ms * 1000000),
      socks_(same_host_ && env.settings->same_host_ring_bytes > 0 ? 1
                                                                  : static_cast<size_t>(env.settings->socks_per_comm)) {}

PendingConnect::~PendingConnect() {
  for (Sock& s : socks_) {
    if (s.fd >= 0) close(s.fd);
  }
}

Result PendingConnect::StartSameHost(Sock& s) {
  bool again = false;
  std::string why;
  s.fd = StartConnectUnix(SameHostSocketName(handle_.listen_id), &again, &why);
  if (s.fd >= 0) {
    SizeSameHostSocket(env_, s.fd);
    s.connected = true;
    const int64_t ring_bytes = env_.settings->same_host_ring_bytes;
    if (ring_bytes > 0 && ring_ == nullptr) {
      std::string why;
      ring_ = SharedRing::Create(static_cast<uint64_t>(ring_bytes), "prism-net ring", &why);
      if (ring_ == nullptr) PRISM_INFO(*env_.logger, "%s: no shared-memory ring (%s); payloads go over the socket", peer_.c_str(), why.c_str());
    }
    return prism_ncclSuccess;
  }
  if (again) {
    s.retry_at_ns = MonoNowNs() + 1000000;  // the listener's backlog is full: again in 1 ms
    return prism_ncclSuccess;
  }
  // Same key but no Unix listener there (e.g. a listener that could not open
  // one): the TCP address still takes the connection.
  PRISM_INFO(*env_.logger, "%s: %s; dialling TCP instead", peer_.c_str(), why.c_str());
  same_host_ = false;
  peer_ = Ipv4ToString(handle_.ipv4_be, handle_.port_be);
  return prism_ncclSuccess;
}

Result PendingConnect::StepSocket(Sock& s, uint32_t index) {
  std::string why;
  if (s.fd < 0) {
    if (MonoNowNs() < s.retry_at_ns) return prism_ncclSuccess;
    if (same_host_) return StartSameHost(s);
    s.fd = StartConnect(handle_.ipv4_be, handle_.port_be, &why);
    if (s.fd < 0) {
      PRISM_WARN(*env_.logger, "connect to %s failed: %s", peer_.c_str(), why.c_str());
      return prism_ncclSystemError;
    }
  }
  if (!s.connected) {
    switch (PollConnect(s.fd, &why)) {
      case ConnectState::kInProgress:
        return prism_ncclSuccess;
      case ConnectState::kConnected:
        s.connected = true;
        break;
      case ConnectState::kRefused:
        close(s.fd);
        s.fd = -1;
        s.retry_at_ns = MonoNowNs() + 10000000;  // retry in 10 ms
        return prism_ncclSuccess;
      case ConnectState::kFailed:
        PRISM_WARN(*env_.logger, "connect to %s failed: %s", peer_.c_str(), why.c_str());
        return prism_ncclSystemError;
    }
  }
  return WriteHello(s, index);
}

Result PendingConnect::WriteHello(Sock& s, uint32_t index) {
  const SocketHello hello{ring_ != nullptr ? kRingHelloMagic : kRealHandleMagic, handle_.listen_id, nonce_, index,
                          static_cast<uint32_t>(socks_.size())};
  std::string why;
  while (s.hello_sent < sizeof(hello)) {
    const char* rest = reinterpret_cast<const char*>(&hello) + s.hello_sent;
    const size_t want = sizeof(hello) - s.hello_sent;
    const bool pass_ring = ring_ != nullptr && index == 0 && s.hello_sent == 0;
    long n = pass_ring ? WriteSomeWithFds(s.fd, rest, want, ring_->fds().data(), ring_->fds().size(), &why) : WriteSome(s.fd, rest, want, &why);
    if (n < 0) {
      PRISM_WARN(*env_.logger, "handshake with %s failed: %s", peer_.c_str(), why.c_str());
      return prism_ncclSystemError;
    }
    if (n == 0) return prism_ncclSuccess;
    s.hello_sent += static_cast<size_t>(n);
  }
  return prism_ncclSuccess;
}

Result PendingConnect::Step(std::unique_ptr<NetComm>* comm) {
  comm->reset();
  bool all_done = true;
  for (size_t i = 0; i < socks_.size(); ++i) {
    Result r = StepSocket(socks_[i], static_cast<uint32_t>(i));
    if (r != prism_ncclSuccess) return r;
    all_done = all_done && socks_[i].hello_sent == sizeof(SocketHello);
  }
  if (!all_done) {
    if (MonoNowNs() > deadline_ns_) {
      PRISM_WARN(*env_.logger,
                 "connect to %s (pid %u) did not complete within PRISM_CONNECT_TIMEOUT_MS=%lld; "
                 "is the peer alive and the address reachable (PRISM_SOCKET_IFADDR)?",
                 peer_.c_str(), handle_.pid,
                 static_cast<long long>(env_.settings->connect_timeout_ms));
      return prism_ncclSystemError;
    }
    return prism_ncclSuccess;
  }
  std::vector<int> fds;
  for (Sock& s : socks_) {
    fds.push_back(s.fd);
    s.fd = -1;
  }
  if (ring_ != nullptr) peer_ = Ipv4ToString(handle_.ipv4_be, handle_.port_be) + " (shared memory)";
  *comm = std::make_unique<RealSendComm>(env_, engines_, std::move(fds), peer_, dev_, std::move(ring_));
  return prism_ncclSuccess;
}

}  // namespace prism::plugin
