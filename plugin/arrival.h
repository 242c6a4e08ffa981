// When a message from a virtual peer reaches the real rank: the timing rules
// VirtualRecvComm applies to a receive once it knows which form applies
// (OpSchedule and ReceiveSchedule in proto/prism_service.proto). Pure
// functions of their arguments: no clock is read, nothing is shared.
//
// Instants are CLOCK_REALTIME, as Nanoseconds since the epoch (the clock the
// plugin stamps its transfers with); durations are Nanoseconds too.
#ifndef PRISM_PLUGIN_ARRIVAL_H_
#define PRISM_PLUGIN_ARRIVAL_H_

#include <algorithm>
#include <cstdint>
#include <vector>

#include "common/pat_schedule.h"
#include "common/ring_step.h"
#include "common/time_math.h"
#include "common/units.h"

namespace prism::plugin {

// How long `bytes` occupy a link of `bandwidth` (rounded up to a whole
// nanosecond); 0 when the link is infinitely fast (bandwidth 0).
inline Nanoseconds WireTime(Bytes bytes, BitsPerSecond bandwidth) {
  return bandwidth.count() > 0 ? TransferTime(bytes, bandwidth) : Nanoseconds(0);
}

// The link a virtual sender's messages travel.
struct VirtualLink {
  BitsPerSecond bandwidth;  // 0: infinitely fast
  Nanoseconds latency;      // one-way
};

// Which rule times a receive (VirtualRecvComm picks it; see its file comment).
enum class ArrivalForm : uint8_t {
  kMirror,     // symmetric ring collective: timed like this rank's own send
  kPatMirror,  // PAT all-gather/reduce-scatter: like this rank's own send of
               // the same channel, dimension and step (PatDimension)
  kStream,     // the virtual sender streams the operation from `ready`
  kPlainLink,  // no operation or schedule: a modelled link from the posting
};

// One receive, as the rule needs it. Instants are CLOCK_REALTIME.
struct ArrivalInput {
  ArrivalForm form = ArrivalForm::kPlainLink;
  Nanoseconds posted;         // irecv posted the receive then
  Bytes bytes;                // what the virtual sender puts into it
  Nanoseconds ready;          // kMirror, kStream: the virtual sender was ready then (0: none)
  Nanoseconds own_send_done;  // kMirror: this rank's own send of the same
                              // operation, channel and step left the wire then;
                              // kPatMirror: of the same channel, dimension and step
  VirtualLink link;
  // kMirror, the ring's lockstep floor (used when ring_start > 0): every
  // member had arrived at ring_start; this message belongs to ring step
  // `ring_step` (0-based, RingStepOfMessage); each step costs the virtual
  // members `step_cost` beyond the link latency (NCCL's step cost c) and
  // `step_wire` of wire time per member (the model's W/h: RingStepWireOf).
  Nanoseconds ring_start;
  uint32_t ring_step = 0;
  Nanoseconds step_cost;
  Nanoseconds step_wire;
  // The first ring step the floor holds (PRISM_RING_FLOOR): 0, every step
  // (model, the default); RingLastStep(...), only the ring's last step (end).
  uint32_t ring_floor_from = 0;
  // kPatMirror, PAT's floor (used when > 0): the receive does not complete
  // before it (PatFloor, below).
  Nanoseconds pat_floor;
  // kPatMirror: this rank's first send of the operation was posted then (0:
  // not known); members that arrived (ready) after it are late (PatLate).
  Nanoseconds own_first_send;
};

struct Arrival {
  Nanoseconds done;      // the receive completes then
  Nanoseconds wire_end;  // the virtual sender's link is free again then
};

// Times one receive. `wire_end` is when the virtual sender's link of this
// connection is free (the previous Arrival's wire_end; 0 at first). With
// T = WireTime(bytes, link.bandwidth) and L = link.latency:
//   kMirror:    done = max(own_send_done + L,
//                          max(ready, wire_end) + T + L when ready > 0
//                          and ready + T > own_send_done, i.e. late,
//                          RingFloor(in) when ring_start > 0: the
//                          lockstep floor, below);
//               wire_end' = max(wire_end, done - L) (the sender's link
//               was busy until that message's last byte left; a sender
//               that arrived late sends its messages back to back from
//               ready, at link rate, not all at once)
//   kPatMirror: as kMirror (the own send of the receive's dimension, below),
//               with PatFloor(...) (in.pat_floor, when > 0) for the floor
//   kStream:    wire_end' = max(ready, wire_end) + T;   done = wire_end' + L
//   kPlainLink: wire_end' = max(posted, wire_end) + T;  done = wire_end' + L
// and in every form done is not before posted.
//
// The lockstep floor: what reaches this rank at ring step s left a virtual
// member at its step s, which that member took once its step s-1 had
// arrived, and so on back to the ring's start: s + 1 hops of the model's
// step, as prismd's model times the ring (common/ring_step.h), less the
// first hop's c, which this rank paid before its own first send (ring_start):
//   RingFloor = ring_start + RingStepsTime(W/h, L + c, s + 1, k) - c
//             = ring_start + s * (W/(h k) + L + c) + W/(h k) + L + (k-1) W/(h k)
// so the floor of a ring's last step is ring_start - c plus the model's ring
// time. This rank's own sends cannot stand in for that chain when
// its NCCL does not wait for data between steps (an LL step whose chunk is
// empty: a 4-byte all-reduce over 8192 ranks moves its one element through
// 16,381 hops while the real rank's own empty steps take 5 us each).
//
// Which steps it holds (in.ring_floor_from, PRISM_RING_FLOOR). model (0, the
// default): every step. Each receive is then the later of this rank's own
// pace and the model's, so a step this rank takes longer than the model's
// delays every later one while the steps it takes faster wait for the floor:
// its lag behind the model is a walk held at zero, and the ring ends at the
// model's time plus the largest lag the rank built up (with steps that vary
// around the model's, on average about sigma * sqrt(2 h / pi) for h steps of
// spread sigma). end (RingLastStep): only the ring's last step; the rank's
// faster steps pay back its slower ones and the ring ends at the later of
// the model's time and the rank's own (bench/ring_floor_bench.cc).
inline Nanoseconds RingFloor(const ArrivalInput& in) {
  const Nanoseconds chain = RingStepsTime(in.step_wire, SatAdd(in.link.latency, in.step_cost),
                                          uint64_t{in.ring_step} + 1, kNcclRingSlicesPerStep);
  return SatAdd(in.ring_start, chain - in.step_cost);
}

// A PAT receive from virtual senders that arrived (in.ready) after this
// rank's first send: they run this rank's schedule from ready, so the link
// that carries the operation's receives (`wire_end`, their stream so far)
// sends it back to back after the ones before it, in the order this rank
// receives them, as long as that stream is behind this rank's own send of
// its twin. A ring's receive looks at ready alone (its first step's); a PAT
// operation's first messages on every dimension wait for nothing, so this
// rank's NIC sends a reduce-scatter's whole dimension 0 before its late
// members arrived, and the stream, not ready, says when their twins come.
// Members on time: as a ring's.
inline bool PatLate(const ArrivalInput& in, Nanoseconds wire_end, Nanoseconds wire) {
  if (in.ready + wire > in.own_send_done) return true;
  return in.own_first_send > Nanoseconds(0) && in.ready > in.own_first_send &&
         Max(in.ready, wire_end) + wire > in.own_send_done;
}

inline Arrival ResolveArrival(const ArrivalInput& in, Nanoseconds wire_end) {
  const Nanoseconds wire = WireTime(in.bytes, in.link.bandwidth);
  const Nanoseconds latency = in.link.latency;
  Arrival a{Nanoseconds(0), wire_end};
  switch (in.form) {
    case ArrivalForm::kMirror:
    case ArrivalForm::kPatMirror:
      a.done = in.own_send_done + latency;
      // Late (its ready time decides): back to back from ready. On time:
      // the own send alone paces it (no queueing behind other channels).
      // A PAT receive is late while the senders' link, streaming from
      // ready, is behind this rank's own send (PatLate, below).
      if (in.ready > Nanoseconds(0) &&
          (in.form == ArrivalForm::kPatMirror ? PatLate(in, wire_end, wire) : in.ready + wire > in.own_send_done))
        a.done = Max(a.done, Max(in.ready, wire_end) + wire + latency);
      if (in.ring_start > Nanoseconds(0) && in.ring_step >= in.ring_floor_from)
        a.done = Max(a.done, RingFloor(in));
      if (in.pat_floor > Nanoseconds(0))
        a.done = Max(a.done, in.pat_floor);
      a.wire_end = Max(wire_end, a.done - latency);
      break;
    case ArrivalForm::kStream:
      a.wire_end = Max(in.ready, wire_end) + wire;
      a.done = a.wire_end + latency;
      break;
    case ArrivalForm::kPlainLink:
      a.wire_end = Max(in.posted, wire_end) + wire;
      a.done = a.wire_end + latency;
      break;
  }
  a.done = Max(a.done, in.posted);
  return a;
}

// The ring step (0-based) of the `message`-th network transfer (0-based) of
// one ring collective on one connection. NCCL 2.28 moves a Simple ring step
// in kRingSlicesPerSimpleStep transfers (chunk steps / slice steps =
// (NCCL_STEPS/2) / (NCCL_STEPS/4) for all-reduce, all-gather and
// reduce-scatter); an LL or LL128 step is one transfer.
inline constexpr uint32_t kRingSlicesPerSimpleStep = kNcclRingSlicesPerStep;
inline uint32_t RingStepOfMessage(bool simple_protocol, uint32_t message) {
  return simple_protocol ? message / kRingSlicesPerSimpleStep : message;
}

// The last ring step (0-based) of a ring all-reduce (`all_reduce`: 2(n-1)
// steps), all-gather or reduce-scatter (n-1 steps) over `n` members: where
// PRISM_RING_FLOOR=end holds the ring (0 for a ring of one member). A Simple operation larger than one of NCCL's loops takes more
// steps than that; the floor holds each of them (RingFloor of its step).
inline uint32_t RingLastStep(bool all_reduce, uint64_t n) {
  if (n < 2) return 0;
  const uint64_t steps = all_reduce ? 2 * (n - 1) : n - 1;
  return static_cast<uint32_t>(std::min<uint64_t>(steps - 1, UINT32_MAX));
}

// W/h of a ring all-reduce (`all_reduce`), all-gather or reduce-scatter of
// `bytes` (NCCL's count times the datatype's size: per rank for all-gather
// and reduce-scatter) over `n` members on links of `bandwidth`, as prismd's
// model times it (NetworkModel::RingWireTime over the ring's steps):
// all-reduce 2(n-1)/n * bytes over 2(n-1) steps, the others (n-1) * bytes
// over n-1 steps. 0 for a ring of one member or an infinitely fast link.
inline Nanoseconds RingStepWireOf(bool all_reduce, uint64_t bytes, uint64_t n, BitsPerSecond bandwidth) {
  if (n < 2 || bandwidth.count() == 0) return Nanoseconds(0);
  if (all_reduce) return RingStepWire(FractionTransferTime(Bytes(bytes), 2 * (n - 1), n, bandwidth), 2 * (n - 1));
  return RingStepWire(FractionTransferTime(Bytes(bytes), n - 1, 1, bandwidth), n - 1);
}

// PAT (NCCL's binomial-tree all-gather and reduce-scatter, one rank per
// node; the engine's model: daemon/engine/pat_play.h). Rank r of n talks to
// r +- 2^d on "dimension" d: an all-gather receives from r + 2^d and sends to
// r - 2^d, a reduce-scatter receives from r - 2^d and sends to r + 2^d (mod
// n; NCCL v2.28.9-1 src/proxy.cc and src/device/prims_simple.h). Every rank
// runs the same schedule shifted by its rank, so the k-th message r receives
// on dimension d is what its sender sends there as its own k-th message, at
// the moment r sends its k-th message on d: a receive from a virtual peer on
// time closes on this rank's own send of the same channel, dimension and step
// plus the link latency (kPatMirror), as a ring receive closes on the own
// send of the same step (kMirror). No cycle: an all-gather's send on d waits
// only for receives on higher dimensions, a reduce-scatter's for lower ones.
//
// The dimension of this rank's connection to `peer` (a receive when
// `is_send` is false); -1 when the peer is at no power-of-two distance in
// that direction (not a PAT connection). With D = distance from this rank to
// the peer along the direction the data goes: all-gather receive and
// reduce-scatter send: (peer - rank) mod n; all-gather send and
// reduce-scatter receive: (rank - peer) mod n; d = log2(D) when D is a power
// of two.
inline int PatDimension(bool all_gather, bool is_send, int rank, int nranks, int peer) {
  if (nranks < 2 || rank < 0 || peer < 0 || rank >= nranks || peer >= nranks || rank == peer) return -1;
  const bool ahead = all_gather != is_send;  // the peer is at rank + 2^d
  const int distance = ahead ? (peer - rank + nranks) % nranks : (rank - peer + nranks) % nranks;
  if ((distance & (distance - 1)) != 0) return -1;
  int d = 0;
  while ((1 << d) < distance) ++d;
  return d;
}

// PAT's floor: what reaches this rank as its k-th message on dimension d
// left its virtual sender as that sender's own k-th message on d. Where the
// model charges NCCL's step cost, the sender's NCCL took its steps in NCCL's
// own order (common/pat_kernel.h: the same step list this rank's NCCL runs,
// NCCL_STEPS slots per connection, each hop L + PatStepCost(c, D)), so its
// k-th message on d left no earlier than that walk's time for it with no
// GPU cost per round (play.earliest[d][k] = play.sent[d][k], from the
// moment every member arrived, `start`): the GPU's own pace is this rank's,
// which the mirror passes on (the virtual peers have its GPU). Without a
// step cost, at the earliest in any order of sends (the links' bound,
// common/pat_schedule.h). So the receive is not done before
//   PatFloor = start + play.earliest[d][k] + L
// (the rank's own k-th send on d stands in for the sender's only while its
// NCCL pays the model's c per hop: a real rank faster per hop than the
// model would otherwise pull its virtual peers along). Not the links'
// play's own send times: that play sends the earliest-ready message first,
// NCCL runs its steps in its own order, and a receive held to the play's
// order stalled NCCL's next steps (a reduce-scatter over 8192 ranks: 2.5
// times the model on the GPU host, 2026-12-02). Nor the model's rounds: with
// them (the walk at 8.0 / 11.6 us a round) the floor held a real rank's
// all-gather over 8192 ranks at +2.1% over the model (2026-12-03). 0 (no
// floor) where the play has no such message.
inline Nanoseconds PatFloor(const PatPlay& play, Nanoseconds start, int dim, int64_t step, Nanoseconds latency) {
  if (dim < 0 || step < 0 || static_cast<size_t>(dim) >= play.earliest.size()) return Nanoseconds(0);
  const std::vector<Nanoseconds>& earliest = play.earliest[static_cast<size_t>(dim)];
  if (static_cast<size_t>(step) >= earliest.size()) return Nanoseconds(0);
  return SatAdd(SatAdd(start, earliest[static_cast<size_t>(step)]), latency);
}

// Bytes a STREAM virtual sender puts into one receive step of `posted_size`
// bytes, when it already streamed `streamed` bytes of the operation on this
// connection: the operation's per-channel share ceil(op_bytes / channels)
// (channels 0 counts as 1) caps it; once the share is used up, or for an
// operation of 0 bytes, the posted size.
inline uint64_t StreamStepBytes(uint64_t op_bytes, uint64_t channels, uint64_t streamed,
                                uint64_t posted_size) {
  channels = std::max<uint64_t>(channels, 1);
  const uint64_t share = (op_bytes + channels - 1) / channels;
  const uint64_t left = share > streamed ? share - streamed : 0;
  return left > 0 ? std::min(posted_size, left) : posted_size;
}

}  // namespace prism::plugin

#endif  // PRISM_PLUGIN_ARRIVAL_H_
