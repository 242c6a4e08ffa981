#include "daemon/bootstrap/connection_table.h"

#include <arpa/inet.h>
#include <linux/filter.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "spdlog/spdlog.h"

namespace prism::bootstrap {
namespace {

constexpr int kMaxAcceptBackoffMs = 2000;

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

// accept4 errors that mean "no resources now": retrying at once would spin.
bool ResourceError(int err) {
  return err == EMFILE || err == ENFILE || err == ENOBUFS || err == ENOMEM;
}

bool IsLoopback(uint32_t ip) { return (ip >> 24) == 127; }

std::string FdLimitText() {
  rlimit rl{};
  getrlimit(RLIMIT_NOFILE, &rl);
  return absl::StrCat(rl.rlim_cur);
}

}  // namespace

absl::StatusOr<std::pair<uint32_t, int>> ParseCidr(const std::string& text) {
  std::vector<std::string> parts = absl::StrSplit(text, '/');
  int len = 32;
  if (parts.size() > 2 || (parts.size() == 2 && (!absl::SimpleAtoi(parts[1], &len) || len < 0 || len > 32))) {
    return absl::InvalidArgumentError(absl::StrCat("'", text, "' is not an IPv4 address or a.b.c.d/len range"));
  }
  in_addr a{};
  if (inet_pton(AF_INET, parts[0].c_str(), &a) != 1) {
    return absl::InvalidArgumentError(absl::StrCat("'", text, "' is not an IPv4 address or a.b.c.d/len range"));
  }
  return std::make_pair(ntohl(a.s_addr), len);
}

void Conn::OnIo(uint32_t events) { table->OnConnIo(this, events); }

ConnectionTable::ConnectionTable(net::EventLoop& loop, Reporter& reporter, ConnEvents& events)
    : loop_(loop), reporter_(reporter), events_(events) {}

ConnectionTable::~ConnectionTable() {
  for (auto& [id, c] : conns_) {
    if (c->fd >= 0) close(c->fd);
  }
  for (auto& [key, l] : endpoint_listeners_) close(l->fd);
  for (auto& l : listeners_) close(l->fd);
}

namespace {

// In loopback-only mode (loopback aliases: virtual ranks are 127.x.y.z on
// one wildcard port) a listener takes only packets from and to 127.0.0.0/8:
// a classic BPF
// socket filter, run by the kernel on every packet for the listener and the
// connections accepted from it (they inherit it), drops a remote peer's SYN,
// so the port is closed to other hosts as if it were bound to loopback.
absl::Status KeepToLoopback(int fd) {
  static constexpr uint32_t kNet = static_cast<uint32_t>(SKF_NET_OFF);  // the IPv4 header
  sock_filter code[] = {
      BPF_STMT(BPF_LD | BPF_W | BPF_ABS, kNet + 12),            // source address
      BPF_STMT(BPF_ALU | BPF_RSH | BPF_K, 24),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, 127, 0, 4),
      BPF_STMT(BPF_LD | BPF_W | BPF_ABS, kNet + 16),            // destination address
      BPF_STMT(BPF_ALU | BPF_RSH | BPF_K, 24),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, 127, 0, 1),
      BPF_STMT(BPF_RET | BPF_K, 0xffffffff),                    // keep the packet
      BPF_STMT(BPF_RET | BPF_K, 0),                             // drop it
  };
  const sock_fprog program{static_cast<unsigned short>(sizeof(code) / sizeof(code[0])), code};
  if (setsockopt(fd, SOL_SOCKET, SO_ATTACH_FILTER, &program, sizeof(program)) != 0)
    return absl::UnavailableError(absl::StrCat("cannot keep the bootstrap listener to loopback (SO_ATTACH_FILTER: ",
                                               std::strerror(errno), ")"));
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<Ipv4Endpoint> ConnectionTable::Listen(const Ipv4Endpoint& at, ListenerKind kind) {
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) return absl::ResourceExhaustedError(absl::StrCat("socket: ", std::strerror(errno)));
  int one = 1;
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  if (limits_.loopback_only) {
    if (auto s = KeepToLoopback(fd); !s.ok()) {
      close(fd);
      return s;
    }
  }
  const sockaddr_in a = ToSockaddr(at);
  if (bind(fd, reinterpret_cast<const sockaddr*>(&a), sizeof(a)) != 0 || listen(fd, 4096) != 0) {
    const std::string err = std::strerror(errno);
    close(fd);
    return absl::UnavailableError(absl::StrCat("cannot listen on ", ToString(at), ": ", err));
  }
  auto l = std::make_unique<Listener>();
  l->table = this;
  l->fd = fd;
  l->kind = kind;
  if (auto s = loop_.Add(fd, EPOLLIN, l.get()); !s.ok()) {
    close(fd);
    return s;
  }
  const Ipv4Endpoint bound = LocalOf(fd);
  listeners_.push_back(std::move(l));
  return bound;
}

