// BootstrapServer: the ring all-gather engine.
//
// Only links between a virtual rank and a real neighbour touch the wire. The
// all-gather's slices are kept once per communicator; on every boundary link
// the slice sent (received) at step s follows from the double-ring formula
// (wire notes 2.6), so a link sends step s as soon as that slice is known:
// virtual slices are synthesised, real slices are learnt from the wire. This
// is never later than a true virtual rank would have it, so it cannot
// deadlock, and it costs O(n) memory and O(boundary links x n) wire bytes.
#include "absl/strings/str_cat.h"
#include "daemon/bootstrap/bootstrap_server.h"
#include "spdlog/spdlog.h"

namespace prism::bootstrap {
namespace {

int Mod(int a, int n) { return ((a % n) + n) % n; }

int OutCount(const AgState& ag, const RingLink& l) {
  return l.from_real_prev ? ag.ring1_steps : ag.ring0_steps;
}
int InCount(const AgState& ag, const RingLink& l) {
  return l.from_real_prev ? ag.ring0_steps : ag.ring1_steps;
}
// Slice a virtual rank sends to its real neighbour at step s.
int OutSlice(const RingLink& l, int s, int n) {
  return l.from_real_prev ? Mod(l.vrank + s, n) : Mod(l.vrank - s, n);
}
// Slice the real neighbour sends to the virtual rank at step s.
int InSlice(const RingLink& l, int s, int n) {
  return l.from_real_prev ? Mod(l.real_rank - s, n) : Mod(l.real_rank + s, n);
}

}  // namespace

bool LinkFinished(const AgState& ag, const RingLink& l) {
  return l.in_step >= InCount(ag, l) && l.out_step >= OutCount(ag, l);
}

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

void BootstrapServer::ArmNextQueued(LiveComm& c) {
  if (c.ag || c.ag_queue.empty()) return;
  const AgKind k = c.ag_queue.front();
  c.ag_queue.pop_front();
  ArmAllGather(c, k);
}

void BootstrapServer::ArmAllGather(LiveComm& c, AgKind kind) {
  const WireProfile& p = *profile_;
  auto ag = std::make_unique<AgState>();
  ag->kind = kind;
  switch (kind) {
    case AgKind::kRingAllInfo: ag->size = p.ring_record_size; break;
    case AgKind::kPeerInfo: ag->size = p.peer_info.size; break;
    case AgKind::kTopoInfo: ag->size = p.topo_info.size; break;
    case AgKind::kSplitInfo: ag->size = p.split_info_size; break;
    case AgKind::kRingConnect: ag->size = p.ring_connect_ag_size; break;
  }
  ag->slices.assign(c.n, {});
  ag->known.assign(c.n, 0);
  if (p.allgather == AllGatherAlgorithm::kPlainRing) {
    ag->ring0_steps = c.n - 1;
    ag->ring1_steps = 0;
  } else {
    ag->ring0_steps = c.n / 2;
    ag->ring1_steps = c.n % 2 == 0 ? c.n / 2 - 1 : c.n / 2;
  }
  ag->started = std::chrono::steady_clock::now();
  c.ag = std::move(ag);
  if (kind == AgKind::kRingConnect) c.ring_connect_started = true;
  for (auto& [key, l] : c.links) {
    l->out_step = 0;
    l->in_step = 0;
    l->out_header_sent = false;
  }
  // Split colors are held too: frameworks derive the color from the member
  // list (PyTorch hashes it), so virtual members of a real rank's group adopt
  // the color that real rank sends (FillVirtualSlices).
  const bool needs_real = kind == AgKind::kPeerInfo || kind == AgKind::kTopoInfo ||
                          kind == AgKind::kRingConnect || kind == AgKind::kSplitInfo;
  if (!needs_real || config_.contributions == ContributionSource::kTemplate) {
    FillVirtualSlices(c, nullptr);
  }
  PumpAllGather(c);
}

void BootstrapServer::FillVirtualSlices(LiveComm& c, const Bytes* real_record, int real_slice) {
  AgState& ag = *c.ag;
  const WireProfile& p = *profile_;
  const PlanComm* call = nullptr;
  int32_t split_color = 0;
  if (ag.kind == AgKind::kSplitInfo && !c.pending_split_calls.empty()) {
    call = &plan_.comms[c.pending_split_calls.front()];
    split_color = call->color;
    // A real member's own color wins over the plan's (same group, the
    // framework's color); a real non-member (NOCOLOR) tells nothing.
    if (real_record != nullptr && real_slice >= 0) {
      const int32_t real_color = ReadAt<int32_t>(real_record->data(), 4);
      const bool real_is_member = std::find(call->members.begin(), call->members.end(),
                                            c.global[real_slice]) != call->members.end();
      if (real_is_member && real_color != kSplitNoColor) split_color = real_color;
    }
  }
  Bytes peer_tmpl = real_record ? *real_record
                    : !config_.peer_info_template.empty() ? config_.peer_info_template
                                                          : DefaultPeerInfoTemplate(p);
  Bytes topo_tmpl = real_record ? *real_record
                    : !config_.topo_info_template.empty() ? config_.topo_info_template
                                                          : DefaultTopoInfoTemplate(p);
  for (int v = 0; v < c.n; ++v) {
    if (c.real[v]) continue;
    const VirtualIdentity who{v, c.global[v], plan_.ranks[c.global[v]].node,
                              plan_.ranks[c.global[v]].local_gpu};
    switch (ag.kind) {
      case AgKind::kRingAllInfo:
        ag.slices[v] = MakeRingRecord(p, c.p2p_ep[v], VirtualPidHash(c.global[v]) ^ c.hash);
        break;
      case AgKind::kPeerInfo: ag.slices[v] = MakePeerInfo(p, peer_tmpl, who, c.hash); break;
      case AgKind::kTopoInfo: ag.slices[v] = MakeTopoInfo(p, topo_tmpl, who, c.node_of[v]); break;
      case AgKind::kRingConnect: ag.slices[v] = MakeRingConnectRecord(p, real_record); break;
      case AgKind::kSplitInfo: {
        int32_t key = 0, color = kSplitNoColor;
        if (call != nullptr) {
          for (size_t i = 0; i < call->members.size(); ++i) {
            if (call->members[i] == c.global[v]) {
              key = call->key0 + static_cast<int32_t>(i);
              color = split_color;
            }
          }
        }
        ag.slices[v] = MakeSplitInfo(key, color);
        break;
      }
    }
    ag.known[v] = 1;
  }
  ag.virtual_filled = true;
}

void BootstrapServer::QueueOnLink(LiveComm& c, RingLink& l, const std::string& bytes) {
  Conn* conn = l.conn ? FindConn(l.conn) : nullptr;
  if (conn == nullptr) {
    l.pending_out += bytes;
    return;
  }
  Send(conn, bytes);
}

void BootstrapServer::PumpLinkOut(LiveComm& c, RingLink& l) {
  AgState& ag = *c.ag;
  const int32_t size = static_cast<int32_t>(ag.size);
  while (l.out_step < OutCount(ag, l)) {
    if (!l.out_header_sent) {
      QueueOnLink(c, l, std::string(reinterpret_cast<const char*>(&size), 4));
      l.out_header_sent = true;
    }
    const int slice = OutSlice(l, l.out_step, c.n);
    if (!ag.known[slice]) return;
    QueueOnLink(c, l, std::string(ag.slices[slice].begin(), ag.slices[slice].end()));
    ++l.out_step;
    l.out_header_sent = false;
  }
}

void BootstrapServer::ParseLinkIn(LiveComm& c, RingLink& l, Conn* conn) {
  AgState& ag = *c.ag;
  while (l.in_step < InCount(ag, l) && conn->Available() >= 4) {
    int32_t size = 0;
    std::memcpy(&size, conn->in.data() + conn->in_off, 4);
    if (size != static_cast<int32_t>(ag.size)) {
      FailComm(c, absl::StrCat("real rank ", l.real_rank, " sent a ", size,
                               "-byte slice header at step ", l.in_step, " of ",
                               AgKindName(ag.kind), " (expected ", ag.size, " bytes, NCCL ",
                               profile_->name, " profile)"));
      return;
    }
    if (conn->Available() < 4 + ag.size) return;
    const auto* data = reinterpret_cast<const uint8_t*>(conn->in.data() + conn->in_off + 4);
    const int slice = InSlice(l, l.in_step, c.n);
    conn->in_off += 4 + ag.size;
    ++l.in_step;
    const uint64_t gen = job_gen_;
    OnSliceReceived(c, slice, data, l.real_rank);
    if (gen != job_gen_) return;
  }
}

void BootstrapServer::OnSliceReceived(LiveComm& c, int slice, const uint8_t* data,
                                      int32_t from_real) {
  AgState& ag = *c.ag;
  if (ag.known[slice]) {
    if (!std::equal(ag.slices[slice].begin(), ag.slices[slice].end(), data)) {
      Diverge(absl::StrCat(c.name, ": ", AgKindName(ag.kind), " slice ", slice,
                           " forwarded by real rank ", from_real, " differs from the known one"));
    }
    return;
  }
  ag.slices[slice].assign(data, data + ag.size);
  ag.known[slice] = 1;
  if (ag.kind == AgKind::kPeerInfo && c.real[slice]) {
    // Refuse another NCCL at once: closing its sockets makes the real rank's
    // init fail with a socket error instead of waiting on a protocol that
    // differs (wire profiles are per version).
    const WireProfile& p = *profile_;
    const int32_t version = ReadAt<int32_t>(data, p.peer_info.version);
    if (version != p.version_code) {
      FailComm(c, absl::StrCat("real rank ", slice, " runs NCCL version code ", version,
                               " but prismd plays the ", p.name, " profile (", p.version_code,
                               "): run the real ranks with NCCL ", p.name,
                               " or start prismd with the matching --wire-profile"));
      return;
    }
  }
  if (!ag.virtual_filled && c.real[slice] && ReadyToFill(c, slice)) {
    const Bytes record = ag.slices[slice];
    FillVirtualSlices(c, &record, slice);
  }
}

// Virtual slices are filled from the first real record, except in a split
// all-gather, where a real non-member's record (NOCOLOR) does not tell the
// group's color: wait for a real member's record, or for every real rank
// that has a virtual ring neighbour (their own slices reach prismd at step 0
// without waiting, so this cannot deadlock).
bool BootstrapServer::ReadyToFill(const LiveComm& c, int real_slice) const {
  const AgState& ag = *c.ag;
  if (ag.kind != AgKind::kSplitInfo || c.pending_split_calls.empty()) return true;
  const PlanComm& call = plan_.comms[c.pending_split_calls.front()];
  const auto is_member = [&](int r) {
    return std::find(call.members.begin(), call.members.end(), c.global[r]) != call.members.end();
  };
  if (is_member(real_slice)) return true;
  for (int r = 0; r < c.n; ++r) {
    if (!c.real[r] || ag.known[r]) continue;
    const bool virtual_neighbour = !c.real[(r + 1) % c.n] || !c.real[(r + c.n - 1) % c.n];
    if (virtual_neighbour) return false;
  }
  return true;
}

bool BootstrapServer::AllGatherComplete(const LiveComm& c) const {
  const AgState& ag = *c.ag;
  for (const auto& [key, l] : c.links) {
    if (l->conn == 0 || l->in_step < InCount(ag, *l) || l->out_step < OutCount(ag, *l)) {
      return false;
    }
  }
  return true;
}

void BootstrapServer::PumpAllGather(LiveComm& c) {
  const uint64_t gen = job_gen_;
  while (c.ag) {
    for (auto& [key, l] : c.links) {
      PumpLinkOut(c, *l);
      Conn* conn = l->conn ? FindConn(l->conn) : nullptr;
      if (conn != nullptr) ParseLinkIn(c, *l, conn);
      if (gen != job_gen_) return;
    }
    // Parsing may have revealed the template: pump the outputs again.
    for (auto& [key, l] : c.links) PumpLinkOut(c, *l);
    if (!AllGatherComplete(c)) return;
    FinishAllGather(c);
    if (gen != job_gen_) return;
  }
  // Idle ring: a real rank may have started an all-gather we arm reactively.
  for (auto& [key, l] : c.links) {
    Conn* conn = l->conn ? FindConn(l->conn) : nullptr;
    if (conn != nullptr && conn->Available() >= 4) {
      if (TryArmReactive(c, *l, conn)) return;  // ArmAllGather pumped already
      if (gen != job_gen_) return;
    }
  }
}

bool BootstrapServer::TryArmReactive(LiveComm& c, RingLink& l, Conn* conn) {
  int32_t size = 0;
  std::memcpy(&size, conn->in.data() + conn->in_off, 4);
  const WireProfile& p = *profile_;
  if (size == static_cast<int32_t>(p.split_info_size)) {
    if (c.pending_split_calls.empty()) {
      Diverge(absl::StrCat(c.name, ": real rank ", l.real_rank,
                           " started a split the plan does not list; virtual ranks pass NOCOLOR"));
    }
    ArmAllGather(c, AgKind::kSplitInfo);
    return true;
  }
  if (size == static_cast<int32_t>(p.ring_connect_ag_size) && !c.ring_connect_started) {
    ArmAllGather(c, AgKind::kRingConnect);
    return true;
  }
  FailComm(c, absl::StrCat("real rank ", l.real_rank, " started an all-gather of ", size,
                           "-byte slices that prismd does not expect (expected a split (",
                           p.split_info_size, " B) or the ring-connect all-gather (",
                           p.ring_connect_ag_size, " B)); is the env as configured?"));
  return false;
}

void BootstrapServer::FinishAllGather(LiveComm& c) {
  AgState& ag = *c.ag;
  const WireProfile& p = *profile_;
  {
    std::lock_guard<std::mutex> lock(stats_mu_);
    ++stats_.allgathers_completed;
  }
  spdlog::debug("bootstrap: {}: {} done", c.name, AgKindName(ag.kind));
  std::optional<int> first_real;
  for (int r = 0; r < c.n; ++r) {
    if (c.real[r] && !first_real) first_real = r;
  }
  switch (ag.kind) {
    case AgKind::kRingAllInfo:
      for (int r = 0; r < c.n; ++r) {
        if (!c.real[r]) continue;
        auto a = DecodeSockAddr(ag.slices[r].data() + p.ring_record_p2p);
        if (a.ok()) c.real_p2p[r] = *a;
        else Diverge(absl::StrCat(c.name, ": rank ", r, " P2P address: ", a.status().message()));
      }
      break;
    case AgKind::kPeerInfo:
      for (int r = 0; r < c.n; ++r) {
        if (!c.real[r]) continue;
        const int32_t version = ReadAt<int32_t>(ag.slices[r].data(), p.peer_info.version);
        if (version != p.version_code) {
          Diverge(absl::StrCat(c.name, ": real rank ", r, " runs NCCL version code ", version,
                               " but prismd plays the ", p.name, " profile (", p.version_code,
                               "): pass --wire-profile to match"));
        }
        const uint64_t host = ReadAt<uint64_t>(ag.slices[r].data(), p.peer_info.host_hash);
        for (int v = 0; v < c.n; ++v) {
          if (!c.real[v] && ReadAt<uint64_t>(ag.slices[v].data(), p.peer_info.host_hash) == host) {
            Diverge(absl::StrCat(c.name, ": virtual rank ", v, " has real rank ", r, "'s hostHash"));
            break;
          }
        }
      }
      if (first_real) c.real_peer_info = ag.slices[*first_real];
      break;
    case AgKind::kTopoInfo:
      if (first_real) c.real_topo_info = ag.slices[*first_real];
      break;
    case AgKind::kSplitInfo: {
      const uint64_t gen = job_gen_;
      CompleteSplit(c);
      if (gen != job_gen_) return;
      break;
    }
    case AgKind::kRingConnect:
      if (first_real) c.real_ring_connect = ag.slices[*first_real];
      break;
  }
  const AgKind done = ag.kind;
  c.ag.reset();
  if (done == AgKind::kSplitInfo) {  // COMMSPLIT messages that came before the split ended
    std::vector<PendingMsg> early;
    early.swap(c.early_split_msgs);
    for (const PendingMsg& m : early) HandleSplitMessage(c, m);
  }
  if (done == AgKind::kTopoInfo && c.phase != CommPhase::kReady) {
    const uint64_t gen = job_gen_;
    CommReady(c);
    if (gen != job_gen_) return;
  }
  ArmNextQueued(c);
}

}  // namespace prism::bootstrap
