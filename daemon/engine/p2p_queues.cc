#include "daemon/engine/p2p_queues.h"

#include <tuple>

#include "absl/container/flat_hash_map.h"

namespace prism::engine {

P2PQueues::P2PQueues(const EngineWorld& world) {
  // Dense ids for the (communicator, src, dst) queues.
  absl::flat_hash_map<std::tuple<uint32_t, uint32_t, uint32_t>, uint32_t> ids;
  desc_base_.resize(world.actors.size());
  for (uint32_t a = 0; a < world.actors.size(); ++a) {
    const Actor& actor = world.actors[a];
    desc_base_[a] = static_cast<uint32_t>(links_.size());
    for (size_t d = 0; d < world.programs[actor.program].p2p.size(); ++d) {
      const P2PDesc& desc = world.programs[actor.program].p2p[d];
      const uint32_t comm = actor.slot_comm[desc.slot], peer = actor.peer_actor[d];
      const auto key = desc.is_send ? std::make_tuple(comm, a, peer) : std::make_tuple(comm, peer, a);
      const auto it = ids.try_emplace(key, static_cast<uint32_t>(ids.size())).first;
      links_.push_back(Link{it->second, peer, actor.peer_same_node[d] != 0, world.actors[peer].real});
    }
  }
  queues_.resize(ids.size());
}

P2PMatch P2PQueues::Post(const PendingP2P& mine, int32_t desc, bool is_send, bool real, bool peer_real) {
  Queue& q = QueueOf(mine.actor, desc);
  P2PMatch m;
  if (real) {
    if (!is_send || peer_real) return m;
    if (q.recvs.empty()) {
      q.sends.push_back(mine);
      return m;
    }
    q.awaiting.emplace_back(mine, q.recvs.front());
    q.recvs.pop_front();
    return m;
  }
  if (peer_real && is_send) {
    m.kind = P2PMatch::Kind::kToReal;
    m.index = q.virtual_to_real++;
    return m;
  }
  if (peer_real) {  // a virtual receive from a real sender
    if (q.sends.empty()) {
      q.recvs.push_back(mine);
      return m;
    }
    return MeetEagerSend(mine, q);
  }
  if (!is_send && !q.sends.empty() && q.sends.front().real_done != PendingP2P::kNotReported)
    return MeetEagerSend(mine, q);  // the receive meets an eager send, as it meets a real one
  auto& others = is_send ? q.recvs : q.sends;
  if (others.empty()) {
    (is_send ? q.sends : q.recvs).push_back(mine);
    return m;
  }
  m.kind = P2PMatch::Kind::kMatched;
  m.send = is_send ? mine : others.front();
  m.recv = is_send ? others.front() : mine;
  others.pop_front();
  return m;
}

P2PMatch P2PQueues::PostEagerSend(const PendingP2P& mine, int32_t desc) {
  Queue& q = QueueOf(mine.actor, desc);
  P2PMatch m;
  if (!q.recvs.empty()) {
    m.kind = P2PMatch::Kind::kMatched;
    m.send = mine, m.recv = q.recvs.front();
    q.recvs.pop_front();
    return m;
  }
  // One message ahead of the receiver at most: NCCL's receiving proxy posts
  // the buffers of a connection's next receive once the previous one is
  // under way; behind an earlier unmatched send this one waits for its
  // receive, as any pair.
  PendingP2P queued = mine;
  if (q.sends.empty()) queued.real_done = PendingP2P::kInFlight;
  q.sends.push_back(queued);
  if (queued.real_done == PendingP2P::kInFlight) m.kind = P2PMatch::Kind::kEager;
  return m;
}

// A virtual receive meeting the send at the queue's front that went on the
// wire without it: a real one, or an eager virtual one.
P2PMatch P2PQueues::MeetEagerSend(const PendingP2P& recv, Queue& q) {
  P2PMatch m;
  const PendingP2P send = q.sends.front();
  q.sends.pop_front();
  if (send.real_done < Nanoseconds(0)) {
    q.awaiting.emplace_back(send, recv);
    return m;
  }
  m.kind = P2PMatch::Kind::kDeliver;
  m.send = send, m.recv = recv;
  return m;
}

std::optional<std::pair<PendingP2P, PendingP2P>> P2PQueues::RealSendDone(uint32_t actor, int32_t desc, Nanoseconds at,
                                                                         bool eager) {
  Queue& q = QueueOf(actor, desc);
  const Nanoseconds pending = eager ? PendingP2P::kInFlight : PendingP2P::kNotReported;
  if (!q.awaiting.empty() && q.awaiting.front().first.actor == actor) {
    auto pair = q.awaiting.front();  // the oldest matched send is this one
    q.awaiting.pop_front();
    pair.first.real_done = at;
    return pair;
  }
  for (PendingP2P& send : q.sends)
    if (send.actor == actor && send.real_done == pending) {
      send.real_done = at;
      break;
    }
  return std::nullopt;
}

}  // namespace prism::engine
