#include "daemon/session/session_service.h"

#include <time.h>

#include <cstdio>
#include <random>

#include "absl/strings/str_cat.h"
#include "common/nccl_version.h"

namespace prism::daemon {
namespace {

int64_t MonoNs() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return int64_t{ts.tv_sec} * 1000000000 + ts.tv_nsec;
}

}  // namespace

struct PluginSessionService::Session {
  SessionId id = 0;
  grpc::ServerReaderWriter<rpc::DaemonMessage, rpc::PluginMessage>* stream = nullptr;
  std::mutex write_mu;        // one writer at a time; guards `open` and `last_write_ns`
  bool open = true;
  int64_t last_write_ns = 0;
  bool warned_unknown_conn = false;  // stream thread only
  int32_t rank = -1;                 // Hello.rank, for logs
};

class PluginSessionService::GrpcService final : public rpc::PluginSession::Service {
 public:
  explicit GrpcService(PluginSessionService* owner) : owner_(owner) {}
  grpc::Status Session(
      grpc::ServerContext* context,
      grpc::ServerReaderWriter<rpc::DaemonMessage, rpc::PluginMessage>* stream) override {
    return owner_->RunSession(context, stream);
  }
  grpc::Status Announce(grpc::ServerContext*, const rpc::Hello* hello, rpc::Welcome* reply) override {
    return owner_->RunAnnounce(*hello, reply);
  }

 private:
  PluginSessionService* owner_;
};

PluginSessionService::PluginSessionService(Options options, ScheduleSource* source)
    : options_(std::move(options)),
      source_(source),
      grpc_service_(std::make_unique<GrpcService>(this)),
      next_conn_((uint64_t{std::random_device{}()} << 32) | 1) {
  keepalive_ = std::thread([this] { KeepaliveMain(); });
}

PluginSessionService::~PluginSessionService() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  stop_cv_.notify_all();
  keepalive_.join();
}

grpc::Service* PluginSessionService::service() { return grpc_service_.get(); }

uint64_t PluginSessionService::NextConnId() { return next_conn_.fetch_add(1); }

std::optional<VirtualLinkInfo> PluginSessionService::LinkOf(uint64_t conn_id) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = links_.find(conn_id);
  if (it == links_.end()) return std::nullopt;
  return it->second;
}

std::shared_ptr<PluginSessionService::Session> PluginSessionService::Register(
    grpc::ServerReaderWriter<rpc::DaemonMessage, rpc::PluginMessage>* stream) {
  auto s = std::make_shared<Session>();
  s->stream = stream;
  s->last_write_ns = MonoNs();
  std::lock_guard<std::mutex> lock(mu_);
  s->id = next_session_++;
  sessions_[s->id] = s;
  connected_.fetch_add(1);
  sessions_total_.fetch_add(1);
  return s;
}

void PluginSessionService::Unregister(const std::shared_ptr<Session>& s) {
  {
    std::lock_guard<std::mutex> wlock(s->write_mu);
    s->open = false;  // no writes after the stream handler returns
  }
  std::lock_guard<std::mutex> lock(mu_);
  sessions_.erase(s->id);
  for (auto it = listen_owner_.begin(); it != listen_owner_.end();) {
    it = it->second == s->id ? listen_owner_.erase(it) : std::next(it);
  }
  connected_.fetch_sub(1);
}

bool PluginSessionService::Write(Session& s, const rpc::DaemonMessage& msg) {
  std::lock_guard<std::mutex> lock(s.write_mu);
  if (!s.open) return false;
  s.last_write_ns = MonoNs();
  return s.stream->Write(msg);
}

bool PluginSessionService::PushSchedules(SessionId id, rpc::ScheduleBatch batch) {
  std::shared_ptr<Session> s;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = sessions_.find(id);
    if (it == sessions_.end()) return false;
    s = it->second;
  }
  rpc::DaemonMessage msg;
  *msg.mutable_schedules() = std::move(batch);
  return Write(*s, msg);
}

void PluginSessionService::FailAll(const std::string& why) {
  std::vector<std::shared_ptr<Session>> all;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto& [id, s] : sessions_) all.push_back(s);
  }
  rpc::DaemonMessage msg;
  msg.mutable_error()->set_message(why);
  for (auto& s : all) Write(*s, msg);
}

size_t PluginSessionService::listeners() const {
  std::lock_guard<std::mutex> lock(mu_);
  return listen_owner_.size();
}

VirtualHandle PluginSessionService::MintReceiveHandle(const VirtualLinkInfo& link) {
  VirtualHandle h;
  h.conn_id = NextConnId();
  h.virtual_rank = link.virtual_rank;
  if (options_.same_node.OneNode(link.real_rank, link.virtual_rank)) {
    h.same_node_bits_per_second = options_.same_node.bandwidth.count();
    h.same_node_latency_ns = options_.same_node.latency.count();
  }
  std::lock_guard<std::mutex> lock(mu_);
  links_[h.conn_id] = link;
  return h;
}

