#include "plugin/virtual_comms.h"

#include <algorithm>
#include <cstring>
#include <vector>

#include "plugin/clock.h"

namespace prism::plugin {
namespace {

uint64_t LinkBits(const Settings& s) {
  return s.link_bits_per_second > 0 ? s.link_bits_per_second
                                    : static_cast<uint64_t>(s.nic.speed_mbps) * 1000000ull;
}
int64_t LinkLatency(const Settings& s) {
  return s.link_latency_ns > 0 ? s.link_latency_ns
                               : static_cast<int64_t>(s.nic.latency_us * 1000.0f);
}

// Tells prismd that a virtual connection opened or closed (batched by the session).
void EmitConnEvent(DaemonSession& session, SessionEvent::Kind kind, uint64_t conn_id, bool is_send, int dev) {
  SessionEvent e{kind};
  e.is_send = is_send;
  e.dev = dev;
  e.id = conn_id;
  e.at_ns = WallNowNs();
  session.Emit(e);
}

}  // namespace

// ---- send ----

VirtualSendComm::VirtualSendComm(const CommEnv& env, std::shared_ptr<DaemonSession> session,
                                 uint64_t conn_id, int dev)
    : env_(env),
      session_(std::move(session)),
      conn_(session_->Conn(conn_id)),
      conn_id_(conn_id),
      link_(LinkBits(*env.settings), LinkLatency(*env.settings)) {
  for (SendRequest& r : pool_) r.owner = this;
  EmitConnEvent(*session_, SessionEvent::kConnOpened, conn_id, /*is_send=*/true, dev);
}

VirtualSendComm::~VirtualSendComm() { Close(); }

void VirtualSendComm::Close() {
  if (closed_) return;
  closed_ = true;
  EmitConnEvent(*session_, SessionEvent::kConnClosed, conn_id_, /*is_send=*/true, 0);
}

Result VirtualSendComm::Isend(void* data, size_t size, int tag, const MemRegion* mr,
                              void** request) {
  *request = nullptr;
  std::string why;
  if (!session_->Healthy(false, &why)) {
    PRISM_WARN(*env_.logger, "send on virtual connection %llx: %s",
               static_cast<unsigned long long>(conn_id_), why.c_str());
    return prism_ncclRemoteError;
  }
  SendRequest* req = nullptr;
  for (SendRequest& r : pool_) {
    if (!r.in_use) {
      req = &r;
      break;
    }
  }
  if (req == nullptr) return prism_ncclSuccess;
  const int64_t now = WallNowNs();
  const LinkModel::Times t = link_.Reserve(size, now);
  req->in_use = true;
  req->seq = next_seq_++;
  req->size = size;
  req->done_at = t.wire_done_ns;
  conn_->RecordSent(req->seq, t.wire_done_ns);
  SessionEvent e{SessionEvent::kPosted};
  e.id = conn_id_;
  e.seq = req->seq;
  e.bytes = size;
  e.tag = tag;
  e.at_ns = now;
  session_->Emit(e);
  // The completion time is already known: report it at once.
  e.kind = SessionEvent::kCompleted;
  e.at_ns = t.wire_done_ns;
  session_->Emit(e);
  *request = req;
  return prism_ncclSuccess;
}

Result VirtualSendComm::SendRequest::Test(int* done, int* sizes) {
  *done = 0;
  if (WallNowNs() < done_at) return prism_ncclSuccess;
  *done = 1;
  if (sizes != nullptr) sizes[0] = static_cast<int>(size);
  in_use = false;
  return prism_ncclSuccess;
}

// ---- receive ----

VirtualRecvComm::VirtualRecvComm(const CommEnv& env, std::shared_ptr<DaemonSession> session,
                                 uint64_t conn_id, int dev)
    : env_(env), session_(std::move(session)), conn_(session_->Conn(conn_id)), conn_id_(conn_id) {
  for (RecvRequest& r : pool_) r.owner = this;
  EmitConnEvent(*session_, SessionEvent::kConnOpened, conn_id, /*is_send=*/false, dev);
}

VirtualRecvComm::~VirtualRecvComm() { Close(); }

void VirtualRecvComm::Close() {
  if (closed_) return;
  closed_ = true;
  EmitConnEvent(*session_, SessionEvent::kConnClosed, conn_id_, /*is_send=*/false, 0);
  session_->ForgetConn(conn_id_);
}

Result VirtualRecvComm::Fail(const std::string& why) {
  if (!warned_) {
    PRISM_WARN(*env_.logger, "receive on virtual connection %llx: %s",
               static_cast<unsigned long long>(conn_id_), why.c_str());
  }
  warned_ = true;
  return prism_ncclRemoteError;
}

Result VirtualRecvComm::Irecv(int n, void** data, const size_t* sizes, const int* tags,
                              const MemRegion* const* mrs, void** request) {
  *request = nullptr;
  if (n < 1 || n > kMaxSlots) return prism_ncclInvalidArgument;
  std::string why;
  if (!session_->Healthy(false, &why)) return Fail(why);
  RecvRequest* req = nullptr;
  for (RecvRequest& r : pool_) {
    if (!r.in_use) {
      req = &r;
      break;
    }
  }
  if (req == nullptr) return prism_ncclSuccess;
  req->in_use = true;
  req->n = n;
  req->posted_at = WallNowNs();
  for (int i = 0; i < n; ++i) {
    Slot& s = req->slots[i];
    s = Slot{};
    s.data = static_cast<char*>(data[i]);
    s.max_size = sizes[i];
    s.gpu = mrs != nullptr && mrs[i] != nullptr && mrs[i]->on_gpu();
    s.seq = next_seq_++;
    SessionEvent e{SessionEvent::kPosted};
    e.id = conn_id_;
    e.seq = s.seq;
    e.bytes = sizes[i];
    e.tag = tags != nullptr ? tags[i] : 0;
    e.at_ns = req->posted_at;
    session_->Emit(e);
  }
  *request = req;
  return prism_ncclSuccess;
}

bool VirtualRecvComm::Fill(const Slot& slot) {
  const RecvFill policy = env_.settings->recv_fill;
  if (policy == RecvFill::kNone || slot.bytes == 0) return true;
  std::string why;
  if (policy == RecvFill::kZeros) {
    if (!slot.gpu) {
      std::memset(slot.data, 0, slot.bytes);
      return true;
    }
    return env_.cuda->Memset(slot.data, 0, slot.bytes, &why);
  }
  // Pattern: byte k of receive seq is (seq * 31 + k) mod 256.
  std::vector<char> host;
  char* dst = slot.data;
  if (slot.gpu) {
    host.resize(slot.bytes);
    dst = host.data();
  }
  for (uint64_t k = 0; k < slot.bytes; ++k) dst[k] = static_cast<char>((slot.seq * 31 + k) & 0xff);
  return !slot.gpu || env_.cuda->Copy(slot.data, host.data(), slot.bytes, &why);
}

bool VirtualRecvComm::Resolve(RecvRequest& req, Slot& slot, Result* error) {
  if (!slot.has_schedule) {
    if (!conn_->TakeSchedule(slot.seq, &slot.schedule)) return false;
    slot.has_schedule = true;
    slot.bytes = slot.schedule.bytes > 0 ? slot.schedule.bytes : slot.max_size;
    if (slot.bytes > slot.max_size) {
      *error = Fail("prismd scheduled " + std::to_string(slot.bytes) + " bytes into a " +
                    std::to_string(slot.max_size) + "-byte buffer (receive " +
                    std::to_string(slot.seq) + "); the graph and this run disagree on sizes");
      return false;
    }
    if (!Fill(slot)) {
      *error = Fail("cannot fill a GPU receive buffer (CUDA runtime)");
      return false;
    }
  }
  if (slot.seq != next_resolve_seq_) return false;  // an earlier receive resolves first
  const Schedule& s = slot.schedule;
  int64_t at = s.earliest_ns;
  if (s.has_after_send) {
    int64_t sent = 0;
    std::shared_ptr<ConnState> other =
        s.after_send_conn == conn_id_ ? conn_ : session_->Conn(s.after_send_conn);
    if (!other->SentAt(s.after_send_seq, &sent)) return false;  // that send is not out yet
    at = std::max(at, sent + s.delay_ns);
  }
  if (s.link_bits_per_second > 0 || s.link_latency_ns > 0) {
    int64_t wire_end = std::max(req.posted_at, link_wire_end_);
    if (s.link_bits_per_second > 0) {
      wire_end += TransferTime(Bytes(slot.bytes), BitsPerSecond(s.link_bits_per_second)).count();
    }
    link_wire_end_ = wire_end;
    at = std::max(at, wire_end + s.link_latency_ns);
  }
  slot.done_at = at;
  slot.resolved = true;
  ++next_resolve_seq_;
  return true;
}

Result VirtualRecvComm::RecvRequest::Test(int* done, int* sizes) {
  *done = 0;
  VirtualRecvComm& c = *owner;
  int64_t done_at = 0;
  bool all = true;
  for (int i = 0; i < n; ++i) {
    Slot& s = slots[i];
    Result error = prism_ncclSuccess;
    if (!s.resolved && !c.Resolve(*this, s, &error)) {
      if (error != prism_ncclSuccess) return error;
      all = false;
      break;
    }
    done_at = std::max(done_at, s.done_at);
  }
  if (!all) {
    std::string why;
    if (!c.session_->Healthy(true, &why)) return c.Fail(why);
    return prism_ncclSuccess;
  }
  const int64_t now = WallNowNs();
  if (now < done_at) return prism_ncclSuccess;
  *done = 1;
  for (int i = 0; i < n; ++i) {
    if (sizes != nullptr) sizes[i] = static_cast<int>(slots[i].bytes);
    SessionEvent e{SessionEvent::kCompleted};
    e.id = c.conn_id_;
    e.seq = slots[i].seq;
    e.bytes = slots[i].bytes;
    e.at_ns = now;
    c.session_->Emit(e);
  }
  in_use = false;
  return prism_ncclSuccess;
}

}  // namespace prism::plugin
