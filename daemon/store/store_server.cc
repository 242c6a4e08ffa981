#include "daemon/store/store_server.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <algorithm>
#include <cstring>
#include <limits>

#include "absl/strings/str_cat.h"
#include "daemon/store/peer_process.h"
#include "spdlog/spdlog.h"

namespace prism::store {
namespace {

constexpr int kMaxAcceptBackoffMs = 2000;

// accept4 errors that mean "no resources now": retrying at once would spin.
bool ResourceError(int err) { return err == EMFILE || err == ENFILE || err == ENOBUFS || err == ENOMEM; }

std::string MiB(uint64_t bytes) { return absl::StrCat(bytes >> 20, " MiB"); }

}  // namespace

struct StoreServer::Client : net::IoHandler {
  StoreServer* server = nullptr;
  ClientInfo info;
  int fd = -1;
  std::string in, out;
  size_t in_off = 0;
  size_t waiting_for = 0;        // keys of the pending WAIT still unset
  std::vector<std::string> wait_keys;
  std::chrono::steady_clock::time_point wait_since;
  std::string barrier;           // pending BARRIER key
  bool validated = false;        // sent VALIDATE with the right magic
  uint64_t held = 0;             // bytes of `in` not parsed yet + `out` (counted in buffered_bytes_)
  void OnIo(uint32_t events) override { server->OnClientIo(this, events); }
};

struct StoreServer::Listener : net::IoHandler {
  StoreServer* server = nullptr;
  int fd = -1;
  void OnIo(uint32_t) override { server->OnAccept(); }
};

absl::StatusOr<std::unique_ptr<StoreServer>> StoreServer::Start(const StoreServerOptions& options,
                                                                StoreObserver* observer) {
  std::unique_ptr<StoreServer> s(new StoreServer(options, observer));
  if (auto st = s->loop_.Init(); !st.ok()) return st;
  if (auto st = s->Bind(); !st.ok()) return st;
  s->thread_ = std::thread([raw = s.get()] { raw->loop_.Run(nullptr); });
  return s;
}

StoreServer::StoreServer(StoreServerOptions options, StoreObserver* observer)
    : options_(std::move(options)), observer_(observer) {
  // At most a quarter of the process's descriptors: store clients must never
  // starve prismd's gRPC server and bootstrap of theirs.
  rlimit rl{};
  if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY) {
    const size_t budget = std::max<size_t>(8, static_cast<size_t>(rl.rlim_cur / 4));
    StoreLimits& l = options_.limits;
    l.max_connections = std::min(l.max_connections, budget);
    l.max_unvalidated = std::max<size_t>(1, std::min(l.max_unvalidated, l.max_connections / 2));
  }
}

StoreServer::~StoreServer() {
  Stop();
  for (auto& [id, c] : clients_) close(c->fd);
  if (listener_) close(listener_->fd);
}

void StoreServer::Stop() {
  if (!thread_.joinable()) return;
  loop_.Stop();
  thread_.join();
}

absl::Status StoreServer::Bind() {
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(options_.port);
  if (inet_pton(AF_INET, options_.host.c_str(), &a.sin_addr) != 1) {
    return absl::InvalidArgumentError(absl::StrCat("store host '", options_.host, "' is not an IPv4 address"));
  }
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  int one = 1;
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  if (bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0 || listen(fd, 4096) != 0) {
    const std::string err = std::strerror(errno);
    close(fd);
    return absl::UnavailableError(absl::StrCat("cannot host PyTorch's store on ", options_.host, ":", options_.port,
                                               ": ", err, " (another job's store or prismd there? pick another "
                                               "port)"));
  }
  socklen_t len = sizeof(a);
  getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  port_ = ntohs(a.sin_port);
  listener_ = std::make_unique<Listener>();
  listener_->server = this;
  listener_->fd = fd;
  return loop_.Add(fd, EPOLLIN, listener_.get());
}

bool StoreServer::AtCapacity() const { return clients_.size() >= options_.limits.max_connections; }

