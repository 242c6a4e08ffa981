#include "daemon/bootstrap/allgather_engine.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "daemon/bootstrap/split_layout.h"
#include "daemon/bootstrap/split_source.h"
#include "daemon/bootstrap/comm_table.h"
#include "daemon/bootstrap/reporter.h"
#include "spdlog/spdlog.h"

namespace prism::bootstrap {
namespace {

int Mod(int a, int n) { return ((a % n) + n) % n; }

int OutCount(const AgState& ag, const RingLink& l) { return l.from_real_prev ? ag.ring1_steps : ag.ring0_steps; }
int InCount(const AgState& ag, const RingLink& l) { return l.from_real_prev ? ag.ring0_steps : ag.ring1_steps; }
// Slice a virtual rank sends to its real neighbour at step s.
int OutSlice(const RingLink& l, int s, int n) { return l.from_real_prev ? Mod(l.vrank + s, n) : Mod(l.vrank - s, n); }
// Slice the real neighbour sends to the virtual rank at step s.
int InSlice(const RingLink& l, int s, int n) { return l.from_real_prev ? Mod(l.real_rank - s, n) : Mod(l.real_rank + s, n); }

}  // namespace

bool LinkFinished(const AgState& ag, const RingLink& l) {
  return l.in_step >= InCount(ag, l) && l.out_step >= OutCount(ag, l);
}
int LinkStepsIn(const AgState& ag, const RingLink& l) { return std::max(0, InCount(ag, l) - l.in_step); }
int LinkStepsOut(const AgState& ag, const RingLink& l) { return std::max(0, OutCount(ag, l) - l.out_step); }

const char* AgKindName(AgKind k) {
  switch (k) {
    case AgKind::kRingAllInfo: return "ringAllInfo";
    case AgKind::kPeerInfo: return "AG1 peerInfo";
    case AgKind::kTopoInfo: return "AG3 allGatherInfo";
    case AgKind::kSplitInfo: return "split info";
    case AgKind::kRingConnect: return "ring-connect register info";
  }
  return "?";
}

const char* CommPhaseName(CommPhase p) {
  switch (p) {
    case CommPhase::kWaiting: return "waiting";
    case CommPhase::kRoot: return "root check-in";
    case CommPhase::kRingOps: return "ring all-gathers";
    case CommPhase::kReady: return "ready";
    case CommPhase::kDone: return "destroyed";
  }
  return "?";
}

RingLink& AllGatherEngine::Link(LiveComm& comm, int32_t v, bool from_real_prev) {
  auto& slot = comm.links[v * 2 + (from_real_prev ? 1 : 0)];
  if (!slot) {
    slot = std::make_unique<RingLink>();
    slot->vrank = v;
    slot->from_real_prev = from_real_prev;
    slot->real_rank = from_real_prev ? (v + comm.n - 1) % comm.n : (v + 1) % comm.n;
  }
  return *slot;
}

void AllGatherEngine::QueueOps(LiveComm& comm, const std::vector<RingOp>& ops) {
  for (RingOp op : ops) {
    switch (op) {
      case RingOp::kRingAllInfo: comm.ag_queue.push_back(AgKind::kRingAllInfo); break;
      case RingOp::kPeerInfo: comm.ag_queue.push_back(AgKind::kPeerInfo); break;
      case RingOp::kTopoInfo: comm.ag_queue.push_back(AgKind::kTopoInfo); break;
    }
  }
  if (comm.phase == CommPhase::kWaiting) comm.phase = CommPhase::kRoot;
  ArmNextQueued(comm);
}

void AllGatherEngine::ArmOrQueue(LiveComm& comm, AgKind kind) {
  if (comm.ag) comm.ag_queue.push_back(kind);
  else Arm(comm, kind);
}

void AllGatherEngine::AttachRealPrev(LiveComm& comm, int32_t v, Conn& conn) {
  RingLink& l = Link(comm, v, true);
  if (l.conn != 0) {
    c_.reporter->Diverge(absl::StrCat(comm.name, ": second ring connection to virtual rank ", v));
    c_.conns->Close(&conn);
    return;
  }
  l.conn = conn.id;
  if (!l.pending_out.empty()) c_.conns->Send(&conn, l.pending_out);
  l.pending_out.clear();
}

void AllGatherEngine::ConnectNext(LiveComm& comm, int32_t v, const Ipv4Endpoint& real_listener) {
  RingLink& l = Link(comm, v, false);
  Conn* conn = c_.conns->ConnectOut(real_listener, ConnRole::kRingToRealNext, comm.magic, l.pending_out, comm.live_id,
                                    v, absl::StrCat("ring ", comm.name, " v", v, "->r", l.real_rank));
  l.pending_out.clear();
  l.conn = conn->id;
  Pump(comm);
}

void AllGatherEngine::ArmNextQueued(LiveComm& comm) {
  if (comm.ag || comm.ag_queue.empty()) return;
  const AgKind k = comm.ag_queue.front();
  comm.ag_queue.pop_front();
  Arm(comm, k);
}

void AllGatherEngine::Arm(LiveComm& comm, AgKind kind) {
  const WireProfile& p = *c_.profile;
  auto ag = std::make_unique<AgState>();
  ag->kind = kind;
  switch (kind) {
    case AgKind::kRingAllInfo: ag->size = p.ring_record_size; break;
    case AgKind::kPeerInfo: ag->size = p.peer_info.size; break;
    case AgKind::kTopoInfo: ag->size = p.topo_info.size; break;
    case AgKind::kSplitInfo: ag->size = p.split_info_size; break;
    case AgKind::kRingConnect: ag->size = p.ring_connect_ag_size; break;
  }
  ag->slices.assign(comm.n, {});
  ag->known.assign(comm.n, 0);
  if (p.allgather == AllGatherAlgorithm::kPlainRing) {
    ag->ring0_steps = comm.n - 1;
    ag->ring1_steps = 0;
  } else {
    ag->ring0_steps = comm.n / 2;
    ag->ring1_steps = comm.n % 2 == 0 ? comm.n / 2 - 1 : comm.n / 2;
  }
  ag->started = std::chrono::steady_clock::now();
  comm.ag = std::move(ag);
  if (kind == AgKind::kRingConnect) comm.ring_connect_started = true;
  for (auto& [key, l] : comm.links) {
    l->out_step = 0;
    l->in_step = 0;
    l->out_header_sent = false;
  }
  // Split colors are held too: frameworks derive the color from the member
  // list (PyTorch hashes it), so virtual members of a real rank's group adopt
  // the color that real rank sends (FillVirtualSlices).
  const bool needs_real = kind == AgKind::kPeerInfo || kind == AgKind::kTopoInfo ||
                          kind == AgKind::kRingConnect || kind == AgKind::kSplitInfo;
  if (!needs_real || c_.config->contributions == ContributionSource::kTemplate) {
    FillVirtualSlices(comm, nullptr);
  }
  Pump(comm);
}

void AllGatherEngine::FillVirtualSlices(LiveComm& comm, const Bytes* real_record) {
  AgState& ag = *comm.ag;
  const WireProfile& p = *c_.profile;
  const BootstrapPlan& plan = *c_.plan;
  // A split: each virtual rank passes the color and key of the pending
  // call's child that holds it. A child's color is the plan's, or the one a
  // real member passed (same group, the framework's color); a real
  // non-member (NOCOLOR) tells nothing.
  SplitLayout layout;
  std::vector<int32_t> child_color;
  if (ag.kind == AgKind::kSplitInfo && !comm.split.pending_calls.empty()) {
    const std::vector<uint32_t>& call = comm.split.pending_calls.front();
    layout = LayoutOfCall(comm, call, plan);
    for (uint32_t child : call) child_color.push_back(plan.comms[child].color);
    for (int r = 0; r < comm.n; ++r) {
      if (!comm.real[r] || !ag.known[r] || layout.child[r] < 0) continue;
      const int32_t real_color = ReadAt<int32_t>(ag.slices[r].data(), 4);
      if (real_color != kSplitNoColor) child_color[layout.child[r]] = real_color;
    }
  }
  const BootstrapConfig& cfg = *c_.config;
  Bytes peer_tmpl = real_record                       ? *real_record
                    : !cfg.peer_info_template.empty() ? cfg.peer_info_template
                                                      : DefaultPeerInfoTemplate(p);
  Bytes topo_tmpl = real_record                       ? *real_record
                    : !cfg.topo_info_template.empty() ? cfg.topo_info_template
                                                      : DefaultTopoInfoTemplate(p);
  for (int v = 0; v < comm.n; ++v) {
    if (comm.real[v]) continue;
    const VirtualIdentity who{v, comm.global[v], plan.ranks[comm.global[v]].node,
                              plan.ranks[comm.global[v]].local_gpu};
    switch (ag.kind) {
      case AgKind::kRingAllInfo:
        ag.slices[v] = MakeRingRecord(p, comm.p2p_ep[v], VirtualPidHash(comm.global[v]) ^ comm.hash);
        break;
      case AgKind::kPeerInfo: ag.slices[v] = MakePeerInfo(p, peer_tmpl, who, comm.hash); break;
      case AgKind::kTopoInfo: ag.slices[v] = MakeTopoInfo(p, topo_tmpl, who, comm.node_of[v]); break;
      case AgKind::kRingConnect: ag.slices[v] = MakeRingConnectRecord(p, real_record); break;
      case AgKind::kSplitInfo: {
        const bool in_child = !layout.child.empty() && layout.child[v] >= 0;
        ag.slices[v] = MakeSplitInfo(in_child ? layout.key[v] : 0,
                                     in_child ? child_color[layout.child[v]] : kSplitNoColor);
        break;
      }
    }
    ag.known[v] = 1;
  }
  ag.virtual_filled = true;
}

void AllGatherEngine::QueueOnLink(RingLink& l, const std::string& bytes) {
  Conn* conn = l.conn ? c_.conns->Find(l.conn) : nullptr;
  if (conn == nullptr) {
    l.pending_out += bytes;
    return;
  }
  c_.conns->Send(conn, bytes);
}

void AllGatherEngine::PumpLinkOut(LiveComm& comm, RingLink& l) {
  AgState& ag = *comm.ag;
  const int32_t size = static_cast<int32_t>(ag.size);
  // Every step whose slice is known goes out in one write: a split of 8192
  // ranks is 8191 steps, and a send (and an epoll change) per header and
  // slice cost prismd 0.2 s of system calls per split (bench/bootstrap_split_bench).
  std::string out;
  while (l.out_step < OutCount(ag, l)) {
    if (!l.out_header_sent) {
      out.append(reinterpret_cast<const char*>(&size), 4);
      l.out_header_sent = true;
    }
    const int slice = OutSlice(l, l.out_step, comm.n);
    if (!ag.known[slice]) break;
    out.append(ag.slices[slice].begin(), ag.slices[slice].end());
    ++l.out_step;
    l.out_header_sent = false;
  }
  if (!out.empty()) QueueOnLink(l, out);
}

void AllGatherEngine::ParseLinkIn(LiveComm& comm, RingLink& l, Conn& conn) {
  AgState& ag = *comm.ag;
  while (l.in_step < InCount(ag, l) && conn.Available() >= 4) {
    int32_t size = 0;
    std::memcpy(&size, conn.in.data() + conn.in_off, 4);
    if (size != static_cast<int32_t>(ag.size)) {
      c_.comms->Fail(comm, absl::StrCat("real rank ", l.real_rank, " sent a ", size, "-byte slice header at step ",
                                        l.in_step, " of ", AgKindName(ag.kind), " (expected ", ag.size,
                                        " bytes, NCCL ", c_.profile->name, " profile)"));
      return;
    }
    if (conn.Available() < 4 + ag.size) return;
    const auto* data = reinterpret_cast<const uint8_t*>(conn.in.data() + conn.in_off + 4);
    const int slice = InSlice(l, l.in_step, comm.n);
    conn.in_off += 4 + ag.size;
    ++l.in_step;
    CommTable::Touch(comm);
    const uint64_t gen = c_.comms->job_gen();
    OnSliceReceived(comm, slice, data, l.real_rank);
    if (gen != c_.comms->job_gen()) return;
  }
}

void AllGatherEngine::OnSliceReceived(LiveComm& comm, int slice, const uint8_t* data, int32_t from_real) {
  AgState& ag = *comm.ag;
  if (ag.known[slice]) {
    if (!std::equal(ag.slices[slice].begin(), ag.slices[slice].end(), data)) {
      c_.reporter->Diverge(absl::StrCat(comm.name, ": ", AgKindName(ag.kind), " slice ", slice,
                                        " forwarded by real rank ", from_real, " differs from the known one"));
    }
    return;
  }
  ag.slices[slice].assign(data, data + ag.size);
  ag.known[slice] = 1;
  if (ag.kind == AgKind::kPeerInfo && comm.real[slice] && c_.profile->peer_info.version != SIZE_MAX) {
    // Refuse another NCCL at once: closing its sockets makes the real rank's
    // init fail with a socket error instead of waiting on a protocol that
    // differs (wire profiles are per version).
    const WireProfile& p = *c_.profile;
    const int32_t version = ReadAt<int32_t>(data, p.peer_info.version);
    if (version != p.version_code) {
      c_.comms->Fail(comm, absl::StrCat("real rank ", slice, " runs NCCL version code ", version,
                                        " but prismd plays the ", p.name, " profile (", p.version_code,
                                        "): run the real ranks with NCCL ", p.name,
                                        " or start prismd with the matching --wire-profile"));
      return;
    }
  }
  if (ag.virtual_filled || !comm.real[slice]) return;
  const uint64_t gen = c_.comms->job_gen();
  const bool ready = ReadyToFill(comm, slice);
  if (gen != c_.comms->job_gen()) return;  // a split it cannot follow failed the job
  if (ready) {
    const Bytes record = ag.slices[slice];
    FillVirtualSlices(comm, &record);
  }
}

// Virtual slices are filled from the first real record, except in a split
// all-gather, where a real non-member's record (NOCOLOR) does not tell a
// group's color: wait for a real member's record in every child of the call
// that has a real member, or for every real rank that has a virtual ring
// neighbour (their own slices reach prismd at step 0 without waiting, so
// this cannot deadlock). Without a pending call the split source decides
// (split_source.h).
bool AllGatherEngine::ReadyToFill(LiveComm& comm, int real_slice) {
  const AgState& ag = *comm.ag;
  if (ag.kind != AgKind::kSplitInfo) return true;
  if (comm.split.pending_calls.empty() || c_.splits->Learning(comm)) {
    const absl::StatusOr<bool> ready = c_.splits->OnRealSplitSlice(comm, real_slice, EveryRealSliceKnown(comm));
    if (ready.ok()) return *ready;
    c_.comms->Fail(comm, std::string(ready.status().message()));
    return false;
  }
  const std::vector<uint32_t>& call = comm.split.pending_calls.front();
  const SplitLayout layout = LayoutOfCall(comm, call, *c_.plan);
  std::vector<char> real_member(call.size(), 0), real_known(call.size(), 0);
  for (int r = 0; r < comm.n; ++r) {
    if (!comm.real[r] || layout.child[r] < 0) continue;
    real_member[layout.child[r]] = 1;
    real_known[layout.child[r]] |= ag.known[r];
  }
  return real_member == real_known || EveryRealSliceKnown(comm);
}

bool AllGatherEngine::EveryRealSliceKnown(const LiveComm& comm) const {
  const AgState& ag = *comm.ag;
  for (int r = 0; r < comm.n; ++r) {
    if (!comm.real[r] || ag.known[r]) continue;
    const bool virtual_neighbour = !comm.real[(r + 1) % comm.n] || !comm.real[(r + comm.n - 1) % comm.n];
    if (virtual_neighbour) return false;
  }
  return true;
}

bool AllGatherEngine::Complete(const LiveComm& comm) const {
  const AgState& ag = *comm.ag;
  for (const auto& [key, l] : comm.links) {
    if (l->conn == 0 || l->in_step < InCount(ag, *l) || l->out_step < OutCount(ag, *l)) return false;
  }
  return true;
}

void AllGatherEngine::Pump(LiveComm& comm) {
  const uint64_t gen = c_.comms->job_gen();
  while (comm.ag) {
    for (auto& [key, l] : comm.links) {
      PumpLinkOut(comm, *l);
      Conn* conn = l->conn ? c_.conns->Find(l->conn) : nullptr;
      if (conn != nullptr) ParseLinkIn(comm, *l, *conn);
      if (gen != c_.comms->job_gen()) return;
    }
    // Parsing may have revealed the template: pump the outputs again.
    for (auto& [key, l] : comm.links) PumpLinkOut(comm, *l);
    if (!Complete(comm)) return;
    Finish(comm);
    if (gen != c_.comms->job_gen()) return;
  }
  // Idle ring: a real rank may have started an all-gather we arm reactively.
  for (auto& [key, l] : comm.links) {
    Conn* conn = l->conn ? c_.conns->Find(l->conn) : nullptr;
    if (conn != nullptr && conn->Available() >= 4) {
      if (TryArmReactive(comm, *l, *conn)) return;  // Arm pumped already
      if (gen != c_.comms->job_gen()) return;
    }
  }
}

bool AllGatherEngine::TryArmReactive(LiveComm& comm, RingLink& l, Conn& conn) {
  int32_t size = 0;
  std::memcpy(&size, conn.in.data() + conn.in_off, 4);
  const WireProfile& p = *c_.profile;
  if (size == static_cast<int32_t>(p.split_info_size)) {
    if (comm.split.pending_calls.empty()) c_.splits->OnSplitWithoutCall(comm, l.real_rank);
    Arm(comm, AgKind::kSplitInfo);
    return true;
  }
  if (p.ring_connect_ag_size > 0 && size == static_cast<int32_t>(p.ring_connect_ag_size) &&
      !comm.ring_connect_started) {
    Arm(comm, AgKind::kRingConnect);
    return true;
  }
  c_.comms->Fail(comm, absl::StrCat("real rank ", l.real_rank, " started an all-gather of ", size,
                                    "-byte slices that prismd does not expect (expected a split (",
                                    p.split_info_size, " B) or the ring-connect all-gather (",
                                    p.ring_connect_ag_size, " B)); is the env as configured?"));
  return false;
}

// What an all-gather taught prismd about the real ranks.
void AllGatherEngine::TakeResults(LiveComm& comm) {
  const AgState& ag = *comm.ag;
  const WireProfile& p = *c_.profile;
  std::optional<int> first_real;
  for (int r = 0; r < comm.n; ++r) {
    if (comm.real[r] && !first_real) first_real = r;
  }
  switch (ag.kind) {
    case AgKind::kRingAllInfo:
      for (int r = 0; r < comm.n; ++r) {
        if (!comm.real[r]) continue;
        auto a = DecodeSockAddr(ag.slices[r].data() + p.ring_record_p2p);
        if (a.ok()) comm.real_p2p[r] = *a;
        else c_.reporter->Diverge(absl::StrCat(comm.name, ": rank ", r, " P2P address: ", a.status().message()));
      }
      break;
    case AgKind::kPeerInfo:
      for (int r = 0; r < comm.n; ++r) {
        if (!comm.real[r]) continue;
        const int32_t version = p.peer_info.version == SIZE_MAX
                                    ? p.version_code
                                    : ReadAt<int32_t>(ag.slices[r].data(), p.peer_info.version);
        if (version != p.version_code) {
          c_.reporter->Diverge(absl::StrCat(comm.name, ": real rank ", r, " runs NCCL version code ", version,
                                            " but prismd plays the ", p.name, " profile (", p.version_code,
                                            "): pass --wire-profile to match"));
        }
        const uint64_t host = ReadAt<uint64_t>(ag.slices[r].data(), p.peer_info.host_hash);
        for (int v = 0; v < comm.n; ++v) {
          if (!comm.real[v] && ReadAt<uint64_t>(ag.slices[v].data(), p.peer_info.host_hash) == host) {
            c_.reporter->Diverge(absl::StrCat(comm.name, ": virtual rank ", v, " has real rank ", r, "'s hostHash"));
            break;
          }
        }
      }
      if (first_real) comm.real_peer_info = ag.slices[*first_real];
      break;
    case AgKind::kTopoInfo:
      if (first_real) comm.real_topo_info = ag.slices[*first_real];
      break;
    case AgKind::kSplitInfo:
      break;
    case AgKind::kRingConnect:
      if (first_real) comm.real_ring_connect = ag.slices[*first_real];
      break;
  }
}

void AllGatherEngine::Finish(LiveComm& comm) {
  c_.reporter->Update([](BootstrapStats& s) { ++s.allgathers_completed; });
  spdlog::debug("bootstrap: {}: {} done", comm.name, AgKindName(comm.ag->kind));
  TakeResults(comm);
  const AgKind done = comm.ag->kind;
  if (done == AgKind::kSplitInfo) {
    const uint64_t gen = c_.comms->job_gen();
    c_.split_events->OnSplitGathered(comm);
    if (gen != c_.comms->job_gen()) return;
  }
  comm.ag.reset();
  if (done == AgKind::kSplitInfo) c_.split_events->ReplayEarlyMessages(comm);
  if (done == AgKind::kTopoInfo && comm.phase != CommPhase::kReady) {
    const uint64_t gen = c_.comms->job_gen();
    c_.comms->Ready(comm);
    if (gen != c_.comms->job_gen()) return;
  }
  ArmNextQueued(comm);
}

void AllGatherEngine::OnLinkClosed(LiveComm& comm, int32_t v, bool from_real_prev, bool leftover) {
  RingLink& l = Link(comm, v, from_real_prev);
  l.closed = true;
  // A real rank that finished its part of the current all-gather may close
  // (destroy) before prismd has read its other socket: only a link that
  // still owes steps means the rank died mid-protocol.
  const bool unfinished = comm.ag ? !LinkFinished(*comm.ag, l) : comm.phase != CommPhase::kReady;
  if (unfinished || leftover) {
    c_.comms->Fail(comm, absl::StrCat("real rank ", l.real_rank, " closed its ring connection to ", "virtual rank ",
                                      l.vrank, " mid-protocol",
                                      comm.ag ? absl::StrCat(" (during ", AgKindName(comm.ag->kind), ")")
                                              : std::string()));
    return;
  }
  const uint64_t gen = c_.comms->job_gen();
  if (comm.ag) Pump(comm);
  if (gen == c_.comms->job_gen() && !comm.ag) c_.comms->MaybeDone(comm);
}

}  // namespace prism::bootstrap
