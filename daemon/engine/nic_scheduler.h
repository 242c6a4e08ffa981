// The NIC policy of the replay engine: who may use which NIC direction when.
//
// Each actor has a transmit and a receive direction (its GPU's NIC share,
// network_model.h). Transfers between nodes ask for directions at the
// engine's current instant; the requests made at one instant are granted
// together, shortest first (kTurns: ring shares first, longest first; then
// in the order made), so that which of two transfers that became ready at
// the same instant goes first never depends
// on which event the engine handled first (a DP reduce-scatter granted
// before a TP all-reduce of the same rank held it back by the whole
// reduce-scatter). How a grant uses the directions is the NicModel:
//  - kQueues (the default): each member of a ring all-reduce, all-gather or
//    reduce-scatter across nodes queues its share of the wire time on its
//    own transmit side, in the first gap that fits there; the collective
//    ends when the last share has left plus the rest of its time (never
//    before the model's time from its start). Other transfers as kCalendar,
//    except that a point-to-point transfer that finds its transmit side
//    carrying a ring share does not wait for that share's end: it leaves
//    behind the share's ring step in progress (what NCCL has queued of it),
//    then interleaved with the rest of it at half the rate, then alone, as
//    far as the side's reservations at its grant say (SharedSent).
//  - kInterleave: kQueues, and a ring share that finds its transmit side
//    carrying a ring share of another communicator goes the same way. Its reservation is kQueues' (the whole share
//    after the other one), so the side's work stays counted for later
//    requests; no grant's end ever moves (the hybrid's contract), so the
//    other share keeps its end: the newcomer alone pays for the sharing.
//  - kTurns: kInterleave, except that a share or point-to-point transfer
//    that finds its transmit side carrying another communicator's ring share
//    does not wait for that share's ring step in progress: the NIC takes the
//    two in turn from its ready time on (a NIC that serves its queue pairs in
//    turn, as the plugin's PRISM_LINK_ORDER=round-robin does in 64 KiB
//    slices, which this leaves out). One instant's ring shares are granted
//    first, longest first, then the other requests shortest first, so that
//    a short one (a TP all-reduce, a pipeline send) made beside a long ring
//    share finds it and pays for the turns, as on such a NIC, where shortest
//    first would send it whole before the long one; the long one keeps the
//    end it had alone (no grant's end moves).
//  - kCalendar: a transfer holds every direction it needs, from the first
//    instant all are free for its whole duration (nic_calendar.h).
//  - kShared: transfers in flight share each direction equally
//    (nic_sharing.h); their ends are known only as time passes (FinishBy).
//    All-virtual worlds only.
// The engine hands each request a ticket of its own and gets back, per
// ticket, when the transfer started and ends (NicGrant); what a transfer
// means to the ranks (waiters, observers, traces) stays with the engine.
//
// Thread-safety: none; the engine thread owns it. `world` and `model` must
// outlive it.
#ifndef PRISM_DAEMON_ENGINE_NIC_SCHEDULER_H_
#define PRISM_DAEMON_ENGINE_NIC_SCHEDULER_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "common/units.h"
#include "daemon/engine/network_model.h"
#include "daemon/engine/nic_calendar.h"
#include "daemon/engine/nic_sharing.h"
#include "daemon/engine/world.h"

namespace prism::engine {

// docs/network-model.md, "NIC serialisation"; prismd --nic-model.
enum class NicModel : uint8_t { kQueues, kCalendar, kShared, kInterleave, kTurns };

// A granted transfer: the engine's ticket, when it started on the NICs and
// when it ends (its last byte delivered).
struct NicGrant {
  uint32_t ticket;
  Nanoseconds start, end;
};

// kShared: a wake-up the engine owes the scheduler at `at` (transfers in
// flight may have finished by then); see FinishBy.
struct NicCheck {
  Nanoseconds at;
  uint32_t generation;  // below NicScheduler::kCheckGenerations
};

class NicScheduler {
 public:
  NicScheduler(const EngineWorld& world, const NetworkModel& model, NicModel nic_model);
  NicScheduler(const NicScheduler&) = delete;
  NicScheduler& operator=(const NicScheduler&) = delete;

  NicModel model() const { return nic_model_; }

