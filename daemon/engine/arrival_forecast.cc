// The hybrid engine's forecast of a collective's virtual arrivals as a
// function of a real rank's report (ReplayEngine::ForecastNextArrival,
// docs/timing.md "Forecast rings").
//
// A virtual member of a mixed collective M completes it at
// S = max(E, last arrival) once the real member reports its end E
// (MixedCollectives::Finish; the report applies at its own time, but not
// before the engine issued the real member's op). From there its stream plays compute ops, each
// starting at the later of the previous one's end and its other
// dependencies' completions (WaitsForLaterCompletion), and arrives at its
// next collective N at max(floor, S + after): max-plus in S, hence in E.
// Compute takes no shared resource, so nothing the engine handles between
// now and E changes it. When the real member reported E before the last
// virtual member arrived (it ran M on its own floor, ahead of the model),
// S is known outright and the forecast carries it: the schedule of N still
// leaves the engine N's compute ahead of its time, not after it. Anything else on the way (a send, a receive, a
// group, a dependency not done yet, NCCL's launch order) ends the forecast:
// the engine then says when N's virtual members arrive once they do, as
// before.
#include <optional>

#include "daemon/engine/replay_engine.h"

namespace prism::engine {
namespace {

// Ops a forecast walks at most per virtual member, and over all of them
// (the event loop pays it: a DP ring at 8192 ranks has 2047 virtual members).
constexpr int kMaxChainOps = 64;
constexpr int kMaxForecastOps = 1 << 14;

}  // namespace

bool ReplayEngine::WalkChain(uint32_t actor, uint32_t k, Nanoseconds from, Nanoseconds* floor, int max_ops,
                             int* budget, absl::FunctionRef<ChainStep(uint32_t j, uint64_t pos)> visit) const {
  const ActorState& s = state_[actor];
  if (s.real) return false;
  const ProgramInfo& p = *s.program;
  const uint32_t stream = p.ops[k].stream;
  const StreamState& st = streams_[s.stream_base + stream];
  if (st.in_group || st.inflight != 1 || st.blocked_on != StreamState::kNotBlocked) return false;
  const std::vector<uint32_t>& ops = p.stream_ops[stream];
  const uint64_t len = ops.size(), total = len * options_.iterations;
  const uint32_t* done = done_.data() + s.done_base;
  // The stream's earlier ops ended by its last completion.
  *floor = Max(from, stream_waits_[s.stream_base + stream].last_done);
  const uint64_t chain_begin = st.Pos(len);
  uint64_t pos = chain_begin;
  for (int walked = 0; walked < max_ops && pos < total && --*budget >= 0; ++walked, ++pos) {
    const uint32_t j = ops[pos % len];
    const OpInfo& op = p.ops[j];
    const uint64_t iteration = pos / len;
    // Its dependencies: op k and the chain's own ops end before it starts;
    // any other must be done already (its time is then a constant).
    for (uint32_t i = op.deps_begin; i < op.deps_end; ++i) {
      const uint32_t d = p.deps[i];
      bool in_chain = d == k;
      for (uint64_t q = chain_begin; !in_chain && q < pos; ++q) in_chain = ops[q % len] == d;
      if (in_chain) continue;
      if (done[d] <= iteration) return false;
      *floor = Max(*floor, done_at_[s.done_base + d]);
    }
    switch (visit(j, pos)) {
      case ChainStep::kNext: continue;
      case ChainStep::kFound: return true;
      case ChainStep::kStop: return false;
    }
  }
  return false;
}

bool ReplayEngine::ChainToNextCollective(uint32_t actor, uint32_t k, Nanoseconds from, NextArrival* out,
                                         int* budget) const {
  // Arrival = max(floor, S + after); S >= from.
  Nanoseconds floor, after(0);
  return WalkChain(actor, k, from, &floor, kMaxChainOps, budget, [&](uint32_t j, uint64_t) {
    const OpInfo& op = state_[actor].program->ops[j];
    if (op.kind == OpKind::kCollective) {
      const SlotState& slot = slots_[state_[actor].slot_base + op.slot];
      *out = NextArrival{slot.comm, slots_[slot.canonical].calls, floor, after};
      return ChainStep::kFound;
    }
    if (op.kind != OpKind::kCompute) return ChainStep::kStop;
    floor = SatAdd(floor, op.duration);
    after = SatAdd(after, op.duration);
    return ChainStep::kNext;
  });
}

void ReplayEngine::ForecastNextArrival(uint32_t comm, uint64_t call, const Instance& in) {
  if (model_.nccl().launch_in_order || comm_state_[comm].real_members != 1) return;
  // The virtual members end M at max(E, last arrival): E is a constant
  // once the real member has reported it (real_left 0).
  const Nanoseconds from = in.real_left == 0 ? Max(in.last, in.real_done) : in.last;
  std::optional<NextArrival> next;
  uint32_t forecast = 0;  // virtual members of M forecast
  int budget = kMaxForecastOps;
  for (const Waiter& w : in.waiters) {
    if (state_[w.actor].real) continue;
    NextArrival a;
    // The virtual members end M at max(E, every member's arrival): the
    // real member's report applies at its own time, but not before the
    // engine issued its op (Issue), which may wait for its earlier reports.
    if (!ChainToNextCollective(w.actor, w.op, from, &a, &budget)) return;
    if (next && (next->comm != a.comm || next->call != a.call)) return;  // not one next collective
    if (!next) next = a;
    next->floor = Max(next->floor, a.floor);
    next->after = Max(next->after, a.after);
    ++forecast;
  }
  if (!next) return;
  // N's virtual members: the forecast ones, and those already there.
  const CommState& ns = comm_state_[next->comm];
  const uint32_t virtual_members = ns.members - ns.real_members;
  uint32_t arrived = 0;
  if (next->call >= ns.base && next->call - ns.base < ns.pending.size()) {
    const Instance& n = ns.pending[next->call - ns.base];
    arrived = n.virtual_arrived;
    if (arrived > 0) next->floor = Max(next->floor, n.last_virtual);
  }
  if (arrived + forecast != virtual_members || ns.real_members == 0) return;
  observer_->OnVirtualMembersForecast(next->comm, next->call, comm, call, next->floor, next->after);
}

}  // namespace prism::engine
