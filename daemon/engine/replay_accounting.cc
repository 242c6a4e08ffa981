#include "daemon/engine/replay_accounting.h"

#include <algorithm>

namespace prism::engine {
namespace {

bool IsComm(OpKind k) { return k == OpKind::kCollective || k == OpKind::kSend || k == OpKind::kRecv; }

}  // namespace

ReplayAccounting::ReplayAccounting(const EngineWorld& world, uint64_t iterations)
    : world_(world), iterations_(iterations), actors_(world.actors.size()),
      iteration_actors_left_(iterations, world.actors.size()) {
  for (size_t a = 0; a < world.actors.size(); ++a) {
    const size_t ops = world.programs[world.actors[a].program].ops.size();
    actors_[a].iteration_left.assign(iterations, static_cast<uint32_t>(ops));
    ops_total_ += ops * iterations;
    if (ops == 0) {  // nothing to replay: done with every iteration from the start
      actors_[a].iterations_done = iterations;
      for (uint64_t& left : iteration_actors_left_) --left;
    }
  }
  stats_.iteration_end.assign(iterations, Nanoseconds(0));
  stats_.actor_exposed.assign(world.actors.size(), Nanoseconds(0));
  stats_.actor_pipeline_wait.assign(world.actors.size(), Nanoseconds(0));
  stats_.actor_peak_memory.assign(world.actors.size(), 0);
}

// Real ranks' reports may arrive out of the engine's time order: never count
// a negative span.
void ReplayAccounting::Account(ActorTally& t, Nanoseconds now) {
  if (t.communicating > 0 && t.computing == 0 && now > t.last_change) {
    t.exposed += now - t.last_change;
    if (t.pipeline_p2p == t.communicating) t.pipeline_wait += now - t.last_change;
  }
  t.last_change = Max(t.last_change, now);
}

bool ReplayAccounting::IsPipelineP2P(const Actor& a, const OpInfo& op) const {
  return (op.kind == OpKind::kSend || op.kind == OpKind::kRecv) &&
         world_.comms[a.slot_comm[op.slot]].kind == graph::COMM_KIND_PP;
}

void ReplayAccounting::Started(uint32_t actor, const OpInfo& op, Nanoseconds now) {
  ActorTally& t = actors_[actor];
  Account(t, now);
  if (op.kind == OpKind::kCompute) {
    ++t.computing;
    t.memory += op.memory_delta;
    t.memory_peak = std::max(t.memory_peak, t.memory);
  } else if (IsComm(op.kind)) {
    ++t.communicating;
    if (IsPipelineP2P(world_.actors[actor], op)) ++t.pipeline_p2p;
  }
}

void ReplayAccounting::Ended(uint32_t actor, const OpInfo& op, Nanoseconds issued, Nanoseconds now) {
  ActorTally& t = actors_[actor];
  Account(t, now);
  const Actor& a = world_.actors[actor];
  const __int128 w = a.weight;
  const int64_t took = std::max<int64_t>(0, (now - issued).count());
  if (op.kind == OpKind::kCompute) {
    --t.computing;
    stats_.compute_ns += w * took;
    return;
  }
  if (!IsComm(op.kind)) return;
  --t.communicating;
  if (IsPipelineP2P(a, op)) --t.pipeline_p2p;
  t.last_comm_done = Max(t.last_comm_done, now);
  const int kind = op.kind == OpKind::kSend   ? kOpKindSend
                   : op.kind == OpKind::kRecv ? kOpKindRecv
                                              : std::clamp<int>(op.collective, 0, kOpKindSend - 1);
  const int comm = std::clamp<int>(world_.comms[a.slot_comm[op.slot]].kind, 0, kCommKinds - 1);
  for (KindTotals* k : {&stats_.by_op[kind], &stats_.by_comm[comm]}) {
    k->time_ns += w * took;
    k->ops += w;
    k->bytes += w * op.bytes.count();
  }
}

std::optional<uint64_t> ReplayAccounting::CountDone(uint32_t actor, uint64_t iteration, Nanoseconds now) {
  ActorTally& t = actors_[actor];
  if (iteration >= iterations_) return std::nullopt;
  ++ops_done_;
  if (--t.iteration_left[iteration] != 0) return std::nullopt;
  ++t.iterations_done;
  stats_.iteration_end[iteration] = Max(stats_.iteration_end[iteration], now);
  if (--iteration_actors_left_[iteration] != 0) return std::nullopt;
  ++iterations_done_;
  return iteration;
}

Nanoseconds ReplayAccounting::IterationTime(uint64_t iteration) const {
  const Nanoseconds prev = iteration == 0 ? Nanoseconds(0) : stats_.iteration_end[iteration - 1];
  return stats_.iteration_end[iteration] - prev;
}

bool ReplayAccounting::CommunicatedAlone(uint32_t actor, Nanoseconds started) const {
  const ActorTally& t = actors_[actor];
  return t.communicating <= 1 && started > Nanoseconds(0) && t.last_comm_done <= started;
}

bool ReplayAccounting::Finished() const {
  for (const ActorTally& t : actors_)
    if (t.iterations_done < iterations_) return false;
  return true;
}

const ReplayStats& ReplayAccounting::Close() {
  for (size_t a = 0; a < actors_.size(); ++a) {
    stats_.actor_exposed[a] = actors_[a].exposed;
    stats_.actor_pipeline_wait[a] = actors_[a].pipeline_wait;
    stats_.actor_peak_memory[a] = actors_[a].memory_peak;
  }
  return stats_;
}

}  // namespace prism::engine