  // Requests at the current instant (granted by Grant). `ready`: when the
  // transfer may start; `duration`: what it takes alone.
  // A collective `op` on communicator `comm` (across nodes): every member's
  // both directions (or, kQueues, its transmit side for a ring).
  void RequestCollective(uint32_t ticket, uint32_t comm, const OpInfo& op, Nanoseconds ready, Nanoseconds duration);
  // Hybrid: a collective real ranks take part in. Its virtual members' NICs
  // are busy as if it were all-virtual; no grant is reported (the real ranks'
  // reports finish it).
  void HoldCollective(uint32_t comm, const OpInfo& op, Nanoseconds ready, Nanoseconds duration);
  // A send from `src` to `dst` on different nodes: src's transmit and dst's
  // receive direction for `duration` (wire plus latency).
  void RequestPointToPoint(uint32_t ticket, uint32_t src, uint32_t dst, Nanoseconds ready, Nanoseconds duration);
  // Hybrid: a virtual rank's send to a real one: only src's transmit side,
  // for `wire`; the grant ends `took` after it started.
  void RequestSend(uint32_t ticket, uint32_t src, Nanoseconds ready, Nanoseconds wire, Nanoseconds took);

  // When a RequestSend(src, ready, wire) made later, with no other request
  // on src's transmit side before it, would start (not kShared): the same
  // start as its grant, interleaving included (a send forecast's first byte).
  Nanoseconds SendStart(uint32_t src, Nanoseconds ready, Nanoseconds wire) const {
    return wire > Nanoseconds(0) ? InterleavedStart(src, ready, wire, nics_[src].tx.NextFree(ready, wire)) : ready;
  }
  bool HasRequests() const { return !requests_.empty(); }
  // Grants every request made since the last call, shortest first (kTurns:
  // ring shares first, longest first), at `now`; `horizon` is the furthest
  // time the engine has handled (older reservations may be forgotten, see
  // kMemory). Appends the grants whose ends are known (all but kShared's) to
  // `done`, in grant order. kShared: for each transfer it starts, appends to
  // `checks` when the first transfer in flight would finish right after that
  // start.
  void Grant(Nanoseconds now, Nanoseconds horizon, std::vector<NicGrant>* done, std::vector<NicCheck>* checks);

  // kShared: wake-up `generation` is due at `now`. Only the latest wake-up
  // made counts (every later one replaces it): an earlier one does nothing.
  // The latest appends the transfers finished by `now` to `done`, in start
  // order, and the next wake-up, if any transfer is still in flight, to
  // `checks`.
  void FinishBy(Nanoseconds now, uint32_t generation, std::vector<NicGrant>* done, std::vector<NicCheck>* checks);
  // Wake-up generations count modulo this (the engine keeps them in an
  // event's op field, event_queue.h).
  static constexpr uint32_t kCheckGenerations = 1u << 28;

  // Hybrid: a collective's members stay busy (both directions) until `end`
  // (its real end, when later than the model's).
  void HoldMembersUntil(uint32_t comm, Nanoseconds now, Nanoseconds end, Nanoseconds horizon);
  // Hybrid: whether no virtual member of `comm` (across nodes) has its NIC
  // reserved past `start` (a real measurement is then clean).
  bool VirtualMembersFreeBy(uint32_t comm, Nanoseconds start) const;

  // Reservations kept behind the furthest time handled: in a paced hybrid
  // run a real rank's report is handled at its own stamp, which can lie
  // behind events already handled (the lookahead plus the report's way).
  static constexpr Nanoseconds kMemory = FromSeconds(1);

 private:
  struct Request {
    enum class Kind : uint8_t { kCollective, kHold, kPointToPoint, kSend };
    Kind kind = Kind::kCollective;
    uint32_t ticket = 0;
    uint32_t comm = 0;          // kCollective, kHold
    uint32_t src = 0, dst = 0;  // kPointToPoint (both), kSend (src)
    const OpInfo* op = nullptr; // kCollective, kHold
    Nanoseconds ready, duration;  // NIC time wanted from `ready` on (the grant order's key)
    Nanoseconds took;             // kSend: the transfer's whole time from its start
    bool ring_share = false;      // kTurns, set by Grant: queues a ring share on transmit sides
  };
  // A ring share queued on a transmit side (kQueues, kInterleave): [start, end) of
  // communicator `comm`, sent one ring step of `step` at a time.
  struct TxShare {
    Nanoseconds start, end, step;
    uint32_t comm = 0;
  };
  struct Directions {
    NicCalendar tx, rx;
    std::vector<TxShare> shares;  // kQueues, kInterleave: tx's ring shares not yet forgotten, in grant order
    size_t prune_at = 64;         // shares' size at which the forgotten ones are dropped
  };

