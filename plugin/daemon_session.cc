#include "plugin/daemon_session.h"

#include <grpcpp/grpcpp.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>

#include "common/daemon_address.h"
#include "common/version.h"
#include "plugin/clock.h"
#include "plugin/daemon_owner.h"
#include "plugin/op_schedules.h"
#include "plugin/plugin.h"
#include "plugin/thread_name.h"
#include "proto/prism_service.grpc.pb.h"

namespace prism::plugin {

inline constexpr uint32_t kSessionProtocolVersion = 2;

// ---- ConnState ----

bool ConnState::TakeSchedule(uint64_t seq, Schedule* out) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = schedules_.find(seq);
  if (it == schedules_.end()) return false;
  *out = it->second;
  schedules_.erase(it);
  return true;
}

void ConnState::PutSchedule(uint64_t seq, const Schedule& s) {
  std::lock_guard<std::mutex> lock(mu_);
  schedules_[seq] = s;
}

void ConnState::RecordSent(uint64_t seq, int64_t wire_done_ns) {
  std::lock_guard<std::mutex> lock(mu_);
  while (sent_base_ + sent_.size() <= seq) sent_.push_back(-1);
  if (seq >= sent_base_) sent_[seq - sent_base_] = wire_done_ns;
  while (sent_.size() > kSentWindow) {
    sent_.pop_front();
    ++sent_base_;
  }
}

bool ConnState::SentAt(uint64_t seq, int64_t* at) const {
  std::lock_guard<std::mutex> lock(mu_);
  if (seq < sent_base_) {
    *at = 0;  // long gone: no constraint left
    return true;
  }
  if (seq - sent_base_ >= sent_.size() || sent_[seq - sent_base_] < 0) return false;
  *at = sent_[seq - sent_base_];
  return true;
}

// ---- the gRPC stream ----

class DaemonSession::Stream {
 public:
  std::shared_ptr<grpc::Channel> channel;
  std::unique_ptr<rpc::PluginSession::Stub> stub;
  grpc::ClientContext context;
  std::unique_ptr<grpc::ClientReaderWriter<rpc::PluginMessage, rpc::DaemonMessage>> rw;
};

DaemonSession::DaemonSession(const CommEnv& env, uint64_t comm_id)
    : env_(env), comm_id_(comm_id), stream_(std::make_unique<Stream>()) {
  last_heard_ns_.store(MonoNowNs());
}

DaemonSession::~DaemonSession() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  if (io_thread_.joinable()) io_thread_.join();
}

void DaemonSession::Start() {
  std::call_once(started_, [this] {
    last_heard_ns_.store(MonoNowNs());
    io_thread_ = std::thread([this] { Guarded("session I/O", [this] { IoMain(); }); });
  });
}

template <typename Body>
void DaemonSession::Guarded(const char* thread, Body&& body) {
  std::string why;
  try {
    body();
    return;
  } catch (const std::exception& e) {
    why = std::string("the plugin's ") + thread + " thread failed: " + e.what();
  } catch (...) {
    why = std::string("the plugin's ") + thread + " thread failed (unknown exception)";
  }
  // The session fails (NCCL sees an error on the virtual peers' requests);
  // the training process is never terminated by a plugin thread.
  Fail(why + "; the session with prismd (" + env_.settings->daemon_address + ") is over");
  PRISM_WARN(*env_.logger, "%s", why.c_str());
  {
    std::lock_guard<std::mutex> lock(mu_);
    read_ended_ = true;
  }
  cv_.notify_all();
}

void DaemonSession::Fail(const std::string& why) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!failure_.empty()) return;
    failure_ = why;
  }
  failed_.store(true, std::memory_order_release);
  cv_.notify_all();
}

bool DaemonSession::Healthy(bool waiting, std::string* why) {
  if (failed_.load(std::memory_order_acquire)) {
    std::lock_guard<std::mutex> lock(mu_);
    *why = failure_;
    return false;
  }
  const int64_t silent_ms = (MonoNowNs() - last_heard_ns_.load()) / 1000000;
  if (waiting && silent_ms > env_.settings->daemon_timeout_ms) {
    *why = "prismd (" + env_.settings->daemon_address + ") sent nothing for " +
           std::to_string(silent_ms) + " ms while NCCL waits on a virtual peer; is prismd " +
           "running and not stuck? (PRISM_DAEMON_TIMEOUT_MS=" +
           std::to_string(env_.settings->daemon_timeout_ms) + ")";
    Fail(*why);
    return false;
  }
  return true;
}

void DaemonSession::Emit(const SessionEvent& e) {
  bool first = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    first = pending_.empty();
    pending_.push_back(e);
  }
  if (first) cv_.notify_one();
}

