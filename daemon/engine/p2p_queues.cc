#include "daemon/engine/p2p_queues.h"

#include <tuple>

#include "absl/container/flat_hash_map.h"

namespace prism::engine {

P2PQueues::P2PQueues(const EngineWorld& world) {
  // Dense ids for the (communicator, src, dst) queues.
  absl::flat_hash_map<std::tuple<uint32_t, uint32_t, uint32_t>, uint32_t> ids;
  queue_of_.resize(world.actors.size());
  for (uint32_t a = 0; a < world.actors.size(); ++a) {
    const Actor& actor = world.actors[a];
    for (size_t d = 0; d < world.programs[actor.program].p2p.size(); ++d) {
      const P2PDesc& desc = world.programs[actor.program].p2p[d];
      const uint32_t comm = actor.slot_comm[desc.slot], peer = actor.peer_actor[d];
      const auto key = desc.is_send ? std::make_tuple(comm, a, peer) : std::make_tuple(comm, peer, a);
      const auto it = ids.try_emplace(key, static_cast<uint32_t>(ids.size())).first;
      queue_of_[a].push_back(it->second);
    }
  }
  queues_.resize(ids.size());
}

P2PMatch P2PQueues::Post(const PendingP2P& mine, int32_t desc, bool is_send, bool real, bool peer_real) {
  Queue& q = queues_[queue_of_[mine.actor][desc]];
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
    const PendingP2P send = q.sends.front();
    q.sends.pop_front();
    if (send.real_done < Nanoseconds(0)) {
      q.awaiting.emplace_back(send, mine);
      return m;
    }
    m.kind = P2PMatch::Kind::kDeliver;
    m.send = send, m.recv = mine;
    return m;
  }
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

std::optional<std::pair<PendingP2P, PendingP2P>> P2PQueues::RealSendDone(uint32_t actor, int32_t desc, Nanoseconds at) {
  Queue& q = queues_[queue_of_[actor][desc]];
  if (!q.awaiting.empty() && q.awaiting.front().first.actor == actor) {
    auto pair = q.awaiting.front();  // the oldest matched send is this one
    q.awaiting.pop_front();
    pair.first.real_done = at;
    return pair;
  }
  for (PendingP2P& send : q.sends)
    if (send.actor == actor && send.real_done < Nanoseconds(0)) {
      send.real_done = at;
      break;
    }
  return std::nullopt;
}

}  // namespace prism::engine
