#include "daemon/bootstrap/comm_table.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "daemon/bootstrap/connection_table.h"
#include "daemon/bootstrap/reporter.h"
#include "daemon/bootstrap/split_source.h"
#include "spdlog/spdlog.h"

namespace prism::bootstrap {

LiveComm* CommTable::Find(uint32_t live_id) {
  auto it = comms_.find(live_id);
  return it == comms_.end() ? nullptr : it->second.get();
}

LiveComm* CommTable::FindByPlan(uint32_t plan_id) {
  if (plan_id >= live_of_plan_.size() || !live_of_plan_[plan_id]) return nullptr;
  return Find(*live_of_plan_[plan_id]);
}

void CommTable::MarkPlanDone(uint32_t plan_id) {
  if (plan_id < plan_done_.size()) plan_done_[plan_id] = 1;
}

void CommTable::Touch(LiveComm& comm) { comm.last_progress = std::chrono::steady_clock::now(); }

void CommTable::StartJob() {
  ++job_gen_;
  comms_.clear();
  c_.splits->StartJob();
  const size_t planned = c_.plan->comms.size();
  live_of_plan_.assign(planned, std::nullopt);
  plan_done_.assign(planned, 0);
  next_init_plan_ = 0;
  c_.starts->ForgetSharedRoot();
  job_active_ = true;
  c_.reporter->Update([](BootstrapStats& s) { ++s.jobs_started; });
  AdvanceInitOrder();
}

void CommTable::FinishJob(bool failed, const std::string& why) {
  if (failed) spdlog::error("bootstrap: job failed: {}; ready for the next job", why);
  job_active_ = false;
  c_.conns->CloseAll();
  for (auto& [id, comm] : comms_) FreeEndpoints(*comm);
  c_.reporter->Update([failed](BootstrapStats& s) { ++(failed ? s.jobs_failed : s.jobs_completed); });
  StartJob();
}

// With a shared NCCL_COMM_ID root, the plan's init communicators are played
// one at a time in plan order (they share the root address). Without it,
// communicators are started on demand (HostRoot/JoinRoot).
void CommTable::AdvanceInitOrder() {
  if (c_.config->comm_id.empty()) return;
  const BootstrapPlan& plan = *c_.plan;
  while (next_init_plan_ < plan.comms.size()) {
    const PlanComm& pc = plan.comms[next_init_plan_];
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
                                      [&](uint32_t g) { return plan.IsReal(g); });
    const bool any_virtual = std::any_of(pc.members.begin(), pc.members.end(),
                                         [&](uint32_t g) { return !plan.IsReal(g); });
    if (!any_real || !any_virtual) {  // nothing on the wire for prismd
      plan_done_[pc.id] = 1;
      ++next_init_plan_;
      continue;
    }
    LiveComm& comm = Create(pc, pc.members, CommHashOfId(c_.shared_id, c_.profile->comm_hash), UniqueIdMagic(c_.shared_id), std::nullopt);
    comm.root.id = c_.shared_id;
    comm.root.addr = c_.shared_root;
    comm.root.host = comm.real[0] ? RootHost::kRealRank : RootHost::kDaemonShared;
    c_.starts->StartRoot(comm);
    return;
  }
}

void CommTable::AllocEndpoints(LiveComm& comm, bool init) {
  for (int r = 0; r < comm.n; ++r) {
    if (comm.real[r]) continue;
    auto alloc = [&](EndpointKind k) {
      auto e = c_.conns->AllocEndpoint({comm.live_id, r, k});
      if (!e.ok()) {
        c_.reporter->Diverge(absl::StrCat(comm.name, ": endpoint for rank ", r, ": ", e.status().message()));
      }
      return e.ok() ? *e : Ipv4Endpoint{};
    };
    comm.p2p_ep[r] = alloc(EndpointKind::kP2p);
    if (comm.real[(r + comm.n - 1) % comm.n]) comm.ring_ep[r] = alloc(EndpointKind::kRing);
    if (init && comm.real[0]) comm.root_ep[r] = alloc(EndpointKind::kRootDelivery);
  }
}