void ConnectionTable::UseAliasEndpoints(uint16_t shared_port) {
  alias_mode_ = true;
  shared_port_ = shared_port;
}

void ConnectionTable::UsePortPerEndpoint(uint32_t ip) {
  alias_mode_ = false;
  endpoint_ip_ = ip;
}

absl::StatusOr<Ipv4Endpoint> ConnectionTable::AllocEndpoint(const EndpointRef& ref) {
  Ipv4Endpoint e;
  if (alias_mode_) {
    // 127.64.0.1 ... 127.127.255.254: 2^22 addresses, reused after wrap.
    const uint32_t alias = next_alias_++ % (1u << 22);
    e = {0x7f400000u + (alias == 0 ? 1 : alias), shared_port_};
  } else {
    const int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    const sockaddr_in a = ToSockaddr({endpoint_ip_, 0});
    if (fd < 0 || bind(fd, reinterpret_cast<const sockaddr*>(&a), sizeof(a)) != 0 || listen(fd, 4096) != 0) {
      const std::string err = std::strerror(errno);
      if (fd >= 0) close(fd);
      return absl::UnavailableError(absl::StrCat("cannot listen on ", ToString({endpoint_ip_, 0}), ": ", err));
    }
    e = {endpoint_ip_, LocalOf(fd).port};
    auto l = std::make_unique<Listener>();
    l->table = this;
    l->fd = fd;
    if (auto s = loop_.Add(fd, EPOLLIN, l.get()); !s.ok()) {
      close(fd);
      return s;
    }
    endpoint_listeners_[{e.ip, e.port}] = std::move(l);
  }
  endpoints_[{e.ip, e.port}] = ref;
  return e;
}

void ConnectionTable::FreeEndpoint(const Ipv4Endpoint& e) {
  if (e.ip == 0) return;
  endpoints_.erase({e.ip, e.port});
  auto it = endpoint_listeners_.find({e.ip, e.port});
  if (it != endpoint_listeners_.end()) {
    if (it->second->paused) --paused_;
    loop_.Remove(it->second->fd);
    close(it->second->fd);
    endpoint_listeners_.erase(it);
  }
}

void ConnectionTable::Retarget(const Ipv4Endpoint& e, const EndpointRef& ref) {
  auto it = endpoints_.find({e.ip, e.port});
  if (it != endpoints_.end()) it->second = ref;
}

const EndpointRef* ConnectionTable::FindEndpoint(const Ipv4Endpoint& local) const {
  auto it = endpoints_.find({local.ip, local.port});
  return it == endpoints_.end() ? nullptr : &it->second;
}

bool ConnectionTable::DialAllowed(uint32_t ip) const {
  if (limits_.loopback_only && !IsLoopback(ip)) return false;
  if (limits_.allowed_peers.empty()) return true;
  return std::any_of(limits_.allowed_peers.begin(), limits_.allowed_peers.end(), [&](const auto& r) {
    const uint32_t mask = r.second == 0 ? 0 : ~uint32_t{0} << (32 - r.second);
    return (ip & mask) == (r.first & mask);
  });
}

bool ConnectionTable::PeerAllowed(const Ipv4Endpoint& local, const Ipv4Endpoint& remote) const {
  if (limits_.loopback_only && !IsLoopback(local.ip)) return false;
  return DialAllowed(remote.ip);
}

bool ConnectionTable::AtCapacity() const {
  return unidentified_ >= limits_.max_unidentified ||
         static_cast<int>(conns_.size()) >= limits_.max_connections;
}

// Takes `l` out of epoll: level-triggered epoll would otherwise report the
// pending connection again at once and the loop would spin.
void ConnectionTable::Pause(Listener* l, std::chrono::milliseconds for_how_long) {
  if (l->paused) return;
  l->paused = true;
  ++paused_;
  loop_.Remove(l->fd);
  if (for_how_long.count() > 0) {
    loop_.AddTimer(for_how_long, [this] { ResumeAll(); });
  }
}

void ConnectionTable::ResumeAll() {
  if (paused_ == 0) return;
  auto resume = [this](Listener* l) {
    if (!l->paused || AtCapacity()) return;
    l->paused = false;
    --paused_;
    loop_.Add(l->fd, EPOLLIN, l).IgnoreError();
  };
  for (auto& l : listeners_) resume(l.get());
  for (auto& [key, l] : endpoint_listeners_) resume(l.get());
  if (!AtCapacity()) cap_warned_ = false;
}