std::vector<SessionEvent> DaemonSession::PendingEvents() {
  std::lock_guard<std::mutex> lock(mu_);
  return pending_;
}

std::shared_ptr<ConnState> DaemonSession::Conn(uint64_t conn_id) {
  std::lock_guard<std::mutex> lock(mu_);
  std::shared_ptr<ConnState>& c = conns_[conn_id];
  if (!c) c = std::make_shared<ConnState>();
  return c;
}

void DaemonSession::ForgetConn(uint64_t conn_id) {
  std::lock_guard<std::mutex> lock(mu_);
  conns_.erase(conn_id);
}

bool DaemonSession::TakeIncoming(uint64_t listen_id, uint64_t* conn_id) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = incoming_.find(listen_id);
  if (it == incoming_.end() || it->second.empty()) return false;
  *conn_id = it->second.front();
  it->second.pop_front();
  return true;
}

namespace {

void OpStartedToProto(const OpInfo& info, rpc::OpStarted* m) {
  m->set_op_id(info.id);
  rpc::OpKey* k = m->mutable_key();
  k->set_comm_hash(info.comm_hash);
  k->set_kind(static_cast<rpc::OpKind>(info.kind));
  k->set_seq(info.seq);
  k->set_peer(info.peer);
  m->set_comm_rank(info.comm_rank);
  m->set_comm_size(info.comm_size);
  m->set_bytes(info.bytes);
  m->set_algorithm(static_cast<rpc::OpAlgorithm>(info.algo));
  m->set_algo_name(info.algo_name);
  m->set_proto_name(info.proto_name);
  m->set_channels(info.channels);
  m->set_root(info.root);
  m->set_at_ns(static_cast<uint64_t>(info.enqueued_ns));
}

void ToProto(const SessionEvent& e, rpc::Event* out) {
  switch (e.kind) {
    case SessionEvent::kConnOpened: {
      auto* m = out->mutable_conn_opened();
      m->set_conn_id(e.id);
      m->set_is_send(e.is_send);
      m->set_dev(e.dev);
      m->set_at_ns(static_cast<uint64_t>(e.at_ns));
      break;
    }
    case SessionEvent::kListenOpened: {
      auto* m = out->mutable_listen_opened();
      m->set_listen_id(e.id);
      m->set_dev(e.dev);
      break;
    }
    case SessionEvent::kListenClosed:
      out->mutable_listen_closed()->set_listen_id(e.id);
      break;
    case SessionEvent::kPosted: {
      auto* m = out->mutable_posted();
      m->set_conn_id(e.id);
      m->set_seq(e.seq);
      m->set_bytes(e.bytes);
      m->set_tag(e.tag);
      m->set_at_ns(static_cast<uint64_t>(e.at_ns));
      m->set_op_id(e.op_id);
      m->set_channel(e.channel);
      m->set_step(e.step);
      break;
    }
    case SessionEvent::kCompleted: {
      auto* m = out->mutable_completed();
      m->set_conn_id(e.id);
      m->set_seq(e.seq);
      m->set_bytes(e.bytes);
      m->set_at_ns(static_cast<uint64_t>(e.at_ns));
      m->set_op_id(e.op_id);
      m->set_channel(e.channel);
      m->set_step(e.step);
      m->set_late_ns(static_cast<uint64_t>(e.late_ns));
      m->set_waited_for_schedule(e.waited_for_schedule);
      break;
    }
    case SessionEvent::kOpStarted:
      if (e.op) OpStartedToProto(*e.op, out->mutable_op_started());
      break;
    case SessionEvent::kOpFinished: {
      auto* m = out->mutable_op_finished();
      m->set_op_id(e.op ? e.op->id : 0);
      m->set_first_send_ns(static_cast<uint64_t>(e.summary.first_send_ns));
      m->set_end_ns(static_cast<uint64_t>(e.summary.end_ns));
      m->set_bytes_sent(e.summary.bytes_sent);
      m->set_bytes_received(e.summary.bytes_received);
      m->set_messages(e.summary.messages);
      break;
    }
    case SessionEvent::kConnClosed: {
      auto* m = out->mutable_conn_closed();
      m->set_conn_id(e.id);
      m->set_at_ns(static_cast<uint64_t>(e.at_ns));
      break;
    }
  }
}

Schedule FromProto(const rpc::ReceiveSchedule& r) {
  Schedule s;
  s.bytes = r.bytes();
  s.earliest_ns = static_cast<int64_t>(r.earliest_ns());
  s.has_after_send = r.has_after_send();
  s.after_send_conn = r.after_send_conn();
  s.after_send_seq = r.after_send_seq();
  s.delay_ns = static_cast<int64_t>(r.delay_ns());
  s.link_bits_per_second = r.link_bits_per_second();
  s.link_latency_ns = static_cast<int64_t>(r.link_latency_ns());
  return s;
}

void PutOpSchedule(const rpc::OpSchedule& r, OpScheduleBook* book) {
  OpKey key{r.key().comm_hash(), static_cast<OpKind>(r.key().kind()), r.key().seq(), r.key().peer()};
  OpSchedule s;
  s.mode = r.mode() == rpc::OpSchedule::STREAM ? OpSchedule::Mode::kStream : OpSchedule::Mode::kMirror;
  s.ready_ns = static_cast<int64_t>(r.ready_ns());
  s.link_bits_per_second = r.link_bits_per_second();
  s.link_latency_ns = r.link_bits_per_second() > 0 || r.link_latency_ns() > 0
                          ? static_cast<int64_t>(r.link_latency_ns())
                          : -1;
  s.unmatched = r.unmatched();
  s.step_cost_ns = static_cast<int64_t>(r.step_cost_ns());
  s.hold = r.hold();
  if (r.has_after()) {
    s.has_after = true;
    s.after = OpKey{r.after().comm_hash(), static_cast<OpKind>(r.after().kind()), r.after().seq(), r.after().peer()};
    s.after_delay_ns = static_cast<int64_t>(r.after_delay_ns());
  }
  book->Put(key, s);
}

}  // namespace