// Takes the listener out of epoll (level-triggered, it would report the
// pending connection again at once); `for_how_long` 0: until a client goes.
void StoreServer::PauseListener(std::chrono::milliseconds for_how_long) {
  if (listener_paused_) return;
  listener_paused_ = true;
  loop_.Remove(listener_->fd);
  if (for_how_long.count() > 0) loop_.AddTimer(for_how_long, [this] { ResumeListener(); });
}

void StoreServer::ResumeListener() {
  if (clients_.size() <= options_.limits.max_connections / 2) cap_warned_ = false;
  if (!listener_paused_ || AtCapacity()) return;
  listener_paused_ = false;
  loop_.Add(listener_->fd, EPOLLIN, listener_.get()).IgnoreError();
}

void StoreServer::OnAccept() {
  while (true) {
    if (AtCapacity()) {
      if (!cap_warned_) {
        cap_warned_ = true;
        spdlog::warn("store: {} connections open (the limit, {} validated): not accepting more until some close",
                     clients_.size(), validated_);
      }
      PauseListener(std::chrono::milliseconds(0));  // resumed by Drop()
      return;
    }
    sockaddr_in peer{};
    socklen_t len = sizeof(peer);
    const int fd = accept4(listener_->fd, reinterpret_cast<sockaddr*>(&peer), &len, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) {
      const int err = errno;
      if (!ResourceError(err)) return;  // EAGAIN, or one connection's transient error
      accept_backoff_ms_ = std::min(kMaxAcceptBackoffMs, accept_backoff_ms_ == 0
                                                              ? static_cast<int>(options_.limits.accept_backoff.count())
                                                              : 2 * accept_backoff_ms_);
      if (!listener_exhausted_) {
        listener_exhausted_ = true;
        spdlog::warn("store: cannot accept: {} ({} store connections open); pausing the listener and retrying "
                     "with back-off. Raise `ulimit -n`", std::strerror(err), clients_.size());
      }
      ++accept_pauses_;
      PauseListener(std::chrono::milliseconds(accept_backoff_ms_));
      Publish();
      return;
    }
    if (listener_exhausted_) {
      listener_exhausted_ = false;
      spdlog::info("store: accepting connections again");
    }
    accept_backoff_ms_ = 0;
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    auto c = std::make_unique<Client>();
    c->server = this;
    c->fd = fd;
    c->info.id = next_client_++;
    char ip[INET_ADDRSTRLEN] = {};
    inet_ntop(AF_INET, &peer.sin_addr, ip, sizeof(ip));
    c->info.address = absl::StrCat(ip, ":", ntohs(peer.sin_port));
    if (!loop_.Add(fd, EPOLLIN | EPOLLRDHUP, c.get()).ok()) {
      close(fd);  // never counted: not a connection yet
      continue;
    }
    Client* raw = c.get();
    clients_[raw->info.id] = std::move(c);
    AdmitUnvalidated(raw);
  }
}

// A new connection waits for its VALIDATE: the oldest waiting one is closed
// when too many wait, and each is closed when its handshake time is up.
void StoreServer::AdmitUnvalidated(Client* c) {
  auto waiting = [this](uint64_t id) {
    auto it = clients_.find(id);
    return it != clients_.end() && it->second->fd >= 0 && !it->second->validated;
  };
  while (!unvalidated_.empty() && !waiting(unvalidated_.front())) unvalidated_.pop_front();
  while (unvalidated_open_ >= options_.limits.max_unvalidated && !unvalidated_.empty()) {
    const uint64_t oldest = unvalidated_.front();
    unvalidated_.pop_front();
    if (!waiting(oldest)) continue;
    auto it = clients_.find(oldest);
    spdlog::debug("store: connection {} from {} has not sent VALIDATE and {} newer ones wait: closing it", oldest,
                  it->second->info.address, unvalidated_open_);
    Drop(it->second.get());
  }
  ++unvalidated_open_;
  unvalidated_.push_back(c->info.id);
  const uint64_t id = c->info.id;
  loop_.AddTimer(options_.limits.handshake_timeout, [this, id] {
    auto it = clients_.find(id);
    if (it == clients_.end() || it->second->fd < 0 || it->second->validated) return;
    spdlog::debug("store: connection {} from {} sent no VALIDATE within {} ms: closing it", id,
                  it->second->info.address, options_.limits.handshake_timeout.count());
    Drop(it->second.get());
  });
  Publish();
}

