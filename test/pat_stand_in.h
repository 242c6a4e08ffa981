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
  std::vector<uint64_t> sent_on(play->sent.size(), 0);
  Nanoseconds now = t0, wire_end(0), last_done(0), worst_early(0);
  PatStandInResult r;
  while (!waiting.empty() || !ready_q.empty()) {
    while (!waiting.empty() && waiting.top().first.first <= now.count()) {
      ready_q.push({msgs[waiting.top().second].priority, waiting.top().second});
      waiting.pop();
    }
    if (ready_q.empty()) {
      now = Nanoseconds(waiting.top().first.first);
      continue;
    }
    const uint32_t id = ready_q.top().second;
    ready_q.pop();
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
      if (--waiting_for[f] == 0) waiting.push({{ready_at[f], msgs[f].priority}, f});
    }
  }
  r.end = SatAdd(last_done, p.real_step_cost) - t0;
  r.model_end = p.members_late + play->end;
  r.worst_early = worst_early;
  return r;
}

}  // namespace prism::testing

#endif  // PRISM_TEST_PAT_STAND_IN_H_
