#include "daemon/engine/replay_accounting.h"

#include <algorithm>

namespace prism::engine {
namespace {

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

Nanoseconds ReplayAccounting::IterationTime(uint64_t iteration) const {
  const Nanoseconds prev = iteration == 0 ? Nanoseconds(0) : stats_.iteration_end[iteration - 1];
  return stats_.iteration_end[iteration] - prev;
}

bool ReplayAccounting::CommunicatedAlone(uint32_t actor, Nanoseconds started, uint32_t held) const {
  const ActorTally& t = actors_[actor];
  return t.communicating <= 1 + held && started > Nanoseconds(0) && t.last_comm_done <= started;
}

bool ReplayAccounting::Finished() const {
  for (uint64_t done : actor_iterations_done_)
    if (done < iterations_) return false;
  return true;
}

const ReplayStats& ReplayAccounting::Close() {
  stats_.compute_ns = compute_ns_.value();
  stats_.by_op = {}, stats_.by_comm = {};
  for (int kind = 0; kind < kOpKinds; ++kind) {
    for (int comm = 0; comm < kCommKinds; ++comm) {
      const Totals& p = by_pair_[kind * kCommKinds + comm];
      for (KindTotals* k : {&stats_.by_op[kind], &stats_.by_comm[comm]}) {
        k->time_ns += p.time_ns.value();
        k->ops += p.ops.value();
        k->bytes += p.bytes.value();
      }
    }
  }
  for (size_t a = 0; a < actors_.size(); ++a) {
    stats_.actor_exposed[a] = actors_[a].exposed;
    stats_.actor_pipeline_wait[a] = actors_[a].pipeline_wait;
    stats_.actor_peak_memory[a] = actors_[a].memory_peak;
  }
  return stats_;
}

}  // namespace prism::engine
