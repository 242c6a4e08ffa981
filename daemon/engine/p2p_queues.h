// Send/recv matching for the replay engine: the k-th send from a rank to a
// peer on a communicator meets the peer's k-th receive from that rank, one
// first-in first-out queue per (communicator, src, dst). Posting one side
// says what follows (P2PMatch); timing it (NICs, the model, observers) is the
// engine's. Real ranks (hybrid runs) complete their own sends and receives
// through their reports; only a real send to a virtual receiver is queued
// here, because the receive ends when the send's last byte arrives.
//
// Thread-safety: none; the engine thread owns it. `world` must outlive it.
#ifndef PRISM_DAEMON_ENGINE_P2P_QUEUES_H_
#define PRISM_DAEMON_ENGINE_P2P_QUEUES_H_

#include <cstdint>
#include <optional>
#include <utility>
#include <vector>

#include "daemon/engine/fifo.h"
#include "daemon/engine/world.h"

namespace prism::engine {

// One side of a send/recv: `actor`'s op `op`, posted (issued) at `posted`;
// a real send's (or an eager virtual send's) last byte left at `real_done`
// (kNotReported: not yet; kInFlight: an eager virtual send on the wire).
// `reached`: when its stream reached it, if it then waited to be issued
// (launch order, launch_order.h): the op's start in reports and traces.
struct PendingP2P {
  static constexpr Nanoseconds kNotReported{-1};
  static constexpr Nanoseconds kInFlight{-2};
  uint32_t actor, op;
  Nanoseconds posted;
  Nanoseconds real_done = kNotReported;
  Nanoseconds reached = kNotReported;
  Nanoseconds Started() const { return reached >= Nanoseconds(0) ? reached : posted; }
};

struct P2PMatch {
  enum class Kind : uint8_t {
    kWaiting,   // nothing follows now
    kMatched,   // two virtual sides met: time the transfer (send, recv)
    kDeliver,   // a virtual receive met a real send already done (send, recv)
    kToReal,    // a virtual send to a real receiver: it leaves at once (index)
    kEager,     // a virtual send queued as on the wire (PostEagerSend): time its transfer now
  };
  Kind kind = Kind::kWaiting;
  PendingP2P send{}, recv{};
  uint64_t index = 0;  // kToReal: the message's index on its (communicator, src, dst), from 0
};

class P2PQueues {
 public:
  explicit P2PQueues(const EngineWorld& world);

  // What a P2P desc of an actor's program leads to: its peer, whether on
  // the same node, whether the peer is a real rank (flat, beside its queue).
  struct Link {
    uint32_t queue = 0;  // index into queues_
    uint32_t peer = 0;
    bool same_node = false, peer_real = false;
  };
  const Link& LinkOf(uint32_t actor, int32_t desc) const { return links_[desc_base_[actor] + desc]; }
  // The index Post will give `actor`'s next send to a real receiver on `desc`.
  uint64_t NextToRealIndex(uint32_t actor, int32_t desc) const {
    return queues_[LinkOf(actor, desc).queue].virtual_to_real;
  }

  // `mine` was posted through P2P desc `desc` of its actor's program.
  // `real`, `peer_real`: whether its actor and the peer are real ranks.
  P2PMatch Post(const PendingP2P& mine, int32_t desc, bool is_send, bool real, bool peer_real);
  // A virtual send to a virtual receiver whose bytes all fit in the
  // receiver's buffers: kMatched if the receive is posted already (timed as
  // any pair); else kEager, the send queued as on the wire (kInFlight): the
  // engine starts its transfer now and reports its last byte gone through
  // RealSendDone, and the receive, when posted, meets it as a real send
  // (kDeliver, or when RealSendDone comes); kWaiting (an ordinary pending
  // send) behind an earlier unmatched send on the same queue.
  P2PMatch PostEagerSend(const PendingP2P& mine, int32_t desc);
  // Real `actor`'s send through `desc` to a virtual receiver reported its
  // last byte gone at `at`: the (send, receive) pair to deliver when the
  // receive was already posted (else the send remembers `at`).
  // `eager`: the same for an eager virtual send (PostEagerSend).
  std::optional<std::pair<PendingP2P, PendingP2P>> RealSendDone(uint32_t actor, int32_t desc, Nanoseconds at,
                                                                bool eager = false);

 private:
  struct Queue {
    Fifo<PendingP2P> sends, recvs;
    Fifo<std::pair<PendingP2P, PendingP2P>> awaiting;  // (real send, virtual recv) matched
    uint64_t virtual_to_real = 0;  // messages a virtual sender started to a real receiver
  };
  P2PMatch MeetEagerSend(const PendingP2P& recv, Queue& q);

  std::vector<Queue> queues_;                    // one per (communicator, src, dst)
  Queue& QueueOf(uint32_t actor, int32_t desc) { return queues_[LinkOf(actor, desc).queue]; }

  std::vector<Link> links_;           // per actor's P2P desc (from desc_base_[actor])
  std::vector<uint32_t> desc_base_;   // per actor
};

}  // namespace prism::engine

#endif  // PRISM_DAEMON_ENGINE_P2P_QUEUES_H_
