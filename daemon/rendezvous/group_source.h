// Which process group an NCCL id key of PyTorch's store names, with a graph
// or without one (prismd --follow). Immutable after construction;
// thread-safe.
//
//  * Planned (a graph): GroupResolver's rule (torch_groups.h): group "k" is
//    the graph's communicator k, a hashed name the one with those members.
//  * Followed (no graph): only the default group "0" (every rank) is known
//    up front. The program's other groups reach prismd as ncclCommSplits of
//    the default group when it was initialised eagerly (device_id), which
//    the bootstrap follows (daemon/bootstrap/split_source.h); a group whose
//    communicator is made from an id in the store (lazy start-up) has
//    members prismd cannot know, so it is refused, naming the fix.
#ifndef PRISM_DAEMON_RENDEZVOUS_GROUP_SOURCE_H_
#define PRISM_DAEMON_RENDEZVOUS_GROUP_SOURCE_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "daemon/bootstrap/bootstrap_plan.h"
#include "daemon/rendezvous/torch_groups.h"

namespace prism::rendezvous {

class GroupSource {
 public:
  virtual ~GroupSource() = default;
  // The communicator of PyTorch group `group` ("0", "3", a SHA-1 name).
  virtual absl::StatusOr<ResolvedGroup> Resolve(const std::string& group) const = 0;
  // As Resolve, for the store key of an NCCL id: a Gloo group there is a
  // mismatch (GroupResolver::ResolveNccl).
  virtual absl::StatusOr<ResolvedGroup> ResolveNccl(const std::string& group) const = 0;
};

// `plan` must outlive the source.
std::unique_ptr<GroupSource> MakeGroupSource(bool follow_real_ranks, const bootstrap::BootstrapPlan& plan);

}  // namespace prism::rendezvous

#endif  // PRISM_DAEMON_RENDEZVOUS_GROUP_SOURCE_H_
