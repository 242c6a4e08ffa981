// What every rank of a parent passes to one planned ncclCommSplit call
// (internal header). Pure functions of the live parent and the plan.
#ifndef PRISM_DAEMON_BOOTSTRAP_SPLIT_LAYOUT_H_
#define PRISM_DAEMON_BOOTSTRAP_SPLIT_LAYOUT_H_

#include <cstdint>
#include <vector>

#include "daemon/bootstrap/bootstrap_plan.h"
#include "daemon/bootstrap/comm_state.h"

namespace prism::bootstrap {

// Per parent rank: the index in `call` (plan ids of the call's children)
// of the child that holds it, -1 for none (it passes NOCOLOR), and the key
// it passes there (the child's key0 + its index in the child).
struct SplitLayout {
  std::vector<int32_t> child;
  std::vector<int32_t> key;
};
SplitLayout LayoutOfCall(const LiveComm& parent, const std::vector<uint32_t>& call, const BootstrapPlan& plan);

}  // namespace prism::bootstrap

#endif  // PRISM_DAEMON_BOOTSTRAP_SPLIT_LAYOUT_H_
