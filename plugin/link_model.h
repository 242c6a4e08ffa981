// The modelled link of one connection direction: a FIFO pipe of `bandwidth`
// (0: infinitely fast) and one-way `latency`.
//
// A message of S bytes posted at time p leaves the sender at
//   wire_done = max(p, previous wire_done) + S / bandwidth
// and is delivered to the receiver at wire_done + latency. The sender
// completes its send at wire_done, the receiver its receive at delivery. The
// sender computes both and stamps the delivery time into the message header,
// so both sides agree without exchanging clocks (one host: the same
// CLOCK_REALTIME; several hosts: as good as their clock sync).
//
// Thread-compatible: one owner thread (the comm's proxy thread).
#ifndef PRISM_PLUGIN_LINK_MODEL_H_
#define PRISM_PLUGIN_LINK_MODEL_H_

#include <algorithm>
#include <cstdint>

#include "common/units.h"

namespace prism::plugin {

// In which order a NIC shared by several connections sends their messages
// (PRISM_LINK_ORDER; link_arbiter.h): as posted, one FIFO over all of them,
// or the connections in turn, a message at a time.
enum class LinkOrder : uint8_t { kPosted, kRoundRobin };

class LinkModel {
 public:
  LinkModel(BitsPerSecond bandwidth, Nanoseconds latency) : bandwidth_(bandwidth), latency_(latency) {}

  struct Times {
    Nanoseconds wire_done;  // the last byte left the sender
    Nanoseconds deliver;    // the receiver has it
  };

  // Reserves the link for `bytes` posted at `now` (CLOCK_REALTIME).
  Times Reserve(Bytes bytes, Nanoseconds now) {
    const Nanoseconds start = Max(now, wire_free_);
    const Nanoseconds done = bandwidth_.count() > 0 ? start + TransferTime(bytes, bandwidth_) : start;
    wire_free_ = done;
    return Times{done, done + latency_};
  }

  bool shaped() const { return bandwidth_.count() > 0 || latency_ > Nanoseconds(0); }
  // The previous message's wire_done (0 before the first).
  Nanoseconds wire_free() const { return wire_free_; }
  Nanoseconds latency() const { return latency_; }
  BitsPerSecond bandwidth() const { return bandwidth_; }

 private:
  BitsPerSecond bandwidth_;
  Nanoseconds latency_;
  Nanoseconds wire_free_;
};

}  // namespace prism::plugin

#endif  // PRISM_PLUGIN_LINK_MODEL_H_