  void GrantOne(const Request& r, std::vector<NicGrant>* done, std::vector<NicCheck>* checks);
  // The end of collective request `r` by the calendar or queues model.
  Nanoseconds ReserveCollective(const Request& r);
  bool QueuesOnTx(const OpInfo& op, const EngineComm& c) const;
  // QueuesOnTx and the ring's wire time (NetworkModel::RingWireTime) of a
  // collective, kept for the last (kind, algorithm, bytes, shape) asked: a
  // grant at 8192 ranks takes thousands of alike collectives at one instant
  // (every TP pair's all-reduce), and choosing NCCL's algorithm for each
  // held the engine for a millisecond.
  struct TxWire {
    bool queues = false;
    Nanoseconds wire, step;  // step: the wire of one ring step
  };
  const TxWire& TxWireOf(const OpInfo& op, const EngineComm& c);
  Nanoseconds QueueOnMembersTx(uint32_t comm, Nanoseconds ready, Nanoseconds wire, Nanoseconds step);
  // kInterleave: when a share of `wire` for `comm`, ready at `ready`, whose
  // side `d` is first free for it at `start` (> ready), has left: start +
  // wire, unless `ready` falls in a ring share H of another communicator;
  // then it waits for the end of H's step in progress (kTurns: not), shares
  // the side with the rest of H (each at half the rate), and sends what is
  // left after H in the first gap that holds it (never later than start +
  // wire).
  Nanoseconds SharedSent(const Directions& d, uint32_t comm, Nanoseconds ready, Nanoseconds wire,
                         Nanoseconds start) const;
  // kInterleave or kTurns: ring shares of different communicators share a side.
  bool Interleaves() const { return nic_model_ == NicModel::kInterleave || nic_model_ == NicModel::kTurns; }
  // kQueues, kInterleave: when a point-to-point transfer of `wire` from
  // `src`, ready at `ready` and first free there at `queued`, effectively
  // starts (its last byte leaves `wire` later): through SharedSent, as a
  // share of a communicator no ring has; `queued` under the other models.
  Nanoseconds InterleavedStart(uint32_t src, Nanoseconds ready, Nanoseconds wire, Nanoseconds queued) const;
  static constexpr uint32_t kPointToPointComm = UINT32_MAX;  // no ring's communicator
  // Reserves every member's both directions for `duration` from the first
  // instant >= `ready` at which all are free; returns that instant.
  Nanoseconds ReserveMembers(const EngineComm& c, Nanoseconds ready, Nanoseconds duration);
  void StartShared(const Request& r, const std::vector<uint32_t>& directions, std::vector<NicCheck>* checks);
  // kShared: a new latest wake-up at the next finish, if any.
  void AddCheck(std::vector<NicCheck>* checks);
  static uint32_t Tx(uint32_t actor) { return 2 * actor; }
  static uint32_t Rx(uint32_t actor) { return 2 * actor + 1; }

  const EngineWorld& world_;
  const NetworkModel& model_;
  const NicModel nic_model_;
  // Whether anything reads a side's ring shares (SharedSent): kInterleave,
  // or kQueues with point-to-point transfers between ring steps. Fixed at
  // construction, so a model that reads none records none.
  const bool keeps_shares_;
  std::vector<Directions> nics_;                // per actor
  Nanoseconds now_, forget_before_;             // of the Grant in progress
  std::vector<Request> requests_;               // made at the current instant
  std::vector<Request> batch_;                  // Grant's working copy (kept for its capacity)
  std::vector<const NicCalendar*> calendars_;   // ReserveMembers' working list
  std::unique_ptr<SharedNics> shared_;          // kShared only
  uint32_t check_generation_ = 0;               // of the latest wake-up made
  absl::flat_hash_map<uint64_t, std::pair<uint32_t, Nanoseconds>> shared_tickets_;  // flow id -> (ticket, start)
  struct TxWireKey {
    graph::CollectiveKind kind{};
    graph::Algorithm algorithm{};
    uint64_t bytes = 0;
    CommShape shape;
    bool operator==(const TxWireKey&) const = default;
  };
  std::optional<std::pair<TxWireKey, TxWire>> tx_wire_;  // TxWireOf's last answer
};

}  // namespace prism::engine

#endif  // PRISM_DAEMON_ENGINE_NIC_SCHEDULER_H_
