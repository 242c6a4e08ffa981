#include "daemon/store/store_server.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "daemon/store/peer_process.h"
#include "spdlog/spdlog.h"

namespace prism::store {

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
    : options_(std::move(options)), observer_(observer) {}

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

void StoreServer::OnAccept() {
  while (true) {
    sockaddr_in peer{};
    socklen_t len = sizeof(peer);
    const int fd = accept4(listener_->fd, reinterpret_cast<sockaddr*>(&peer), &len, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) return;  // few clients: a resource error here is retried by epoll at most briefly
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    auto c = std::make_unique<Client>();
    c->server = this;
    c->fd = fd;
    c->info.id = next_client_++;
    char ip[INET_ADDRSTRLEN] = {};
    inet_ntop(AF_INET, &peer.sin_addr, ip, sizeof(ip));
    c->info.address = absl::StrCat(ip, ":", ntohs(peer.sin_port));
    if (options_.identify_clients) {
      sockaddr_in self{};
      socklen_t slen = sizeof(self);
      getsockname(fd, reinterpret_cast<sockaddr*>(&self), &slen);
      if (auto p = FindPeerProcess(ntohl(peer.sin_addr.s_addr), ntohs(peer.sin_port), ntohl(self.sin_addr.s_addr),
                                   ntohs(self.sin_port))) {
        c->info.pid = p->pid;
        c->info.rank = p->rank;
      }
    }
    Client* raw = c.get();
    clients_[raw->info.id] = std::move(c);
    if (!loop_.Add(fd, EPOLLIN | EPOLLRDHUP, raw).ok()) {
      Drop(raw);
      continue;
    }
    spdlog::debug("store: client {} from {} (rank {})", raw->info.id, raw->info.address,
                  raw->info.rank ? std::to_string(*raw->info.rank) : "?");
    if (observer_) observer_->OnConnected(raw->info);
    Publish();
  }
}

void StoreServer::OnClientIo(Client* c, uint32_t events) {
  char buf[65536];
  bool eof = false;
  while (true) {
    const ssize_t r = recv(c->fd, buf, sizeof(buf), 0);
    if (r > 0) {
      c->in.append(buf, r);
      continue;
    }
    if (r == 0 || (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)) eof = true;
    break;
  }
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
    if (!Serve(c, q)) {
      Drop(c);
      return;
    }
  }
  if (c->in_off == c->in.size()) {
    c->in.clear();
    c->in_off = 0;
  }
  if (eof) Drop(c);
}

bool StoreServer::AllSet(const std::vector<std::string>& keys) const {
  for (const std::string& k : keys) {
    if (kv_.count(k) == 0) {
      auto q = queues_.find(k);
      if (q == queues_.end() || q->second.empty()) return false;
    }
  }
  return true;
}

