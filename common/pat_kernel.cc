#include "common/pat_kernel.h"

#include <algorithm>
#include <utility>
#include <vector>

#include "common/time_math.h"

namespace prism {
namespace {

// NCCL_STEPS: the messages a connection holds in flight.
constexpr uint64_t kConnectionSlots = 8;
// NCCL's PAT workers: 512 threads, at most one group of warps per step.
constexpr uint32_t kMaxParallelSteps = 16;

uint32_t CeilLog2(uint64_t v) {
  uint32_t r = 0;
  while ((uint64_t{1} << r) < v) ++r;
  return r;
}

// Lowest set bit of s; `none` for 0.
int LowBit(uint64_t s, int none) { return s == 0 ? none : __builtin_ctzll(s); }

// i's low log2(span) bits in reverse order (span a power of two).
uint64_t BitReversed(uint64_t i, uint64_t span) {
  uint64_t out = 0;
  for (uint64_t bit = 1, mirror = span / 2; bit < span; bit <<= 1, mirror >>= 1)
    if (i & bit) out += mirror;
  return out;
}

// How NCCL sizes the list (both kinds alike).
struct ListSizing {
  uint64_t ranks = 2;
  uint64_t pow2 = 2;           // ranks rounded up to a power of two
  uint64_t chunk = 0;          // bytes per piece and loop
  uint64_t channel_bytes = 0;  // this channel's share of one rank's piece, all loops
  uint64_t per_message = 1;    // pieces a posted message carries at most (NCCL's post frequency)
  uint64_t spread = 1;         // per_message, widened by NCCL_STEPS' depth (NCCL's aggregation factor)
  uint64_t stride = 2;         // pow2 / spread (NCCL's aggregation delta)
  uint32_t parallel = 1;       // steps per round

  explicit ListSizing(const PatShape& op) {
    const PatCut cut = CutPatShape(op);
    ranks = op.ranks;
    pow2 = uint64_t{1} << cut.dims;
    chunk = cut.chunk.count();
    channel_bytes = std::max<uint64_t>(cut.piece, 1);
    while (chunk / (channel_bytes * per_message) >= 2 && per_message < ranks / 2) per_message *= 2;
    spread = per_message;
    for (uint64_t depth = kConnectionSlots; depth > 1 && spread < ranks / 2; depth /= 2) spread *= 2;
    stride = pow2 / spread;
    parallel = static_cast<uint32_t>(std::min<uint64_t>(kMaxParallelSteps, per_message));
  }
};

// What both walkers share: the sizing, the current loop's offset and piece
// size, whether the list ended; after each phase, the next phase, or at a
// loop's end the next loop (or the end). Walker: StartPhase, StartLoop.
template <typename Walker>
class ListWalk {
 protected:
  explicit ListWalk(const ListSizing& z) : z_(z) {}

  // `loop_ended`: the phase was the loop's last (offset_ already moved on).
  void AfterPhase(bool loop_ended) {
    Walker& walker = static_cast<Walker&>(*this);
    if (!loop_ended) return walker.StartPhase();
    if (offset_ >= z_.channel_bytes) {
      done_ = true;
      return;
    }
    walker.StartLoop();
  }

  const ListSizing z_;
  uint64_t offset_ = 0, nelem_ = 0;
  bool done_ = false;
};

// Walks NCCL's PAT all-gather list. Three phases per loop: a rank's own
// piece goes down the high dimensions (kOwnDown, the pieces at distance
// (2a+1) * scale * stride), then each group of distances forwards what
// arrived (kForward) and finally lands the pieces received on dimension 0
// in the output (kLand). The groups (NCCL's "as") come in the order
// GroupOrder gives.
class AllGatherList : public ListWalk<AllGatherList> {
 public:
  explicit AllGatherList(const ListSizing& z) : ListWalk(z), group_bits_(CeilLog2(z.stride)) { StartLoop(); }

  // The next step into *s; false once the list's last step was given.
  bool Next(PatKernelStep* s) {
    if (done_) return false;
    *s = PatKernelStep{};
    s->skipped = a_ >= a_end_;
    if (!s->skipped) Fill(s);
    Advance();
    return true;
  }

 private:
  enum Phase { kLand, kForward, kOwnDown };

