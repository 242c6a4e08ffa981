#include "daemon/bootstrap/comm_split.h"

#include <algorithm>
#include <set>

#include "absl/strings/str_cat.h"
#include "daemon/bootstrap/allgather_engine.h"
#include "daemon/bootstrap/comm_table.h"
#include "daemon/bootstrap/p2p_messages.h"
#include "daemon/bootstrap/reporter.h"

namespace prism::bootstrap {
namespace {

std::string ExpectedChildren(const BootstrapPlan& plan, const std::optional<std::vector<uint32_t>>& call) {
  if (!call) return "no split";
  if (call->empty()) return "a split where every rank passes NOCOLOR";
  std::string names;
  for (size_t i = 0; i < call->size() && i < 3; ++i)
    absl::StrAppend(&names, i == 0 ? "" : " or ", plan.comms[(*call)[i]].name);
  if (call->size() > 3) absl::StrAppend(&names, " or ", call->size() - 3, " more");
  return names;
}

}  // namespace

void SplitCoordinator::OnSplitGathered(LiveComm& parent) {
  const AgState& ag = *parent.ag;
  const BootstrapPlan& plan = *c_.plan;
  const WireProfile& p = *c_.profile;
  SplitProgress& split = parent.split;
  ++split.split_count;
  std::optional<std::vector<uint32_t>> call;  // the plan ids of the call's children
  if (!split.pending_calls.empty()) {
    call = std::move(split.pending_calls.front());
    split.pending_calls.pop_front();
  }
  const std::vector<uint32_t> no_children;
  const std::vector<uint32_t>& children = call ? *call : no_children;
  std::set<uint32_t> live_children;  // of the call
  // color -> [(key, parent rank)]
  std::map<int32_t, std::vector<std::pair<int32_t, int32_t>>> groups;
  for (int r = 0; r < parent.n; ++r) {
    const int32_t key = ReadAt<int32_t>(ag.slices[r].data(), 0);
    const int32_t color = ReadAt<int32_t>(ag.slices[r].data(), 4);
    if (color != kSplitNoColor) groups[color].push_back({key, r});
  }
  split.children_by_color.clear();
  split.msgs_pending = 0;
  for (auto& [color, list] : groups) {
    std::sort(list.begin(), list.end());
    std::vector<uint32_t> members;
    for (auto& [key, r] : list) members.push_back(parent.global[r]);
    PlanComm pc;
    // The planned child: same color, or the plan's members under the color
    // a real member chose (frameworks derive colors themselves).
    std::optional<uint32_t> planned_id;
    for (uint32_t id : children) {
      if (plan.comms[id].color == color || plan.comms[id].members == members) planned_id = id;
      if (plan.comms[id].members == members) break;
    }
    const bool planned = planned_id.has_value();
    if (planned) {
      pc = plan.comms[*planned_id];
      if (pc.members != members) {
        c_.reporter->Diverge(absl::StrCat(parent.name, ": split #", split.split_count, " color ", color, " produced ",
                                          members.size(), " members differing from the plan's ", pc.name, " (",
                                          pc.members.size(), " members); following NCCL"));
      }
    } else {
      c_.reporter->Diverge(absl::StrCat(parent.name, ": split #", split.split_count, " color ", color,
                                        " is not in the plan (expected ", ExpectedChildren(plan, call), ")"));
      pc.id = static_cast<uint32_t>(plan.comms.size());  // unplanned
      pc.name = absl::StrCat(parent.name, "/split", split.split_count, "/color", color);
    }
    const bool any_real = std::any_of(members.begin(), members.end(), [&](uint32_t g) { return plan.IsReal(g); });
    const bool any_virtual =
        std::any_of(members.begin(), members.end(), [&](uint32_t g) { return !plan.IsReal(g); });
    const uint64_t hash = ChildCommHash(parent.hash, split.split_count, color, c_.profile->comm_hash);
    if (!any_real || !any_virtual) {
      if (planned) c_.comms->MarkPlanDone(pc.id);
      // A child of real ranks only needs no emulation, but its operations are
      // still the real ranks' program: tell the hybrid scheduler its hash.
      if (!any_virtual && c_.broker != nullptr) {
        daemon::CommDescription d;
        d.comm_hash = hash;
        d.graph_comm = planned ? static_cast<int64_t>(pc.id) : -1;
        d.name = pc.name;
        d.members = members;
        c_.broker->CommunicatorKnown(d);
      }
      continue;
    }
    LiveComm& child = c_.comms->Create(pc, members, hash, hash, parent.live_id);
    split.children_by_color[color] = child.live_id;
    if (planned) live_children.insert(pc.id);
    // COMMSPLIT: every virtual child rank with a real predecessor sends it its
    // child ring address; every one with a real successor waits for its.
    for (int v = 0; v < child.n; ++v) {
      if (child.real[v]) continue;
      const int pred = (v + child.n - 1) % child.n;
      const int succ = (v + 1) % child.n;
      const int32_t v_parent = list[v].second;
      if (child.real[pred]) {
        Bytes info(p.ring_connect_info_size, 0);
        const SockAddrBytes a = EncodeSockAddr(child.ring_ep[v]);
        std::copy(a.begin(), a.end(), info.begin());
        c_.p2p->SendToReal(parent, v_parent, list[pred].second, p.tag_comm_split, info);
      }
      if (child.real[succ]) ++split.msgs_pending;
    }
    c_.allgather->QueueOps(child, p.split_child_ops);
  }
  for (uint32_t id : children) {
    if (live_children.count(id) == 0) c_.comms->MarkPlanDone(id);
  }
}

void SplitCoordinator::OnSplitMessage(LiveComm& parent, const PendingMsg& m) {
  SplitProgress& split = parent.split;
  // A message for the latest split's children, or an early one for the next
  // split (its sender finished that split's all-gather before prismd did).
  if (split.msgs_pending == 0) {
    split.early_msgs.push_back(m);
    return;
  }
  for (auto& [color, live] : split.children_by_color) {
    LiveComm* child = c_.comms->Find(live);
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
      c_.reporter->Diverge(absl::StrCat(child->name, ": ", addr.status().message()));
      return;
    }
    --split.msgs_pending;
    child->next_ring[v] = *addr;
    c_.allgather->ConnectNext(*child, v, *addr);
    return;
  }
  split.early_msgs.push_back(m);  // for the next split
}

void SplitCoordinator::ReplayEarlyMessages(LiveComm& parent) {
  std::vector<PendingMsg> early;
  early.swap(parent.split.early_msgs);
  for (const PendingMsg& m : early) OnSplitMessage(parent, m);
}

}  // namespace prism::bootstrap
