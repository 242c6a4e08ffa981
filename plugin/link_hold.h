// Whether this process's shaped real-peer links held the model: the ground
// truth's own check (docs/plugin.md, "Link shaping"; bench/fidelity).
//
// A receive from a real peer over a shaped link completes at the delivery
// time the sender stamped (wire_done + latency), never earlier, but later
// when the machine is slower than the model: when its bytes landed after
// that time (sockets, thread wake-ups, a busy host), and by how long NCCL's
// test() took to see it. Both are counted here; a ground truth whose bytes
// land late does not hold the link it claims to model, and a hybrid run
// cannot be compared with it at that size.
//
// Thread-safe: progress threads record landings, NCCL's proxy threads
// record completions; any thread may read the summary.
#ifndef PRISM_PLUGIN_LINK_HOLD_H_
#define PRISM_PLUGIN_LINK_HOLD_H_

#include <array>
#include <atomic>
#include <cstdint>
#include <string>

namespace prism::plugin {

// Counts of non-negative delays in fixed buckets (upper bounds in µs: 0, 1,
// 2, 5, 10, 20, 50, 100, 200, 500, 1000, 10000, beyond), with their max.
class DelayHistogram {
 public:
  static constexpr std::array<int64_t, 12> kUpperUs = {0, 1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 10000};

  // Negative delays count as 0 (in time).
  void Record(int64_t delay_ns);
  uint64_t count() const;
  // Delays above `us` microseconds.
  uint64_t CountAbove(int64_t us) const;
  // The upper bound (µs) of the bucket that holds quantile `q` (0..1); -1
  // when empty, INT64_MAX for the overflow bucket.
  int64_t QuantileUpperUs(double q) const;
  int64_t max_ns() const { return max_ns_.load(std::memory_order_relaxed); }

 private:
  std::array<std::atomic<uint64_t>, kUpperUs.size() + 1> buckets_{};
  std::atomic<int64_t> max_ns_{0};
};

class LinkHoldStats {
 public:
  LinkHoldStats() = default;
  LinkHoldStats(const LinkHoldStats&) = delete;
  LinkHoldStats& operator=(const LinkHoldStats&) = delete;

  // The last byte of a receive landed `now_ns`; the sender's link model
  // delivers it at `deliver_ns` (0: the link is not shaped; not counted);
  // NCCL posted the receive at `posted_ns`. A receive posted after its
  // delivery time is late by the program's order, not by the machine: its
  // lateness counts from the posting.
  void RecordLanded(int64_t now_ns, int64_t deliver_ns, int64_t posted_ns);
  // test() first saw the receive done `late_ns` after it could complete.
  void RecordSeen(int64_t late_ns);
  // The receive's header was matched `now_ns` (read by this side and taken
  // by a posted receive); its delivery time `deliver_ns` (0: not counted),
  // its posting `posted_ns`. The sender writes the header in the isend that
  // posts the message (PRISM_LINK_ORDER=posted, the default; round-robin
  // writes it once its link decides, in a later call of the sender's), long
  // before a shaped delivery, so a header matched after that time says the
  // receiving side was late to read it; a receive that landed late with its
  // header on time was late in its payload (the sender's copy into the ring
  // or socket, or this side's copy out).
  void RecordMatched(int64_t now_ns, int64_t deliver_ns, int64_t posted_ns);

  const DelayHistogram& landed_late() const { return landed_; }
  const DelayHistogram& seen_late() const { return seen_; }
  const DelayHistogram& matched_late() const { return matched_; }

  // One line for people: "shaped receives: N; bytes landed after the
  // modelled delivery (or the posting, if later): K (P%), p50 <=a us, p99
  // <=b us, max c us; test() saw them p50 <=d us, p99 <=e us later;
  // headers read after it: H, max f us". Empty when nothing was counted.
  std::string Summary() const;

  // Late by more than this counts against the link: beyond the jitter of a
  // wake-up and a socket read.
  static constexpr int64_t kUnheldLateUs = 50;
  // When at least 1 in kUnheldShare of the shaped receives landed over
  // kUnheldLateUs late, the machine did not hold the link it models.
  static constexpr uint64_t kUnheldShare = 20;

  // A warning for people, with what it means and what to do, when the
  // links did not hold (the rule above); empty when they did or nothing
  // was counted. Printed whether or not PRISM_LINK_REPORT is set: two real
  // ranks on one host whose loopback cannot carry the graph's link run
  // their exchanges slower than the target would.
  std::string UnheldWarning() const;

 private:
  DelayHistogram landed_;
  DelayHistogram seen_;
  DelayHistogram matched_;
};

}  // namespace prism::plugin

#endif  // PRISM_PLUGIN_LINK_HOLD_H_
