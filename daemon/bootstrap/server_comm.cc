// BootstrapServer: job and communicator lifecycle, split, divergences.
#include <algorithm>
#include <tuple>

#include "absl/strings/str_cat.h"
#include "daemon/bootstrap/bootstrap_server.h"
#include "spdlog/spdlog.h"

namespace prism::bootstrap {

LiveComm* BootstrapServer::Comm(uint32_t live_id) {
  auto it = comms_.find(live_id);
  return it == comms_.end() ? nullptr : it->second.get();
}

void BootstrapServer::Diverge(const std::string& message) {
  spdlog::warn("bootstrap: divergence: {}", message);
  std::lock_guard<std::mutex> lock(stats_mu_);
  ++stats_.divergences;
  stats_.recent_divergences.push_back(message);
  if (stats_.recent_divergences.size() > 32) {
    stats_.recent_divergences.erase(stats_.recent_divergences.begin());
  }
}

void BootstrapServer::StartJob() {
  ++job_gen_;
  comms_.clear();
  live_of_plan_.assign(plan_.comms.size(), std::nullopt);
  plan_done_.assign(plan_.comms.size(), 0);
  next_init_plan_ = 0;
  current_root_comm_.reset();
  job_active_ = true;
  {
    std::lock_guard<std::mutex> lock(stats_mu_);
    ++stats_.jobs_started;
  }
  AdvanceInitOrder();
}

void BootstrapServer::FinishJob(bool failed, const std::string& why) {
  if (failed) spdlog::error("bootstrap: job failed: {}; ready for the next job", why);
  job_active_ = false;
  std::vector<Conn*> all;
  for (auto& [id, c] : conns_) all.push_back(c.get());
  for (Conn* c : all) CloseConn(c);
  for (auto& [id, c] : comms_) FreeEndpoints(*c);
  {
    std::lock_guard<std::mutex> lock(stats_mu_);
    ++(failed ? stats_.jobs_failed : stats_.jobs_completed);
  }
  job_active_ = false;
  StartJob();
}

void BootstrapServer::AdvanceInitOrder() {
  while (next_init_plan_ < plan_.comms.size()) {
    const PlanComm& pc = plan_.comms[next_init_plan_];
    if (pc.parent) {  // splits are driven by their parent's split all-gather
      ++next_init_plan_;
      continue;
    }
    if (live_of_plan_[pc.id]) {
      if (!plan_done_[pc.id]) return;  // one root at a time (NCCL_COMM_ID is shared)
      ++next_init_plan_;
      continue;
    }
    const bool any_real = std::any_of(pc.members.begin(), pc.members.end(),
                                      [&](uint32_t g) { return plan_.IsReal(g); });
    const bool any_virtual = std::any_of(pc.members.begin(), pc.members.end(),
                                         [&](uint32_t g) { return !plan_.IsReal(g); });
    if (!any_real || !any_virtual) {  // nothing on the wire for prismd
      plan_done_[pc.id] = 1;
      ++next_init_plan_;
      continue;
    }
    LiveComm& c = CreateComm(pc, pc.members, CommHashOfId(unique_id_), std::nullopt);
    StartRoot(c);
    return;
  }
}

LiveComm& BootstrapServer::CreateComm(const PlanComm& pc, std::vector<uint32_t> members,
                                      uint64_t hash, std::optional<uint32_t> parent) {
  auto owned = std::make_unique<LiveComm>();
  LiveComm& c = *owned;
  c.live_id = next_live_id_++;
  c.plan_id = pc.id;
  c.name = pc.name;
  c.n = static_cast<int>(members.size());
  c.global = std::move(members);
  c.hash = hash;
  c.magic = parent ? hash : UniqueIdMagic(unique_id_);
  c.parent = parent;
  c.init_started = std::chrono::steady_clock::now();
  c.real.resize(c.n);
  for (int r = 0; r < c.n; ++r) {
    c.real[r] = plan_.IsReal(c.global[r]) ? 1 : 0;
    c.num_real += c.real[r];
  }
  c.top_rank.resize(c.n);
  LiveComm* p = parent ? Comm(*parent) : nullptr;
  for (int r = 0; r < c.n; ++r) {
    c.top_rank[r] = r;
    if (p == nullptr) continue;
    const auto it = std::find(p->global.begin(), p->global.end(), c.global[r]);
    if (it != p->global.end()) c.top_rank[r] = p->top_rank[it - p->global.begin()];
  }
  c.ring_ep.assign(c.n, {});
  c.p2p_ep.assign(c.n, {});
  c.root_ep.assign(c.n, {});
  c.real_p2p.assign(c.n, std::nullopt);
  c.next_ring.assign(c.n, std::nullopt);
  c.real_ext.assign(c.n, {});
  for (int r = 0; r < c.n; ++r) {
    if (c.real[r]) continue;
    auto alloc = [&](EndpointKind k) {
      auto e = AllocEndpoint(c.live_id, r, k);
      if (!e.ok()) Diverge(absl::StrCat(c.name, ": endpoint for rank ", r, ": ", e.status().message()));
      return e.ok() ? *e : Ipv4Endpoint{};
    };
    c.p2p_ep[r] = alloc(EndpointKind::kP2p);
    if (c.real[(r + c.n - 1) % c.n]) c.ring_ep[r] = alloc(EndpointKind::kRing);
    if (!parent && c.real[0]) c.root_ep[r] = alloc(EndpointKind::kRootDelivery);
  }
  // Virtual NCCL nodes: virtual ranks of one graph node, ascending comm rank.
  std::map<uint32_t, VirtualNodeLayout> nodes;
  for (int r = 0; r < c.n; ++r) {
    if (!c.real[r]) nodes[plan_.ranks[c.global[r]].node].ranks.push_back(r);
  }
  c.node_of.resize(c.n);
  for (int r = 0; r < c.n; ++r) {
    if (!c.real[r]) c.node_of[r] = nodes[plan_.ranks[c.global[r]].node];
  }
  for (int r = 0; r < c.n && c.n > 1; ++r) {
    if (!c.real[r]) continue;
    if (!c.real[(r + 1) % c.n]) Link(c, (r + 1) % c.n, true);
    if (!c.real[(r + c.n - 1) % c.n]) Link(c, (r + c.n - 1) % c.n, false);
  }
  for (const PlanComm& child : plan_.comms) {
    if (child.parent && *child.parent == pc.id) c.pending_split_calls.push_back(child.id);
  }
  if (pc.id < live_of_plan_.size()) live_of_plan_[pc.id] = c.live_id;
  spdlog::info("bootstrap: {} (commHash {:#x}): {} ranks, {} real", c.name, c.hash, c.n,
               c.num_real);
  comms_[c.live_id] = std::move(owned);
  return c;
}

void BootstrapServer::CommReady(LiveComm& c) {
  c.phase = CommPhase::kReady;
  if (c.plan_id < plan_done_.size()) plan_done_[c.plan_id] = 1;
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() -
                                                    c.init_started).count();
  {
    std::lock_guard<std::mutex> lock(stats_mu_);
    ++stats_.comms_initialized;
    stats_.last_init_summary =
        absl::StrCat(c.name, ": ", c.n, " ranks, ", c.num_real, " real, ", secs, " s");
  }
  spdlog::info("bootstrap: {} initialized ({} ranks) in {:.3f} s", c.name, c.n, secs);
  AdvanceInitOrder();
}