bool DaemonSession::WriteBatch(std::vector<SessionEvent>* batch) {
  // Stay far below gRPC's 4 MiB default message limit (~20 B per event).
  constexpr size_t kMaxEventsPerMessage = 16384;
  rpc::PluginMessage msg;
  for (size_t begin = 0; begin < batch->size(); begin += kMaxEventsPerMessage) {
    const size_t end = std::min(batch->size(), begin + kMaxEventsPerMessage);
    auto* events = msg.mutable_events()->mutable_events();
    events->Clear();
    events->Reserve(static_cast<int>(end - begin));
    for (size_t i = begin; i < end; ++i) ToProto((*batch)[i], events->Add());
    if (!stream_->rw->Write(msg)) {
      batch->clear();
      return false;
    }
  }
  batch->clear();
  return true;
}

std::string AnnounceToDaemon(const Settings& s, int nccl_version) {
  auto channel = grpc::CreateChannel(s.daemon_address, grpc::InsecureChannelCredentials());
  const auto deadline = std::chrono::system_clock::now() + std::chrono::milliseconds(s.daemon_timeout_ms);
  if (!channel->WaitForConnected(deadline)) {
    return "cannot reach prismd at " + s.daemon_address + " within " + std::to_string(s.daemon_timeout_ms) +
           " ms: start prismd first, or point PRISM_DAEMON at it (prismd's default here: " +
           prism::DefaultDaemonAddress() + ")";
  }
  if (const std::string why = CheckDaemonOwner(s.daemon_address, getuid(), s.daemon_trusted_uids); !why.empty()) {
    return why;
  }
  rpc::Hello hello;
  hello.set_protocol_version(kSessionProtocolVersion);
  hello.set_pid(static_cast<uint32_t>(getpid()));
  char host[256] = {};
  gethostname(host, sizeof(host) - 1);
  hello.set_hostname(host);
  hello.set_rank(s.rank);
  hello.set_plugin_version(prism::kVersion);
  hello.set_nccl_version(nccl_version);
  grpc::ClientContext context;
  context.set_deadline(deadline);
  rpc::Welcome welcome;
  const grpc::Status status = rpc::PluginSession::NewStub(channel)->Announce(&context, hello, &welcome);
  if (status.ok() || status.error_code() == grpc::StatusCode::UNIMPLEMENTED) return "";
  if (status.error_code() == grpc::StatusCode::FAILED_PRECONDITION) return "prismd refused this rank: " + status.error_message();
  return "prismd at " + s.daemon_address + " did not answer the plugin's announcement (" +
         status.error_message() + "): is it a prismd of this Prism build?";
}

