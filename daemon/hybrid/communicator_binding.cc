#include "daemon/hybrid/communicator_binding.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace prism::daemon {

void CommunicatorBinding::Bind(const CommDescription& c) {
  comm_of_hash_[c.comm_hash] = c;
  if (c.graph_comm >= 0) hash_of_graph_comm_[c.graph_comm] = c.comm_hash;
  bool all_real = !c.members.empty();
  for (uint32_t m : c.members) all_real = all_real && programs_->IsReal(m);
  if (all_real) all_real_hashes_.insert(c.comm_hash);
}

const CommDescription* CommunicatorBinding::Find(uint64_t hash) const {
  const auto it = comm_of_hash_.find(hash);
  return it == comm_of_hash_.end() ? nullptr : &it->second;
}

std::optional<ParkedOps> CommunicatorBinding::TakeParked(uint64_t hash) {
  const auto pending = pending_comms_.find(hash);
  if (pending == pending_comms_.end()) return std::nullopt;
  ParkedOps ops = std::move(pending->second.ops);
  pending_comms_.erase(pending);
  for (const auto& [sid, st] : ops.started) parked_ops_.erase({sid, st.op_id()});
  return ops;
}

CommunicatorBinding::Parking CommunicatorBinding::Park(SessionId id, int32_t session_rank, const rpc::OpStarted& s) {
  Parking out;
  if (session_rank < 0 || !programs_->IsReal(static_cast<uint32_t>(session_rank)))
    return out;  // the session did not say which rank it is (RANK unset)
  if (s.comm_size() < 2 || s.comm_rank() < 0 || s.comm_rank() >= s.comm_size() ||
      static_cast<size_t>(s.comm_size()) > programs_->real_count())
    return out;  // it has virtual members, which prismd's bootstrap would have seen
  out.parked = true;
  const uint64_t hash = s.key().comm_hash();
  PendingComm& p = pending_comms_[hash];
  p.size = s.comm_size();
  p.members[s.comm_rank()] = static_cast<uint32_t>(session_rank);
  p.ops.started.emplace_back(id, s);
  parked_ops_[{id, s.op_id()}] = hash;
  if (static_cast<int32_t>(p.members.size()) < p.size) return out;  // the other members will report too
  CommDescription c;
  c.comm_hash = hash;
  for (const auto& [comm_rank, global] : p.members) c.members.push_back(global);
  out.ops = *TakeParked(hash);
  // Not told by the store (no PyTorch id for it): the graph communicator
  // with these members, the first in creation order not bound to another
  // NCCL communicator when several have them.
  std::set<uint32_t> bound;
  for (const auto& [graph_comm, bound_hash] : hash_of_graph_comm_)
    if (graph_comm >= 0) bound.insert(static_cast<uint32_t>(graph_comm));
  const auto found = programs_->AllRealCommunicator(c.members, bound);
  if (found) {
    c.graph_comm = found->id;
    c.name = found->name;
  } else {
    c.name = absl::StrCat("real-only communicator ", hash);
    out.divergence = absl::StrCat("a communicator of real ranks ", absl::StrJoin(c.members, ","),
                                  " that the graph lacks",
                                  programs_->AllRealCommunicator(c.members)
                                      ? " (its communicators with these members are "
                                        "bound to other NCCL communicators already)"
                                      : "",
                                  "; its operations are not matched");
  }
  out.complete = std::move(c);
  return out;
}

void CommunicatorBinding::ParkFinished(SessionId id, const rpc::OpFinished& f) {
  if (const auto parked = parked_ops_.find({id, f.op_id()}); parked != parked_ops_.end())
    pending_comms_[parked->second].ops.finished.emplace_back(id, f);
}

void CommunicatorBinding::BindWorld(const engine::EngineWorld& world) {
  real_views_.clear();
  for (uint32_t rank = 0; rank < world.actor_of_rank.size(); ++rank) {
    if (!programs_->IsReal(rank)) continue;
    const engine::Actor& a = world.actors[world.actor_of_rank[rank]];
    const std::vector<uint32_t> graph_slots = programs_->GraphSlots(rank);
    for (size_t s = 0; s < a.slot_comm.size() && s < graph_slots.size(); ++s) {
      auto& views = real_views_[a.slot_comm[s]];
      const std::pair<uint32_t, uint32_t> view{rank, graph_slots[s]};
      if (std::find(views.begin(), views.end(), view) == views.end()) views.push_back(view);
    }
  }
}

const std::vector<std::pair<uint32_t, uint32_t>>* CommunicatorBinding::RealViews(uint32_t comm) const {
  const auto it = real_views_.find(comm);
  return it == real_views_.end() ? nullptr : &it->second;
}

std::optional<uint32_t> CommunicatorBinding::GraphCommOf(uint32_t comm, uint32_t real_rank) const {
  const auto* views = RealViews(comm);
  if (views == nullptr) return std::nullopt;
  const auto view =
      std::find_if(views->begin(), views->end(), [&](const auto& v) { return v.first == real_rank; });
  if (view == views->end()) return std::nullopt;
  return view->second;
}

}  // namespace prism::daemon