LiveComm& CommTable::Create(const PlanComm& pc, std::vector<uint32_t> members, uint64_t hash, uint64_t magic,
                            std::optional<uint32_t> parent) {
  const BootstrapPlan& plan = *c_.plan;
  auto owned = std::make_unique<LiveComm>();
  LiveComm& comm = *owned;
  comm.live_id = next_live_id_++;
  comm.plan_id = pc.id;
  comm.name = pc.name;
  comm.n = static_cast<int>(members.size());
  comm.global = std::move(members);
  comm.hash = hash;
  comm.magic = magic;
  comm.parent = parent;
  comm.init_started = std::chrono::steady_clock::now();
  comm.last_progress = comm.init_started;
  comm.real.resize(comm.n);
  for (int r = 0; r < comm.n; ++r) {
    comm.real[r] = plan.IsReal(comm.global[r]) ? 1 : 0;
    comm.num_real += comm.real[r];
  }
  comm.top_rank.resize(comm.n);
  LiveComm* p = parent ? Find(*parent) : nullptr;
  for (int r = 0; r < comm.n; ++r) {
    comm.top_rank[r] = r;
    if (p == nullptr) continue;
    const auto it = std::find(p->global.begin(), p->global.end(), comm.global[r]);
    if (it != p->global.end()) comm.top_rank[r] = p->top_rank[it - p->global.begin()];
  }
  comm.ring_ep.assign(comm.n, {});
  comm.p2p_ep.assign(comm.n, {});
  comm.root_ep.assign(comm.n, {});
  comm.real_p2p.assign(comm.n, std::nullopt);
  comm.next_ring.assign(comm.n, std::nullopt);
  comm.root.real_ext.assign(comm.n, {});
  AllocEndpoints(comm, !parent);
  // Virtual NCCL nodes: virtual ranks of one graph node, ascending comm rank.
  std::map<uint32_t, VirtualNodeLayout> nodes;
  for (int r = 0; r < comm.n; ++r) {
    if (!comm.real[r]) nodes[plan.ranks[comm.global[r]].node].ranks.push_back(r);
  }
  comm.node_of.resize(comm.n);
  for (int r = 0; r < comm.n; ++r) {
    if (!comm.real[r]) comm.node_of[r] = nodes[plan.ranks[comm.global[r]].node];
  }
  for (int r = 0; r < comm.n && comm.n > 1; ++r) {
    if (!comm.real[r]) continue;
    if (!comm.real[(r + 1) % comm.n]) c_.starts->LinkVirtualNeighbour(comm, (r + 1) % comm.n, true);
    if (!comm.real[(r + comm.n - 1) % comm.n]) c_.starts->LinkVirtualNeighbour(comm, (r + comm.n - 1) % comm.n, false);
  }
  for (const PlanSplitCall& call : plan.split_calls) {
    if (call.parent == pc.id) comm.split.pending_calls.push_back(call.children);
  }
  if (pc.id < live_of_plan_.size()) live_of_plan_[pc.id] = comm.live_id;
  spdlog::info("bootstrap: {} (commHash {:#x}): {} ranks, {} real", comm.name, comm.hash, comm.n, comm.num_real);
  if (c_.broker != nullptr) {
    daemon::CommDescription d;
    d.comm_hash = comm.hash;
    d.graph_comm = pc.id < plan.comms.size() ? static_cast<int64_t>(pc.id) : -1;
    d.name = comm.name;
    d.members = comm.global;
    c_.broker->CommunicatorKnown(d);
  }
  comms_[comm.live_id] = std::move(owned);
  return comm;
}

void CommTable::Ready(LiveComm& comm) {
  comm.phase = CommPhase::kReady;
  Touch(comm);
  MarkPlanDone(comm.plan_id);
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - comm.init_started).count();
  const std::string summary = absl::StrCat(comm.name, ": ", comm.n, " ranks, ", comm.num_real, " real, ", secs, " s");
  c_.reporter->Update([&](BootstrapStats& s) {
    ++s.comms_initialized;
    s.last_init_summary = summary;
  });
  spdlog::info("bootstrap: {} initialized ({} ranks) in {:.3f} s", comm.name, comm.n, secs);
  AdvanceInitOrder();
}

void CommTable::MaybeDone(LiveComm& comm) {
  if (comm.phase == CommPhase::kDone) return;
  for (auto& [key, link] : comm.links) {
    if (!link->closed) return;
  }
  comm.phase = CommPhase::kDone;
  FreeEndpoints(comm);
  c_.reporter->Update([](BootstrapStats& s) { ++s.comms_destroyed; });
  spdlog::info("bootstrap: {} destroyed by its real ranks", comm.name);
  for (auto& [id, other] : comms_) {
    const bool idle_root = other->phase == CommPhase::kRoot && !other->real_seen;
    if (other->phase != CommPhase::kDone && !idle_root) return;
  }
  FinishJob(false, "");
}

void CommTable::Fail(LiveComm& comm, const std::string& why) {
  c_.reporter->Diverge(absl::StrCat(comm.name, ": ", why));
  c_.reporter->Update([](BootstrapStats& s) { ++s.real_rank_failures; });
  FinishJob(true, absl::StrCat(comm.name, ": ", why));
}

void CommTable::FreeEndpoints(LiveComm& comm) {
  for (auto* v : {&comm.ring_ep, &comm.p2p_ep, &comm.root_ep}) {
    for (const Ipv4Endpoint& e : *v) c_.conns->FreeEndpoint(e);
  }
  if (comm.root.host == RootHost::kDaemonOwn) c_.conns->FreeEndpoint(comm.root.addr);
}

}  // namespace prism::bootstrap