void BootstrapServer::MaybeCommDone(LiveComm& c) {
  if (c.phase == CommPhase::kDone) return;
  for (auto& [key, link] : c.links) {
    if (!link->closed) return;
  }
  c.phase = CommPhase::kDone;
  FreeEndpoints(c);
  {
    std::lock_guard<std::mutex> lock(stats_mu_);
    ++stats_.comms_destroyed;
  }
  spdlog::info("bootstrap: {} destroyed by its real ranks", c.name);
  for (auto& [id, other] : comms_) {
    const bool idle_root = other->phase == CommPhase::kRoot && !other->real_seen;
    if (other->phase != CommPhase::kDone && !idle_root) return;
  }
  FinishJob(false, "");
}

void BootstrapServer::FailComm(LiveComm& c, const std::string& why) {
  Diverge(absl::StrCat(c.name, ": ", why));
  {
    std::lock_guard<std::mutex> lock(stats_mu_);
    ++stats_.real_rank_failures;
  }
  FinishJob(true, absl::StrCat(c.name, ": ", why));
}

void BootstrapServer::CompleteSplit(LiveComm& parent) {
  const AgState& ag = *parent.ag;
  ++parent.split_count;
  std::optional<uint32_t> call;
  if (!parent.pending_split_calls.empty()) {
    call = parent.pending_split_calls.front();
    parent.pending_split_calls.pop_front();
  }
  // color -> [(key, parent rank)]
  std::map<int32_t, std::vector<std::pair<int32_t, int32_t>>> groups;
  for (int r = 0; r < parent.n; ++r) {
    const int32_t key = ReadAt<int32_t>(ag.slices[r].data(), 0);
    const int32_t color = ReadAt<int32_t>(ag.slices[r].data(), 4);
    if (color != kSplitNoColor) groups[color].push_back({key, r});
  }
  parent.children_by_color.clear();
  parent.split_msgs_pending = 0;
  bool planned_child_live = false;
  for (auto& [color, list] : groups) {
    std::sort(list.begin(), list.end());
    std::vector<uint32_t> members;
    for (auto& [key, r] : list) members.push_back(parent.global[r]);
    PlanComm pc;
    // The planned group: same color, or the plan's members under the color a
    // real member chose (frameworks derive colors themselves).
    const bool planned = call && (plan_.comms[*call].color == color || plan_.comms[*call].members == members);
    if (planned) {
      pc = plan_.comms[*call];
      if (pc.members != members) {
        Diverge(absl::StrCat(parent.name, ": split #", parent.split_count, " color ", color,
                             " produced ", members.size(), " members differing from the plan's ",
                             pc.name, " (", pc.members.size(), " members); following NCCL"));
      }
    } else {
      Diverge(absl::StrCat(parent.name, ": split #", parent.split_count, " color ", color,
                           " is not in the plan (expected ",
                           call ? plan_.comms[*call].name : std::string("no split"), ")"));
      pc.id = static_cast<uint32_t>(plan_.comms.size());  // unplanned
      pc.name = absl::StrCat(parent.name, "/split", parent.split_count, "/color", color);
    }
    const bool any_real = std::any_of(members.begin(), members.end(),
                                      [&](uint32_t g) { return plan_.IsReal(g); });
    const bool any_virtual = std::any_of(members.begin(), members.end(),
                                         [&](uint32_t g) { return !plan_.IsReal(g); });
    if (!any_real || !any_virtual) {
      if (planned) plan_done_[pc.id] = 1;
      continue;
    }
    LiveComm& child = CreateComm(pc, members, ChildCommHash(parent.hash, parent.split_count, color),
                                 parent.live_id);
    parent.children_by_color[color] = child.live_id;
    planned_child_live |= planned;
    // COMMSPLIT: every virtual child rank with a real predecessor sends it its
    // child ring address; every one with a real successor waits for its.
    for (int v = 0; v < child.n; ++v) {
      if (child.real[v]) continue;
      const int pred = (v + child.n - 1) % child.n;
      const int succ = (v + 1) % child.n;
      const int32_t v_parent = list[v].second;
      if (child.real[pred]) {
        Bytes info(profile_->ring_connect_info_size, 0);
        const SockAddrBytes a = EncodeSockAddr(child.ring_ep[v]);
        std::copy(a.begin(), a.end(), info.begin());
        SendP2p(parent, v_parent, list[pred].second, profile_->tag_comm_split, info);
      }
      if (child.real[succ]) ++parent.split_msgs_pending;
    }
    StartRingOps(child, profile_->split_child_ops);
  }
  if (call && !planned_child_live) plan_done_[*call] = 1;
}