  void Fill(PatKernelStep* s) {
    const uint64_t n = z_.ranks, pf = z_.per_message, st = z_.stride;
    const bool message_full = a_ % pf == pf - 1;
    if (phase_ == kOwnDown) {
      uint64_t d = (2 * a_ + 1) * scale_ * st;
      s->post_send = message_full || (2 * (a_ + 1) + 1) * scale_ * st >= n;
      s->skipped = d >= n;
      s->send_dim = static_cast<int8_t>(LowBit(d, 0));
      s->message_bytes = static_cast<uint32_t>((a_ % pf + 1) * nelem_);
      d -= uint64_t{1} << s->send_dim;
      s->recv_dim = static_cast<int8_t>(d ? LowBit(d, 0) : -1);
      s->slot_ahead = static_cast<uint32_t>(s->recv_dim >= 0 ? ((a_ * 2 * scale_ * st) >> (s->recv_dim + 1)) / pf : a_ / pf);
      return;
    }
    uint64_t d = a_ * st + group_;
    const bool beyond = d >= n;
    s->skipped = beyond;
    if (phase_ == kLand) {
      s->recv_dim = 0;
      s->post_recv = message_full || (a_ + 1) * st + group_ >= n;
      return;
    }
    s->send_dim = static_cast<int8_t>(LowBit(d, static_cast<int>(CeilLog2(z_.pow2))));
    d -= uint64_t{1} << s->send_dim;
    s->recv_dim = static_cast<int8_t>(d ? LowBit(d, 0) : -1);
    s->post_send = message_full || (a_ + 1) * st + group_ >= n;
    s->message_bytes = static_cast<uint32_t>((a_ % pf + 1) * nelem_);
    const bool to_zero = s->send_dim == 0;
    if (s->recv_dim >= 0 && group_ == (uint64_t{1} << s->send_dim)) {
      const uint64_t f = (a_ * st) >> (s->recv_dim + 1);  // the received piece's place in its message
      s->post_recv = to_zero && (f % pf == pf - 1 || (((f + 1) * 2 + 1) << s->recv_dim) >= n);
      s->slot_ahead = static_cast<uint32_t>(to_zero ? 0 : f / pf);
    } else if (s->recv_dim >= 0) {
      s->post_recv = to_zero && (message_full || (a_ + 1) * st + group_ - 1 >= n);
      s->slot_ahead = static_cast<uint32_t>(to_zero ? 0 : a_ / pf);
    }
    if (beyond && to_zero && d < n) {  // no one to send to, but the receive still lands
      s->send_dim = -1;
      s->post_send = false;
      s->skipped = false;
    }
  }

  void Advance() {
    ++a_;
    if (a_ < a_end_ || a_ < z_.parallel) return;
    const Phase was = phase_;
    if (was == kOwnDown) scale_ /= 2;
    if (was == kOwnDown) {
      phase_ = scale_ ? kOwnDown : kForward;
    } else if (was == kForward) {
      phase_ = group_ % 2 == 1 ? kLand : kForward;
    } else {
      phase_ = kForward;
    }
    if (was == kLand || (was == kForward && group_ % 2 == 0)) group_ = order_.Next();
    const bool loop_ended = was == kLand && group_ == z_.stride / 2;
    if (loop_ended) offset_ += z_.chunk;
    AfterPhase(loop_ended);
  }
  friend class ListWalk<AllGatherList>;

  void StartLoop() {
    nelem_ = std::min(z_.chunk, z_.channel_bytes - offset_);
    scale_ = z_.spread / 2;
    phase_ = scale_ ? kOwnDown : kForward;
    order_ = GroupOrder(group_bits_);
    group_ = order_.Next();
    StartPhase();
  }

  void StartPhase() {
    a_ = 0;
    a_end_ = z_.spread;
    if (phase_ == kOwnDown) a_end_ /= 2 * scale_;
  }

