// BootstrapServer: sockets, connections, endpoint allocation, recording.
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "daemon/bootstrap/bootstrap_server.h"
#include "spdlog/spdlog.h"

namespace prism::bootstrap {
namespace {

sockaddr_in ToSockaddr(const Ipv4Endpoint& e) {
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(e.port);
  a.sin_addr.s_addr = htonl(e.ip);
  return a;
}

Ipv4Endpoint FromSockaddr(const sockaddr_in& a) {
  return {ntohl(a.sin_addr.s_addr), ntohs(a.sin_port)};
}

Ipv4Endpoint LocalOf(int fd) {
  sockaddr_in a{};
  socklen_t len = sizeof(a);
  getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  return FromSockaddr(a);
}

Ipv4Endpoint PeerOf(int fd) {
  sockaddr_in a{};
  socklen_t len = sizeof(a);
  getpeername(fd, reinterpret_cast<sockaddr*>(&a), &len);
  return FromSockaddr(a);
}

void SetNoDelay(int fd) {
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

bool TransientConnectError(int err) {
  return err == ECONNREFUSED || err == ETIMEDOUT || err == EHOSTUNREACH || err == EAGAIN ||
         err == EINTR || err == ENETUNREACH;
}

}  // namespace

void Conn::OnIo(uint32_t events) { server->OnConnIo(this, events); }
void BootstrapServer::Listener::OnIo(uint32_t) { server->OnAccept(this); }

absl::StatusOr<int> BootstrapServer::ListenOn(const Ipv4Endpoint& at) {
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) return absl::ResourceExhaustedError(absl::StrCat("socket: ", std::strerror(errno)));
  int one = 1;
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  const sockaddr_in a = ToSockaddr(at);
  if (bind(fd, reinterpret_cast<const sockaddr*>(&a), sizeof(a)) != 0 || listen(fd, 4096) != 0) {
    const std::string err = std::strerror(errno);
    close(fd);
    return absl::UnavailableError(absl::StrCat("cannot listen on ", ToString(at), ": ", err));
  }
  return fd;
}

absl::StatusOr<Ipv4Endpoint> BootstrapServer::AllocEndpoint(uint32_t comm, int32_t rank,
                                                            EndpointKind kind) {
  Ipv4Endpoint e;
  if (config_.address_mode == AddressMode::kLoopbackAliases) {
    // 127.64.0.1 ... 127.127.255.254: 2^22 addresses, reused after wrap.
    const uint32_t alias = next_alias_++ % (1u << 22);
    e = {0x7f400000u + (alias == 0 ? 1 : alias), shared_port_};
  } else {
    auto fd = ListenOn({advertise_.ip, 0});
    if (!fd.ok()) return fd.status();
    e = {advertise_.ip, LocalOf(*fd).port};
    auto l = std::make_unique<Listener>();
    l->server = this;
    l->fd = *fd;
    if (auto s = loop_.Add(*fd, EPOLLIN, l.get()); !s.ok()) return s;
    endpoint_listeners_[{e.ip, e.port}] = std::move(l);
  }
  endpoints_[{e.ip, e.port}] = EndpointRef{comm, rank, kind};
  return e;
}

void BootstrapServer::FreeEndpoints(LiveComm& c) {
  for (auto* v : {&c.ring_ep, &c.p2p_ep, &c.root_ep}) {
    for (const Ipv4Endpoint& e : *v) {
      if (e.ip == 0) continue;
      endpoints_.erase({e.ip, e.port});
      auto it = endpoint_listeners_.find({e.ip, e.port});
      if (it != endpoint_listeners_.end()) {
        loop_.Remove(it->second->fd);
        close(it->second->fd);
        endpoint_listeners_.erase(it);
      }
    }
  }
}

void BootstrapServer::OnAccept(Listener* l) {
  while (true) {
    const int fd = accept4(l->fd, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) return;  // EAGAIN or transient: epoll calls again
    SetNoDelay(fd);
    Conn* c = NewConn(fd, l->is_root ? ConnRole::kRootIn : ConnRole::kAcceptedUnknown,
                      l->is_root ? "root check-in" : "accepted");
    c->local = LocalOf(fd);
    c->remote = PeerOf(fd);
    if (recorder_) recorder_->Opened(c->id, false, c->local, c->remote, c->note);
    {
      std::lock_guard<std::mutex> lock(stats_mu_);
      ++stats_.accepted_connections;
    }
    if (auto s = loop_.Add(fd, EPOLLIN | EPOLLRDHUP, c); !s.ok()) CloseConn(c);
  }
}

Conn* BootstrapServer::NewConn(int fd, ConnRole role, const std::string& note) {
  auto c = std::make_unique<Conn>();
  c->server = this;
  c->id = next_conn_id_++;
  c->fd = fd;
  c->role = role;
  c->note = note;
  Conn* raw = c.get();
  conns_[raw->id] = std::move(c);
  return raw;
}

Conn* BootstrapServer::FindConn(uint64_t id) {
  auto it = conns_.find(id);
  return it == conns_.end() || it->second->dead ? nullptr : it->second.get();
}

Conn* BootstrapServer::ConnectOut(const Ipv4Endpoint& to, ConnRole role, uint64_t magic,
                                  std::string payload, uint32_t comm, int32_t rank,
                                  const std::string& note, int32_t socket_type) {
  Conn* c = NewConn(-1, role, note);
  c->remote = to;
  c->comm = comm;
  c->rank = rank;
  char header[12];
  const int32_t type = socket_type;
  std::memcpy(header, &magic, 8);
  std::memcpy(header + 8, &type, 4);
  c->out.assign(header, 12);
  c->out += payload;
  c->close_after_flush = role == ConnRole::kOneShotOut;
  c->give_up = std::chrono::steady_clock::now() +
               std::chrono::milliseconds(config_.root_connect_timeout_ms);
  StartConnect(c);
  return c;
}

void BootstrapServer::StartConnect(Conn* c) {
  c->fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (c->fd < 0) {
    RetryConnect(c);
    return;
  }
  SetNoDelay(c->fd);
  const sockaddr_in a = ToSockaddr(c->remote);
  const int r = connect(c->fd, reinterpret_cast<const sockaddr*>(&a), sizeof(a));
  if (r != 0 && errno != EINPROGRESS) {
    const int err = errno;
    close(c->fd);
    c->fd = -1;
    if (TransientConnectError(err)) {
      RetryConnect(c);
    } else {
      Diverge(absl::StrCat("connect to real rank at ", ToString(c->remote), " (", c->note,
                           ") failed: ", std::strerror(err)));
      c->dead = true;
      CloseConn(c);
    }
    return;
  }
  c->connecting = true;
  if (!loop_.Add(c->fd, EPOLLOUT | EPOLLIN | EPOLLRDHUP, c).ok()) CloseConn(c);
}

void BootstrapServer::RetryConnect(Conn* c) {
  spdlog::debug("bootstrap: retry connect {} ({})", ToString(c->remote), c->note);
  if (c->fd >= 0) {
    loop_.Remove(c->fd);
    close(c->fd);
    c->fd = -1;
  }
  c->connecting = false;
  if (std::chrono::steady_clock::now() > c->give_up) {
    LiveComm* comm = Comm(c->comm);
    const std::string why = absl::StrCat("real rank listener ", ToString(c->remote), " (", c->note,
                                         ") did not accept within ",
                                         config_.root_connect_timeout_ms, " ms");
    CloseConn(c);
    if (comm != nullptr) FailComm(*comm, why);
    return;
  }
  ++c->attempts;
  const uint64_t id = c->id;
  const int delay_ms = std::min(100 * c->attempts, 1000);
  loop_.AddTimer(std::chrono::milliseconds(delay_ms), [this, id] {
    if (Conn* again = FindConn(id)) StartConnect(again);
  });
}

void BootstrapServer::Send(Conn* c, const std::string& bytes) {
  c->out += bytes;
  Flush(c);
}

void BootstrapServer::Flush(Conn* c) {
  if (c->dead || c->connecting || c->fd < 0) return;
  while (c->out_off < c->out.size()) {
    const ssize_t w = send(c->fd, c->out.data() + c->out_off, c->out.size() - c->out_off,
                           MSG_NOSIGNAL);
    if (w > 0) {
      if (recorder_) recorder_->Data(c->id, false, c->out.data() + c->out_off, w);
      c->out_off += w;
      continue;
    }
    if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      loop_.Modify(c->fd, EPOLLIN | EPOLLOUT | EPOLLRDHUP, c).IgnoreError();
      return;
    }
    HandleEof(c);  // broken pipe: peer is gone
    return;
  }
  c->out.clear();
  c->out_off = 0;
  loop_.Modify(c->fd, EPOLLIN | EPOLLRDHUP, c).IgnoreError();
  if (c->close_after_flush) CloseConn(c);
}

