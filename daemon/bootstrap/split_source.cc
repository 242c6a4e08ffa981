#include "daemon/bootstrap/split_source.h"

#include <algorithm>
#include <deque>
#include <map>
#include <optional>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "daemon/bootstrap/reporter.h"
#include "graphgen/split_color.h"
#include "spdlog/spdlog.h"

namespace prism::bootstrap {
namespace {

class PlannedSplits final : public SplitSource {
 public:
  explicit PlannedSplits(Components& c) : c_(c) {}
  void StartJob() override {}
  void OnSplitWithoutCall(LiveComm& parent, int32_t real_rank) override {
    c_.reporter->Diverge(absl::StrCat(parent.name, ": real rank ", real_rank,
                                      " started a split the plan does not list; virtual ranks pass NOCOLOR"));
  }
  absl::StatusOr<bool> OnRealSplitSlice(LiveComm&, int, bool) override { return true; }
  bool Learning(const LiveComm&) const override { return false; }
  void Announce(uint32_t, std::vector<uint32_t>) override {}

 private:
  Components& c_;
};

class FollowedSplits final : public SplitSource {
 public:
  FollowedSplits(Components& c, BootstrapPlan* plan) : c_(c), plan_(plan), planned_(plan->comms.size()) {}

  void StartJob() override {
    plan_->comms.resize(planned_);
    open_.reset();
    announced_.clear();
  }

  void Announce(uint32_t rank, std::vector<uint32_t> members) override {
    spdlog::info("bootstrap: follow: real rank {} announces a split_group call putting it with {} ranks {}", rank,
                 members.size(), Describe(members));
    announced_[rank].push_back(std::move(members));
  }

  bool Learning(const LiveComm& parent) const override { return open_ && IsOpen(parent); }

  void OnSplitWithoutCall(LiveComm& parent, int32_t real_rank) override {
    spdlog::debug("bootstrap: {}: real rank {} starts split #{} (followed)", parent.name, real_rank,
                  parent.split.split_count + 1);
  }

  absl::StatusOr<bool> OnRealSplitSlice(LiveComm& parent, int real_slice, bool every_real_known) override {
    const Bytes& slice = parent.ag->slices[real_slice];
    const int32_t key = ReadAt<int32_t>(slice.data(), 0);
    const int32_t color = ReadAt<int32_t>(slice.data(), 4);
    if (color == kSplitNoColor) return every_real_known;  // a real member may still come
    const uint32_t rank = parent.global[real_slice];
    const int split = parent.split.split_count + 1;
    const bool open = open_ && IsOpen(parent);
    if (open) {  // a child of this call may hold the rank already (another real member's)
      for (uint32_t id : parent.split.pending_calls.front()) {
        const std::vector<uint32_t>& m = plan_->comms[id].members;
        if (std::find(m.begin(), m.end(), rank) != m.end()) return every_real_known;
      }
    }
    std::vector<std::vector<uint32_t>> groups;
    const std::optional<std::vector<uint32_t>> announced = TakeAnnounced(rank, key, color);
    if (announced) {
      groups.push_back(*announced);  // split_group: the group the rank announced
    } else {
      groups = GroupsOfColor(static_cast<uint32_t>(plan_->ranks.size()), rank, key, color);  // new_group
    }
    groups.erase(std::remove_if(groups.begin(), groups.end(), [&](const std::vector<uint32_t>& g) {
                   return !std::all_of(g.begin(), g.end(), [&](uint32_t m) {
                     return std::find(parent.global.begin(), parent.global.end(), m) != parent.global.end();
                   });
                 }), groups.end());
    if (groups.size() != 1)
      return absl::FailedPreconditionError(Unfollowable(parent, split, rank, key, color, groups));
    PlanComm pc;
    pc.id = static_cast<uint32_t>(plan_->comms.size());
    pc.name = absl::StrCat(parent.plan_id == 0 ? "" : absl::StrCat(parent.name, "/"), "group", split, "[",
                           groups[0].front(), "]", announced ? kSplitGroupSuffix : "");
    pc.members = std::move(groups[0]);
    pc.parent = parent.plan_id;
    pc.color = color;
    pc.key0 = 0;
    spdlog::info("bootstrap: follow: {} split #{}: real rank {} (key {}, color {}) is in {} ranks {}", parent.name,
                 split, rank, key, color, pc.members.size(), Describe(pc.members));
    if (open) {
      parent.split.pending_calls.front().push_back(pc.id);
    } else {
      parent.split.pending_calls.push_back({pc.id});
      open_ = OpenCall{parent.live_id, split};
    }
    plan_->comms.push_back(std::move(pc));
    return every_real_known;  // another real rank may be in another group of this call
  }

 private:
  static std::string Describe(const std::vector<uint32_t>& g) {
    if (g.size() < 2) return absl::StrJoin(g, ",");
    return absl::StrCat(g.front(), "..", g.back(), " step ", g[1] - g[0]);
  }