  // The order in which the forwarding groups come: each bit of the group
  // number flips on its own counter (NCCL's nextAs).
  class GroupOrder {
   public:
    GroupOrder() = default;
    explicit GroupOrder(uint32_t bits) : bits_(bits), count_(bits), zero_steps_(bits, 1) {
      for (uint32_t i = 0; i < bits; ++i) count_[i] = bits - i;
    }
    uint64_t Next() {
      for (uint32_t d = 0; d < bits_; ++d) {
        const uint64_t bit = uint64_t{1} << d;
        if (--count_[d] != 0) continue;
        value_ ^= bit;
        count_[d] = static_cast<int64_t>(bit);
        if (value_ & bit) continue;
        count_[d] += LowBit(zero_steps_[d], static_cast<int>(bits_)) - 1;
        if (count_[d] == 0) {
          value_ ^= bit;
          count_[d] = static_cast<int64_t>(bit);
        }
        ++zero_steps_[d];
      }
      return value_;
    }

   private:
    uint32_t bits_ = 0;
    uint64_t value_ = 0;
    std::vector<int64_t> count_;
    std::vector<uint64_t> zero_steps_;
  };

  const uint32_t group_bits_;
  GroupOrder order_;
  Phase phase_ = kForward;
  uint64_t a_ = 0, a_end_ = 0, group_ = 0, scale_ = 0;
};

// Walks NCCL's PAT reduce-scatter list: the all-gather's tree run
// backwards. Per loop: this rank's own data leaves on dimension 0
// (kOwnOut), partial sums arrive and move up (kReduce), then, when pieces
// are aggregated, two phases fold the aggregated halves (kFoldZero,
// kFoldUp, once per scale), and the last piece lands in the output (kLand).
class ReduceScatterList : public ListWalk<ReduceScatterList> {
 public:
  explicit ReduceScatterList(const ListSizing& z) : ListWalk(z) { StartLoop(); }

  bool Next(PatKernelStep* s) {
    if (done_) return false;
    *s = PatKernelStep{};
    s->slot_ahead = slot_ahead_;
    s->skipped = a_ >= a_end_;
    if (!s->skipped) Fill(s);
    Advance();
    return true;
  }

 private:
  enum Phase { kOwnOut, kReduce, kFoldZero, kFoldUp, kLand, kEnd };

  // Whether a is the last position of a power-of-two block of `span`:
  // only its high bits set below span (NCCL's newPeer).
  static bool BlockStart(uint64_t a, uint64_t span) { return __builtin_popcountll((a ^ (span - 1)) + 1) == 1; }

  void Fill(PatKernelStep* s) {
    const uint64_t n = z_.ranks, pf = z_.per_message, st = z_.stride;
    const bool closes = (a_ % pf) + 1 >= pf || a_ == a_end_ - 1;
    const int top = static_cast<int>(CeilLog2(z_.pow2));
    switch (phase_) {
      case kOwnOut: {
        s->skipped = BitReversed(~a_, a_end_) * st + group_ >= n;
        s->send_dim = 0;
        s->post_send = closes;
        s->message_bytes = static_cast<uint32_t>((a_ % pf + 1) * nelem_);
        return;
      }
      case kReduce: {
        uint64_t d = BitReversed(~a_, a_end_) * st + group_;
        s->skipped = d >= n;
        const int rd = LowBit(d, top);
        s->recv_dim = static_cast<int8_t>(rd);
        s->post_send = rd == 0 && closes;
        s->post_recv = closes;
        d -= uint64_t{1} << rd;
        s->send_dim = static_cast<int8_t>(d ? LowBit(d, top) : -1);
        uint64_t place = a_ % pf;
        if (s->send_dim >= 0 && group_ == (uint64_t{1} << rd)) {
          if (BlockStart(a_, z_.spread)) {
            send_restart_ = a_;
            slot_ahead_ = 0;
            s->slot_ahead = 0;
          }
          place = (a_ - send_restart_) % pf;
        }
        s->message_bytes = static_cast<uint32_t>((place + 1) * nelem_);
        if (d < n && s->skipped) {  // nothing to receive, but the send still goes
          s->recv_dim = -1;
          s->post_recv = false;
          s->skipped = false;
        }
        if (rd > 0 && ((a_ - send_restart_) % pf) + 1 >= pf && !s->skipped) ++slot_ahead_;
        return;
      }
      case kFoldZero: {
        uint64_t d = (2 * BitReversed(~a_, a_end_) + 1) * scale_ * st + 1;
        s->skipped = d >= n;
        s->recv_dim = 0;
        s->post_send = a_ == a_end_ - 1 || (a_ + 1) % pf == 0;
        d -= 1;
        if (d < n && s->skipped) {
          s->recv_dim = -1;
          s->skipped = false;
        } else if (!s->skipped) {
          s->post_recv = (a_ + z_.spread - z_.spread / scale_ + 1) % pf == 0;
        }
        s->send_dim = static_cast<int8_t>(d ? LowBit(d, top) : -1);
        s->message_bytes = static_cast<uint32_t>((a_ % pf + 1) * nelem_);
        return;
      }
      case kFoldUp: {
        uint64_t d = (2 * BitReversed(~a_, a_end_) + 1) * scale_ * st;
        s->skipped = d >= n;
        const int rd = LowBit(d, top);
        s->recv_dim = static_cast<int8_t>(rd);
        s->post_recv = a_ == a_end_ - 1 || (a_ + 1) % pf == 0;
        d -= uint64_t{1} << rd;
        s->send_dim = static_cast<int8_t>(d ? LowBit(d, top) : -1);
        if (d < n && s->skipped) {
          s->recv_dim = -1;
          s->post_recv = false;
          s->skipped = false;
        }
        if (BlockStart(a_, z_.spread / (2 * scale_))) {
          send_restart_ = a_;
          slot_ahead_ = 0;
          s->slot_ahead = 0;
        }
        if (((a_ - send_restart_) % pf) + 1 >= pf && !s->skipped) ++slot_ahead_;
        return;
      }
      case kLand:
        s->recv_dim = 0;
        s->post_recv = true;
        offset_ += z_.chunk;
        return;
      case kEnd:
        return;
    }
  }

