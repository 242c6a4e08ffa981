// The transmit side of one NIC (device) of the process, shared by every
// connection through it, real or virtual: a NIC's bandwidth is divided among
// its connections and channels, not granted to each (docs/design.md: a
// ground truth is only as good as its links). In which order its connections'
// messages go is the LinkArbiter's (PRISM_LINK_ORDER).
//
// Thread-safe (isend and test run on NCCL's proxy threads, one per
// communicator). The link must outlive every LinkConnection on it.
#ifndef PRISM_PLUGIN_SHARED_LINK_H_
#define PRISM_PLUGIN_SHARED_LINK_H_

#include <cstdint>
#include <mutex>
#include <optional>

#include "common/units.h"
#include "plugin/link_arbiter.h"
#include "plugin/link_model.h"

namespace prism::plugin {

class SharedLink {
 public:
  SharedLink(BitsPerSecond bandwidth, Nanoseconds latency, LinkOrder order = LinkOrder::kPosted,
             Nanoseconds decide_ahead = Nanoseconds(0))
      : arbiter_(bandwidth, latency, order, decide_ahead) {}
  SharedLink(const SharedLink&) = delete;
  SharedLink& operator=(const SharedLink&) = delete;

  // LinkArbiter's, under the link's lock.
  uint32_t AddConnection(bool whole_messages) {
    std::lock_guard<std::mutex> lock(mu_);
    return arbiter_.AddConnection(whole_messages);
  }
  void RemoveConnection(uint32_t conn) {
    std::lock_guard<std::mutex> lock(mu_);
    arbiter_.RemoveConnection(conn);
  }
  std::optional<LinkModel::Times> Post(uint32_t conn, Bytes bytes, Nanoseconds now) {
    std::lock_guard<std::mutex> lock(mu_);
    return arbiter_.Post(conn, bytes, now);
  }
  std::optional<LinkModel::Times> NextDecided(uint32_t conn, Nanoseconds now) {
    std::lock_guard<std::mutex> lock(mu_);
    return arbiter_.NextDecided(conn, now);
  }

  LinkOrder order() const { return arbiter_.order(); }

 private:
  std::mutex mu_;
  LinkArbiter arbiter_;
};

// One send comm's connection on a SharedLink, from construction to
// destruction. `whole_messages`: its messages take whole turns under
// LinkOrder::kRoundRobin (a comm whose payload follows its header on a
// socket must send both when the message's times are known; a comm whose
// payload goes ahead through shared memory, or a virtual one, need not).
// Thread-compatible: the comm's proxy thread uses it.
class LinkConnection {
 public:
  LinkConnection(SharedLink* link, bool whole_messages)
      : link_(link), id_(link->AddConnection(whole_messages)) {}
  ~LinkConnection() { link_->RemoveConnection(id_); }
  LinkConnection(const LinkConnection&) = delete;
  LinkConnection& operator=(const LinkConnection&) = delete;

  // A message of `bytes` posted now: its times if decided at once with
  // nothing of this connection's before it (always under LinkOrder::kPosted),
  // else nullopt and NextDecided gives them, in posting order.
  std::optional<LinkModel::Times> Post(Bytes bytes, Nanoseconds now) { return link_->Post(id_, bytes, now); }
  std::optional<LinkModel::Times> NextDecided(Nanoseconds now) { return link_->NextDecided(id_, now); }
  const SharedLink& link() const { return *link_; }

 private:
  SharedLink* link_;
  const uint32_t id_;
};

}  // namespace prism::plugin

#endif  // PRISM_PLUGIN_SHARED_LINK_H_
