// A CPU stand-in for a real rank's PAT all-gather or reduce-scatter in a
// hybrid run, with every peer virtual: the rank's NCCL sends its messages
// (common/pat_schedule.h, PatRankMessages) on its NIC one after another, a
// message once the receives it waits for completed plus the real rank's own
// cost per message; each receive from a virtual peer is timed by the
// plugin's rule (plugin/arrival.h, kPatMirror: the rank's own send of the
// same dimension and message index plus L; PAT's floor when asked), the
// virtual senders' late streaming on one link per operation as
// OpScheduleBook::ResolveOnSenderLink keeps it. Channels move together (the
// play's view: a message's wire time is its bytes on every channel).
// Used by bench/pat_hybrid_bench and the plugin's PAT tests. Header-only;
// pure functions.
#ifndef PRISM_TEST_PAT_STAND_IN_H_
#define PRISM_TEST_PAT_STAND_IN_H_

#include <algorithm>
#include <cstdint>
#include <functional>
#include <optional>
#include <queue>
#include <utility>
#include <vector>

#include "common/pat_schedule.h"
#include "common/time_math.h"
#include "plugin/arrival.h"

namespace prism::testing {

struct PatStandIn {
  PatShape model;             // the operation; step_latency = L + the model's c
  Nanoseconds link_latency;   // L
  Nanoseconds real_step_cost; // the real rank's NCCL: from a receive's completion to the send it feeds
  Nanoseconds members_late;   // the virtual members arrive this long after the real rank starts
  bool floor = true;          // PAT's floor (plugin/arrival.h, PatFloor)
  // The real rank's order of sends: false, the play's (the earliest-ready
  // message first: a reduce-scatter sends all of dimension 0 first); true,
  // NCCL's kind of order, strictly one after another (a message waiting for
  // its receives holds the later ones): in rounds of NCCL_STEPS (8) messages
  // per dimension, as the GPU host's reduce-scatter over 8192 ranks ran (8
  // on dimension 0, then 8 on dimension 1, ...; 2026-12-02), a message's
  // round k / 8 (k its index on its dimension) or its inputs' if later,
  // within a round by earliest leave (PatEarliestLeaves).
  bool own_order = false;
};

struct PatStandInResult {
  Nanoseconds end;        // the real rank's last receive completed, plus its own cost to take it
  Nanoseconds model_end;  // members_late + the play's time
  uint64_t messages = 0;  // per channel, sent
  Nanoseconds worst_early;  // largest (model's arrival - hybrid's) over receives, 0 if none earlier
};

// Times are from the real rank's start (its first send may leave then).
inline std::optional<PatStandInResult> PlayPatStandIn(const PatStandIn& p) {
  const std::vector<PatMessage> msgs = PatRankMessages(p.model);
  const std::optional<PatPlay> play = PlayPatSchedule(p.model);
  if (msgs.empty() || !play) return std::nullopt;
  const Nanoseconds t0(1'000'000'000);  // ready > 0 means "a schedule gave it"
  const Nanoseconds ready = t0 + p.members_late;
  const plugin::VirtualLink link{p.model.bandwidth, p.link_latency};
  using Entry = std::pair<std::pair<int64_t, uint64_t>, uint32_t>;  // ((ready, priority), id)
  std::priority_queue<Entry, std::vector<Entry>, std::greater<>> waiting;
  std::priority_queue<std::pair<uint64_t, uint32_t>, std::vector<std::pair<uint64_t, uint32_t>>, std::greater<>> ready_q;
  std::vector<int64_t> ready_at(msgs.size(), t0.count());
  std::vector<uint32_t> waiting_for(msgs.size());
  for (uint32_t i = 0; i < msgs.size(); ++i) {
    waiting_for[i] = msgs[i].inputs;
    if (msgs[i].inputs == 0) waiting.push({{t0.count(), msgs[i].priority}, i});
  }
  std::vector<uint32_t> sequence;  // own_order: the order the rank sends in
  if (p.own_order) {
    const std::vector<Nanoseconds> left = PatEarliestLeaves(msgs, p.model);
    for (uint32_t i = 0; i < msgs.size(); ++i) sequence.push_back(i);
    std::stable_sort(sequence.begin(), sequence.end(), [&](uint32_t a, uint32_t b) { return left[a] < left[b]; });
    std::vector<uint64_t> round(msgs.size(), 0), on_dim(play->sent.size(), 0);
    for (uint32_t id : sequence) {  // inputs before what they feed
      round[id] = std::max(round[id], on_dim[msgs[id].dim]++ / 8);
      for (uint32_t f : msgs[id].feeds) round[f] = std::max(round[f], round[id]);
    }
    std::stable_sort(sequence.begin(), sequence.end(), [&](uint32_t a, uint32_t b) { return round[a] < round[b]; });
    waiting = {};
  }
  size_t next_in_sequence = 0;
  std::vector<uint64_t> sent_on(play->sent.size(), 0);
  Nanoseconds now = t0, wire_end(0), last_done(0), worst_early(0);
  PatStandInResult r;
  while (!waiting.empty() || !ready_q.empty() || next_in_sequence < sequence.size()) {
    uint32_t id = 0;
    if (p.own_order) {  // inputs come earlier in the sequence: ready_at is final
      id = sequence[next_in_sequence++];
      now = Max(now, Nanoseconds(ready_at[id]));
    } else {
      while (!waiting.empty() && waiting.top().first.first <= now.count()) {
        ready_q.push({msgs[waiting.top().second].priority, waiting.top().second});
        waiting.pop();
      }
      if (ready_q.empty()) {
        now = Nanoseconds(waiting.top().first.first);
        continue;
      }
      id = ready_q.top().second;
      ready_q.pop();
    }
    const PatMessage& m = msgs[id];
    const uint64_t wire_bytes = m.bytes * std::max<uint32_t>(p.model.channels, 1);
    now = SatAdd(now, FractionTransferTime(Bytes(wire_bytes), 1, 1, p.model.bandwidth));  // own send leaves the wire
    ++r.messages;
    // Its twin: the k-th message this rank receives on the dimension.
    const uint64_t k = sent_on[m.dim]++;
    plugin::ArrivalInput in;
    in.form = plugin::ArrivalForm::kPatMirror;
    in.bytes = Bytes(wire_bytes);
    in.ready = ready;
    in.own_send_done = now;
    in.own_first_send = t0;
    in.link = link;
    if (p.floor) in.pat_floor = plugin::PatFloor(*play, Max(ready, t0), static_cast<int>(m.dim), static_cast<int64_t>(k), link.latency);
    const plugin::Arrival a = plugin::ResolveArrival(in, wire_end);
    wire_end = a.wire_end;
    last_done = Max(last_done, a.done);
    const Nanoseconds model_arrival = ready + play->sent[m.dim][k] + link.latency;
    worst_early = Max(worst_early, model_arrival - a.done);
    const int64_t next = SatAdd(a.done, p.real_step_cost).count();
    for (uint32_t f : m.feeds) {
      ready_at[f] = std::max(ready_at[f], next);
      if (--waiting_for[f] == 0 && !p.own_order) waiting.push({{ready_at[f], msgs[f].priority}, f});
    }
  }
  r.end = SatAdd(last_done, p.real_step_cost) - t0;
  r.model_end = p.members_late + play->end;
  r.worst_early = worst_early;
  return r;
}

}  // namespace prism::testing

#endif  // PRISM_TEST_PAT_STAND_IN_H_