  void Advance() {
    ++a_;
    if (a_ < a_end_ || a_ < z_.parallel) return;
    const Phase was = phase_;
    if (was == kReduce) --group_;
    if (was == kFoldUp) scale_ *= 2;
    switch (was) {
      case kOwnOut: phase_ = group_ == 1 ? (z_.spread > 1 ? kFoldZero : kLand) : kReduce; break;
      case kReduce: phase_ = group_ % 2 == 1 ? kOwnOut : kReduce; break;
      case kFoldZero: phase_ = kFoldUp; break;
      case kFoldUp: phase_ = scale_ < z_.spread ? kFoldZero : kLand; break;
      default: phase_ = kEnd; break;
    }
    AfterPhase(was == kLand);  // the land step moved offset_ on
  }
  friend class ListWalk<ReduceScatterList>;

  void StartLoop() {
    nelem_ = std::min(z_.chunk, z_.channel_bytes - offset_);
    phase_ = kOwnOut;
    scale_ = 1;
    group_ = z_.stride - 1;
    StartPhase();
  }

  void StartPhase() {
    a_ = 0;
    send_restart_ = 0;
    slot_ahead_ = 0;
    a_end_ = z_.spread;
    if (phase_ >= kFoldZero) a_end_ /= 2 * scale_;
    if (phase_ == kLand) a_end_ = 1;
  }

  Phase phase_ = kOwnOut;
  uint64_t a_ = 0, a_end_ = 0, group_ = 0, scale_ = 1, send_restart_ = 0;
  uint32_t slot_ahead_ = 0;
};

// Calls f(step) for every step of op's list, in order; false past `limit` steps.
template <typename F>
bool WalkList(const PatShape& op, uint64_t limit, F&& f) {
  const ListSizing z(op);
  PatKernelStep s;
  uint64_t count = 0;
  auto run = [&](auto list) {
    while (list.Next(&s)) {
      if (++count > limit) return false;
      f(s);
    }
    return true;
  };
  return op.all_gather ? run(AllGatherList(z)) : run(ReduceScatterList(z));
}

}  // namespace

PatKernelProgram PatKernelSteps(const PatShape& op) {
  PatKernelProgram p;
  if (op.ranks <= 1) return p;
  p.parallel = ListSizing(op).parallel;
  const bool whole = WalkList(op, kMaxPlayedPatSteps, [&](const PatKernelStep& s) { p.steps.push_back(s); });
  if (!whole) p.steps.clear();
  return p;
}

namespace {

// The walk's state: per dimension, the messages sent (their wire ends) and
// the connection's counters; the NIC of the channel.
class KernelWalk {
 public:
  KernelWalk(const PatShape& op, Nanoseconds round)
      : op_(op), round_(round), all_gather_(op.all_gather), parallel_(ListSizing(op).parallel) {
    const uint32_t dims = CutPatShape(op).dims;
    sent_.assign(dims, {});
    received_.assign(dims, 0);
  }