// VALIDATE came: now a client (its process looked up, the observer told).
// False (the caller closes it) when its socket belongs to another user of
// this host and only this user's clients are served.
bool StoreServer::OnValidated(Client* c) {
  sockaddr_in peer{}, self{};
  socklen_t plen = sizeof(peer), slen = sizeof(self);
  getpeername(c->fd, reinterpret_cast<sockaddr*>(&peer), &plen);
  getsockname(c->fd, reinterpret_cast<sockaddr*>(&self), &slen);
  PeerInfo who;
  if (options_.same_user_only || options_.identify_clients) {
    who = DescribePeer(ntohl(peer.sin_addr.s_addr), ntohs(peer.sin_port), ntohl(self.sin_addr.s_addr),
                       ntohs(self.sin_port), options_.identify_clients);
  }
  if (options_.same_user_only && who.uid && *who.uid != geteuid()) {
    spdlog::warn("store: client {} ({}) runs as uid {}, not as prismd's uid {}: refused (real ranks run as the "
                 "user who runs prismd)", c->info.id, c->info.address, *who.uid, geteuid());
    return false;
  }
  c->validated = true;
  --unvalidated_open_;
  ++validated_;
  if (who.process) {
    c->info.pid = who.process->pid;
    c->info.rank = who.process->rank;
  }
  spdlog::debug("store: client {} from {} (rank {})", c->info.id, c->info.address,
                c->info.rank ? std::to_string(*c->info.rank) : "?");
  if (observer_) observer_->OnConnected(c->info);
  Publish();
  return true;
}

// Reads what arrived; false when the peer is gone (or the connection was
// closed for holding more than the buffered-bytes limit allows).
bool StoreServer::ReadInput(Client* c) {
  char buf[65536];
  while (true) {
    const ssize_t r = recv(c->fd, buf, sizeof(buf), 0);
    if (r > 0) {
      c->in.append(buf, r);
      Account(c);
      if (buffered_bytes_ > options_.limits.max_buffered_bytes) {
        spdlog::warn("store: client {} ({}): requests and replies in flight over the {} limit of all connections "
                     "together ({} of them this connection's); closing it",
                     c->info.id, c->info.address, MiB(options_.limits.max_buffered_bytes), MiB(c->held));
        Drop(c);
        return false;
      }
      continue;
    }
    return !(r == 0 || (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR));
  }
}

void StoreServer::Account(Client* c) {
  const uint64_t now = c->fd < 0 ? 0 : (c->in.size() - c->in_off) + c->out.size();
  buffered_bytes_ = buffered_bytes_ - c->held + now;
  c->held = now;
}

void StoreServer::OnClientIo(Client* c, uint32_t events) {
  const bool eof = !ReadInput(c);
  if (c->fd < 0) return;
  if (events & EPOLLOUT) Flush(c);
  while (c->fd >= 0) {
    Request q;
    auto used = ParseRequest(c->in, c->in_off, &q);
    if (!used.ok()) {
      spdlog::warn("store: client {} ({}): {}; closing it", c->info.id, c->info.address,
                   std::string(used.status().message()));
      Drop(c);
      return;
    }
    if (*used == 0) break;
    c->in_off += *used;
    if (!c->validated && q.query != Query::kValidate) {
      spdlog::warn("store: client {} ({}) sent {} before VALIDATE (not a PyTorch TCPStore client?); closing it",
                   c->info.id, c->info.address, QueryName(q.query));
      Drop(c);
      return;
    }
    if (!Serve(c, q)) {
      Drop(c);
      return;
    }
  }
  if (c->in_off == c->in.size()) {
    c->in.clear();
    c->in_off = 0;
  }
  Account(c);
  if (eof) Drop(c);
}

