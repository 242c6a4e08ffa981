// DeriveSplitCalls (bootstrap_plan.h): which children each ncclCommSplit
// call makes, per parent, in call order.
#include <algorithm>
#include <map>

#include "absl/strings/str_cat.h"
#include "daemon/bootstrap/bootstrap_plan.h"

namespace prism::bootstrap {
namespace {

// The default group's communicator when the process-group list names one
// that can be split from: group 0, NCCL, the whole world, no parent.
std::optional<uint32_t> DefaultComm(const BootstrapPlan& plan) {
  if (plan.process_groups.empty() || plan.process_groups[0].gloo) return std::nullopt;
  const uint32_t c = plan.process_groups[0].comm;
  if (c >= plan.comms.size() || plan.comms[c].parent || plan.comms[c].members.size() != plan.ranks.size())
    return std::nullopt;
  return c;
}

// The default group's calls as each rank makes them (bootstrap_plan.h);
// marks the children it placed in `placed`. Appends what does not fit to
// `why`.
void DefaultGroupCalls(BootstrapPlan& plan, uint32_t world, std::vector<char>& placed, std::string& why) {
  const size_t n = plan.ranks.size();
  std::vector<uint64_t> skipped(n, 0);  // Gloo groups so far that hold the rank: calls it did not make
  std::map<uint64_t, std::vector<uint32_t>> at;  // a call's position in every member's sequence -> children
  uint64_t made = 0;                    // process groups so far after the default one (a split_group once)
  bool last_split_of_world = false;
  for (size_t k = 1; k < plan.process_groups.size(); ++k) {
    const PlanProcessGroup& g = plan.process_groups[k];
    if (g.gloo) {
      for (uint32_t m : g.members) ++skipped[m];
      ++made;
      last_split_of_world = false;
      continue;
    }
    const PlanComm& c = plan.comms[g.comm];
    const bool of_world = c.parent && *c.parent == world;
    if (!(of_world && c.same_call && last_split_of_world)) ++made;
    last_split_of_world = of_world;
    if (!of_world) continue;
    const uint64_t position = made - 1 - skipped[c.members.front()];
    for (uint32_t m : c.members) {
      if (made - 1 - skipped[m] != position && why.size() < 400) {
        absl::StrAppend(&why, c.name, ": rank ", m, " reaches it as split call #", made - skipped[m],
                        " of the default group, rank ", c.members.front(), " as #", position + 1,
                        " (Gloo groups before it hold them differently); ");
        break;
      }
    }
    at[position].push_back(g.comm);
    placed[g.comm] = 1;
  }
  const auto [least, most] = std::minmax_element(skipped.begin(), skipped.end());
  if (*least != *most) {
    absl::StrAppend(&why, "ranks make ", made - *most, " to ", made - *least,
                    " split calls of the default group (Gloo groups hold them differently); ");
  }
  const uint64_t calls = made - *least;
  for (uint64_t p = 0; p < calls; ++p) {
    PlanSplitCall call;
    call.parent = world;
    if (auto it = at.find(p); it != at.end()) call.children = std::move(it->second);
    plan.split_calls.push_back(std::move(call));
  }
}

}  // namespace

std::string DeriveSplitCalls(BootstrapPlan& plan) {
  plan.split_calls.clear();
  std::vector<char> placed(plan.comms.size(), 0);
  std::string why;
  if (const std::optional<uint32_t> world = DefaultComm(plan)) DefaultGroupCalls(plan, *world, placed, why);
  std::map<uint32_t, size_t> last_call;  // parent -> index of its latest call
  for (const PlanComm& c : plan.comms) {
    if (!c.parent || placed[c.id]) continue;
    const auto last = last_call.find(*c.parent);
    if (c.same_call && last != last_call.end()) {
      plan.split_calls[last->second].children.push_back(c.id);
      continue;
    }
    plan.split_calls.push_back(PlanSplitCall{*c.parent, {c.id}});
    last_call[*c.parent] = plan.split_calls.size() - 1;
  }
  return why;
}

}  // namespace prism::bootstrap
