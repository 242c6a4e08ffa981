// Which algorithm and protocol each collective of a world runs (the report's
// "collective algorithms" table): NCCL's choice where the graph leaves the
// algorithm to it (NetworkModel::ChooseNccl), the graph's where it names one.
// Pure function of the world and the model; thread-compatible.
#ifndef PRISM_DAEMON_ENGINE_ALGORITHM_REPORT_H_
#define PRISM_DAEMON_ENGINE_ALGORITHM_REPORT_H_

#include <vector>

#include "daemon/engine/network_model.h"
#include "daemon/engine/simulation_report.h"
#include "daemon/engine/world.h"

namespace prism::engine {

// Rows sorted by kind, algorithm, protocol; calls per iteration, each rank's
// call counted (class actors by their weight). Collectives of one rank are
// left out (no network).
std::vector<AlgorithmRow> AlgorithmChoices(const EngineWorld& world, const NetworkModel& model);

}  // namespace prism::engine

#endif  // PRISM_DAEMON_ENGINE_ALGORITHM_REPORT_H_