void BootstrapServer::OnConnIo(Conn* c, uint32_t events) {
  if (c->dead) return;
  if (c->connecting) {
    int err = 0;
    socklen_t len = sizeof(err);
    getsockopt(c->fd, SOL_SOCKET, SO_ERROR, &err, &len);
    if (err != 0 || (events & (EPOLLERR | EPOLLHUP))) {
      RetryConnect(c);
      return;
    }
    c->connecting = false;
    c->local = LocalOf(c->fd);
    spdlog::debug("bootstrap: connected {} ({})", ToString(c->remote), c->note);
    if (recorder_) recorder_->Opened(c->id, true, c->local, c->remote, c->note);
    Flush(c);
    if (c->dead) return;
  }
  if (events & EPOLLOUT) Flush(c);
  if (c->dead) return;
  if (events & (EPOLLIN | EPOLLRDHUP | EPOLLHUP | EPOLLERR)) {
    char buf[65536];
    bool eof = false;
    while (true) {
      const ssize_t r = recv(c->fd, buf, sizeof(buf), 0);
      if (r > 0) {
        if (recorder_) recorder_->Data(c->id, true, buf, r);
        if (c->in_off > 0 && c->in_off == c->in.size()) {
          c->in.clear();
          c->in_off = 0;
        }
        c->in.append(buf, r);
        continue;
      }
      if (r == 0 || (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)) eof = true;
      break;
    }
    spdlog::debug("bootstrap: conn {} ({}) role {} has {} bytes{}", c->id, c->note,
                  static_cast<int>(c->role), c->Available(), eof ? ", eof" : "");
    HandleInput(c);
    if (eof && !c->dead) {
      c->eof = true;
      HandleEof(c);
    }
  }
}

