#include "daemon/bootstrap/root_checkin.h"

#include "absl/strings/str_cat.h"
#include "daemon/bootstrap/allgather_engine.h"
#include "daemon/bootstrap/comm_table.h"
#include "daemon/bootstrap/reporter.h"
#include "spdlog/spdlog.h"

namespace prism::bootstrap {
namespace {

constexpr uint32_t kNoComm = UINT32_MAX;  // a connection that belongs to no communicator

std::string Int32Bytes(int32_t v) { return std::string(reinterpret_cast<const char*>(&v), 4); }

// Reads one length-prefixed message of exactly `size` bytes into `out`.
// Returns 0 when incomplete, 1 on success, -1 on a size mismatch.
int TakeSized(Conn& c, size_t size, Bytes* out, int32_t* got_len) {
  if (c.Available() < 4) return 0;
  std::memcpy(got_len, c.in.data() + c.in_off, 4);
  if (*got_len != static_cast<int32_t>(size)) return -1;
  if (c.Available() < 4 + size) return 0;
  const uint8_t* p = reinterpret_cast<const uint8_t*>(c.in.data() + c.in_off + 4);
  out->assign(p, p + size);
  c.in_off += 4 + size;
  return 1;
}

}  // namespace

void RootCheckin::Start(LiveComm& comm) {
  comm.phase = CommPhase::kRoot;
  switch (comm.root.host) {
    case RootHost::kRealRank: PumpCheckins(comm); break;
    case RootHost::kDaemonShared: shared_root_comm_ = comm.live_id; break;
    case RootHost::kDaemonOwn: break;  // check-ins arrive on the comm's root endpoint
  }
  c_.allgather->QueueOps(comm, c_.profile->init_ops);
}

void RootCheckin::OnCheckinClosed(LiveComm& comm) {
  --comm.root.checkins_outstanding;
  PumpCheckins(comm);
}

void RootCheckin::PumpCheckins(LiveComm& comm) {
  const WireProfile& p = *c_.profile;
  RootProgress& root = comm.root;
  while (root.checkins_outstanding < c_.config->max_concurrent_checkins && root.next_checkin < comm.n) {
    const int v = root.next_checkin++;
    if (comm.real[v]) continue;
    Bytes ext(p.ext_info_size, 0);
    WriteAt<int32_t>(ext.data(), p.ext_rank, v);
    WriteAt<int32_t>(ext.data(), p.ext_nranks, comm.n);
    if (p.ext_iroot != SIZE_MAX) WriteAt<int32_t>(ext.data(), p.ext_iroot, 0);    // absent before 2.23
    if (p.ext_nroots != SIZE_MAX) WriteAt<int32_t>(ext.data(), p.ext_nroots, 1);
    const SockAddrBytes listen = EncodeSockAddr(comm.root_ep[v]);
    // Ring listener: real only where the predecessor is real; otherwise any
    // non-zero address (nobody dials it).
    const SockAddrBytes ring = EncodeSockAddr(comm.ring_ep[v].ip ? comm.ring_ep[v] : comm.p2p_ep[v]);
    std::copy(listen.begin(), listen.end(), ext.begin() + p.ext_listen_root_addr);
    std::copy(ring.begin(), ring.end(), ext.begin() + p.ext_connect_info);
    std::string msg = Int32Bytes(static_cast<int32_t>(ext.size()));
    msg.append(reinterpret_cast<const char*>(ext.data()), ext.size());
    Conn* conn = c_.conns->ConnectOut(root.addr, ConnRole::kOneShotOut, UniqueIdMagic(root.id), std::move(msg),
                                      comm.live_id, v, absl::StrCat("check-in ", comm.name, " v", v));
    conn->checkin = true;
    ++root.checkins_outstanding;
  }
}

void RootCheckin::OnDelivery(Conn& conn) {
  LiveComm* comm = c_.comms->Find(conn.comm);
  if (comm == nullptr) return;
  Bytes info;
  int32_t len = 0;
  const int got = TakeSized(conn, c_.profile->ring_connect_info_size, &info, &len);
  if (got == 0) return;
  if (got < 0) {
    c_.reporter->Diverge(absl::StrCat(comm->name, ": root delivery to virtual rank ", conn.rank, " has ", len,
                                      " bytes, expected ", c_.profile->ring_connect_info_size));
    c_.conns->Close(&conn);
    return;
  }
  comm->real_seen = true;
  CommTable::Touch(*comm);
  ++comm->root.deliveries_seen;
  const int v = conn.rank;
  const int next = (v + 1) % comm->n;
  c_.conns->Close(&conn);
  if (!comm->real[next]) return;  // in-memory neighbour
  auto addr = DecodeSockAddr(info.data());
  if (!addr.ok() || IsAllZero(info.data(), kSockAddrBytes)) {
    c_.reporter->Diverge(absl::StrCat(comm->name, ": root sent virtual rank ", v, " an unusable ring address"));
    return;
  }
  comm->next_ring[v] = *addr;
  c_.allgather->ConnectNext(*comm, v, *addr);
}

// The 12-byte header of a check-in on the shared NCCL_COMM_ID root (check-ins
// on a communicator's own root endpoint were checked on accept).
bool RootCheckin::TakeCheckinHeader(Conn& conn) {
  if (conn.expect_magic != 0) return true;
  if (conn.Available() < 12) return false;
  uint64_t magic;
  int32_t type;
  std::memcpy(&magic, conn.in.data() + conn.in_off, 8);
  std::memcpy(&type, conn.in.data() + conn.in_off + 8, 4);
  conn.in_off += 12;
  const uint64_t want = UniqueIdMagic(c_.shared_id);
  if (magic != want || type != kSocketTypeBootstrap) {
    c_.reporter->Reject("root header", absl::StrCat("root check-in from ", ToString(conn.remote), " with magic ",
                                                    magic, " type ", type, " (expected ", want, ", type 1): ",
                                                    "is NCCL_COMM_ID the same for every rank?"));
    c_.conns->Close(&conn);
    return false;
  }
  conn.expect_magic = magic;
  c_.conns->Identify(&conn);
  return true;
}

LiveComm* RootCheckin::CommOfCheckin(const Conn& conn) {
  if (conn.comm != 0) return c_.comms->Find(conn.comm);  // a comm's own root endpoint
  return shared_root_comm_ ? c_.comms->Find(*shared_root_comm_) : nullptr;
}

void RootCheckin::OnCheckin(Conn& conn) {
  const WireProfile& p = *c_.profile;
  if (!TakeCheckinHeader(conn)) return;
  Bytes ext;
  int32_t len = 0;
  const int got = TakeSized(conn, p.ext_info_size, &ext, &len);
  if (got == 0) return;
  if (got < 0) {
    RefuseOtherVersion(conn, len);
    return;
  }
  c_.conns->Close(&conn);
  const int32_t rank = ReadAt<int32_t>(ext.data(), p.ext_rank);
  const int32_t nranks = ReadAt<int32_t>(ext.data(), p.ext_nranks);
  LiveComm* comm = CommOfCheckin(conn);
  if (comm == nullptr) {
    c_.reporter->Diverge(absl::StrCat("unexpected root check-in from rank ", rank, " of ", nranks,
                                      ": no communicator initialisation is expected now"));
    return;
  }
  RootProgress& root = comm->root;
  if (nranks != comm->n || rank < 0 || rank >= comm->n || !comm->real[rank] || !root.real_ext[rank].empty() ||
      root.delivered) {
    const std::string why = absl::StrCat(comm->name, ": unexpected check-in from rank ", rank, " of ", nranks,
                                         " (plan: ", comm->n, " ranks, rank ",
                                         rank >= 0 && rank < comm->n && comm->real[rank] ? "real" : "virtual",
                                         ", real ranks checked in ", root.checked_in, ")");
    if (root.host == RootHost::kDaemonOwn) RefuseMismatch(*comm, ext, why);
    else c_.reporter->Diverge(why);
    return;
  }
  auto listen = DecodeSockAddr(ext.data() + p.ext_listen_root_addr);
  if (!listen.ok() || !c_.conns->DialAllowed(listen->ip)) {
    c_.reporter->Diverge(absl::StrCat(comm->name, ": check-in of rank ", rank, " from ", ToString(conn.remote),
                                      " names ", listen.ok() ? ToString(*listen) : std::string("no address"),
                                      " for its root delivery, which is not an expected real-rank address; "
                                      "ignored"));
    return;
  }
  comm->real_seen = true;
  CommTable::Touch(*comm);
  root.real_ext[rank] = std::move(ext);
  if (++root.checked_in == comm->num_real) Deliver(*comm);
}

// A real rank checked in at a root prismd minted for a graph communicator
// that it does not fit (another size, or a virtual rank's place): the
// program's group is not the graph's. Refusing its root listener with a
// socket of the wrong type makes its NCCL init fail at once instead of
// waiting forever; the reason stays on the communicator for /status.
void RootCheckin::RefuseMismatch(LiveComm& comm, const Bytes& ext, const std::string& why) {
  const WireProfile& p = *c_.profile;
  comm.root.mismatch = absl::StrCat(why, ": the program's group differs from the graph's communicator (order ",
                                    "or members); the real rank's NCCL init was refused");
  auto listen = DecodeSockAddr(ext.data() + p.ext_listen_root_addr);
  if (listen.ok() && c_.conns->DialAllowed(listen->ip)) {
    c_.conns->ConnectOut(*listen, ConnRole::kOneShotOut, UniqueIdMagic(comm.root.id), std::string(), kNoComm, -1,
                         "refuse mismatched check-in", kSocketTypeProxy);
  }
  c_.reporter->Diverge(comm.root.mismatch);
}

// A check-in whose size is another NCCL version's extInfo: that real rank
// would wait forever for its root delivery. Answer its root listener with a
// socket of the wrong type, which NCCL treats as fatal ("wrong type"), so its
// init fails at once; the divergence names both versions.
void RootCheckin::RefuseOtherVersion(Conn& conn, int32_t len) {
  const WireProfile& p = *c_.profile;
  const WireProfile* other = nullptr;  // the first version with this extInfo size
  std::string names;
  for (const WireProfile& w : AllWireProfiles()) {
    if (w.ext_info_size != static_cast<size_t>(len) || w.version_code == p.version_code) continue;
    if (other == nullptr) other = &w;
    absl::StrAppend(&names, names.empty() ? "" : " or ", w.name);
  }
  if (other != nullptr && conn.Available() < 4 + static_cast<size_t>(len)) return;  // wait for it all
  std::string why =
      absl::StrCat("root check-in of ", len, " bytes, expected ", p.ext_info_size, " (NCCL ", p.name, " extInfo)");
  if (other != nullptr) {
    const auto* ext = reinterpret_cast<const uint8_t*>(conn.in.data() + conn.in_off + 4);
    auto listen = DecodeSockAddr(ext + other->ext_listen_root_addr);
    if (listen.ok() && c_.conns->DialAllowed(listen->ip)) {
      c_.conns->ConnectOut(*listen, ConnRole::kOneShotOut, conn.expect_magic, std::string(), kNoComm, -1,
                           "refuse NCCL " + names, kSocketTypeProxy);
    }
    absl::StrAppend(&why, ": the real rank runs NCCL ", names, "; prismd plays ", p.name,
                    " (--wire-profile). Refused: its init fails now");
  } else {
    absl::StrAppend(&why, ": wrong NCCL version on a real rank?");
  }
  c_.conns->Close(&conn);
  c_.reporter->Diverge(why);
}

void RootCheckin::Deliver(LiveComm& comm) {
  const WireProfile& p = *c_.profile;
  if (comm.root.host == RootHost::kDaemonShared) shared_root_comm_.reset();
  comm.root.delivered = true;
  const uint64_t magic = UniqueIdMagic(comm.root.id);
  for (int r = 0; r < comm.n; ++r) {
    const int next = (r + 1) % comm.n;
    const std::vector<Bytes>& ext = comm.root.real_ext;
    if (comm.real[r]) {
      Bytes info(p.ring_connect_info_size, 0);
      if (comm.real[next]) {
        std::copy_n(ext[next].begin() + p.ext_connect_info, info.size(), info.begin());
      } else {
        const SockAddrBytes a = EncodeSockAddr(comm.ring_ep[next]);
        std::copy(a.begin(), a.end(), info.begin());
      }
      auto listen = DecodeSockAddr(ext[r].data() + p.ext_listen_root_addr);
      if (!listen.ok()) {
        c_.comms->Fail(comm, absl::StrCat("rank ", r, "'s root listen address: ", listen.status().message()));
        return;
      }
      std::string msg = Int32Bytes(static_cast<int32_t>(info.size()));
      msg.append(reinterpret_cast<const char*>(info.data()), info.size());
      c_.conns->ConnectOut(*listen, ConnRole::kOneShotOut, magic, std::move(msg), comm.live_id, r,
                           absl::StrCat("root delivery ", comm.name, " r", r));
    } else if (comm.real[next]) {
      auto ring = DecodeSockAddr(ext[next].data() + p.ext_connect_info);
      if (!ring.ok()) {
        c_.comms->Fail(comm, absl::StrCat("rank ", next, "'s ring address: ", ring.status().message()));
        return;
      }
      comm.next_ring[r] = *ring;
      c_.allgather->ConnectNext(comm, r, *ring);
    }
  }
}

}  // namespace prism::bootstrap