absl::Status PluginSessionService::ConnectToRealListener(const RealListenHandle& listen,
                                                         const VirtualLinkInfo& link) {
  if (listen.magic != kRealHandleMagic) {
    return absl::InvalidArgumentError("not a Prism plugin listen handle (wrong magic); is the "
                                      "real rank running with NCCL_NET_PLUGIN=prism?");
  }
  std::shared_ptr<Session> s;
  const uint64_t conn_id = NextConnId();
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto owner = listen_owner_.find(listen.listen_id);
    if (owner == listen_owner_.end()) {
      return absl::FailedPreconditionError(
          "no plugin session announced listen id " + std::to_string(listen.listen_id) +
          " (pid " + std::to_string(listen.pid) + "); is PRISM_DAEMON set for that rank?");
    }
    s = sessions_.at(owner->second);
    links_[conn_id] = link;
  }
  rpc::DaemonMessage msg;
  auto* in = msg.mutable_incoming();
  in->set_listen_id(listen.listen_id);
  in->set_conn_id(conn_id);
  in->set_virtual_rank(static_cast<int32_t>(link.virtual_rank));
  if (!Write(*s, msg)) return absl::UnavailableError("the plugin session closed meanwhile");
  return absl::OkStatus();
}

namespace {

// The connection an event names, or 0 for events without one.
uint64_t ConnOf(const rpc::Event& e) {
  switch (e.kind_case()) {
    case rpc::Event::kConnOpened: return e.conn_opened().conn_id();
    case rpc::Event::kPosted: return e.posted().conn_id();
    case rpc::Event::kCompleted: return e.completed().conn_id();
    case rpc::Event::kConnClosed: return e.conn_closed().conn_id();
    default: return 0;
  }
}

}  // namespace

bool PluginSessionService::DropUnknownConnections(Session& s, const rpc::EventBatch& batch,
                                                  rpc::EventBatch* kept) {
  std::vector<int> unknown;
  uint64_t first_unknown = 0;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (int i = 0; i < batch.events_size(); ++i) {
      const uint64_t conn = ConnOf(batch.events(i));
      if (conn == 0 || links_.count(conn) != 0) continue;
      if (unknown.empty()) first_unknown = conn;
      unknown.push_back(i);
    }
  }
  if (unknown.empty()) return false;
  rejected_events_.fetch_add(unknown.size(), std::memory_order_relaxed);
  if (!s.warned_unknown_conn) {
    s.warned_unknown_conn = true;
    std::fprintf(stderr,
                 "prismd: session %llu (rank %d) reports events on connection %llx, which prismd never "
                 "minted; they are dropped (is this plugin talking to the right prismd?)\n",
                 static_cast<unsigned long long>(s.id), s.rank, static_cast<unsigned long long>(first_unknown));
  }
  size_t next = 0;
  for (int i = 0; i < batch.events_size(); ++i) {
    if (next < unknown.size() && unknown[next] == i) {
      ++next;
      continue;
    }
    *kept->add_events() = batch.events(i);
  }
  return true;
}

void PluginSessionService::HandleEvents(Session& s, const rpc::EventBatch& batch) {
  for (const rpc::Event& e : batch.events()) {
    if (e.has_listen_closed()) {
      std::lock_guard<std::mutex> lock(mu_);
      listen_owner_.erase(e.listen_closed().listen_id());
      continue;
    }
    if (!e.has_listen_opened()) continue;
    {
      std::lock_guard<std::mutex> lock(mu_);
      listen_owner_[e.listen_opened().listen_id()] = s.id;
    }
    if (options_.on_listen) options_.on_listen(s.id, e.listen_opened().listen_id(), e.listen_opened().dev());
  }
  if (source_ == nullptr) return;
  rpc::EventBatch kept;
  const rpc::EventBatch& good = DropUnknownConnections(s, batch, &kept) ? kept : batch;
  rpc::ScheduleBatch reply;
  source_->OnEvents(s.id, good, &reply);
  if (reply.receives_size() > 0 || reply.ops_size() > 0) PushSchedules(s.id, std::move(reply));
}

std::string PluginSessionService::AdmitNccl(const rpc::Hello& hello, const char* what) const {
  if (options_.nccl_gate == nullptr) return "";
  const std::string who = absl::StrCat("rank ", hello.rank(), " (pid ", hello.pid(), " on ",
                                       hello.hostname().empty() ? "?" : hello.hostname(), ")");
  const absl::Status s = options_.nccl_gate->Admit(hello.nccl_version(), who);
  if (s.ok()) return "";
  std::fprintf(stderr, "prismd: refused %s: %s\n", what, std::string(s.message()).c_str());
  return std::string(s.message());
}

