#include "daemon/bootstrap/comm_waits.h"

#include <algorithm>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "daemon/bootstrap/nccl_ids.h"

namespace prism::bootstrap {
namespace {

std::string RankList(const std::vector<uint32_t>& ranks) { return absl::StrJoin(ranks, ", "); }

}  // namespace

std::optional<WaitReport> RootWait(const LiveComm& comm) {
  const RootProgress& root = comm.root;
  WaitReport w;
  w.communicator = comm.name;
  if (root.host != RootHost::kRealRank) {
    if (root.delivered) return std::nullopt;
    if (!root.mismatch.empty()) {
      w.waits_for = root.mismatch;
      return w;
    }
    for (int r = 0; r < comm.n; ++r) {
      if (comm.real[r] && root.real_ext[r].empty()) w.ranks.push_back(comm.global[r]);
    }
    w.waits_for = absl::StrCat("NCCL init: waits for real rank(s) ", RankList(w.ranks),
                               " to check in at its root (prismd plays comm rank 0, root ", ToString(root.addr),
                               "); has that rank started and reached this communicator's init?");
    return w;
  }
  int virtual_ranks = 0;
  for (int r = 0; r < comm.n; ++r) virtual_ranks += comm.real[r] ? 0 : 1;
  if (root.deliveries_seen >= virtual_ranks) return std::nullopt;
  const uint32_t root_rank = comm.global[0];
  if (root.next_checkin < comm.n || root.checkins_outstanding > 0) {
    w.ranks.push_back(root_rank);
    w.waits_for = absl::StrCat("NCCL init: virtual ranks cannot finish checking in at the root of real rank ",
                               root_rank, " (", ToString(root.addr), "): is that rank alive?");
    return w;
  }
  for (int r = 1; r < comm.n; ++r) {
    if (comm.real[r]) w.ranks.push_back(comm.global[r]);
  }
  if (w.ranks.empty()) {
    w.ranks.push_back(root_rank);
    w.waits_for = absl::StrCat("NCCL init: every virtual rank checked in at the root of real rank ", root_rank,
                               " (", ToString(root.addr), "), which has not answered");
  } else {
    w.waits_for = absl::StrCat("NCCL init: every virtual rank checked in at the root of real rank ", root_rank,
                               " (", ToString(root.addr), "); it still waits for real rank(s) ", RankList(w.ranks),
                               " to check in: have they started and reached this communicator's init?");
  }
  return w;
}

std::optional<WaitReport> AllGatherWait(const LiveComm& comm) {
  const AgState& ag = *comm.ag;
  WaitReport w;
  w.communicator = comm.name;
  std::vector<std::string> parts;
  for (const auto& [key, l] : comm.links) {
    const uint32_t real_g = comm.global[l->real_rank], virt_g = comm.global[l->vrank];
    if (l->conn == 0) {
      if (!l->from_real_prev) continue;  // prismd connects those once it knows where
      w.ranks.push_back(real_g);
      parts.push_back(absl::StrCat("real rank ", real_g, " has not connected its bootstrap ring to virtual rank ",
                                   virt_g));
    } else if (LinkStepsIn(ag, *l) > 0) {
      w.ranks.push_back(real_g);
      parts.push_back(absl::StrCat("real rank ", real_g, " owes ", LinkStepsIn(ag, *l), " step(s) to virtual rank ",
                                   virt_g));
    }
  }
  if (parts.empty()) return std::nullopt;
  std::sort(w.ranks.begin(), w.ranks.end());
  w.ranks.erase(std::unique(w.ranks.begin(), w.ranks.end()), w.ranks.end());
  w.waits_for = absl::StrCat(AgKindName(ag.kind), " all-gather: ", absl::StrJoin(parts, "; "));
  return w;
}

}  // namespace prism::bootstrap