// Serves one request; false closes the connection.
bool StoreServer::Serve(Client* c, const Request& q) {
  std::string reply;
  switch (q.query) {
    case Query::kValidate: return q.word == kValidationMagic;
    case Query::kPing: AppendU32(&reply, q.word); break;
    case Query::kSet:
      ApplySet(q.keys[0], q.values[0]);
      if (observer_) observer_->OnSet(c->info, q.keys[0], q.values[0]);
      break;
    case Query::kCompareSet: {
      auto it = kv_.find(q.keys[0]);
      const bool unset = it == kv_.end();
      if ((unset && q.values[0].empty()) || (!unset && it->second == q.values[0])) {
        ApplySet(q.keys[0], q.values[1]);
        if (observer_) observer_->OnSet(c->info, q.keys[0], q.values[1]);
        AppendValue(&reply, q.values[1]);
      } else {
        AppendValue(&reply, unset ? q.values[0] : it->second);
      }
      break;
    }
    case Query::kGet: {
      auto it = kv_.find(q.keys[0]);
      AppendValue(&reply, it == kv_.end() ? std::string() : it->second);
      break;
    }
    case Query::kAdd: {
      int64_t sum = q.number, old = 0;
      auto it = kv_.find(q.keys[0]);
      if (it != kv_.end() && absl::SimpleAtoi(it->second, &old)) sum += old;
      ApplySet(q.keys[0], std::to_string(sum));
      AppendI64(&reply, sum);
      break;
    }
    case Query::kCheck:
      AppendU8(&reply, static_cast<uint8_t>(AllSet(q.keys) ? CheckReply::kReady : CheckReply::kNotReady));
      break;
    case Query::kWait: {
      std::vector<std::string> unset;
      for (const std::string& k : q.keys) {
        if (!AllSet({k})) unset.push_back(k);
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
    case Query::kNumKeys: AppendI64(&reply, static_cast<int64_t>(kv_.size())); break;
    case Query::kDeleteKey: AppendI64(&reply, static_cast<int64_t>(kv_.erase(q.keys[0]))); break;
    case Query::kAppend: ApplySet(q.keys[0], kv_[q.keys[0]] + q.values[0]); break;
    case Query::kMultiGet:
      for (const std::string& k : q.keys) {
        auto it = kv_.find(k);
        AppendValue(&reply, it == kv_.end() ? std::string() : it->second);
      }
      break;
    case Query::kMultiSet:
      for (size_t i = 0; i < q.keys.size(); ++i) {
        ApplySet(q.keys[i], q.values[i]);
        if (observer_) observer_->OnSet(c->info, q.keys[i], q.values[i]);
      }
      break;
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
      queues_[q.keys[0]].push_back(q.values[0]);
      WakeWaiters(q.keys[0]);
      break;
    case Query::kQueuePop: {
      auto& queue = queues_[q.keys[0]];
      AppendI64(&reply, static_cast<int64_t>(queue.size()));
      if (!queue.empty()) {
        AppendValue(&reply, queue.front());
        queue.pop_front();
      }
      break;
    }
    case Query::kQueueLen: {
      auto it = queues_.find(q.keys[0]);
      AppendI64(&reply, it == queues_.end() ? 0 : static_cast<int64_t>(it->second.size()));
      break;
    }
    case Query::kListKeys:
      AppendI64(&reply, static_cast<int64_t>(kv_.size()));
      for (const auto& [k, v] : kv_) AppendValue(&reply, k);
      break;
    case Query::kBarrier: {
      int64_t arrived = 1, old = 0;
      auto it = kv_.find(q.keys[0]);
      if (it != kv_.end() && absl::SimpleAtoi(it->second, &old)) arrived += old;
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

void StoreServer::ApplySet(const std::string& key, const std::string& value) {
  kv_[key] = value;
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
      return;
    }
    return;  // broken: the read side sees the end
  }
  if (c->fd >= 0) loop_.Modify(c->fd, EPOLLIN | EPOLLRDHUP, c).IgnoreError();
}

void StoreServer::Drop(Client* c) {
  if (c->fd < 0) return;  // dropped already
  loop_.Remove(c->fd);
  close(c->fd);
  c->fd = -1;
  for (const std::string& k : c->wait_keys) {
    auto it = waiters_.find(k);
    if (it == waiters_.end()) continue;
    std::erase(it->second, c->info.id);
    if (it->second.empty()) waiters_.erase(it);
  }
  const uint64_t id = c->info.id;
  // Freed on the next loop turn: the caller may still hold `c`.
  loop_.AddTimer(std::chrono::nanoseconds(0), [this, id] {
    clients_.erase(id);
    if (!clients_.empty()) {
      Publish();
      return;
    }
    if (observer_) observer_->OnAllClientsGone();
    kv_.clear();
    queues_.clear();
    waiters_.clear();
    spdlog::info("store: every client left; keys forgotten (next job starts clean)");
    Publish();
  });
}

void StoreServer::Set(const std::string& key, const std::string& value) {
  if (OnLoopThread()) {
    ApplySet(key, value);
    return;
  }
  loop_.Post([this, key, value] { ApplySet(key, value); });
}

void StoreServer::Publish() {
  StoreSnapshot s;
  for (const auto& [id, c] : clients_) {
    if (c->fd < 0) continue;
    ++s.clients;
    if (c->waiting_for > 0) s.waits.push_back({c->info, c->wait_keys, c->wait_since});
  }
  s.keys = kv_.size();
  std::lock_guard<std::mutex> lock(snapshot_mu_);
  snapshot_ = std::move(s);
}

StoreSnapshot StoreServer::Snapshot() const {
  std::lock_guard<std::mutex> lock(snapshot_mu_);
  return snapshot_;
}

}  // namespace prism::store