// Serves one request; false closes the connection.
bool StoreServer::Serve(Client* c, const Request& q) {
  std::string reply;
  switch (q.query) {
    case Query::kValidate:
      if (q.word != kValidationMagic) {
        spdlog::warn("store: client {} ({}) sent VALIDATE with magic {:#x}, not {:#x}; closing it", c->info.id,
                     c->info.address, q.word, kValidationMagic);
        return false;
      }
      return c->validated || OnValidated(c);
    case Query::kPing: AppendU32(&reply, q.word); break;
    case Query::kSet:
      if (!Storable(c, q.keys[0].size() + q.values[0].size(), table_.StoredSize(q.keys[0]))) return false;
      ApplySet(q.keys[0], q.values[0]);
      if (observer_) observer_->OnSet(c->info, q.keys[0], q.values[0]);
      break;
    case Query::kCompareSet: {
      const std::string* now = table_.Find(q.keys[0]);
      if ((now == nullptr && q.values[0].empty()) || (now != nullptr && *now == q.values[0])) {
        if (!Storable(c, q.keys[0].size() + q.values[1].size(), table_.StoredSize(q.keys[0]))) return false;
        ApplySet(q.keys[0], q.values[1]);
        if (observer_) observer_->OnSet(c->info, q.keys[0], q.values[1]);
        AppendValue(&reply, q.values[1]);
      } else {
        AppendValue(&reply, now == nullptr ? q.values[0] : *now);
      }
      break;
    }
    case Query::kGet:
      if (observer_) observer_->OnRead(c->info, q.keys);
      AppendValue(&reply, table_.ValueOr(q.keys[0]));
      break;
    case Query::kAdd: {
      int64_t sum = 0;
      const int64_t old = table_.NumberAt(q.keys[0]);
      if (__builtin_add_overflow(old, q.number, &sum)) {
        spdlog::warn("store: client {} ({}): ADD {} to '{}' (now {}) leaves the 64-bit range; closing it",
                     c->info.id, c->info.address, q.number, q.keys[0], old);
        return false;
      }
      if (!Storable(c, q.keys[0].size() + 20, table_.StoredSize(q.keys[0]))) return false;
      ApplySet(q.keys[0], std::to_string(sum));
      AppendI64(&reply, sum);
      break;
    }
    case Query::kCheck:
      AppendU8(&reply, static_cast<uint8_t>(table_.AllSet(q.keys) ? CheckReply::kReady : CheckReply::kNotReady));
      break;
    case Query::kWait: {
      if (observer_) observer_->OnRead(c->info, q.keys);
      std::vector<std::string> unset;
      for (const std::string& k : q.keys) {
        if (!table_.AllSet({k})) unset.push_back(k);
      }
      if (unset.empty()) {
        AppendU8(&reply, static_cast<uint8_t>(WaitReply::kStopWaiting));
        break;
      }
      c->waiting_for = unset.size();
      c->wait_keys = unset;
      c->wait_since = std::chrono::steady_clock::now();
      for (const std::string& k : unset) waiters_[k].push_back(c->info.id);
      Publish();
      if (observer_) observer_->OnWait(c->info, unset);  // may Set() and so answer at once
      return c->fd >= 0;
    }
    case Query::kNumKeys: AppendI64(&reply, static_cast<int64_t>(table_.keys())); break;
    case Query::kDeleteKey:
      AppendI64(&reply, table_.Forget(q.keys[0]) ? 1 : 0);
      Publish();
      break;
    case Query::kAppend: {
      const std::string old = table_.ValueOr(q.keys[0]);
      if (old.size() + q.values[0].size() > kMaxValueBytes) {
        spdlog::warn("store: client {} ({}): APPEND to '{}' would make its value over the {} a value may hold; "
                     "closing it", c->info.id, c->info.address, q.keys[0], MiB(kMaxValueBytes));
        return false;
      }
      if (!Storable(c, q.keys[0].size() + old.size() + q.values[0].size(), table_.StoredSize(q.keys[0])))
        return false;
      ApplySet(q.keys[0], old + q.values[0]);
      break;
    }
    case Query::kMultiGet:
      if (observer_) observer_->OnRead(c->info, q.keys);
      for (const std::string& k : q.keys) AppendValue(&reply, table_.ValueOr(k));
      break;
    case Query::kMultiSet: {
      uint64_t adding = 0, removing = 0;
      for (size_t i = 0; i < q.keys.size(); ++i) {
        adding += q.keys[i].size() + q.values[i].size();
        removing += table_.StoredSize(q.keys[i]);
      }
      if (!Storable(c, adding, removing)) return false;
      for (size_t i = 0; i < q.keys.size(); ++i) {
        ApplySet(q.keys[i], q.values[i]);
        if (observer_) observer_->OnSet(c->info, q.keys[i], q.values[i]);
      }
      break;
    }
    case Query::kCancelWait:
      for (const std::string& k : c->wait_keys) {
        auto& list = waiters_[k];
        std::erase(list, c->info.id);
        if (list.empty()) waiters_.erase(k);
      }
      c->wait_keys.clear();
      c->waiting_for = 0;
      AppendU8(&reply, static_cast<uint8_t>(WaitReply::kWaitCanceled));
      Publish();
      break;
    case Query::kQueuePush:
      if (!Storable(c, q.keys[0].size() + q.values[0].size(), 0)) return false;
      table_.QueuePush(q.keys[0], q.values[0]);
      WakeWaiters(q.keys[0]);
      break;
    case Query::kQueuePop: {
      const auto [length, front] = table_.QueuePop(q.keys[0]);
      AppendI64(&reply, length);
      if (front) AppendValue(&reply, *front);
      break;
    }
    case Query::kQueueLen: AppendI64(&reply, table_.QueueLength(q.keys[0])); break;
    case Query::kListKeys:
      AppendI64(&reply, static_cast<int64_t>(table_.keys()));
      for (const auto& [k, v] : table_.values()) AppendValue(&reply, k);
      break;
    case Query::kBarrier: {
      int64_t arrived = 1;
      if (const int64_t old = table_.NumberAt(q.keys[0]); old < std::numeric_limits<int64_t>::max()) arrived += old;
      if (!Storable(c, q.keys[0].size() + 20, table_.StoredSize(q.keys[0]))) return false;
      c->barrier = q.keys[0];
      ApplySet(q.keys[0], std::to_string(arrived));
      if (arrived < q.number) return true;
      for (auto& [id, other] : clients_) {
        if (other->barrier != q.keys[0]) continue;
        other->barrier.clear();
        std::string done;
        AppendU8(&done, static_cast<uint8_t>(WaitReply::kStopWaiting));
        Reply(other.get(), done);
      }
      return true;
    }
  }
  if (!reply.empty()) Reply(c, reply);
  return true;
}