void BootstrapServer::CloseConn(Conn* c) {
  if (c->fd >= 0) {
    loop_.Remove(c->fd);
    close(c->fd);
    c->fd = -1;
  }
  if (recorder_ && !c->dead) recorder_->Closed(c->id);
  const bool was_dead = c->dead;
  c->dead = true;
  if (c->checkin && !was_dead && job_active_) {
    if (LiveComm* comm = Comm(c->comm)) {
      --comm->checkins_outstanding;
      PumpCheckins(*comm);
    }
  }
  auto it = conns_.find(c->id);
  if (it == conns_.end()) return;
  graveyard_.push_back(std::move(it->second));
  conns_.erase(it);
  if (!reap_scheduled_) {
    reap_scheduled_ = true;
    loop_.AddTimer(std::chrono::nanoseconds(0), [this] { ReapDead(); });
  }
}

void BootstrapServer::ReapDead() {
  graveyard_.clear();
  reap_scheduled_ = false;
}

void BootstrapServer::SendP2p(LiveComm& c, int32_t from, int32_t to, int32_t tag,
                              const Bytes& payload) {
  if (!c.real_p2p[to]) {
    Diverge(absl::StrCat(c.name, ": no P2P address known for real rank ", to,
                         " (message from virtual ", from, " tag ", tag, " dropped)"));
    return;
  }
  std::string msg;
  const int32_t ack_len = 8;
  const int32_t len = static_cast<int32_t>(payload.size());
  msg.append(reinterpret_cast<const char*>(&ack_len), 4);
  msg.append(reinterpret_cast<const char*>(&from), 4);
  msg.append(reinterpret_cast<const char*>(&tag), 4);
  msg.append(reinterpret_cast<const char*>(&len), 4);
  msg.append(reinterpret_cast<const char*>(payload.data()), payload.size());
  ConnectOut(*c.real_p2p[to], ConnRole::kOneShotOut, c.magic, std::move(msg), c.live_id, from,
             absl::StrCat("p2p ", c.name, " v", from, "->r", to, " tag ", tag));
  std::lock_guard<std::mutex> lock(stats_mu_);
  ++stats_.p2p_messages_out;
}

}  // namespace prism::bootstrap