void ConnectionTable::OnAccept(Listener* l) {
  while (true) {
    if (AtCapacity()) {
      if (!cap_warned_) {
        cap_warned_ = true;
        reporter_.Warn("connection cap",
                       absl::StrCat("connection cap reached (", unidentified_, " connections without a header, ",
                                    conns_.size(), " open, limits ", limits_.max_unidentified, "/",
                                    limits_.max_connections, "): not accepting until some close"));
      }
      Pause(l, std::chrono::milliseconds(0));  // resumed by Close()
      return;
    }
    const int fd = accept4(l->fd, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) {
      const int err = errno;
      if (!ResourceError(err)) return;  // EAGAIN, or a transient error of one connection
      OnAcceptExhausted(l, err);
      return;
    }
    if (l->exhausted) {
      l->exhausted = false;
      spdlog::info("bootstrap: accepting bootstrap connections again");
    }
    l->backoff_ms = 0;
    SetNoDelay(fd);
    const Ipv4Endpoint local = LocalOf(fd), remote = PeerOf(fd);
    if (!PeerAllowed(local, remote)) {
      close(fd);
      reporter_.Reject("peer", absl::StrCat("from ", ToString(remote), " to ", ToString(local),
                                            ": not an expected real-rank address (loopback only in "
                                            "loopback-alias mode; see --bootstrap-allow)"));
      continue;
    }
    const bool root = l->kind == ListenerKind::kRoot;
    Conn* c = NewConn(fd, root ? ConnRole::kRootIn : ConnRole::kAcceptedUnknown,
                      root ? "root check-in" : "accepted");
    c->accepted = true;
    c->local = local;
    c->remote = remote;
    ++unidentified_;
    if (recorder_) recorder_->Opened(c->id, false, c->local, c->remote, c->note);
    reporter_.Update([](BootstrapStats& s) { ++s.accepted_connections; });
    if (auto s = loop_.Add(fd, EPOLLIN | EPOLLRDHUP, c); !s.ok()) {
      Close(c);
      continue;
    }
    ArmHeaderTimeout(c->id);
  }
}

// accept4 failed for lack of fds or memory. Level-triggered epoll would
// report the pending connection again at once and the loop would spin: take
// the listener out of epoll for a growing pause, and say so once.
void ConnectionTable::OnAcceptExhausted(Listener* l, int err) {
  reporter_.Update([](BootstrapStats& s) {
    ++s.accept_failures;
    ++s.accept_pauses;
  });
  l->backoff_ms = std::min(kMaxAcceptBackoffMs, l->backoff_ms == 0 ? static_cast<int>(limits_.accept_backoff.count())
                                                                    : 2 * l->backoff_ms);
  if (!l->exhausted) {
    l->exhausted = true;
    reporter_.Warn("accept", absl::StrCat("cannot accept bootstrap connections: ", std::strerror(err), " (",
                                          conns_.size(), " bootstrap connections open, open-file limit ",
                                          FdLimitText(), "); pausing the listener and retrying with back-off. "
                                          "Raise `ulimit -n` or run fewer virtual ranks per prismd"));
  }
  Pause(l, std::chrono::milliseconds(l->backoff_ms));
}

void ConnectionTable::ArmHeaderTimeout(uint64_t id) {
  loop_.AddTimer(limits_.header_timeout, [this, id] {
    Conn* c = Find(id);
    if (c == nullptr || c->identified) return;
    reporter_.Reject("idle", absl::StrCat("from ", ToString(c->remote), " to ", ToString(c->local), ": no valid ",
                                          "bootstrap header within ", limits_.header_timeout.count(), " ms"));
    Close(c);
  });
}

void ConnectionTable::Identify(Conn* c) {
  if (!c->accepted || c->identified) return;
  c->identified = true;
  --unidentified_;
  ResumeAll();  // below the cap again
}

Conn* ConnectionTable::NewConn(int fd, ConnRole role, const std::string& note) {
  auto c = std::make_unique<Conn>();
  c->table = this;
  c->id = next_conn_id_++;
  c->fd = fd;
  c->role = role;
  c->note = note;
  Conn* raw = c.get();
  conns_[raw->id] = std::move(c);
  return raw;
}

Conn* ConnectionTable::Find(uint64_t id) {
  auto it = conns_.find(id);
  return it == conns_.end() || it->second->dead ? nullptr : it->second.get();
}

