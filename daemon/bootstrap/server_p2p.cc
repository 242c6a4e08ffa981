// BootstrapServer: input dispatch, point-to-point bootstrap messages from real
// ranks (P2pSetup with the broker, barriers, COMMSPLIT), end of connections.
#include "absl/strings/str_cat.h"
#include "daemon/bootstrap/bootstrap_server.h"
#include "spdlog/spdlog.h"

namespace prism::bootstrap {
namespace {

constexpr int32_t kMaxP2pPayload = 64 << 20;

// A NET send entry: small int at 0, int at 128, everything else zero.
bool IsSendEntry(const uint8_t* e) {
  const int32_t rank = ReadAt<int32_t>(e, 0);
  return rank >= 0 && rank < (1 << 24) && IsAllZero(e + 4, 124) && IsAllZero(e + 132, 124);
}

}  // namespace

void BootstrapServer::HandleInput(Conn* c) {
  switch (c->role) {
    case ConnRole::kAcceptedUnknown: HandleAcceptedHeader(c); break;
    case ConnRole::kRootIn: OnRootCheckin(c); break;
    case ConnRole::kRootDeliveryIn: OnRootDelivery(c); break;
    case ConnRole::kP2pIn: OnP2pInput(c); break;
    case ConnRole::kRingFromRealPrev:
    case ConnRole::kRingToRealNext:
      if (LiveComm* comm = Comm(c->comm)) PumpAllGather(*comm);
      break;
    case ConnRole::kOneShotOut: c->in_off = c->in.size(); break;
  }
}

void BootstrapServer::HandleAcceptedHeader(Conn* c) {
  if (c->Available() < 12) return;
  auto it = endpoints_.find({c->local.ip, c->local.port});
  if (it == endpoints_.end()) {
    Diverge(absl::StrCat("connection from ", ToString(c->remote), " to ", ToString(c->local),
                         ", which is no live virtual endpoint (stale communicator?)"));
    CloseConn(c);
    return;
  }
  const EndpointRef ep = it->second;
  LiveComm* comm = Comm(ep.comm);
  if (comm == nullptr) {
    CloseConn(c);
    return;
  }
  uint64_t magic;
  int32_t type;
  std::memcpy(&magic, c->in.data() + c->in_off, 8);
  std::memcpy(&type, c->in.data() + c->in_off + 8, 4);
  c->in_off += 12;
  const uint64_t want = ep.kind == EndpointKind::kRootDelivery ? UniqueIdMagic(unique_id_) : comm->magic;
  if (magic != want || type != kSocketTypeBootstrap) {
    Diverge(absl::StrCat(comm->name, ": connection to virtual rank ", ep.rank, " with magic ",
                         magic, " type ", type, " (expected ", want, ", type 1): dropped"));
    CloseConn(c);
    return;
  }
  c->comm = ep.comm;
  c->rank = ep.rank;
  switch (ep.kind) {
    case EndpointKind::kRootDelivery: c->role = ConnRole::kRootDeliveryIn; break;
    case EndpointKind::kP2p: c->role = ConnRole::kP2pIn; break;
    case EndpointKind::kRing: {
      c->role = ConnRole::kRingFromRealPrev;
      RingLink& l = Link(*comm, ep.rank, true);
      if (l.conn != 0) {
        Diverge(absl::StrCat(comm->name, ": second ring connection to virtual rank ", ep.rank));
        CloseConn(c);
        return;
      }
      l.conn = c->id;
      if (!l.pending_out.empty()) Send(c, l.pending_out);
      l.pending_out.clear();
      break;
    }
  }
  HandleInput(c);
}

void BootstrapServer::OnP2pInput(Conn* conn) {
  LiveComm* c = Comm(conn->comm);
  if (c == nullptr) return;
  if (conn->Available() < 16) return;
  const char* p = conn->in.data() + conn->in_off;
  int32_t ack_len, from, tag, len;
  std::memcpy(&ack_len, p, 4);
  std::memcpy(&from, p + 4, 4);
  std::memcpy(&tag, p + 8, 4);
  std::memcpy(&len, p + 12, 4);
  if (ack_len != 8 || len < 0 || len > kMaxP2pPayload) {
    Diverge(absl::StrCat(c->name, ": malformed bootstrap message to virtual rank ", conn->rank,
                         " (ack ", ack_len, " bytes, payload ", len, ")"));
    CloseConn(conn);
    return;
  }
  if (conn->Available() < 16 + static_cast<size_t>(len)) return;
  PendingMsg m;
  m.to_rank = conn->rank;
  m.from_rank = from;
  m.tag = tag;
  m.payload.assign(p + 16, p + 16 + len);
  conn->in_off += 16 + len;
  CloseConn(conn);
  {
    std::lock_guard<std::mutex> lock(stats_mu_);
    ++stats_.p2p_messages_in;
  }
  DispatchP2p(*c, m);
}

void BootstrapServer::DispatchP2p(LiveComm& c, const PendingMsg& m) {
  const WireProfile& p = *profile_;
  if (m.from_rank < 0 || m.from_rank >= c.n || !c.real[m.from_rank]) {
    Diverge(absl::StrCat(c.name, ": bootstrap message claims sender rank ", m.from_rank,
                         ", which is not a real rank of this communicator"));
    return;
  }
  c.real_seen = true;
  if (m.tag == p.tag_comm_split) {
    HandleSplitMessage(c, m);
    return;
  }
  if (m.tag == p.tag_global_barrier) {
    HandleBarrier(c, m);
    return;
  }
  const int32_t i = m.tag >> 8;
  const int32_t g = m.tag & 0x7f;
  if (i >= 1 && i < c.n && g <= 5) {
    HandleP2pSetup(c, m);
    return;
  }
  Diverge(absl::StrCat(c.name, ": bootstrap message from real rank ", m.from_rank,
                       " to virtual rank ", m.to_rank, " with unknown tag ", m.tag, " (",
                       m.payload.size(), " bytes); not answered"));
}

void BootstrapServer::HandleP2pSetup(LiveComm& c, const PendingMsg& m) {
  const WireProfile& p = *profile_;
  const int32_t i = m.tag >> 8, g = m.tag & 0x7f, R = m.from_rank, V = m.to_rank;
  if (m.tag & 0x80) {  // closing sync: one empty message back
    SendP2p(c, V, R, m.tag, {});
    return;
  }
  {
    std::lock_guard<std::mutex> lock(stats_mu_);
    ++stats_.p2p_setups;
  }
  const bool v_is_recv_peer = (R - i + c.n) % c.n == V;  // R's entries are recv entries
  const bool v_is_send_peer = (R + i) % c.n == V;        // R's entries are send entries
  const size_t es = p.connect_entry_size;
  if ((!v_is_recv_peer && !v_is_send_peer) || m.payload.size() % es != 0) {
    Diverge(absl::StrCat(c.name, ": P2pSetup tag ", m.tag, " from rank ", R, " to rank ", V,
                         " (", m.payload.size(), " bytes) fits neither ring distance"));
    return;
  }
  const size_t count = m.payload.size() / es;
  size_t real_recvs = 0;  // R's leading recv entries
  if (v_is_recv_peer && v_is_send_peer) {
    while (real_recvs < count && !IsSendEntry(m.payload.data() + real_recvs * es)) ++real_recvs;
  } else if (v_is_recv_peer) {
    real_recvs = count;
  }
  const size_t real_sends = count - real_recvs;
  Bytes reply((real_sends + real_recvs) * es, 0);
  daemon::VirtualLinkInfo link{c.hash, c.global[V], c.global[R], 0};
  // V's recv entries (R sends to V): minted virtual handles.
  for (size_t k = 0; k < real_sends; ++k) {
    link.channel = static_cast<int32_t>(k);
    VirtualHandle h;
    h.virtual_rank = c.global[V];
    if (broker_ != nullptr) {
      h = broker_->MintReceiveHandle(link);
      std::lock_guard<std::mutex> lock(stats_mu_);
      ++stats_.broker_mints;
    } else {
      std::lock_guard<std::mutex> lock(stats_mu_);
      ++stats_.broker_errors;
    }
    std::memcpy(reply.data() + k * es, &h, sizeof(h));
  }
  // V's send entries (V sends to R through R's real listen handle).
  for (size_t k = 0; k < real_recvs; ++k) {
    uint8_t* e = reply.data() + (real_sends + k) * es;
    WriteAt<int32_t>(e, 0, c.top_rank[V]);
    RealListenHandle h;
    std::memcpy(&h, m.payload.data() + k * es, sizeof(h));
    link.channel = static_cast<int32_t>(k);
    if (h.magic != kRealHandleMagic) {
      Diverge(absl::StrCat(c.name, ": rank ", R, "'s listen handle for virtual rank ", V,
                           " is not a Prism handle (is NCCL_NET=Prism set?)"));
      continue;
    }
    ConnectVirtualSender(c, h, link, 0);
  }
  SendP2p(c, V, R, m.tag, reply);
  if (g == 1 && profile_ && config_.env.register_ag && !c.ring_connect_started) {
    c.ring_connect_started = true;
    if (c.ag) c.ag_queue.push_back(AgKind::kRingConnect);
    else ArmAllGather(c, AgKind::kRingConnect);
  }
}

void BootstrapServer::ConnectVirtualSender(LiveComm& c, RealListenHandle handle,
                                           daemon::VirtualLinkInfo link, int attempt) {
  if (broker_ == nullptr) {
    std::lock_guard<std::mutex> lock(stats_mu_);
    ++stats_.broker_errors;
    return;
  }
  const absl::Status s = broker_->ConnectToRealListener(handle, link);
  if (s.ok()) {
    std::lock_guard<std::mutex> lock(stats_mu_);
    ++stats_.broker_connects;
    return;
  }
  if (absl::IsFailedPrecondition(s) && attempt < 250) {  // ListenOpened may lag: 5 s
    const uint32_t live = c.live_id;
    const uint64_t gen = job_gen_;
    loop_.AddTimer(std::chrono::milliseconds(20), [this, live, gen, handle, link, attempt] {
      LiveComm* again = gen == job_gen_ ? Comm(live) : nullptr;
      if (again != nullptr) ConnectVirtualSender(*again, handle, link, attempt + 1);
    });
    return;
  }
  Diverge(absl::StrCat(c.name, ": broker could not connect virtual rank ", link.virtual_rank,
                       " to real rank ", link.real_rank, "'s listener: ", std::string(s.message())));
  std::lock_guard<std::mutex> lock(stats_mu_);
  ++stats_.broker_errors;
}

void BootstrapServer::HandleBarrier(LiveComm& c, const PendingMsg& m) {
  const int R = m.from_rank;
  int targets = 0;
  for (int mask = 1; mask < c.n; mask <<= 1) targets += c.real[(R + mask) % c.n] ? 0 : 1;
  const int count = ++c.barrier_msgs_from[R];
  const int barrier = targets == 0 ? 0 : (count - 1) / targets;
  if (barrier < c.barriers_started) return;
  ++c.barriers_started;
  {
    std::lock_guard<std::mutex> lock(stats_mu_);
    ++stats_.barriers;
  }
  Bytes zero(4, 0);
  for (int r = 0; r < c.n; ++r) {
    if (!c.real[r]) continue;
    for (int mask = 1; mask < c.n; mask <<= 1) {
      const int from = (r - mask % c.n + c.n) % c.n;
      if (!c.real[from]) SendP2p(c, from, r, m.tag, zero);
    }
  }
}

void BootstrapServer::HandleEof(Conn* c) {
  LiveComm* comm = Comm(c->comm);
  const ConnRole role = c->role;
  const bool leftover = c->Available() > 0;
  CloseConn(c);
  if (comm == nullptr) return;
  if (role == ConnRole::kRingFromRealPrev || role == ConnRole::kRingToRealNext) {
    RingLink& l = Link(*comm, c->rank, role == ConnRole::kRingFromRealPrev);
    l.closed = true;
    // A real rank that finished its part of the current all-gather may close
    // (destroy) before prismd has read its other socket: only a link that
    // still owes steps means the rank died mid-protocol.
    const bool unfinished = comm->ag ? !LinkFinished(*comm->ag, l)
                                     : comm->phase != CommPhase::kReady;
    if (unfinished || leftover) {
      FailComm(*comm, absl::StrCat("real rank ", l.real_rank, " closed its ring connection to ",
                                   "virtual rank ", l.vrank, " mid-protocol",
                                   comm->ag ? absl::StrCat(" (during ", AgKindName(comm->ag->kind), ")")
                                            : std::string()));
      return;
    }
    const uint64_t gen = job_gen_;
    if (comm->ag) PumpAllGather(*comm);
    if (gen == job_gen_ && !comm->ag) MaybeCommDone(*comm);
    return;
  }
  if (role == ConnRole::kP2pIn || role == ConnRole::kRootIn || role == ConnRole::kRootDeliveryIn) {
    if (leftover) {
      Diverge(absl::StrCat(comm->name, ": real rank closed a bootstrap connection mid-message"));
    }
  }
}

}  // namespace prism::bootstrap