// Whether `adding` more bytes (and `removing` fewer) stay within
// max_stored_bytes; if not, says so (the caller closes the connection).
// Counts what clients stored: the values prismd sets itself (Set(), e.g.
// the records of thousands of virtual Gloo ranks) take no client's room.
bool StoreServer::Storable(Client* c, uint64_t adding, uint64_t removing) {
  const uint64_t held = table_.client_bytes();
  const uint64_t after = held - std::min(removing, held) + adding;
  if (after <= options_.limits.max_stored_bytes) return true;
  spdlog::warn("store: client {} ({}): storing {} more bytes would take the store over its {} of keys and values "
               "({} held); closing it", c->info.id, c->info.address, adding, MiB(options_.limits.max_stored_bytes),
               held);
  return false;
}

void StoreServer::ApplySet(const std::string& key, const std::string& value, bool by_prismd) {
  table_.Set(key, value, by_prismd);
  WakeWaiters(key);
  Publish();
}

void StoreServer::WakeWaiters(const std::string& key) {
  auto it = waiters_.find(key);
  if (it == waiters_.end()) return;
  const std::vector<uint64_t> ids = std::move(it->second);
  waiters_.erase(it);
  for (uint64_t id : ids) {
    auto c = clients_.find(id);
    if (c == clients_.end() || c->second->waiting_for == 0) continue;
    std::erase(c->second->wait_keys, key);
    if (--c->second->waiting_for > 0) continue;
    std::string done;
    AppendU8(&done, static_cast<uint8_t>(WaitReply::kStopWaiting));
    Reply(c->second.get(), done);
  }
}

