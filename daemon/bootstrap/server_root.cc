// BootstrapServer: root check-in (virtual ranks as clients of a real root, or
// prismd hosting the root) and the bootstrap ring connections.
#include "absl/strings/str_cat.h"
#include "daemon/bootstrap/bootstrap_server.h"
#include "spdlog/spdlog.h"

namespace prism::bootstrap {
namespace {

std::string Int32Bytes(int32_t v) { return std::string(reinterpret_cast<const char*>(&v), 4); }

// Consumes the 12-byte connect header; false if not complete yet.
bool TakeHeader(Conn* c, uint64_t* magic, int32_t* type) {
  if (c->Available() < 12) return false;
  std::memcpy(magic, c->in.data() + c->in_off, 8);
  std::memcpy(type, c->in.data() + c->in_off + 8, 4);
  c->in_off += 12;
  return true;
}

// Reads one length-prefixed message of exactly `size` bytes into `out`.
// Returns 0 when incomplete, 1 on success, -1 on a size mismatch.
int TakeSized(Conn* c, size_t size, Bytes* out, int32_t* got_len) {
  if (c->Available() < 4) return 0;
  std::memcpy(got_len, c->in.data() + c->in_off, 4);
  if (*got_len != static_cast<int32_t>(size)) return -1;
  if (c->Available() < 4 + size) return 0;
  const uint8_t* p = reinterpret_cast<const uint8_t*>(c->in.data() + c->in_off + 4);
  out->assign(p, p + size);
  c->in_off += 4 + size;
  return 1;
}

}  // namespace

RingLink& BootstrapServer::Link(LiveComm& c, int32_t v, bool from_real_prev) {
  auto& slot = c.links[v * 2 + (from_real_prev ? 1 : 0)];
  if (!slot) {
    slot = std::make_unique<RingLink>();
    slot->vrank = v;
    slot->from_real_prev = from_real_prev;
    slot->real_rank = from_real_prev ? (v + c.n - 1) % c.n : (v + 1) % c.n;
  }
  return *slot;
}

void BootstrapServer::StartRoot(LiveComm& c) {
  c.phase = CommPhase::kRoot;
  if (c.real[0]) {  // the real rank 0 hosts the root at NCCL_COMM_ID
    PumpCheckins(c);
  } else {
    current_root_comm_ = c.live_id;
  }
  StartRingOps(c, profile_->init_ops);
}

void BootstrapServer::PumpCheckins(LiveComm& c) {
  const WireProfile& p = *profile_;
  while (c.checkins_outstanding < config_.max_concurrent_checkins && c.next_checkin < c.n) {
    const int v = c.next_checkin++;
    if (c.real[v]) continue;
    Bytes ext(p.ext_info_size, 0);
    WriteAt<int32_t>(ext.data(), p.ext_rank, v);
    WriteAt<int32_t>(ext.data(), p.ext_nranks, c.n);
    WriteAt<int32_t>(ext.data(), p.ext_iroot, 0);
    WriteAt<int32_t>(ext.data(), p.ext_nroots, 1);
    const SockAddrBytes listen = EncodeSockAddr(c.root_ep[v]);
    // Ring listener: real only where the predecessor is real; otherwise any
    // non-zero address (nobody dials it).
    const SockAddrBytes ring = EncodeSockAddr(c.ring_ep[v].ip ? c.ring_ep[v] : c.p2p_ep[v]);
    std::copy(listen.begin(), listen.end(), ext.begin() + p.ext_listen_root_addr);
    std::copy(ring.begin(), ring.end(), ext.begin() + p.ext_connect_info);
    std::string msg = Int32Bytes(static_cast<int32_t>(ext.size()));
    msg.append(reinterpret_cast<const char*>(ext.data()), ext.size());
    Conn* conn = ConnectOut(root_addr_, ConnRole::kOneShotOut, UniqueIdMagic(unique_id_),
                            std::move(msg), c.live_id, v,
                            absl::StrCat("check-in ", c.name, " v", v));
    conn->checkin = true;
    ++c.checkins_outstanding;
  }
}

void BootstrapServer::OnRootDelivery(Conn* conn) {
  LiveComm* c = Comm(conn->comm);
  if (c == nullptr) return;
  Bytes info;
  int32_t len = 0;
  const int got = TakeSized(conn, profile_->ring_connect_info_size, &info, &len);
  if (got == 0) return;
  if (got < 0) {
    Diverge(absl::StrCat(c->name, ": root delivery to virtual rank ", conn->rank, " has ", len,
                         " bytes, expected ", profile_->ring_connect_info_size));
    CloseConn(conn);
    return;
  }
  c->real_seen = true;
  ++c->deliveries_seen;
  const int v = conn->rank;
  const int next = (v + 1) % c->n;
  CloseConn(conn);
  if (!c->real[next]) return;  // in-memory neighbour
  auto addr = DecodeSockAddr(info.data());
  if (!addr.ok() || IsAllZero(info.data(), kSockAddrBytes)) {
    Diverge(absl::StrCat(c->name, ": root sent virtual rank ", v, " an unusable ring address"));
    return;
  }
  c->next_ring[v] = *addr;
  ConnectRingNext(*c, v, *addr);
}

void BootstrapServer::OnRootCheckin(Conn* conn) {
  const WireProfile& p = *profile_;
  if (conn->expect_magic == 0) {
    uint64_t magic;
    int32_t type;
    if (!TakeHeader(conn, &magic, &type)) return;
    if (magic != UniqueIdMagic(unique_id_) || type != kSocketTypeBootstrap) {
      Diverge(absl::StrCat("root check-in with magic ", magic, " type ", type,
                           " (expected NCCL_MAGIC, type 1): is NCCL_COMM_ID the same for every rank?"));
      CloseConn(conn);
      return;
    }
    conn->expect_magic = magic;
  }
  Bytes ext;
  int32_t len = 0;
  const int got = TakeSized(conn, p.ext_info_size, &ext, &len);
  if (got == 0) return;
  if (got < 0) {
    RefuseOtherVersionCheckin(conn, len);
    return;
  }
  CloseConn(conn);
  const int32_t rank = ReadAt<int32_t>(ext.data(), p.ext_rank);
  const int32_t nranks = ReadAt<int32_t>(ext.data(), p.ext_nranks);
  LiveComm* c = current_root_comm_ ? Comm(*current_root_comm_) : nullptr;
  if (c == nullptr) {
    Diverge(absl::StrCat("unexpected root check-in from rank ", rank, " of ", nranks,
                         ": no communicator initialisation is expected now"));
    return;
  }
  if (nranks != c->n || rank < 0 || rank >= c->n || !c->real[rank] || !c->real_ext[rank].empty()) {
    Diverge(absl::StrCat(c->name, ": unexpected check-in from rank ", rank, " of ", nranks,
                         " (plan: ", c->n, " ranks, rank ",
                         rank >= 0 && rank < c->n && c->real[rank] ? "real" : "virtual",
                         ", real ranks checked in ", c->checked_in, ")"));
    return;
  }
  c->real_seen = true;
  c->real_ext[rank] = std::move(ext);
  if (++c->checked_in == c->num_real) DeliverFromDaemonRoot(*c);
}

constexpr uint32_t kNoComm = UINT32_MAX;  // a connection that belongs to no communicator

// A check-in whose size is another NCCL version's extInfo: that real rank
// would wait forever for its root delivery. Answer its root listener with a
// socket of the wrong type, which NCCL treats as fatal ("wrong type"), so its
// init fails at once; the divergence names both versions.
void BootstrapServer::RefuseOtherVersionCheckin(Conn* conn, int32_t len) {
  const WireProfile& p = *profile_;
  const WireProfile* other = nullptr;  // the first version with this extInfo size
  std::string names;
  for (const WireProfile& w : AllWireProfiles()) {
    if (w.ext_info_size != static_cast<size_t>(len) || w.version_code == p.version_code) continue;
    if (other == nullptr) other = &w;
    absl::StrAppend(&names, names.empty() ? "" : " or ", w.name);
  }
  if (other != nullptr && conn->Available() < 4 + static_cast<size_t>(len)) return;  // wait for it all
  std::string why = absl::StrCat("root check-in of ", len, " bytes, expected ", p.ext_info_size, " (NCCL ",
                                 p.name, " extInfo)");
  if (other != nullptr) {
    const auto* ext = reinterpret_cast<const uint8_t*>(conn->in.data() + conn->in_off + 4);
    auto listen = DecodeSockAddr(ext + other->ext_listen_root_addr);
    if (listen.ok()) {
      ConnectOut(*listen, ConnRole::kOneShotOut, UniqueIdMagic(unique_id_), std::string(), kNoComm, -1,
                 "refuse NCCL " + names, kSocketTypeProxy);
    }
    absl::StrAppend(&why, ": the real rank runs NCCL ", names, "; prismd plays ", p.name,
                    " (--wire-profile). Refused: its init fails now");
  } else {
    absl::StrAppend(&why, ": wrong NCCL version on a real rank?");
  }
  CloseConn(conn);
  Diverge(why);
}

void BootstrapServer::DeliverFromDaemonRoot(LiveComm& c) {
  const WireProfile& p = *profile_;
  current_root_comm_.reset();
  for (int r = 0; r < c.n; ++r) {
    const int next = (r + 1) % c.n;
    if (c.real[r]) {
      Bytes info(p.ring_connect_info_size, 0);
      if (c.real[next]) {
        std::copy_n(c.real_ext[next].begin() + p.ext_connect_info, info.size(), info.begin());
      } else {
        const SockAddrBytes a = EncodeSockAddr(c.ring_ep[next]);
        std::copy(a.begin(), a.end(), info.begin());
      }
      auto listen = DecodeSockAddr(c.real_ext[r].data() + p.ext_listen_root_addr);
      if (!listen.ok()) {
        FailComm(c, absl::StrCat("rank ", r, "'s root listen address: ", listen.status().message()));
        return;
      }
      std::string msg = Int32Bytes(static_cast<int32_t>(info.size()));
      msg.append(reinterpret_cast<const char*>(info.data()), info.size());
      ConnectOut(*listen, ConnRole::kOneShotOut, UniqueIdMagic(unique_id_), std::move(msg),
                 c.live_id, r, absl::StrCat("root delivery ", c.name, " r", r));
    } else if (c.real[next]) {
      auto ring = DecodeSockAddr(c.real_ext[next].data() + p.ext_connect_info);
      if (!ring.ok()) {
        FailComm(c, absl::StrCat("rank ", next, "'s ring address: ", ring.status().message()));
        return;
      }
      c.next_ring[r] = *ring;
      ConnectRingNext(c, r, *ring);
    }
  }
}

void BootstrapServer::ConnectRingNext(LiveComm& c, int32_t v, const Ipv4Endpoint& real_listener) {
  RingLink& l = Link(c, v, false);
  Conn* conn = ConnectOut(real_listener, ConnRole::kRingToRealNext, c.magic, l.pending_out,
                          c.live_id, v, absl::StrCat("ring ", c.name, " v", v, "->r", l.real_rank));
  l.pending_out.clear();
  l.conn = conn->id;
  PumpAllGather(c);
}

void BootstrapServer::StartRingOps(LiveComm& c, const std::vector<RingOp>& ops) {
  for (RingOp op : ops) {
    switch (op) {
      case RingOp::kRingAllInfo: c.ag_queue.push_back(AgKind::kRingAllInfo); break;
      case RingOp::kPeerInfo: c.ag_queue.push_back(AgKind::kPeerInfo); break;
      case RingOp::kTopoInfo: c.ag_queue.push_back(AgKind::kTopoInfo); break;
    }
  }
  if (c.phase == CommPhase::kWaiting) c.phase = CommPhase::kRoot;
  ArmNextQueued(c);
}

}  // namespace prism::bootstrap
