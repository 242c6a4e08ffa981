#include "daemon/bootstrap/bootstrap_plan.h"

#include <algorithm>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "proto/graph.pb.h"
#include "spdlog/spdlog.h"

namespace prism::bootstrap {

bool BootstrapPlan::IsReal(uint32_t global_rank) const {
  return std::find(real_ranks.begin(), real_ranks.end(), global_rank) != real_ranks.end();
}

absl::Status ValidatePlan(const BootstrapPlan& plan) {
  const size_t world = plan.ranks.size();
  for (uint32_t r : plan.real_ranks) {
    if (r >= world) {
      return absl::InvalidArgumentError(absl::StrCat(
          "real rank ", r, " is outside the job (world size ", world, ")"));
    }
  }
  for (size_t i = 0; i < plan.comms.size(); ++i) {
    const PlanComm& c = plan.comms[i];
    if (c.id != i) return absl::InvalidArgumentError(absl::StrCat("communicator ", i, " has id ", c.id));
    if (c.members.empty()) {
      return absl::InvalidArgumentError(absl::StrCat("communicator ", c.name, " has no members"));
    }
    for (uint32_t m : c.members) {
      if (m >= world) {
        return absl::InvalidArgumentError(absl::StrCat(
            "communicator ", c.name, " names rank ", m, " outside the job (world ", world, ")"));
      }
    }
    if (c.parent && *c.parent >= i) {
      return absl::InvalidArgumentError(absl::StrCat(
          "communicator ", c.name, " is split from communicator ", *c.parent,
          " which is not created before it"));
    }
  }
  for (size_t k = 0; k < plan.process_groups.size(); ++k) {
    const PlanProcessGroup& g = plan.process_groups[k];
    if (!g.gloo && g.comm >= plan.comms.size()) {
      return absl::InvalidArgumentError(absl::StrCat("process group ", k, " names communicator ", g.comm,
                                                     ", which the plan does not have"));
    }
    for (uint32_t m : g.members) {
      if (m >= world) {
        return absl::InvalidArgumentError(absl::StrCat("process group ", k, " names rank ", m,
                                                       " outside the job (world ", world, ")"));
      }
    }
  }
  for (const PlanSplitCall& call : plan.split_calls) {
    for (uint32_t child : call.children) {
      if (child >= plan.comms.size() || plan.comms[child].parent != call.parent) {
        return absl::InvalidArgumentError(absl::StrCat("a split call of communicator ", call.parent,
                                                       " makes communicator ", child, ", which is not its child"));
      }
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<BootstrapPlan> PlanFromGraph(const prism::graph::Graph& graph,
                                            const std::vector<uint32_t>& real_ranks) {
  BootstrapPlan plan;
  plan.real_ranks = real_ranks;
  for (const auto& r : graph.ranks()) plan.ranks.push_back({r.node(), r.local_gpu()});
  for (const auto& c : graph.communicators()) {
    PlanComm pc;
    pc.id = c.id();
    pc.name = c.name().empty() ? absl::StrCat("comm", c.id()) : c.name();
    pc.members.assign(c.members().begin(), c.members().end());
    if (c.has_split()) {
      pc.parent = c.split().parent();
      pc.color = c.split().color();
      pc.key0 = c.split().key();
      pc.same_call = c.split().same_call();
    }
    plan.comms.push_back(std::move(pc));
  }
  for (const auto& g : graph.process_groups()) {
    PlanProcessGroup pg;
    pg.gloo = g.backend() == prism::graph::ProcessGroup::GLOO;
    pg.comm = g.communicator();
    pg.members.assign(g.members().begin(), g.members().end());
    pg.name = g.name();
    pg.desc = g.desc();
    plan.process_groups.push_back(std::move(pg));
  }
  PRISM_RETURN_IF_ERROR(ValidatePlan(plan));
  const std::string unfit = DeriveSplitCalls(plan);
  if (!unfit.empty()) {
    spdlog::warn("bootstrap: with device_id (eager start-up) PyTorch's split calls of this graph's groups do not "
                 "line up across ranks, so NCCL would hang without Prism too: {}", unfit);
  }
  return plan;
}

BootstrapPlan WorldPlan(uint32_t world_size, uint32_t gpus_per_node,
                        std::vector<uint32_t> real_ranks) {
  BootstrapPlan plan;
  plan.real_ranks = std::move(real_ranks);
  for (uint32_t r = 0; r < world_size; ++r) {
    plan.ranks.push_back({r / gpus_per_node, r % gpus_per_node});
  }
  PlanComm world;
  world.id = 0;
  world.name = "world";
  for (uint32_t r = 0; r < world_size; ++r) world.members.push_back(r);
  plan.comms.push_back(std::move(world));
  return plan;
}

uint32_t AddSplit(BootstrapPlan& plan, uint32_t parent, std::vector<uint32_t> members,
                  int32_t color, int32_t key0, std::string name) {
  PlanComm c;
  c.id = static_cast<uint32_t>(plan.comms.size());
  c.name = std::move(name);
  c.members = std::move(members);
  c.parent = parent;
  c.color = color;
  c.key0 = key0;
  plan.comms.push_back(std::move(c));
  plan.split_calls.push_back(PlanSplitCall{parent, {plan.comms.back().id}});
  return plan.comms.back().id;
}

}  // namespace prism::bootstrap
