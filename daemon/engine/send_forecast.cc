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
  const std::vector<uint32_t>& ops = p.stream_ops[stream];
  const uint64_t chain_begin = streams_[s.stream_base + stream].Pos(ops.size());  // op k sits just before
  if (chain_begin == 0 || ops[(chain_begin - 1) % ops.size()] != k) return;
  Nanoseconds t;
  bool in_group = false;
  int budget = kMaxSendChainOps;
  WalkChain(actor, k, end, &t, kMaxSendChainOps, &budget, [&](uint32_t j, uint64_t pos) {
    const OpInfo& op = p.ops[j];
    switch (op.kind) {
      case OpKind::kCompute:
        if (in_group) return ChainStep::kStop;
        t = SatAdd(t, op.duration);
        return ChainStep::kNext;
      case OpKind::kGroupStart:
        if (in_group) return ChainStep::kStop;
        in_group = true;
        return ChainStep::kNext;
      case OpKind::kRecv:  // issued with the group, holds nothing of the sender's
        return in_group ? ChainStep::kNext : ChainStep::kStop;
      case OpKind::kSend: {
        P2PTransfers::ToRealPlan plan;
        if (!p2p_.PlanToReal(actor, j, &plan)) return ChainStep::kStop;  // a virtual receiver: the sender's NIC
        if (!OtherStreamsWaitFor(actor, stream, chain_begin, pos)) return ChainStep::kStop;
        const Nanoseconds first_byte = plan.same_node ? t : nics_.SendStart(actor, t, plan.wire);
        const Actor& a = world_.actors[actor];
        const uint32_t recv_rank = world_.actors[a.peer_actor[op.p2p_desc]].rep_rank;
        observer_->OnVirtualSendToRealForecast(a.slot_comm[op.slot], a.rep_rank, recv_rank, plan.index, first_byte,
                                               op.bytes);
        return ChainStep::kFound;
      }
      default:
        return ChainStep::kStop;
    }
  });
}

}  // namespace prism::engine
