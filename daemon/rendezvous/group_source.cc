#include "daemon/rendezvous/group_source.h"

#include "absl/strings/str_cat.h"

namespace prism::rendezvous {
namespace {

class PlannedGroups final : public GroupSource {
 public:
  explicit PlannedGroups(const bootstrap::BootstrapPlan& plan) : resolver_(plan) {}
  absl::StatusOr<ResolvedGroup> Resolve(const std::string& group) const override { return resolver_.Resolve(group); }
  absl::StatusOr<ResolvedGroup> ResolveNccl(const std::string& group) const override {
    return resolver_.ResolveNccl(group);
  }

 private:
  GroupResolver resolver_;
};

class FollowedGroups final : public GroupSource {
 public:
  explicit FollowedGroups(const bootstrap::BootstrapPlan& plan) : plan_(plan) {}
  absl::StatusOr<ResolvedGroup> Resolve(const std::string& group) const override {
    if (group == "0") {
      ResolvedGroup r;
      r.plan_id = 0;
      r.members = plan_.comms.at(0).members;
      r.name = plan_.comms.at(0).name;
      return r;
    }
    return absl::FailedPreconditionError(absl::StrCat(
        "PyTorch group '", group.substr(0, 12), "' makes its NCCL communicator from an id in the store (lazy "
        "start-up: init_process_group without device_id), and prismd --follow has no graph to tell its members; "
        "initialise eagerly (init_process_group(..., device_id=torch.device('cuda', local_rank)): every new_group "
        "is then an ncclCommSplit that prismd follows; examples/train_gpt.py: --device-id), or give prismd a graph "
        "of the program"));
  }
  // prismd --follow knows no Gloo groups: every group it resolves is NCCL's.
  absl::StatusOr<ResolvedGroup> ResolveNccl(const std::string& group) const override { return Resolve(group); }

 private:
  const bootstrap::BootstrapPlan& plan_;
};

}  // namespace

std::unique_ptr<GroupSource> MakeGroupSource(bool follow_real_ranks, const bootstrap::BootstrapPlan& plan) {
  if (follow_real_ranks) return std::make_unique<FollowedGroups>(plan);
  return std::make_unique<PlannedGroups>(plan);
}

}  // namespace prism::rendezvous
