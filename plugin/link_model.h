// The modelled link of one connection direction: a FIFO pipe of bandwidth
// `bits_per_second` (0: infinitely fast) and one-way `latency_ns`.
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
#include <mutex>

#include "common/units.h"

namespace prism::plugin {

class LinkModel {
 public:
  LinkModel(uint64_t bits_per_second, int64_t latency_ns)
      : bits_per_second_(bits_per_second), latency_ns_(latency_ns) {}

  struct Times {
    int64_t wire_done_ns;
    int64_t deliver_ns;
  };

  // Reserves the link for `bytes` posted at `now_ns`.
  Times Reserve(uint64_t bytes, int64_t now_ns) {
    int64_t start = std::max(now_ns, wire_free_ns_);
    int64_t done = start;
    if (bits_per_second_ > 0) {
      done += TransferTime(Bytes(bytes), BitsPerSecond(bits_per_second_)).count();
    }
    wire_free_ns_ = done;
    return Times{done, done + latency_ns_};
  }

  bool shaped() const { return bits_per_second_ > 0 || latency_ns_ > 0; }
  int64_t latency_ns() const { return latency_ns_; }
  uint64_t bits_per_second() const { return bits_per_second_; }

 private:
  uint64_t bits_per_second_;
  int64_t latency_ns_;
  int64_t wire_free_ns_ = 0;
};

// The transmit side of one NIC (device) of the process, shared by every
// connection through it, real or virtual: a NIC's bandwidth is divided among
// its connections and channels, not granted to each (DESIGN.md, "A ground
// truth is only as good as its links"). Thread-safe (isend runs on NCCL's
// proxy threads, one per communicator).
class SharedLink {
 public:
  SharedLink(uint64_t bits_per_second, int64_t latency_ns) : link_(bits_per_second, latency_ns) {}
  SharedLink(const SharedLink&) = delete;
  SharedLink& operator=(const SharedLink&) = delete;

  LinkModel::Times Reserve(uint64_t bytes, int64_t now_ns) {
    std::lock_guard<std::mutex> lock(mu_);
    return link_.Reserve(bytes, now_ns);
  }
  bool shaped() const { return link_.shaped(); }
  int64_t latency_ns() const { return link_.latency_ns(); }
  uint64_t bits_per_second() const { return link_.bits_per_second(); }

 private:
  std::mutex mu_;
  LinkModel link_;
};

}  // namespace prism::plugin

#endif  // PRISM_PLUGIN_LINK_MODEL_H_