void StoreServer::Reply(Client* c, const std::string& bytes) {
  c->out += bytes;
  Flush(c);
  if (c->fd >= 0 && buffered_bytes_ > options_.limits.max_buffered_bytes) {
    spdlog::warn("store: client {} ({}) does not read its replies ({} unsent; all connections together over the "
                 "{} limit); closing it", c->info.id, c->info.address, MiB(c->out.size()),
                 MiB(options_.limits.max_buffered_bytes));
    Drop(c);
  }
}

void StoreServer::Flush(Client* c) {
  while (!c->out.empty() && c->fd >= 0) {
    const ssize_t w = send(c->fd, c->out.data(), c->out.size(), MSG_NOSIGNAL);
    if (w > 0) {
      c->out.erase(0, static_cast<size_t>(w));
      continue;
    }
    if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      loop_.Modify(c->fd, EPOLLIN | EPOLLOUT | EPOLLRDHUP, c).IgnoreError();
      Account(c);
      return;
    }
    break;  // broken: the read side sees the end
  }
  Account(c);
  if (c->fd >= 0 && c->out.empty()) loop_.Modify(c->fd, EPOLLIN | EPOLLRDHUP, c).IgnoreError();
}

void StoreServer::Drop(Client* c) {
  if (c->fd < 0) return;  // dropped already
  loop_.Remove(c->fd);
  close(c->fd);
  c->fd = -1;
  Account(c);  // its buffers no longer count
  const bool was_client = c->validated;
  if (was_client) {
    --validated_;
  } else {
    --unvalidated_open_;
  }
  for (const std::string& k : c->wait_keys) {
    auto it = waiters_.find(k);
    if (it == waiters_.end()) continue;
    std::erase(it->second, c->info.id);
    if (it->second.empty()) waiters_.erase(it);
  }
  const uint64_t id = c->info.id;
  // Freed on the next loop turn: the caller may still hold `c`.
  loop_.AddTimer(std::chrono::nanoseconds(0), [this, id, was_client] {
    clients_.erase(id);
    ResumeListener();
    // Forget when the last client's entry goes (others dropped in the same
    // turn are still listed, validated, until their own erase).
    const bool clients_left = std::any_of(clients_.begin(), clients_.end(),
                                          [](const auto& entry) { return entry.second->validated; });
    if (!was_client || clients_left) {
      Publish();
      return;
    }
    if (observer_) observer_->OnAllClientsGone();
    table_.Clear();
    waiters_.clear();
    spdlog::info("store: every client left; keys forgotten (next job starts clean)");
    Publish();
  });
}

void StoreServer::Set(const std::string& key, const std::string& value) {
  if (OnLoopThread()) {
    ApplySet(key, value, /*by_prismd=*/true);
    return;
  }
  loop_.Post([this, key, value] { ApplySet(key, value, /*by_prismd=*/true); });
}

void StoreServer::Publish() {
  StoreSnapshot s;
  for (const auto& [id, c] : clients_) {
    if (c->fd < 0) continue;
    ++(c->validated ? s.clients : s.unvalidated);
    if (c->waiting_for > 0) s.waits.push_back({c->info, c->wait_keys, c->wait_since});
  }
  s.keys = table_.keys();
  s.stored_bytes = table_.stored_bytes();
  s.accept_pauses = accept_pauses_;
  std::lock_guard<std::mutex> lock(snapshot_mu_);
  snapshot_ = std::move(s);
}

StoreSnapshot StoreServer::Snapshot() const {
  std::lock_guard<std::mutex> lock(snapshot_mu_);
  return snapshot_;
}

}  // namespace prism::store
