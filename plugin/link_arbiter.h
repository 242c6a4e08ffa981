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
//  - kRoundRobin: whenever the NIC is free (at its previous wire_done, or at
//    a posting that finds it idle), the next connection in turn among those
//    with a message posted by then sends its oldest one, whole:
//      start = max(free, posted);  wire_done = start + bytes / bandwidth
//    as a NIC takes work from its queue pairs in turn. A message that has to
//    wait is decided only once the NIC frees for it, so its times are known
//    then, not at its posting; a message posted later still waits at most one
//    message of every other busy connection.
// Decisions depend only on messages posted by the time they are made, so a
// caller may ask at any later time (NextDecided's `now`) and gets the same
// answer: undecided messages are decided up to `now` on every call.
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

class LinkArbiter {
 public:
  LinkArbiter(BitsPerSecond bandwidth, Nanoseconds latency, LinkOrder order)
      : link_(bandwidth, latency), order_(order) {}
  LinkArbiter(const LinkArbiter&) = delete;
  LinkArbiter& operator=(const LinkArbiter&) = delete;

  // A new connection's id (ids of removed connections are reused).
  uint32_t AddConnection();
  // Drops the connection's undecided and uncollected messages; its id may be
  // handed out again.
  void RemoveConnection(uint32_t conn);

  // A message of `bytes` posted by `conn` at `now`. (Two threads' clocks may
  // put a posting a few ns before a decision already made; it then takes
  // part from the next decision on.)
  void Post(uint32_t conn, Bytes bytes, Nanoseconds now);
  // The times of `conn`'s oldest posted message not yet collected, once
  // decided (always, under kPosted); nullopt while it waits for the NIC.
  // Each message is returned once, in posting order.
  std::optional<LinkModel::Times> NextDecided(uint32_t conn, Nanoseconds now);

  LinkOrder order() const { return order_; }
  const LinkModel& link() const { return link_; }

 private:
  struct Posted {
    Bytes bytes;
    Nanoseconds at;
  };
  struct Connection {
    bool in_use = false;
    std::deque<Posted> waiting;               // posted, not yet decided
    std::deque<LinkModel::Times> decided;     // decided, not yet collected
  };

  // kRoundRobin: makes every decision due by `now`.
  void DecideUpTo(Nanoseconds now);
  // The connection whose turn it is at `at` among those with a message posted
  // by then, starting after the last one served; -1 when none.
  int NextInTurn(Nanoseconds at) const;
  // The earliest posting among the waiting messages (waiting_ > 0).
  Nanoseconds EarliestWaiting() const;

  LinkModel link_;
  const LinkOrder order_;
  std::vector<Connection> conns_;
  std::vector<uint32_t> free_ids_;
  uint32_t last_served_ = 0;
  size_t waiting_ = 0;       // messages waiting over all connections
};

}  // namespace prism::plugin

#endif  // PRISM_PLUGIN_LINK_ARBITER_H_
