#include "daemon/engine/replay_accounting.h"

#include <algorithm>

namespace prism::engine {
namespace {

bool IsComm(OpKind k) { return k == OpKind::kCollective || k == OpKind::kSend || k == OpKind::kRecv; }
static_assert(kCommKinds <= 256 && graph::COMM_KIND_PP < kCommKinds - 1, "slot kinds are by_comm rows in a byte");

}  // namespace

ReplayAccounting::ReplayAccounting(const EngineWorld& world, uint64_t iterations)
    : iterations_(iterations), actors_(world.actors.size()), weight_(world.actors.size()),
      slot_base_(world.actors.size()), actor_iterations_done_(world.actors.size(), 0),
      iteration_actors_left_(iterations, world.actors.size()) {
  iteration_left_.reserve(world.actors.size() * iterations);
  for (size_t a = 0; a < world.actors.size(); ++a) {
    const Actor& actor = world.actors[a];
    const size_t ops = world.programs[actor.program].ops.size();
    weight_[a] = actor.weight;
    slot_base_[a] = static_cast<uint32_t>(slot_kind_.size());
    for (uint32_t comm : actor.slot_comm)  // by_comm's row (the pipeline kind kept apart from the last row)
      slot_kind_.push_back(static_cast<uint8_t>(std::clamp<int>(world.comms[comm].kind, 0, kCommKinds - 1)));
    iteration_left_.insert(iteration_left_.end(), iterations, static_cast<uint32_t>(ops));
    ops_total_ += ops * iterations;
    if (ops == 0) {  // nothing to replay: done with every iteration from the start
      actor_iterations_done_[a] = iterations;
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

void ReplayAccounting::Started(uint32_t actor, const OpInfo& op, Nanoseconds now) {
  ActorTally& t = actors_[actor];
  Account(t, now);
  if (op.kind == OpKind::kCompute) {
    ++t.computing;
    t.memory += op.memory_delta;
    t.memory_peak = std::max(t.memory_peak, t.memory);
  } else if (IsComm(op.kind)) {
    ++t.communicating;
    if (op.kind != OpKind::kCollective && SlotKind(actor, op.slot) == graph::COMM_KIND_PP) ++t.pipeline_p2p;
  }
}

void ReplayAccounting::Ended(uint32_t actor, const OpInfo& op, Nanoseconds issued, Nanoseconds now) {
  ActorTally& t = actors_[actor];
  Account(t, now);
  const __int128 w = weight_[actor];
  const int64_t took = std::max<int64_t>(0, (now - issued).count());
  if (op.kind == OpKind::kCompute) {
    --t.computing;
    stats_.compute_ns += w * took;
    return;
  }
  if (!IsComm(op.kind)) return;
  --t.communicating;
  const graph::CommKind comm_kind = SlotKind(actor, op.slot);
  if (op.kind != OpKind::kCollective && comm_kind == graph::COMM_KIND_PP) --t.pipeline_p2p;
  t.last_comm_done = Max(t.last_comm_done, now);
  const int kind = op.kind == OpKind::kSend   ? kOpKindSend
                   : op.kind == OpKind::kRecv ? kOpKindRecv
                                              : std::clamp<int>(op.collective, 0, kOpKindSend - 1);
  const int comm = comm_kind;  // clamped when stored
  for (KindTotals* k : {&stats_.by_op[kind], &stats_.by_comm[comm]}) {
    k->time_ns += w * took;
    k->ops += w;
    k->bytes += w * op.bytes.count();
  }
}

std::optional<uint64_t> ReplayAccounting::CountDone(uint32_t actor, uint64_t iteration, Nanoseconds now) {
  if (iteration >= iterations_) return std::nullopt;
  ++ops_done_;
  if (--iteration_left_[actor * iterations_ + iteration] != 0) return std::nullopt;
  ++actor_iterations_done_[actor];
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
  for (uint64_t done : actor_iterations_done_)
    if (done < iterations_) return false;
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