void BootstrapServer::HandleSplitMessage(LiveComm& parent, const PendingMsg& m) {
  // A message for the latest split's children, or an early one for the next
  // split (its sender finished that split's all-gather before prismd did).
  if (parent.split_msgs_pending == 0) {
    parent.early_split_msgs.push_back(m);
    return;
  }
  for (auto& [color, live] : parent.children_by_color) {
    LiveComm* child = Comm(live);
    if (child == nullptr) continue;
    const uint32_t to_g = parent.global[m.to_rank], from_g = parent.global[m.from_rank];
    const auto to_it = std::find(child->global.begin(), child->global.end(), to_g);
    const auto from_it = std::find(child->global.begin(), child->global.end(), from_g);
    if (to_it == child->global.end() || from_it == child->global.end()) continue;
    const int v = static_cast<int>(to_it - child->global.begin());
    const int r = static_cast<int>(from_it - child->global.begin());
    if (r != (v + 1) % child->n || child->next_ring[v] || m.payload.size() < kSockAddrBytes) {
      continue;  // not this child's ring: a later split's message
    }
    auto addr = DecodeSockAddr(m.payload.data());
    if (!addr.ok()) {
      Diverge(absl::StrCat(child->name, ": ", addr.status().message()));
      return;
    }
    --parent.split_msgs_pending;
    child->next_ring[v] = *addr;
    ConnectRingNext(*child, v, *addr);
    return;
  }
  parent.early_split_msgs.push_back(m);  // for the next split
}

}  // namespace prism::bootstrap
