// prismd's schedules for the real rank's NCCL operations (OpSchedule in
// proto/prism_service.proto), kept per process until the operation ends:
// the session readers put them, the virtual receive comms read them.
//
// Thread-safety: every method is thread-safe (one mutex; a lookup per
// receive step, a few per operation).
#ifndef PRISM_PLUGIN_OP_SCHEDULES_H_
#define PRISM_PLUGIN_OP_SCHEDULES_H_

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <deque>
#include <map>
#include <mutex>
#include <optional>

#include "plugin/arrival.h"
#include "plugin/clock.h"
#include "plugin/op_tracker.h"
#include "plugin/pat_plays.h"

namespace prism::plugin {

// The identity prismd and the plugin both give an operation.
struct OpKey {
  uint64_t comm_hash = 0;
  OpKind kind = OpKind::kUnknown;
  uint64_t seq = 0;
  int32_t peer = -1;
  static OpKey Of(const OpInfo& info) { return OpKey{info.comm_hash, info.kind, info.seq, info.peer}; }
  auto operator<=>(const OpKey&) const = default;
};

// How a virtual peer's messages of one operation are timed (see the proto).
struct OpSchedule {
  enum class Mode : uint8_t { kMirror = 1, kStream = 2 };
  Mode mode = Mode::kMirror;
  int64_t ready_ns = 0;              // 0: none
  uint64_t link_bits_per_second = 0; // 0: the plugin's own link
  int64_t link_latency_ns = -1;      // < 0: the plugin's own link
  int64_t step_cost_ns = 0;          // MIRROR: the virtual members' cost per ring step beyond the latency
  bool unmatched = false;
  bool hold = false;                 // MIRROR: virtual members not there yet: wait for the next schedule
  // A forecast: the virtual members are ready at max(ready_ns, E +
  // after_delay_ns), E = this process's end of operation `after`.
  bool has_after = false;
  OpKey after;
  int64_t after_delay_ns = 0;
  // When the book got it (CLOCK_REALTIME; OpScheduleBook::Put stamps it): a
  // receive it times whose done time came before it waited for prismd.
  int64_t put_at_ns = 0;
};

class OpScheduleBook {
 public:
  OpScheduleBook() = default;
  OpScheduleBook(const OpScheduleBook&) = delete;
  OpScheduleBook& operator=(const OpScheduleBook&) = delete;

  // A later schedule for the same key replaces the earlier one, except that
  // a hold never replaces a schedule (the schedule may overtake its hold).
  // Schedules for operations already finished are dropped.
  void Put(const OpKey& key, const OpSchedule& s) {
    std::lock_guard<std::mutex> lock(mu_);
    if (finished_.count(key) != 0) return;
    if (const auto it = book_.find(key); s.hold && it != book_.end() && !it->second.hold) return;
    OpSchedule& in = book_[key] = s;
    in.put_at_ns = WallNowNs();
    ++puts_;
  }
  std::optional<OpSchedule> Get(const OpKey& key) const {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = book_.find(key);
    if (it == book_.end()) return std::nullopt;
    return it->second;
  }
  // A forecast made plain: ready_ns = max(ready_ns, E + after_delay_ns) once
  // operation `after` has ended here (E: its end as Finish was told); false
  // while it has not (or its end was forgotten: kFinishedKept). Anything
  // else is left as it is (true).
  bool ResolveAfter(OpSchedule* s) const {
    if (!s->has_after) return true;
    std::lock_guard<std::mutex> lock(mu_);
    return ResolveAfterLocked(s);
  }
  // Get, with a forecast made plain (ResolveAfter) and written back, so that
  // the operation's later receives find it plain: one lock and one lookup
  // per receive. `*anchor_pending`: the schedule is a forecast whose anchor
  // has not ended here yet (returned as it is).
  std::optional<OpSchedule> GetResolved(const OpKey& key, bool* anchor_pending) {
    std::lock_guard<std::mutex> lock(mu_);
    *anchor_pending = false;
    auto it = book_.find(key);
    if (it == book_.end()) return std::nullopt;
    if (it->second.has_after && !ResolveAfterLocked(&it->second)) *anchor_pending = true;
    return it->second;
  }
  // Times one receive of operation `key` on its virtual sender's link,
  // which every connection of the operation shares (its channels leave
  // through one NIC), and on the receiving connection's own FIFO link
  // `*conn_wire_end` (its earlier operations); advances both.
  Arrival ResolveOnSenderLink(const OpKey& key, const ArrivalInput& in, Nanoseconds* conn_wire_end) {
    std::lock_guard<std::mutex> lock(mu_);
    Nanoseconds& op_wire_end = sender_wire_end_[key];
    const Arrival a = ResolveArrival(in, Max(op_wire_end, *conn_wire_end));
    op_wire_end = a.wire_end;
    *conn_wire_end = a.wire_end;
    return a;
  }
  // The operation ended at `end_ns` (CLOCK_REALTIME, OpFinished.end_ns):
  // forget its schedule (a late one is dropped); its end anchors forecasts.
  void Finish(const OpKey& key, int64_t end_ns = 0) {
    std::lock_guard<std::mutex> lock(mu_);
    book_.erase(key);
    sender_wire_end_.erase(key);
    if (!finished_.emplace(key, end_ns).second) return;
    finished_order_.push_back(key);
    if (finished_order_.size() > kFinishedKept) {  // forget the oldest
      finished_.erase(finished_order_.front());
      finished_order_.pop_front();
    }
  }
  size_t size() const {
    std::lock_guard<std::mutex> lock(mu_);
    return book_.size();
  }
  uint64_t puts() const {
    std::lock_guard<std::mutex> lock(mu_);
    return puts_;
  }
  // NCCL's cost per ring step in prismd's model (its Welcome): the ring's
  // lockstep for MIRROR receives without a schedule, and PAT's hop. 0 until
  // told. Lock-free: read on every such receive on NCCL's proxy thread.
  void SetRingStepCost(Nanoseconds c) { ring_step_cost_ns_.store(c.count(), std::memory_order_relaxed); }
  Nanoseconds ring_step_cost() const { return Nanoseconds(ring_step_cost_ns_.load(std::memory_order_relaxed)); }
  // The model's PAT plays, per shape (PAT's floor; its own lock).
  PatPlays& pat_plays() { return pat_plays_; }

 private:
  static constexpr size_t kFinishedKept = 4096;
  bool ResolveAfterLocked(OpSchedule* s) const {
    const auto it = finished_.find(s->after);
    if (it == finished_.end()) return false;
    s->ready_ns = std::max(s->ready_ns, it->second + s->after_delay_ns);
    s->has_after = false;
    return true;
  }
  mutable std::mutex mu_;
  std::map<OpKey, OpSchedule> book_;
  std::map<OpKey, Nanoseconds> sender_wire_end_;  // per operation, until Finish
  std::map<OpKey, int64_t> finished_;  // its end
  std::deque<OpKey> finished_order_;
  uint64_t puts_ = 0;
  std::atomic<int64_t> ring_step_cost_ns_{0};
  PatPlays pat_plays_;
};

}  // namespace prism::plugin

#endif  // PRISM_PLUGIN_OP_SCHEDULES_H_
