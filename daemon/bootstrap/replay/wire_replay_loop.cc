// The replay loop: plays the real side of a recording against a fresh
// BootstrapService (contract in wire_replay.h). One thread, poll(2) over
// non-blocking sockets; prismd runs on its own thread inside the service.
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <map>
#include <memory>
#include <thread>

#include "absl/strings/str_cat.h"
#include "daemon/bootstrap/replay/wire_replay.h"
#include "daemon/bootstrap/replay/wire_replay_match.h"

namespace prism::bootstrap {
namespace {

using Clock = std::chrono::steady_clock;
using replay::Renamings;
using replay::StreamChecker;

std::string Bytes8(uint64_t v) { return std::string(reinterpret_cast<const char*>(&v), 8); }
std::string AddrBytes(const Ipv4Endpoint& e) {
  const SockAddrBytes a = EncodeSockAddr(e);
  return std::string(reinterpret_cast<const char*>(a.data()), a.size());
}

// Listener on 127.0.0.1:0 (kernel's port). Returns fd, fills `bound`.
int ListenLoopback(Ipv4Endpoint* bound) {
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  sockaddr_in a = ToSockaddr({0x7f000001, 0});
  if (fd < 0 || bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0 || listen(fd, 1024) != 0) {
    if (fd >= 0) close(fd);
    return -1;
  }
  socklen_t len = sizeof(a);
  getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  *bound = {ntohl(a.sin_addr.s_addr), ntohs(a.sin_port)};
  return fd;
}

// Blocking connect with retries on refusal (prismd may not listen yet).
int ConnectTo(const Ipv4Endpoint& to, int timeout_ms) {
  const auto deadline = Clock::now() + std::chrono::milliseconds(timeout_ms);
  while (true) {
    const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in a = ToSockaddr(to);
    if (connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0) {
      const int one = 1;
      setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
      fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
      return fd;
    }
    close(fd);
    if (Clock::now() > deadline) return -1;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}

struct Conn {
  const WireRecordEvent* open = nullptr;
  std::string real_stream;          // the real side's recorded bytes, rewritten as sent
  size_t queued = 0, written = 0;
  std::unique_ptr<StreamChecker> checker;
  int fd = -1;
  bool shutdown_wanted = false, shut = false, eof = false, closed_in_recording = false;
};

struct RealListener {
  int fd = -1;
  Ipv4Endpoint old_ep, new_ep;
  std::vector<uint64_t> waiting;    // recorded conns prismd opened to it, by conn id
  size_t next = 0;
};

class Replay {
 public:
  Replay(const std::vector<WireRecordEvent>& events, const WireManifest& m,
         const ReplayOptions& o)
      : events_(events), manifest_(m), options_(o) {}
  ~Replay();
  absl::StatusOr<ReplayReport> Run();

 private:
  absl::Status Prepare(const WireProfile& profile);
  void SeedCommHashes(const Ipv4Endpoint& old_id, const Ipv4Endpoint& new_id, CommHashScheme scheme);
  bool Advance();              // runs the cursor as far as causality allows
  bool Pump(int timeout_ms);   // one poll round; true when something moved
  void Fail(const std::string& what);
  std::string Describe(uint64_t id) const;
  std::string Waiting() const;

  const std::vector<WireRecordEvent>& events_;
  const WireManifest& manifest_;
  const ReplayOptions& options_;
  std::map<uint64_t, Conn> conns_;
  std::vector<size_t> data_end_;    // per event: stream offset after it (data only)
  std::vector<RealListener> listeners_;
  Renamings names_;
  Ipv4Endpoint old_comm_id_, new_comm_id_;
  size_t cursor_ = 0;
  ReplayReport report_;
  bool failed_ = false;
};

Replay::~Replay() {
  for (auto& [id, c] : conns_) {
    if (c.fd >= 0) close(c.fd);
  }
  for (auto& l : listeners_) {
    if (l.fd >= 0) close(l.fd);
  }
}

void Replay::Fail(const std::string& what) {
  if (failed_) return;
  failed_ = true;
  report_.divergence = what;
}

std::string Replay::Describe(uint64_t id) const {
  const Conn& c = conns_.at(id);
  return absl::StrCat("conn ", id, " (", c.open->note, "; ",
                      c.open->from_daemon ? "prismd connected to real " : "real connected to prismd ",
                      ToString(c.open->from_daemon ? c.open->remote : c.open->local),
                      " in the recording, line ", c.open->line, ")");
}

void Replay::SeedCommHashes(const Ipv4Endpoint& old_id, const Ipv4Endpoint& new_id, CommHashScheme scheme) {
  const uint64_t old_root = CommHashOfId(UniqueIdForCommId(old_id), scheme);
  const uint64_t new_root = CommHashOfId(UniqueIdForCommId(new_id), scheme);
  std::vector<uint64_t> old_hash, new_hash;
  std::map<uint32_t, int32_t> split_count;
  for (const PlanComm& pc : manifest_.plan.comms) {
    if (!pc.parent) {
      old_hash.push_back(old_root);
      new_hash.push_back(new_root);
    } else {
      const int32_t n = ++split_count[*pc.parent];
      old_hash.push_back(ChildCommHash(old_hash[*pc.parent], n, pc.color, scheme));
      new_hash.push_back(ChildCommHash(new_hash[*pc.parent], n, pc.color, scheme));
    }
    names_.hashes.Seed(Bytes8(old_hash.back()), Bytes8(new_hash.back()));
  }
}

absl::Status Replay::Prepare(const WireProfile& profile) {
  auto old_id = ParseHostPort(manifest_.nccl_comm_id);
  if (!old_id.ok()) return old_id.status();
  old_comm_id_ = *old_id;
  // Group events per connection; every connection must open first.
  std::map<uint64_t, size_t> offset_in, offset_out;
  std::map<uint64_t, std::string> recorded_out;
  bool real_hosts_root = false;
  data_end_.assign(events_.size(), 0);
  for (size_t i = 0; i < events_.size(); ++i) {
    const WireRecordEvent& e = events_[i];
    if (e.kind == WireRecordEvent::kOpen) {
      if (conns_.count(e.conn)) {
        return absl::InvalidArgumentError(absl::StrCat("line ", e.line, ": conn ", e.conn,
                                                       " opened twice"));
      }
      conns_[e.conn].open = &e;
      if (e.from_daemon && e.remote == old_comm_id_) real_hosts_root = true;
      continue;
    }
    auto it = conns_.find(e.conn);
    if (it == conns_.end()) {
      return absl::InvalidArgumentError(absl::StrCat("line ", e.line, ": conn ", e.conn,
                                                     " used before its open event"));
    }
    if (e.kind == WireRecordEvent::kClose) {
      it->second.closed_in_recording = true;
    } else if (e.from_daemon) {
      recorded_out[e.conn] += e.bytes;
      data_end_[i] = (offset_out[e.conn] += e.bytes.size());
    } else {
      it->second.real_stream += e.bytes;
      data_end_[i] = (offset_in[e.conn] += e.bytes.size());
    }
  }
  // The new NCCL_COMM_ID and the real side's listeners.
  std::map<std::pair<uint32_t, uint16_t>, size_t> listener_of;
  if (real_hosts_root) {
    RealListener l;
    l.fd = ListenLoopback(&l.new_ep);
    l.old_ep = old_comm_id_;
    if (l.fd < 0) return absl::UnavailableError("cannot listen on 127.0.0.1");
    new_comm_id_ = l.new_ep;
    listener_of[{l.old_ep.ip, l.old_ep.port}] = listeners_.size();
    listeners_.push_back(l);
  } else {
    RealListener probe;
    probe.fd = ListenLoopback(&new_comm_id_);   // a free port for prismd's root
    if (probe.fd < 0) return absl::UnavailableError("cannot listen on 127.0.0.1");
    close(probe.fd);
    names_.addresses.Seed(AddrBytes(old_comm_id_), AddrBytes(new_comm_id_));
  }
  for (auto& [id, c] : conns_) {
    if (!c.open->from_daemon) continue;
    const auto key = std::make_pair(c.open->remote.ip, c.open->remote.port);
    if (!listener_of.count(key)) {
      RealListener l;
      l.old_ep = c.open->remote;
      l.fd = ListenLoopback(&l.new_ep);
      if (l.fd < 0) return absl::UnavailableError("cannot listen on 127.0.0.1");
      listener_of[key] = listeners_.size();
      listeners_.push_back(l);
    }
    listeners_[listener_of[key]].waiting.push_back(id);   // map order = conn id order
  }
  for (const RealListener& l : listeners_) names_.real.Seed(AddrBytes(l.old_ep), AddrBytes(l.new_ep));
  SeedCommHashes(old_comm_id_, new_comm_id_, profile.comm_hash);
  for (auto& [id, c] : conns_) {
    c.checker = std::make_unique<StreamChecker>(
        replay::BuildExpected(recorded_out[id], c.open->from_daemon, profile, names_.real));
  }
  report_.connections = conns_.size();
  report_.events = events_.size();
  return absl::OkStatus();
}

bool Replay::Advance() {
  bool moved = false;
  while (!failed_ && cursor_ < events_.size()) {
    const WireRecordEvent& e = events_[cursor_];
    Conn& c = conns_[e.conn];
    if (e.kind == WireRecordEvent::kOpen) {
      if (e.from_daemon) {
        if (c.fd < 0) break;   // prismd has not connected yet
      } else {
        const std::string* to = names_.addresses.Find(AddrBytes(e.local));
        if (!to) {
          Fail(absl::StrCat(Describe(e.conn), ": prismd never sent the new address of its "
                            "endpoint ", ToString(e.local), " before the real side dialled it"));
          break;
        }
        auto ep = DecodeSockAddr(reinterpret_cast<const uint8_t*>(to->data()));
        c.fd = ep.ok() ? ConnectTo(*ep, options_.stall_timeout_ms) : -1;
        if (c.fd < 0) {
          Fail(absl::StrCat(Describe(e.conn), ": cannot connect to prismd at ",
                            ep.ok() ? ToString(*ep) : std::string("?")));
          break;
        }
      }
    } else if (e.kind == WireRecordEvent::kData && e.from_daemon) {
      if (c.checker->checked() < data_end_[cursor_]) break;
    } else if (e.kind == WireRecordEvent::kData) {
      replay::RewriteRealChunk(c.real_stream, c.queued, data_end_[cursor_], names_);
      c.queued = data_end_[cursor_];
    } else {
      c.shutdown_wanted = true;
    }
    ++cursor_;
    moved = true;
  }
  return moved;
}

bool Replay::Pump(int timeout_ms) {
  std::vector<pollfd> fds;
  std::vector<int64_t> who;   // >= 0: conn id; < 0: -(listener index + 1)
  for (size_t i = 0; i < listeners_.size(); ++i) {
    if (listeners_[i].fd < 0) continue;
    fds.push_back({listeners_[i].fd, POLLIN, 0});
    who.push_back(-static_cast<int64_t>(i) - 1);
  }
  for (auto& [id, c] : conns_) {
    if (c.fd < 0 || (c.eof && c.shut)) continue;
    short ev = c.eof ? 0 : POLLIN;
    if (c.written < c.queued) ev |= POLLOUT;
    fds.push_back({c.fd, ev, 0});
    who.push_back(static_cast<int64_t>(id));
  }
  bool moved = false;
  if (poll(fds.data(), fds.size(), timeout_ms) < 0) return false;
  char buf[1 << 16];
  for (size_t k = 0; k < fds.size() && !failed_; ++k) {
    if (fds[k].revents == 0) continue;
    if (who[k] < 0) {
      RealListener& l = listeners_[static_cast<size_t>(-who[k] - 1)];
      int fd;
      while ((fd = accept4(l.fd, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC)) >= 0) {
        moved = true;
        if (l.next >= l.waiting.size()) {
          close(fd);
          Fail(absl::StrCat("prismd opened an unrecorded connection to the real listener ",
                            ToString(l.old_ep), " (now ", ToString(l.new_ep), "): ",
                            l.waiting.size(), " were recorded"));
          break;
        }
        conns_[l.waiting[l.next++]].fd = fd;
      }
      // NCCL's root thread exits once every rank checked in: prismd's next
      // job (re-armed at once) must find it gone, as in the recording.
      if (!failed_ && l.old_ep == old_comm_id_ && l.next == l.waiting.size()) {
        close(l.fd);
        l.fd = -1;
      }
      continue;
    }
    Conn& c = conns_[static_cast<uint64_t>(who[k])];
    if ((fds[k].revents & POLLOUT) && c.written < c.queued) {
      const ssize_t w = send(c.fd, c.real_stream.data() + c.written, c.queued - c.written,
                             MSG_NOSIGNAL);
      if (w > 0) {
        c.written += static_cast<size_t>(w);
        report_.bytes_sent += static_cast<uint64_t>(w);
        moved = true;
      }
    }
    if (fds[k].revents & (POLLIN | POLLHUP | POLLERR)) {
      const ssize_t r = recv(c.fd, buf, sizeof(buf), 0);
      if (r > 0) {
        moved = true;
        const std::string problem = c.checker->Add(buf, static_cast<size_t>(r), names_);
        if (!problem.empty()) Fail(absl::StrCat(Describe(static_cast<uint64_t>(who[k])),
                                                ", prismd -> real ", problem));
      } else if (r == 0 || (errno != EAGAIN && errno != EWOULDBLOCK)) {
        c.eof = true;
        moved = true;
      }
    }
  }
  for (auto& [id, c] : conns_) {
    if (c.fd >= 0 && c.shutdown_wanted && !c.shut && c.written == c.queued) {
      shutdown(c.fd, SHUT_WR);
      c.shut = true;
      moved = true;
    }
  }
  return moved;
}

std::string Replay::Waiting() const {
  std::string s = cursor_ < events_.size()
                      ? absl::StrCat("stalled at recording line ", events_[cursor_].line, " (",
                                     Describe(events_[cursor_].conn), ")")
                      : std::string("all events played, but");
  for (const auto& [id, c] : conns_) {
    if (c.checker->checked() < c.checker->expected_size()) {
      absl::StrAppend(&s, "; ", Describe(id), ": got ", c.checker->received(), " of ",
                      c.checker->expected_size(), " bytes from prismd");
    } else if (c.closed_in_recording && c.fd >= 0 && !c.eof) {
      absl::StrAppend(&s, "; ", Describe(id), ": prismd did not close it");
    }
  }
  return s;
}

absl::StatusOr<ReplayReport> Replay::Run() {
  auto profile = SelectWireProfile(manifest_.nccl_version);
  if (!profile.ok()) return profile.status();
  absl::Status prepared = Prepare(**profile);
  if (!prepared.ok()) return prepared;
  BootstrapConfig config;
  config.nccl_version = manifest_.nccl_version;
  config.comm_id = ToString(new_comm_id_);
  config.address_mode = manifest_.address_mode;
  config.contributions = manifest_.contributions;
  config.env = manifest_.env;
  ReplayBroker broker;
  BootstrapService service(config, manifest_.plan, &broker);
  absl::Status started = service.Start();
  if (!started.ok()) return started;
  auto last_move = Clock::now();
  const auto stall = std::chrono::milliseconds(options_.stall_timeout_ms);
  while (!failed_) {
    const bool moved = Advance() | Pump(5);
    const bool done =
        cursor_ == events_.size() &&
        std::all_of(conns_.begin(), conns_.end(), [](const auto& kv) {
          const Conn& c = kv.second;
          return c.checker->checked() == c.checker->expected_size() && c.written == c.queued &&
                 (!c.closed_in_recording || c.eof);
        });
    if (done) break;
    if (moved) last_move = Clock::now();
    if (Clock::now() - last_move > stall) Fail(Waiting());
  }
  if (!failed_ && manifest_.expect_job_complete) {
    const auto deadline = Clock::now() + stall;
    while (service.Stats().jobs_completed + service.Stats().jobs_failed == 0 &&
           Clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    if (service.Stats().jobs_completed == 0) Fail("prismd did not complete the job");
  }
  report_.server = service.Stats();
  service.Stop();
  if (!failed_ && (report_.server.divergences != 0 || report_.server.jobs_failed != 0)) {
    Fail(absl::StrCat("prismd counted ", report_.server.divergences, " divergences, ",
                      report_.server.jobs_failed, " failed jobs: ",
                      report_.server.recent_divergences.empty()
                          ? std::string()
                          : report_.server.recent_divergences.front()));
  }
  for (const auto& [id, c] : conns_) {
    report_.bytes_compared += c.checker->bytes_exact();
    report_.bytes_renamed += c.checker->bytes_renamed();
  }
  report_.renamed_values = names_.addresses.size() + names_.hashes.size() + names_.handles.size();
  report_.matched = !failed_;
  return report_;
}

}  // namespace

absl::StatusOr<ReplayReport> ReplayRecording(const std::vector<WireRecordEvent>& events,
                                             const WireManifest& manifest,
                                             const ReplayOptions& options) {
  Replay replay(events, manifest, options);
  return replay.Run();
}

}  // namespace prism::bootstrap
