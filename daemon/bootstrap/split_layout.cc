#include "daemon/bootstrap/split_layout.h"

namespace prism::bootstrap {

SplitLayout LayoutOfCall(const LiveComm& parent, const std::vector<uint32_t>& call, const BootstrapPlan& plan) {
  SplitLayout out;
  out.child.assign(parent.n, -1);
  out.key.assign(parent.n, 0);
  std::vector<int32_t> parent_rank(plan.ranks.size(), -1);  // global rank -> parent rank
  for (int r = 0; r < parent.n; ++r) {
    if (parent.global[r] < parent_rank.size()) parent_rank[parent.global[r]] = r;
  }
  for (size_t c = 0; c < call.size(); ++c) {
    const PlanComm& child = plan.comms[call[c]];
    for (size_t i = 0; i < child.members.size(); ++i) {
      const uint32_t g = child.members[i];
      if (g >= parent_rank.size() || parent_rank[g] < 0) continue;
      out.child[parent_rank[g]] = static_cast<int32_t>(c);
      out.key[parent_rank[g]] = child.key0 + static_cast<int32_t>(i);
    }
  }
  return out;
}

}  // namespace prism::bootstrap