Conn* ConnectionTable::ConnectOut(const Ipv4Endpoint& to, ConnRole role, uint64_t magic,
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
  c->give_up = std::chrono::steady_clock::now() + limits_.connect_timeout;
  StartConnect(c);
  return c;
}

void ConnectionTable::StartConnect(Conn* c) {
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
      c->dead = true;  // no close event: it never opened
      Close(c);
      events_.OnConnectFailed(*c, absl::StrCat("connect to real rank at ", ToString(c->remote), " (", c->note,
                                               ") failed: ", std::strerror(err)),
                              false);
    }
    return;
  }
  c->connecting = true;
  if (!loop_.Add(c->fd, EPOLLOUT | EPOLLIN | EPOLLRDHUP, c).ok()) Close(c);
}

void ConnectionTable::RetryConnect(Conn* c) {
  spdlog::debug("bootstrap: retry connect {} ({})", ToString(c->remote), c->note);
  if (c->fd >= 0) {
    loop_.Remove(c->fd);
    close(c->fd);
    c->fd = -1;
  }
  c->connecting = false;
  if (std::chrono::steady_clock::now() > c->give_up) {
    const std::string why = absl::StrCat("real rank listener ", ToString(c->remote), " (", c->note,
                                         ") did not accept within ", limits_.connect_timeout.count(), " ms");
    Close(c);
    events_.OnConnectFailed(*c, why, true);
    return;
  }
  ++c->attempts;
  const uint64_t id = c->id;
  const int delay_ms = std::min(100 * c->attempts, 1000);
  loop_.AddTimer(std::chrono::milliseconds(delay_ms), [this, id] {
    if (Conn* again = Find(id)) StartConnect(again);
  });
}

void ConnectionTable::Send(Conn* c, const std::string& bytes) {
  c->out += bytes;
  Flush(c);
}

void ConnectionTable::Flush(Conn* c) {
  if (c->dead || c->connecting || c->fd < 0) return;
  while (c->out_off < c->out.size()) {
    const ssize_t w = send(c->fd, c->out.data() + c->out_off, c->out.size() - c->out_off, MSG_NOSIGNAL);
    if (w > 0) {
      if (recorder_) recorder_->Data(c->id, false, c->out.data() + c->out_off, w);
      c->out_off += w;
      continue;
    }
    if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      loop_.Modify(c->fd, EPOLLIN | EPOLLOUT | EPOLLRDHUP, c).IgnoreError();
      return;
    }
    events_.OnEof(*c);  // broken pipe: peer is gone
    return;
  }
  c->out.clear();
  c->out_off = 0;
  loop_.Modify(c->fd, EPOLLIN | EPOLLRDHUP, c).IgnoreError();
  if (c->close_after_flush) Close(c);
}

void ConnectionTable::ReadAll(Conn* c, bool* eof) {
  char buf[65536];
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
    if (r == 0 || (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)) *eof = true;
    return;
  }
}

void ConnectionTable::OnConnIo(Conn* c, uint32_t events) {
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
    bool eof = false;
    ReadAll(c, &eof);
    spdlog::debug("bootstrap: conn {} ({}) role {} has {} bytes{}", c->id, c->note, static_cast<int>(c->role),
                  c->Available(), eof ? ", eof" : "");
    events_.OnInput(*c);
    if (eof && !c->dead) {
      c->eof = true;
      events_.OnEof(*c);
    }
  }
}

void ConnectionTable::Close(Conn* c) {
  if (c->fd >= 0) {
    loop_.Remove(c->fd);
    close(c->fd);
    c->fd = -1;
  }
  if (recorder_ && !c->dead) recorder_->Closed(c->id);
  const bool was_dead = c->dead;
  c->dead = true;
  if (c->accepted && !c->identified) {
    c->identified = true;  // no longer counted as waiting for its header
    --unidentified_;
  }
  if (!was_dead) events_.OnClosed(*c);
  auto it = conns_.find(c->id);
  if (it == conns_.end()) return;
  graveyard_.push_back(std::move(it->second));
  conns_.erase(it);
  ResumeAll();
  if (!reap_scheduled_) {
    reap_scheduled_ = true;
    loop_.AddTimer(std::chrono::nanoseconds(0), [this] {
      graveyard_.clear();
      reap_scheduled_ = false;
    });
  }
}

void ConnectionTable::CloseAll() {
  std::vector<Conn*> all;
  for (auto& [id, c] : conns_) all.push_back(c.get());
  for (Conn* c : all) Close(c);
}

}  // namespace prism::bootstrap
