#include "daemon/engine/world.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "daemon/engine/equivalence.h"
#include "daemon/engine/rank_world.h"
#include "proto/graph_file.h"
#include "proto/graph_topology.h"

namespace prism::engine {
namespace {

absl::Status Invalid(const std::string& what) {
  return absl::InvalidArgumentError(absl::StrCat("graph cannot be replayed: ", what));
}

// Per program, the slots its collectives use, each once, in the order of
// their first op: the checks below visit each rank's communicators, not
// each rank's ops (a 131,072-rank graph has 16 programs of thousands of ops).
std::vector<std::vector<uint32_t>> CollectiveSlots(const RankWorld& w) {
  std::vector<std::vector<uint32_t>> slots(w.programs.size());
  for (size_t i = 0; i < w.programs.size(); ++i)
    for (const OpInfo& op : w.programs[i].ops)
      if (op.kind == OpKind::kCollective &&
          std::find(slots[i].begin(), slots[i].end(), op.slot) == slots[i].end())
        slots[i].push_back(op.slot);
  return slots;
}

// Every communicator a collective uses and every P2P pair must be servable.
absl::Status CheckLinks(const RankWorld& w, const NetworkModel& model) {
  const std::vector<std::vector<uint32_t>> slots = CollectiveSlots(w);
  std::vector<uint8_t> checked(w.communicators(), 0);
  for (uint32_t r = 0; r < w.ranks(); ++r) {
    const auto comms = w.slots(r);
    for (uint32_t slot : slots[w.program(r)]) {
      const uint32_t c = comms[slot];
      if (checked[c]) continue;
      checked[c] = 1;
      if (auto s = model.CheckShape(w.shapes[c]); !s.ok())
        return Invalid(absl::StrCat("communicator ", w.CommName(c), ": ", std::string(s.message())));
    }
    for (uint8_t same_node : w.peers_same_node(r))
      if (auto s = model.CheckP2P(same_node); !s.ok())
        return Invalid(absl::StrCat("rank ", r, " send/recv: ", std::string(s.message())));
  }
  return absl::OkStatus();
}

// Plays every tree all-reduce the model will play (one rank per node,
// NetworkModel::Tree) now, so that a play of up to about 20 ms never runs
// on the engine thread while prismd keeps pace with real ranks. Each
// (program, slot, algorithm, size) once per rank, each communicator once.
void PlayTreesAhead(const RankWorld& w, const NetworkModel& model) {
  struct Tree {
    uint32_t slot;
    graph::Algorithm algorithm;
    Bytes bytes;
    bool operator==(const Tree&) const = default;
  };
  std::vector<std::vector<Tree>> trees(w.programs.size());
  for (size_t i = 0; i < w.programs.size(); ++i)
    for (const OpInfo& op : w.programs[i].ops) {
      if (op.kind != OpKind::kCollective || op.collective != graph::ALLREDUCE) continue;
      if (op.algorithm != graph::ALGORITHM_TREE && op.algorithm != graph::ALGORITHM_DEFAULT) continue;
      const Tree t{op.slot, op.algorithm, op.bytes};
      if (std::find(trees[i].begin(), trees[i].end(), t) == trees[i].end()) trees[i].push_back(t);
    }
  for (uint32_t r = 0; r < w.ranks(); ++r)
    for (const Tree& t : trees[w.program(r)]) {
      const CommShape& shape = w.shapes[w.slots(r)[t.slot]];
      if (shape.max_per_node == 1 && shape.SpansNodes())
        (void)model.CollectiveTime(graph::ALLREDUCE, t.algorithm, t.bytes, shape);
    }
}

}  // namespace

uint64_t EngineStateEntries(const EngineWorld& world, uint64_t iterations) {
  uint64_t entries = 0;
  for (const Actor& a : world.actors) {
    const ProgramInfo& p = world.programs[a.program];
    entries += p.ops.size() * (a.real ? 2 : 1) + p.streams + a.slot_comm.size() + iterations;
  }
  return entries;
}

absl::StatusOr<EngineWorld> BuildWorld(const graph::Graph& graph, const NetworkModel& model,
                                       const WorldOptions& options) {
  // Ranks, per-rank state, durations, sizes and kinds within common/limits.h.
  if (!options.graph_validated)
    if (auto s = graph::ValidateGraph(graph); !s.ok()) return s;
  auto topology = graph::Topology::Of(graph);  // ValidateGraph (here or the caller's) checked the tables
  if (!topology.ok()) return topology.status();
  auto ranks = BuildRankWorld(graph, *std::move(topology), options.real_ranks);
  if (!ranks.ok()) return ranks.status();
  if (!options.alone_ranks.empty()) {
    ranks->alone.assign(ranks->ranks(), 0);
    for (uint32_t r : options.alone_ranks) {
      if (r >= ranks->ranks())
        return absl::InvalidArgumentError(absl::StrCat("rank ", r, " is outside the ", ranks->ranks(),
                                                       "-rank world of the graph"));
      ranks->alone[r] = 1;
    }
  }
  if (auto s = CheckLinks(*ranks, model); !s.ok()) return s;
  PlayTreesAhead(*ranks, model);
  if (!options.use_classes) {
    EngineWorld full = EveryRankWorld(*ranks);
    full.reduction_note = "equivalence classes switched off (--no-classes)";
    return full;
  }
  return ReduceWorld(*ranks);
}

}  // namespace prism::engine
