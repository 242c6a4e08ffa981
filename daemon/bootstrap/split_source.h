// Where the groups of the real ranks' ncclCommSplit calls come from
// (internal header). Loop thread only.
//
// Two sources, chosen once by BootstrapConfig::follow_real_ranks:
//  * PlannedSplits (a graph): every split call is in the plan (comm_table.cc
//    queues a parent's calls in plan order); a real rank starting a split the
//    plan does not list is a divergence and the virtual ranks pass NOCOLOR.
//  * FollowedSplits (prismd --follow, no graph): the plan holds only the
//    world; a split call is learnt from the first real member's slice of the
//    split all-gather. PyTorch's new_group passes
//      color = abs(hash(tuple(sorted(ranks)))) % 2**31, key = index in ranks
//    (graphgen/split_color.h), so the group is the rank set of that color
//    that holds the real rank at that key (every real rank's: real ranks
//    in different groups of one call give one call with a child each; the
//    virtual slices wait for every real rank's slice, which comes at step
//    0). PyTorch 2.11's split_group (DeviceMesh on an eager default group)
//    passes the group's lowest rank instead, which names no set: such a
//    split takes the group the rank announced (Announce) and is refused,
//    naming the fixes, when there is none. FollowedSplits searches the sets a
//    layout of contiguous or strided groups makes (arithmetic progressions of
//    global ranks: Megatron's and DeviceMesh's tensor, data, pipeline,
//    context and expert groups) and appends the one whose hash gives the
//    color to the plan, as the parent's next call; the virtual members then
//    pass that color and their keys. A split where every real rank passes
//    NOCOLOR is a group without a real member: the real ranks never see it,
//    so the virtual ranks pass NOCOLOR too. A color no such set gives (or
//    two sets give) fails the job with the reason. Followed calls live for
//    one job (StartJob drops them).
#ifndef PRISM_DAEMON_BOOTSTRAP_SPLIT_SOURCE_H_
#define PRISM_DAEMON_BOOTSTRAP_SPLIT_SOURCE_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "daemon/bootstrap/comm_state.h"
#include "daemon/bootstrap/components.h"

namespace prism::bootstrap {

class SplitSource {
 public:
  virtual ~SplitSource() = default;
  // A job starts (CommTable::StartJob), before its first communicator.
  virtual void StartJob() = 0;
  // A real rank started a split all-gather of `parent` and no call of the
  // plan is pending there.
  virtual void OnSplitWithoutCall(LiveComm& parent, int32_t real_rank) = 0;
  // In that split all-gather, the slice of real comm rank `real_slice` is
  // known; `every_real_known`: every real rank with a virtual ring
  // neighbour has sent its own. May queue the call it shows on
  // parent.split.pending_calls. Returns true when the virtual slices may be
  // filled now; an error (its message says why) when the call cannot be
  // followed: the caller fails the parent's job with it.
  virtual absl::StatusOr<bool> OnRealSplitSlice(LiveComm& parent, int real_slice, bool every_real_known) = 0;
  // True while the source still learns the running split call of `parent`
  // from its real slices (the call it queued may gain children: real ranks
  // in different groups of one split_group call): the caller then asks
  // OnRealSplitSlice for every real slice, not the queued call.
  virtual bool Learning(const LiveComm& parent) const = 0;
  // Real rank `rank` (global) is about to make a split_group call that puts
  // it with `members` (global ranks, ascending): prism capture's ranks say so
  // through PyTorch's store (scripts/prism_torch/prism_group_announce.py),
  // since that call's color (the group's lowest rank) does not name them.
  // Announcements are used in order, one per such split of the rank, and
  // last one job. PlannedSplits ignores them (the graph has the groups).
  virtual void Announce(uint32_t rank, std::vector<uint32_t> members) = 0;
};

// The name FollowedSplits gives a learnt group, "group<k>[<lowest rank>]" (k:
// the parent's split number), ends with this for a split_group call's group,
// so that a capture of the recording keeps such a call's groups one call
// (daemon/hybrid/follow_capture.h).
inline constexpr char kSplitGroupSuffix[] = " split_group";

// `plan` is the server's plan: FollowedSplits appends the calls it learns
// (and drops them at StartJob). Both must outlive the source.
std::unique_ptr<SplitSource> MakeSplitSource(bool follow_real_ranks, Components& c, BootstrapPlan* plan);

// The groups of `world_size` global ranks, contiguous or strided
// ({b, b+s, ..., b+(n-1)s}, n >= 1), that hold `rank` at index `key` and whose
// PyTorch split color is `color` (new_group's). Usually
// one; none or several make the caller refuse. Pure;
// O(world_size * log(world_size)).
std::vector<std::vector<uint32_t>> GroupsOfColor(uint32_t world_size, uint32_t rank, int32_t key, int32_t color);

}  // namespace prism::bootstrap

#endif  // PRISM_DAEMON_BOOTSTRAP_SPLIT_SOURCE_H_
