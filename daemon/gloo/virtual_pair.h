// One Gloo pair between a virtual rank (played here) and a real rank: prismd
// connects to the real rank's Gloo listener, writes the sequence number its
// pair waits for, then answers every message on Gloo's protocol
// (gloo_wire.h):
//  * the real rank's NOTIFY_SEND_READY (slot, n) is answered with
//    NOTIFY_RECV_READY (slot, n); the SEND_UNBOUND_BUFFER that follows is
//    read and dropped;
//  * the real rank's NOTIFY_RECV_READY (slot, n) is answered with
//    NOTIFY_SEND_READY (slot, n) and SEND_UNBOUND_BUFFER (slot, n) carrying
//    n zero bytes (the payload policy: docs/bootstrap.md, "Gloo groups");
//  * a SEND_BUFFER (old-style bound buffers) is read and dropped;
//  * anything malformed closes the pair with an error naming it (the real
//    rank's Gloo then fails its operation at once: "Connection closed by
//    peer").
// Every answer goes out as soon as the real rank asks: this never waits for
// anything, so it cannot deadlock with the real rank.
//
// Threading and lifetime: created, driven and destroyed on one EventLoop's
// thread; `events` must outlive it. Not copyable.
#ifndef PRISM_DAEMON_GLOO_VIRTUAL_PAIR_H_
#define PRISM_DAEMON_GLOO_VIRTUAL_PAIR_H_

#include <sys/socket.h>

#include <cstdint>
#include <deque>
#include <string>

#include "absl/status/status.h"
#include "daemon/gloo/gloo_wire.h"
#include "daemon/net/event_loop.h"

namespace prism::gloo {

struct PairCounters {
  uint64_t messages_in = 0;   // preambles received
  uint64_t messages_out = 0;  // preambles sent
  uint64_t payload_in = 0;    // payload bytes received (dropped)
  uint64_t payload_out = 0;   // payload bytes sent (zeros)
  uint64_t bound_buffer_sends = 0;  // SEND_BUFFER received
};

class VirtualPair;

// What a pair tells its owner (on the loop thread).
class PairEvents {
 public:
  virtual ~PairEvents() = default;
  // The pair is connected and its sequence number written.
  virtual void OnPairOpen(VirtualPair* pair) = 0;
  // The pair is closed: `why` is OK when the real rank closed it between
  // two of its messages (a FIN, or the reset of Gloo's hard close), an error
  // otherwise (refused, closed inside a message, malformed). The owner may
  // destroy the pair after this returns (not inside).
  virtual void OnPairClosed(VirtualPair* pair, const absl::Status& why) = 0;
};

struct PairTarget {
  std::string name;            // "gloo group '0' (cpu) rank 5 (virtual) <-> rank 0 (real)", for messages
  sockaddr_storage listener{}; // the real rank's Gloo listener
  int64_t sequence = 0;        // what its pair waits for
  uint64_t max_payload = 0;    // larger messages are malformed
};

class VirtualPair : public net::IoHandler {
 public:
  VirtualPair(net::EventLoop* loop, PairTarget target, PairEvents* events);
  ~VirtualPair() override;
  VirtualPair(const VirtualPair&) = delete;
  VirtualPair& operator=(const VirtualPair&) = delete;

  // Starts the non-blocking connect. An error (no socket) is also reported
  // through OnPairClosed.
  void Connect();
  void OnIo(uint32_t events) override;

  const PairTarget& target() const { return target_; }
  const PairCounters& counters() const { return counters_; }
  bool open() const { return state_ == State::kOpen; }
  // Closes at once (no event is reported).
  void Close();

 private:
  enum class State { kIdle, kConnecting, kOpen, kClosed };
  struct Segment {
    std::string bytes;
    uint64_t zeros = 0;  // then this many zero bytes
  };

  void OnConnected();
  void Fail(const absl::Status& why);
  bool Idle() const;  // between two messages of the real rank's
  bool ReadInput();   // false: closed
  bool Handle(const Preamble& p);
  void Queue(const Preamble& p, uint64_t zeros);
  bool Flush();       // false: closed
  void WatchWrites(bool on);

  net::EventLoop* loop_;
  PairTarget target_;
  PairEvents* events_;
  int fd_ = -1;
  State state_ = State::kIdle;
  bool watching_writes_ = false;
  std::string in_;               // a partial preamble
  uint64_t discard_ = 0;         // payload bytes still to drop
  std::deque<Segment> out_;
  PairCounters counters_;
};

}  // namespace prism::gloo

#endif  // PRISM_DAEMON_GLOO_VIRTUAL_PAIR_H_
