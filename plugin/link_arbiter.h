// Which connection's message a modelled NIC transmit side sends next
// (PRISM_LINK_ORDER; docs/plugin.md, "Link shaping").
//
// Every send comm through a NIC is one connection of that NIC's arbiter. A
// message is posted with its size at the time NCCL posted it; the arbiter
// decides when its first byte leaves, and so its LinkModel::Times:
//  - kPosted: in posting order, as one FIFO over all connections (LinkModel):
//      start = max(posted, previous message's wire_done)
//    decided at once. A connection that posted NCCL's window (up to 8 steps
//    of 512 KiB per channel) holds every later message of the NIC behind it.
//  - kRoundRobin: whenever the NIC is free (at its previous slice's end, or
//    at a posting that finds it idle), the next connection in turn among
//    those with a message posted by then sends the next slice of its oldest
//    one, as a NIC takes packets from its queue pairs in turn:
//      slice = min(kRoundRobinSlice, what is left of it)  (a whole-message
//              connection: all of it)
//      start = max(free, posted);  end = start + slice / bandwidth
//    A message's wire_done is its last slice's end, and it is decided then,
//    not at its posting. Connections in turn share the NIC about equally, as
//    a NIC's queue pairs do; a message posted later waits for at most one
//    slice of every other busy connection per slice of its own. A
//    connection whose bytes must go out with their times (a payload behind
//    its header on a socket) takes whole-message turns instead, so that its
//    times are known when its first byte leaves.
//    A turn is decided `decide_ahead` before it begins (at the first call at
//    or after that), with the messages posted by then: the message's times
//    then reach its receiver that long before they come, enough for its
//    bytes to land, and a message posted within that span takes its turn
//    from the next one on.
// Decisions depend only on the messages posted by the time they are made, so
// a caller may ask at any later time (NextDecided's `now`) and gets the same
// answer: undecided turns are decided up to `now + decide_ahead` on every
// call.
//
// Thread-compatible: one owner (SharedLink holds it under its mutex).
#ifndef PRISM_PLUGIN_LINK_ARBITER_H_
#define PRISM_PLUGIN_LINK_ARBITER_H_

#include <cstdint>
#include <deque>
#include <optional>
#include <vector>

#include "common/units.h"
#include "plugin/link_model.h"

namespace prism::plugin {

// kRoundRobin's slice: 64 KiB, 210 us at 2.5 Gbit/s, 5 us at 100 Gbit/s.
inline constexpr Bytes kRoundRobinSlice{64 * 1024};

class LinkArbiter {
 public:
  LinkArbiter(BitsPerSecond bandwidth, Nanoseconds latency, LinkOrder order,
              Nanoseconds decide_ahead = Nanoseconds(0))
      : link_(bandwidth, latency), order_(order), decide_ahead_(decide_ahead) {}
  LinkArbiter(const LinkArbiter&) = delete;
  LinkArbiter& operator=(const LinkArbiter&) = delete;

  // A new connection's id (ids of removed connections are reused).
  // `whole_messages`: kRoundRobin turns of whole messages, not slices.
  uint32_t AddConnection(bool whole_messages = false);
  // Drops the connection's undecided and uncollected messages; its id may be
  // handed out again.
  void RemoveConnection(uint32_t conn);

  // A message of `bytes` posted by `conn` at `now`: its times when they are
  // decided at once and nothing of `conn`'s waits to be collected before it
  // (always under kPosted; the caller then does not collect it), else
  // nullopt (NextDecided gives them). (Two threads' clocks may put a posting
  // a few ns before a decision already made; it then takes part from the
  // next decision on.)
  std::optional<LinkModel::Times> Post(uint32_t conn, Bytes bytes, Nanoseconds now);
  // The times of `conn`'s oldest posted message not yet collected, once
  // decided (always, under kPosted); nullopt while it waits for the NIC.
  // Each message is returned once, in posting order.
  std::optional<LinkModel::Times> NextDecided(uint32_t conn, Nanoseconds now);

  LinkOrder order() const { return order_; }
  const LinkModel& link() const { return link_; }

 private:
  struct Posted {
    Bytes left;  // kRoundRobin: not yet given a slice
    Nanoseconds at;
  };
  struct Connection {
    bool in_use = false;
    bool whole_messages = false;
    std::deque<Posted> waiting;               // posted, not yet decided
    std::deque<LinkModel::Times> decided;     // decided, not yet collected
  };

  // kRoundRobin: makes every decision due by `now` (turns beginning up to
  // `now + decide_ahead_`).
  void DecideUpTo(Nanoseconds now);
  // The connection whose turn it is at `at` among those with a message posted
  // by then, starting after the last one served; -1 when none.
  int NextInTurn(Nanoseconds at) const;
  // The earliest posting among the waiting messages (waiting_ > 0).
  Nanoseconds EarliestWaiting() const;

  LinkModel link_;
  const LinkOrder order_;
  const Nanoseconds decide_ahead_;
  std::vector<Connection> conns_;
  std::vector<uint32_t> free_ids_;
  uint32_t last_served_ = 0;
  size_t waiting_ = 0;       // messages waiting over all connections
};

}  // namespace prism::plugin

#endif  // PRISM_PLUGIN_LINK_ARBITER_H_
