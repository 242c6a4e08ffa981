// The hybrid engine's forecast of a virtual sender's send to a real rank
// (ReplayEngine::ForecastSendToReal, docs/timing.md "Forecast pipeline
// receives").
//
// A paced engine plays a virtual rank's send to a real receiver when the
// wall clock reaches it, and the receiver's STREAM schedule then still has
// the engine's and gRPC's way to go: it came after the time it gives. But
// once an op of the sender ends at a time the engine knows (an all-virtual
// collective within a node, resolved: its end is its last arrival plus its
// time, both fixed then), what follows may be fixed too: compute ops start
// at the later of the previous end and their other dependencies'
// completions (WaitsForLaterCompletion), a group's ops issue together, and
// the send's first byte leaves at the first gap of the sender's transmit
// side (NicScheduler, RequestSend). Only the sender itself puts transfers on
// that side, so the gap is known too when no other stream of the sender can
// issue before the send. Anything else on the way (a collective, a send, a
// receive outside a group, a dependency not done yet, NCCL's launch order)
// ends the forecast: the engine then tells the receiver when it plays the
// send, as before.
#include "daemon/engine/replay_engine.h"

namespace prism::engine {
namespace {

constexpr int kMaxSendChainOps = 64;  // ops walked at most per forecast

}  // namespace

bool ReplayEngine::OtherStreamsWaitFor(uint32_t actor, uint32_t stream, uint64_t chain_begin,
                                       uint64_t send_pos) const {
  const ActorState& s = state_[actor];
  const ProgramInfo& p = *s.program;
  const std::vector<uint32_t>& ops = p.stream_ops[stream];
  const uint64_t len = ops.size();
  const uint32_t* done = done_.data() + s.done_base;
  for (uint32_t other = 0; other < s.streams; ++other) {
    if (other == stream) continue;
    const StreamState& o = streams_[s.stream_base + other];
    const std::vector<uint32_t>& oops = p.stream_ops[other];
    if (oops.empty() || o.iteration >= options_.iterations) continue;  // nothing left
    if (o.inflight > 0 || o.in_group) return false;
    // Its next op waits for an op of `stream` from the send on (one that is
    // not done, and neither in flight before the chain nor in the chain).
    const OpInfo& next = p.ops[oops[o.index]];
    bool waits = false;
    for (uint32_t i = next.deps_begin; i < next.deps_end && !waits; ++i) {
      const uint32_t d = p.deps[i];
      if (p.ops[d].stream != stream || done[d] > o.iteration) continue;
      bool before_send = false;
      for (uint64_t q = chain_begin - 1; q < send_pos && !before_send; ++q) before_send = ops[q % len] == d;
      waits = !before_send;
    }
    if (!waits) return false;
  }
  return true;
}

void ReplayEngine::ForecastSendToReal(uint32_t actor, uint32_t k, Nanoseconds end) {
  if (observer_ == nullptr || !has_real_ || launch_in_order_) return;
  if (nics_.model() == NicModel::kShared) return;
  const ActorState& s = state_[actor];
  if (s.real) return;
  const ProgramInfo& p = *s.program;
  const uint32_t stream = p.ops[k].stream;
  const StreamState& st = streams_[s.stream_base + stream];
  if (st.in_group || st.inflight != 1 || st.blocked_on != StreamState::kNotBlocked) return;
  const std::vector<uint32_t>& ops = p.stream_ops[stream];
  const uint64_t len = ops.size(), total = len * options_.iterations;
  const uint32_t* done = done_.data() + s.done_base;
  const uint64_t chain_begin = st.Pos(len);  // op k sits just before
  if (chain_begin == 0 || ops[(chain_begin - 1) % len] != k) return;
  Nanoseconds t = Max(end, stream_waits_[s.stream_base + stream].last_done);
  bool in_group = false;
  for (uint64_t pos = chain_begin; pos < total && pos - chain_begin < kMaxSendChainOps; ++pos) {
    const uint32_t j = ops[pos % len];
    const OpInfo& op = p.ops[j];
    const uint64_t iteration = pos / len;
    // Op k and the chain's own ops end before it starts; any other
    // dependency must be done already (its time is then a constant).
    for (uint32_t i = op.deps_begin; i < op.deps_end; ++i) {
      const uint32_t d = p.deps[i];
      bool in_chain = d == k;
      for (uint64_t q = chain_begin; !in_chain && q < pos; ++q) in_chain = ops[q % len] == d;
      if (in_chain) continue;
      if (done[d] <= iteration) return;
      t = Max(t, done_at_[s.done_base + d]);
    }
    switch (op.kind) {
      case OpKind::kCompute:
        if (in_group) return;
        t = SatAdd(t, op.duration);
        continue;
      case OpKind::kGroupStart:
        if (in_group) return;
        in_group = true;
        continue;
      case OpKind::kRecv:  // issued with the group, holds nothing of the sender's
        if (!in_group) return;
        continue;
      case OpKind::kSend: {
        P2PTransfers::ToRealPlan plan;
        if (!p2p_.PlanToReal(actor, j, &plan)) return;  // a virtual receiver: the sender's NIC
        if (!OtherStreamsWaitFor(actor, stream, chain_begin, pos)) return;
        const Nanoseconds first_byte = plan.same_node ? t : nics_.SendStart(actor, t, plan.wire);
        const Actor& a = world_.actors[actor];
        const uint32_t recv_rank = world_.actors[a.peer_actor[op.p2p_desc]].rep_rank;
        observer_->OnVirtualSendToRealForecast(a.slot_comm[op.slot], a.rep_rank, recv_rank, plan.index, first_byte,
                                               op.bytes);
        return;
      }
      default:
        return;
    }
  }
}

}  // namespace prism::engine