grpc::Status PluginSessionService::RunAnnounce(const rpc::Hello& hello, rpc::Welcome* reply) {
  if (hello.protocol_version() != kSessionProtocolVersion) {
    return grpc::Status(grpc::StatusCode::FAILED_PRECONDITION,
                        "plugin speaks session protocol " + std::to_string(hello.protocol_version()) +
                            ", prismd speaks " + std::to_string(kSessionProtocolVersion) +
                            "; use a plugin and prismd from the same Prism build");
  }
  if (const std::string why = AdmitNccl(hello, "a rank's NCCL"); !why.empty()) {
    return grpc::Status(grpc::StatusCode::FAILED_PRECONDITION, why);
  }
  reply->set_protocol_version(kSessionProtocolVersion);
  reply->set_daemon_version(options_.daemon_version);
  if (options_.on_announce) options_.on_announce(hello);
  return grpc::Status::OK;
}

grpc::Status PluginSessionService::RunSession(
    grpc::ServerContext* context,
    grpc::ServerReaderWriter<rpc::DaemonMessage, rpc::PluginMessage>* stream) {
  rpc::PluginMessage msg;
  {
    std::lock_guard<std::mutex> lock(mu_);
    awaiting_hello_[context] =
        MonoNs() + std::chrono::duration_cast<std::chrono::nanoseconds>(options_.hello_timeout).count();
  }
  const bool read = stream->Read(&msg);
  {
    std::lock_guard<std::mutex> lock(mu_);
    awaiting_hello_.erase(context);
  }
  if (!read) return grpc::Status::OK;
  if (!msg.has_hello()) {
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                        "the first message of a plugin session must be Hello");
  }
  if (msg.hello().protocol_version() != kSessionProtocolVersion) {
    rpc::DaemonMessage err;
    err.mutable_error()->set_message(
        "plugin speaks session protocol " + std::to_string(msg.hello().protocol_version()) +
        ", prismd speaks " + std::to_string(kSessionProtocolVersion) +
        "; use a plugin and prismd from the same Prism build");
    stream->Write(err);
    return grpc::Status(grpc::StatusCode::FAILED_PRECONDITION, err.error().message());
  }
  if (const std::string why = AdmitNccl(msg.hello(), "a plugin session"); !why.empty()) {
    rpc::DaemonMessage err;
    err.mutable_error()->set_message(why);
    stream->Write(err);
    return grpc::Status(grpc::StatusCode::FAILED_PRECONDITION, why);
  }
  std::shared_ptr<Session> s = Register(stream);
  const rpc::Hello hello = msg.hello();
  s->rank = hello.rank();
  rpc::DaemonMessage welcome;
  welcome.mutable_welcome()->set_protocol_version(kSessionProtocolVersion);
  welcome.mutable_welcome()->set_daemon_version(options_.daemon_version);
  welcome.mutable_welcome()->set_session_id(s->id);
  welcome.mutable_welcome()->set_ring_step_cost_ns(static_cast<uint64_t>(options_.ring_step_cost.count()));
  Write(*s, welcome);
  if (source_ != nullptr) source_->OnSessionOpened(s->id, hello, this);
  while (stream->Read(&msg)) {
    if (msg.has_events()) HandleEvents(*s, msg.events());
    if (msg.has_goodbye()) break;
  }
  Unregister(s);
  if (source_ != nullptr) source_->OnSessionClosed(s->id);
  return grpc::Status::OK;
}

void PluginSessionService::KeepaliveMain() {
  const auto period = options_.keepalive;
  std::unique_lock<std::mutex> lock(mu_);
  const auto tick = std::min<std::chrono::milliseconds>(period / 2, options_.hello_timeout / 2);
  while (!stop_cv_.wait_for(lock, std::max(tick, std::chrono::milliseconds(1)), [this] { return stop_; })) {
    for (auto it = awaiting_hello_.begin(); it != awaiting_hello_.end();) {
      if (MonoNs() < it->second) {
        ++it;
        continue;
      }
      it->first->TryCancel();  // its Read returns false; the handler erases nothing more
      it = awaiting_hello_.erase(it);
    }
    std::vector<std::shared_ptr<Session>> all;
    for (auto& [id, s] : sessions_) all.push_back(s);
    lock.unlock();
    rpc::DaemonMessage empty;
    empty.mutable_schedules();
    const int64_t now = MonoNs();
    for (auto& s : all) {
      bool idle;
      {
        std::lock_guard<std::mutex> wlock(s->write_mu);
        idle = now - s->last_write_ns >= std::chrono::nanoseconds(period).count();
      }
      if (idle) Write(*s, empty);
    }
    lock.lock();
  }
}

}  // namespace prism::daemon