void DaemonSession::IoMain() {
  NameThisThread("prism session");
  const Settings& s = *env_.settings;
  Stream& st = *stream_;
  st.channel = grpc::CreateChannel(s.daemon_address, grpc::InsecureChannelCredentials());
  const int64_t deadline = MonoNowNs() + s.daemon_timeout_ms * 1000000;
  for (;;) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (stopping_) return;
    }
    if (st.channel->WaitForConnected(std::chrono::system_clock::now() +
                                     std::chrono::milliseconds(100))) {
      break;
    }
    if (MonoNowNs() > deadline) {
      Fail("cannot reach prismd at " + s.daemon_address + " within " +
           std::to_string(s.daemon_timeout_ms) +
           " ms: start prismd, or point PRISM_DAEMON at it (prismd's default here: " +
           prism::DefaultDaemonAddress() + ")");
      PRISM_WARN(*env_.logger, "%s", failure_.c_str());
      return;
    }
  }
  // Only this user's prismd (or one PRISM_DAEMON_UIDS names) gets the session.
  if (const std::string why = CheckDaemonOwner(s.daemon_address, getuid(), s.daemon_trusted_uids); !why.empty()) {
    Fail(why);
    PRISM_WARN(*env_.logger, "%s", why.c_str());
    return;
  }
  st.stub = rpc::PluginSession::NewStub(st.channel);
  st.rw = st.stub->Session(&st.context);
  rpc::PluginMessage hello;
  auto* h = hello.mutable_hello();
  h->set_protocol_version(kSessionProtocolVersion);
  h->set_comm_id(comm_id_);
  h->set_pid(static_cast<uint32_t>(getpid()));
  char host[256] = {};
  gethostname(host, sizeof(host) - 1);
  h->set_hostname(host);
  h->set_rank(s.rank);
  h->set_plugin_version(prism::kVersion);
  h->set_nccl_version(env_.nccl_version);
  if (!st.rw->Write(hello)) {
    Fail("prismd at " + s.daemon_address + " refused the session stream");
  } else {
    PRISM_INFO(*env_.logger, "session with prismd at %s opened (comm %llx)",
               s.daemon_address.c_str(), static_cast<unsigned long long>(comm_id_));
    reader_thread_ = std::thread([this] { Guarded("session reader", [this] { ReaderMain(); }); });
  }
  std::vector<SessionEvent> batch;
  bool stop = false;
  while (!stop && !failed_.load(std::memory_order_acquire)) {
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [&] {
        return stopping_ || read_ended_ || !pending_.empty() || failed_.load();
      });
      if (read_ended_ && !stopping_) break;
      if (!stopping_ && s.event_flush_ns > 0) {
        lock.unlock();
        std::this_thread::sleep_for(std::chrono::nanoseconds(s.event_flush_ns));
        lock.lock();
      }
      batch.swap(pending_);
      stop = stopping_;
    }
    if (!batch.empty() && !failed_.load() && !WriteBatch(&batch)) {
      Fail("prismd at " + s.daemon_address + " closed the session stream");
    }
  }
  if (stop && !failed_.load()) {
    rpc::PluginMessage bye;
    bye.mutable_goodbye()->set_reason("plugin context finalized");
    st.rw->Write(bye);
    st.rw->WritesDone();
  }
  bool ended_by_daemon;
  {
    std::lock_guard<std::mutex> lock(mu_);
    ended_by_daemon = read_ended_ && !stopping_;
  }
  if (!ended_by_daemon) st.context.TryCancel();
  if (reader_thread_.joinable()) reader_thread_.join();
  grpc::Status status = st.rw ? st.rw->Finish() : grpc::Status::OK;
  if (ended_by_daemon) {
    Fail("prismd at " + s.daemon_address + " ended the session" +
         (status.ok() ? std::string(" (did prismd exit? see its log)")
                      : ": " + status.error_message()));
  }
  if (failed_.load() && !stop) PRISM_WARN(*env_.logger, "%s", failure_.c_str());
}

void DaemonSession::ReaderMain() {
  NameThisThread("prism sess read");
  rpc::DaemonMessage msg;
  while (stream_->rw->Read(&msg)) {
    last_heard_ns_.store(MonoNowNs());
    switch (msg.body_case()) {
      case rpc::DaemonMessage::kWelcome:
        PRISM_INFO(*env_.logger, "prismd %s welcomed session %llu",
                   msg.welcome().daemon_version().c_str(),
                   static_cast<unsigned long long>(msg.welcome().session_id()));
        if (env_.schedules != nullptr)
          env_.schedules->SetRingStepCost(Nanoseconds(static_cast<int64_t>(msg.welcome().ring_step_cost_ns())));
        break;
      case rpc::DaemonMessage::kSchedules:
        for (const rpc::ReceiveSchedule& r : msg.schedules().receives()) {
          Conn(r.conn_id())->PutSchedule(r.seq(), FromProto(r));
        }
        if (env_.schedules != nullptr) {
          for (const rpc::OpSchedule& r : msg.schedules().ops()) PutOpSchedule(r, env_.schedules);
        }
        break;
      case rpc::DaemonMessage::kIncoming: {
        std::lock_guard<std::mutex> lock(mu_);
        incoming_[msg.incoming().listen_id()].push_back(msg.incoming().conn_id());
        break;
      }
      case rpc::DaemonMessage::kError:
        Fail("prismd reported: " + msg.error().message());
        break;
      default:
        break;
    }
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    read_ended_ = true;
  }
  cv_.notify_all();
}

}  // namespace prism::plugin