  // Takes the list's steps one at a time; false when the list is not NCCL's
  // (a step waits for a message no earlier round sent).
  bool Take(const PatKernelStep& s) {
    round_steps_.push_back(s);
    if (round_steps_.size() < parallel_) return true;
    return EndRound();
  }

  // Plays what is left; the operation's end, or nullopt as Take.
  std::optional<Nanoseconds> Finish() {
    if (!round_steps_.empty() && !EndRound()) return std::nullopt;
    return end_;
  }

  // Per dimension, each sent message's wire end (after Finish).
  std::vector<std::vector<Nanoseconds>> TakeSent() { return std::move(sent_); }

 private:
  bool EndRound() {
    Nanoseconds start = end_;
    for (const PatKernelStep& s : round_steps_) {
      if (s.skipped) continue;
      if (s.recv_dim >= static_cast<int>(sent_.size()) || s.send_dim >= static_cast<int>(sent_.size())) return false;
      if (s.recv_dim >= 0) {
        const std::vector<Nanoseconds>& on = sent_[s.recv_dim];
        const uint64_t m = received_[s.recv_dim] + (all_gather_ ? s.slot_ahead : 0);
        if (m >= on.size()) return false;
        start = Max(start, SatAdd(on[m], op_.step_latency));  // its twin arrived
      }
      if (s.send_dim >= 0) {
        const std::vector<Nanoseconds>& on = sent_[s.send_dim];
        const uint64_t k = on.size() + (all_gather_ ? 0 : s.slot_ahead);
        if (k >= kConnectionSlots) {
          if (k - kConnectionSlots >= on.size()) return false;
          start = Max(start, on[k - kConnectionSlots]);  // its slot is free again
        }
      }
    }
    end_ = SatAdd(start, round_);
    for (const PatKernelStep& s : round_steps_) {
      if (s.skipped) continue;
      if (s.post_send && s.send_dim >= 0) {
        nic_free_ = SatAdd(Max(end_, nic_free_),
                           FractionTransferTime(Bytes(s.message_bytes), op_.channels, 1, op_.bandwidth));
        sent_[s.send_dim].push_back(nic_free_);
      }
      if (s.post_recv && s.recv_dim >= 0) ++received_[s.recv_dim];
    }
    round_steps_.clear();
    return true;
  }

  const PatShape& op_;
  const Nanoseconds round_;
  const bool all_gather_;
  const uint32_t parallel_;
  std::vector<std::vector<Nanoseconds>> sent_;  // per dimension, each sent message's wire end
  std::vector<uint64_t> received_;              // per dimension, messages freed
  std::vector<PatKernelStep> round_steps_;
  Nanoseconds end_{0};
  Nanoseconds nic_free_{0};
};

}  // namespace

std::optional<PatPlay> PlayPatKernelSends(const PatShape& op, Nanoseconds round) {
  if (op.ranks <= 1) return PatPlay{};
  KernelWalk walk(op, round);
  bool fits = true;
  const bool whole = WalkList(op, kMaxPlayedPatSteps, [&](const PatKernelStep& s) { fits = fits && walk.Take(s); });
  if (!whole || !fits) return std::nullopt;
  const std::optional<Nanoseconds> end = walk.Finish();
  if (!end) return std::nullopt;
  PatPlay play;
  play.end = *end;
  play.sent = walk.TakeSent();
  play.earliest = play.sent;
  return play;
}

std::optional<Nanoseconds> PlayPatKernel(const PatShape& op, Nanoseconds round) {
  if (op.ranks <= 1) return Nanoseconds(0);
  const std::optional<PatPlay> play = PlayPatKernelSends(op, round);
  if (!play) return std::nullopt;
  return play->end;
}

}  // namespace prism