  // The rank's next announced group when this split's color and key are
  // that group's (its lowest rank, the rank at index `key`): consumed. Else
  // nothing (a new_group split, whose color is a hash), the announcement kept.
  std::optional<std::vector<uint32_t>> TakeAnnounced(uint32_t rank, int32_t key, int32_t color) {
    auto it = announced_.find(rank);
    if (it == announced_.end() || it->second.empty()) return std::nullopt;
    const std::vector<uint32_t>& g = it->second.front();
    const bool fits = color >= 0 && key >= 0 && !g.empty() && g.front() == static_cast<uint32_t>(color) &&
                      static_cast<size_t>(key) < g.size() && g[static_cast<size_t>(key)] == rank;
    if (!fits) return std::nullopt;
    std::vector<uint32_t> taken = std::move(it->second.front());
    it->second.pop_front();
    return taken;
  }

  // PyTorch 2.11's split_group color: the group's lowest rank, with `rank`
  // at index `key` of an ascending group from it.
  static bool CouldBeLowestRank(uint32_t rank, int32_t key, int32_t color) {
    if (color < 0 || key < 0 || static_cast<uint32_t>(color) > rank) return false;
    const uint32_t above = rank - static_cast<uint32_t>(color);
    return key == 0 ? above == 0 : above >= static_cast<uint32_t>(key);
  }

  static std::string Unfollowable(const LiveComm& parent, int split, uint32_t rank, int32_t key, int32_t color,
                                  const std::vector<std::vector<uint32_t>>& groups) {
    if (groups.empty() && CouldBeLowestRank(rank, key, color)) {
      return absl::StrCat(parent.name, ": split #", split, ": real rank ", rank, " passes color ", color,
                          " with key ", key, ": that is how PyTorch's split_group (DeviceMesh on a default group "
                          "started with device_id) colors a group, by its lowest rank, which does not say which "
                          "ranks the group has, and the rank announced no group for this call (prism capture "
                          "puts scripts/prism_torch on the ranks' PYTHONPATH with PRISM_ANNOUNCE_GROUPS=1, which "
                          "does). Run the program under prism capture, make the groups with new_group, or give "
                          "prismd a graph of the program (--graph) (docs/capture.md)");
    }
    std::string why = groups.empty()
                          ? "no group of contiguous or evenly strided ranks gives that color"
                          : absl::StrCat(groups.size(), " such groups give it (", Describe(groups[0]), " and ",
                                         Describe(groups[1]), ")");
    return absl::StrCat(parent.name, ": split #", split, ": real rank ", rank, " passes color ", color, " with key ",
                        key, ", and ", why, "; prismd --follow cannot tell which ranks the group has. Give prismd a "
                        "graph of the program (--graph), or make the slice's groups contiguous or strided rank "
                        "ranges (docs/capture.md)");
  }

  // The split call being learnt: its parent and the parent's split number.
  struct OpenCall {
    uint32_t parent = 0;
    int split = 0;
  };
  bool IsOpen(const LiveComm& parent) const {
    return open_->parent == parent.live_id && open_->split == parent.split.split_count + 1 &&
           !parent.split.pending_calls.empty();
  }

  Components& c_;
  BootstrapPlan* plan_;
  size_t planned_;
  std::optional<OpenCall> open_;
  std::map<uint32_t, std::deque<std::vector<uint32_t>>> announced_;  // by real global rank, in call order
};

}  // namespace

std::unique_ptr<SplitSource> MakeSplitSource(bool follow_real_ranks, Components& c, BootstrapPlan* plan) {
  if (follow_real_ranks) return std::make_unique<FollowedSplits>(c, plan);
  return std::make_unique<PlannedSplits>(c);
}

std::vector<std::vector<uint32_t>> GroupsOfColor(uint32_t world_size, uint32_t rank, int32_t key, int32_t color) {
  std::vector<std::vector<uint32_t>> found;
  if (key < 0 || rank >= world_size) return found;
  const uint64_t k = static_cast<uint64_t>(key);
  const auto search = [&](uint64_t stride) {
    if (k * stride > rank) return false;
    const uint64_t base = rank - k * stride;
    graphgen::PythonTupleHasher new_group_hash;  // new_group's color
    for (uint64_t n = 1, m = base; m < world_size; ++n, m += stride) {
      new_group_hash.Add(static_cast<uint32_t>(m));
      if (n > k && graphgen::PyTorchColorOfHash(new_group_hash.Value()) == color) {
        std::vector<uint32_t> g;
        for (uint64_t i = 0; i < n; ++i) g.push_back(static_cast<uint32_t>(base + i * stride));
        found.push_back(std::move(g));
      }
    }
    return true;
  };
  for (uint64_t stride = 1; stride < world_size; ++stride) {
    if (!search(stride) && k > 0) break;  // larger strides start below rank 0 too
  }
  // A group of one rank is found once per stride: keep it once.
  std::sort(found.begin(), found.end());
  found.erase(std::unique(found.begin(), found.end()), found.end());
  return found;
}

}  // namespace prism::bootstrap
