// When a message from a virtual peer reaches the real rank: the timing rules
// VirtualRecvComm applies to a receive once it knows which form applies
// (OpSchedule and ReceiveSchedule in proto/prism_service.proto). Pure
// functions of their arguments: no clock is read, nothing is shared.
//
// Times are CLOCK_REALTIME nanoseconds. A link of `bits_per_second` 0 is
// infinitely fast; `latency_ns` is one-way.
#ifndef PRISM_PLUGIN_ARRIVAL_H_
#define PRISM_PLUGIN_ARRIVAL_H_

#include <algorithm>
#include <cstdint>

#include "common/units.h"

namespace prism::plugin {

// Nanoseconds `bytes` occupy a link of `bits_per_second` (rounded up to a
// whole nanosecond); 0 when the link is infinitely fast.
inline int64_t WireTimeNs(uint64_t bytes, uint64_t bits_per_second) {
  return bits_per_second > 0 ? TransferTime(Bytes(bytes), BitsPerSecond(bits_per_second)).count() : 0;
}

// The link a virtual sender's messages travel.
struct VirtualLink {
  uint64_t bits_per_second = 0;
  int64_t latency_ns = 0;
};

// Which rule times a receive (VirtualRecvComm picks it; see its file comment).
enum class ArrivalForm : uint8_t {
  kMirror,     // symmetric ring collective: timed like this rank's own send
  kStream,     // the virtual sender streams the operation from ready_ns
  kPlainLink,  // no operation or schedule: a modelled link from the posting
};

// One receive, as the rule needs it.
struct ArrivalInput {
  ArrivalForm form = ArrivalForm::kPlainLink;
  int64_t posted_ns = 0;         // irecv posted the receive then
  uint64_t bytes = 0;            // what the virtual sender puts into it
  int64_t ready_ns = 0;          // kMirror, kStream: the virtual sender was ready then (0: none)
  int64_t own_send_done_ns = 0;  // kMirror: this rank's own send of the same
                                 // operation, channel and step left the wire then
  VirtualLink link;
};

struct Arrival {
  int64_t done_ns = 0;      // the receive completes then
  int64_t wire_end_ns = 0;  // the virtual sender's link is free again then
};

// Times one receive. `wire_end_ns` is when the virtual sender's link of this
// connection is free (the previous Arrival's wire_end_ns; 0 at first). With
// T = WireTimeNs(bytes, link.bits_per_second) and L = link.latency_ns:
//   kMirror:    done = max(own_send_done + L, ready + T + L when ready > 0);
//               wire_end' = max(wire_end, done - L) (the sender's link
//               was busy until that message's last byte left)
//   kStream:    wire_end' = max(ready, wire_end) + T;   done = wire_end' + L
//   kPlainLink: wire_end' = max(posted, wire_end) + T;  done = wire_end' + L
// and in every form done is not before posted.
inline Arrival ResolveArrival(const ArrivalInput& in, int64_t wire_end_ns) {
  const int64_t wire = WireTimeNs(in.bytes, in.link.bits_per_second);
  const int64_t latency = in.link.latency_ns;
  Arrival a{0, wire_end_ns};
  switch (in.form) {
    case ArrivalForm::kMirror:
      a.done_ns = in.own_send_done_ns + latency;
      if (in.ready_ns > 0) a.done_ns = std::max(a.done_ns, in.ready_ns + wire + latency);
      a.wire_end_ns = std::max(wire_end_ns, a.done_ns - latency);
      break;
    case ArrivalForm::kStream:
      a.wire_end_ns = std::max(in.ready_ns, wire_end_ns) + wire;
      a.done_ns = a.wire_end_ns + latency;
      break;
    case ArrivalForm::kPlainLink:
      a.wire_end_ns = std::max(in.posted_ns, wire_end_ns) + wire;
      a.done_ns = a.wire_end_ns + latency;
      break;
  }
  a.done_ns = std::max(a.done_ns, in.posted_ns);
  return a;
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
