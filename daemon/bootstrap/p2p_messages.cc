#include "daemon/bootstrap/p2p_messages.h"

#include "absl/strings/str_cat.h"
#include "daemon/bootstrap/allgather_engine.h"
#include "daemon/bootstrap/comm_table.h"
#include "daemon/bootstrap/reporter.h"

namespace prism::bootstrap {
namespace {

constexpr int32_t kMaxP2pPayload = 64 << 20;

// A NET send entry: small int at 0, int at 128, everything else zero.
bool IsSendEntry(const uint8_t* e) {
  const int32_t rank = ReadAt<int32_t>(e, 0);
  return rank >= 0 && rank < (1 << 24) && IsAllZero(e + 4, 124) && IsAllZero(e + 132, 124);
}

}  // namespace

void P2pMessages::SendToReal(LiveComm& comm, int32_t from, int32_t to, int32_t tag, const Bytes& payload) {
  if (!comm.real_p2p[to]) {
    c_.reporter->Diverge(absl::StrCat(comm.name, ": no P2P address known for real rank ", to,
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
  c_.conns->ConnectOut(*comm.real_p2p[to], ConnRole::kOneShotOut, comm.magic, std::move(msg), comm.live_id, from,
                       absl::StrCat("p2p ", comm.name, " v", from, "->r", to, " tag ", tag));
  c_.reporter->Update([](BootstrapStats& s) { ++s.p2p_messages_out; });
}

void P2pMessages::OnInput(Conn& conn) {
  LiveComm* comm = c_.comms->Find(conn.comm);
  if (comm == nullptr) return;
  if (conn.Available() < 16) return;
  const char* p = conn.in.data() + conn.in_off;
  int32_t ack_len, from, tag, len;
  std::memcpy(&ack_len, p, 4);
  std::memcpy(&from, p + 4, 4);
  std::memcpy(&tag, p + 8, 4);
  std::memcpy(&len, p + 12, 4);
  if (ack_len != 8 || len < 0 || len > kMaxP2pPayload) {
    c_.reporter->Diverge(absl::StrCat(comm->name, ": malformed bootstrap message to virtual rank ", conn.rank,
                                      " (ack ", ack_len, " bytes, payload ", len, ")"));
    c_.conns->Close(&conn);
    return;
  }
  if (conn.Available() < 16 + static_cast<size_t>(len)) return;
  PendingMsg m;
  m.to_rank = conn.rank;
  m.from_rank = from;
  m.tag = tag;
  m.payload.assign(p + 16, p + 16 + len);
  conn.in_off += 16 + len;
  c_.conns->Close(&conn);
  c_.reporter->Update([](BootstrapStats& s) { ++s.p2p_messages_in; });
  Dispatch(*comm, m);
}

void P2pMessages::Dispatch(LiveComm& comm, const PendingMsg& m) {
  const WireProfile& p = *c_.profile;
  if (m.from_rank < 0 || m.from_rank >= comm.n || !comm.real[m.from_rank]) {
    c_.reporter->Diverge(absl::StrCat(comm.name, ": bootstrap message claims sender rank ", m.from_rank,
                                      ", which is not a real rank of this communicator"));
    return;
  }
  comm.real_seen = true;
  CommTable::Touch(comm);
  if (m.tag == p.tag_comm_split) {
    c_.split_events->OnSplitMessage(comm, m);
    return;
  }
  if (m.tag == p.tag_global_barrier) {
    OnBarrier(comm, m);
    return;
  }
  const int32_t i = m.tag >> 8;
  const int32_t g = m.tag & 0x7f;
  if (i >= 1 && i < comm.n && g <= 5) {
    OnP2pSetup(comm, m);
    return;
  }
  c_.reporter->Diverge(absl::StrCat(comm.name, ": bootstrap message from real rank ", m.from_rank, " to virtual rank ",
                                    m.to_rank, " with unknown tag ", m.tag, " (", m.payload.size(),
                                    " bytes); not answered"));
}

void P2pMessages::OnP2pSetup(LiveComm& comm, const PendingMsg& m) {
  const WireProfile& p = *c_.profile;
  const int32_t i = m.tag >> 8, g = m.tag & 0x7f, R = m.from_rank, V = m.to_rank;
  if (m.tag & 0x80) {  // closing sync: one empty message back
    SendToReal(comm, V, R, m.tag, {});
    return;
  }
  c_.reporter->Update([](BootstrapStats& s) { ++s.p2p_setups; });
  const bool v_is_recv_peer = (R - i + comm.n) % comm.n == V;  // R's entries are recv entries
  const bool v_is_send_peer = (R + i) % comm.n == V;           // R's entries are send entries
  const size_t es = p.connect_entry_size;
  if ((!v_is_recv_peer && !v_is_send_peer) || m.payload.size() % es != 0) {
    c_.reporter->Diverge(absl::StrCat(comm.name, ": P2pSetup tag ", m.tag, " from rank ", R, " to rank ", V, " (",
                                      m.payload.size(), " bytes) fits neither ring distance"));
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
  daemon::VirtualLinkInfo link{comm.hash, comm.global[V], comm.global[R], 0};
  // V's recv entries (R sends to V): minted virtual handles.
  for (size_t k = 0; k < real_sends; ++k) {
    link.channel = static_cast<int32_t>(k);
    VirtualHandle h;
    h.virtual_rank = comm.global[V];
    if (c_.broker != nullptr) {
      h = c_.broker->MintReceiveHandle(link);
      c_.reporter->Update([](BootstrapStats& s) { ++s.broker_mints; });
    } else {
      c_.reporter->Update([](BootstrapStats& s) { ++s.broker_errors; });
    }
    std::memcpy(reply.data() + k * es, &h, sizeof(h));
  }
  // V's send entries (V sends to R through R's real listen handle).
  for (size_t k = 0; k < real_recvs; ++k) {
    uint8_t* e = reply.data() + (real_sends + k) * es;
    WriteAt<int32_t>(e, 0, comm.top_rank[V]);
    RealListenHandle h;
    std::memcpy(&h, m.payload.data() + k * es, sizeof(h));
    link.channel = static_cast<int32_t>(k);
    if (h.magic != kRealHandleMagic) {
      c_.reporter->Diverge(absl::StrCat(comm.name, ": rank ", R, "'s listen handle for virtual rank ", V,
                                        " is not a Prism handle (is NCCL_NET=Prism set?)"));
      continue;
    }
    ConnectVirtualSender(comm, h, link, 0);
  }
  SendToReal(comm, V, R, m.tag, reply);
  if (g == 1 && c_.config->env.register_ag && p.ring_connect_ag_size > 0 && !comm.ring_connect_started) {
    comm.ring_connect_started = true;
    c_.allgather->ArmOrQueue(comm, AgKind::kRingConnect);
  }
}

void P2pMessages::ConnectVirtualSender(LiveComm& comm, RealListenHandle handle, daemon::VirtualLinkInfo link,
                                       int attempt) {
  if (c_.broker == nullptr) {
    c_.reporter->Update([](BootstrapStats& s) { ++s.broker_errors; });
    return;
  }
  const absl::Status s = c_.broker->ConnectToRealListener(handle, link);
  if (s.ok()) {
    c_.reporter->Update([](BootstrapStats& st) { ++st.broker_connects; });
    return;
  }
  if (absl::IsFailedPrecondition(s) && attempt < 250) {  // ListenOpened may lag: 5 s
    const uint32_t live = comm.live_id;
    const uint64_t gen = c_.comms->job_gen();
    c_.loop->AddTimer(std::chrono::milliseconds(20), [this, live, gen, handle, link, attempt] {
      LiveComm* again = gen == c_.comms->job_gen() ? c_.comms->Find(live) : nullptr;
      if (again != nullptr) ConnectVirtualSender(*again, handle, link, attempt + 1);
    });
    return;
  }
  c_.reporter->Diverge(absl::StrCat(comm.name, ": broker could not connect virtual rank ", link.virtual_rank,
                                    " to real rank ", link.real_rank, "'s listener: ", std::string(s.message())));
  c_.reporter->Update([](BootstrapStats& st) { ++st.broker_errors; });
}

void P2pMessages::OnBarrier(LiveComm& comm, const PendingMsg& m) {
  const int R = m.from_rank;
  int targets = 0;
  for (int mask = 1; mask < comm.n; mask <<= 1) targets += comm.real[(R + mask) % comm.n] ? 0 : 1;
  const int count = ++comm.barrier.msgs_from[R];
  const int barrier = targets == 0 ? 0 : (count - 1) / targets;
  if (barrier < comm.barrier.started) return;
  ++comm.barrier.started;
  c_.reporter->Update([](BootstrapStats& s) { ++s.barriers; });
  Bytes zero(4, 0);
  for (int r = 0; r < comm.n; ++r) {
    if (!comm.real[r]) continue;
    for (int mask = 1; mask < comm.n; mask <<= 1) {
      const int from = (r - mask % comm.n + comm.n) % comm.n;
      if (!comm.real[from]) SendToReal(comm, from, r, m.tag, zero);
    }
  }
}

}  // namespace prism::bootstrap
