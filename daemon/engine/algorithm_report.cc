#include "daemon/engine/algorithm_report.h"

#include <map>
#include <tuple>

#include "absl/strings/ascii.h"

namespace prism::engine {

std::vector<AlgorithmRow> AlgorithmChoices(const EngineWorld& world, const NetworkModel& model) {
  // Actors of one program whose slots have the same shapes choose alike: weigh them once.
  std::map<std::pair<uint32_t, std::vector<CommShape>>, uint64_t> templates;
  for (const Actor& a : world.actors) {
    std::vector<CommShape> shapes;
    shapes.reserve(a.slot_comm.size());
    for (uint32_t c : a.slot_comm) shapes.push_back(world.comms[c].shape);
    templates[{a.program, std::move(shapes)}] += a.weight;
  }
  // (kind, algorithm, protocol or -1, forced) -> calls
  std::map<std::tuple<int, int, int, bool>, uint64_t> counts;
  for (const auto& [key, weight] : templates) {
    const auto& [program, shapes] = key;
    for (const OpInfo& op : world.programs[program].ops) {
      if (op.kind != OpKind::kCollective || op.slot >= shapes.size() || shapes[op.slot].ranks <= 1) continue;
      const bool forced = op.algorithm != graph::ALGORITHM_DEFAULT;
      int algorithm = op.algorithm, protocol = -1;
      if (!forced && model.nccl().nccl_choice && op.collective != graph::ALLTOALL) {
        const NcclChoice c = model.ChooseNccl(op.collective, op.bytes, shapes[op.slot]);
        algorithm = c.algorithm;
        protocol = static_cast<int>(c.protocol);
      } else if (!forced) {
        algorithm = model.Choose(op.collective, op.bytes, shapes[op.slot]);
      }
      counts[{op.collective, algorithm, protocol, forced}] += weight;
    }
  }
  std::vector<AlgorithmRow> rows;
  for (const auto& [key, calls] : counts) {
    const auto& [kind, algorithm, protocol, forced] = key;
    AlgorithmRow r;
    r.kind = absl::AsciiStrToLower(graph::CollectiveKind_Name(static_cast<graph::CollectiveKind>(kind)));
    r.algorithm = NcclAlgorithmName(static_cast<graph::Algorithm>(algorithm));
    r.protocol = protocol < 0 ? "" : NcclProtocolName(static_cast<NcclProtocol>(protocol));
    r.forced = forced;
    r.calls = calls;
    rows.push_back(std::move(r));
  }
  return rows;
}

}  // namespace prism::engine
