// One call that loads nothing and replays a graph: the glue used by prismd
// --simulate, the tests and the benchmarks.
//
// Simulate() builds the world (equivalence classes unless switched off), runs
// the engine on the calling thread and returns the report, plus the trace when
// ranks were selected. Thread-compatible: concurrent calls share nothing.
#ifndef PRISM_DAEMON_ENGINE_SIMULATION_H_
#define PRISM_DAEMON_ENGINE_SIMULATION_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/limits.h"
#include "daemon/engine/late_ranks.h"
#include "daemon/engine/realtime.h"
#include "daemon/engine/replay_engine.h"
#include "daemon/engine/simulation_report.h"
#include "daemon/engine/trace_writer.h"
#include "daemon/engine/world.h"
#include "proto/graph.pb.h"

namespace prism::engine {

inline constexpr uint64_t kMaxIterations = limits::kMaxIterations;

struct SimulationOptions {
  uint64_t iterations = 0;                  // 0: JobInfo.attributes["iterations"], else 1
  bool use_classes = true;
  bool graph_validated = false;             // WorldOptions::graph_validated
  std::optional<std::vector<uint32_t>> trace_ranks;  // set: record a trace of these ranks
  std::optional<RealtimeOptions> realtime;  // set: pace to the wall clock (Simulate owns the pacer)
  // Or a pacer the caller owns and has Start()ed (hybrid mode: the session
  // service converts CLOCK_REALTIME stamps with pacer->EmulatedFromRealtime,
  // safe from any thread after Start). Overrides `realtime`.
  WallClockPacer* pacer = nullptr;
  std::vector<uint32_t> real_ranks;         // hybrid: ranks whose progress comes from `inbox`
  EngineObserver* observer = nullptr;       // not owned
  EngineInbox* inbox = nullptr;             // not owned
  uint64_t progress_every_events = 1 << 16; // observer OnProgress cadence
  // A StopRequest on `inbox` ends the replay with the report so far
  // (SimulationReport::stopped; prismd --simulate on SIGINT/SIGTERM) instead
  // of a Cancelled status.
  bool report_when_stopped = false;
  // How transfers share NICs (nic_scheduler.h NicModel); kShared needs no real ranks.
  NicModel nic_model = NicModel::kQueues;
  // What the model follows of the job's NCCL (network_model.h, NcclBehaviour): its
  // cost per ring step and the algorithms NCCL_ALGO allows. prismd
  // passes the measured step cost (nccl_tuning.h) and --nccl-algo; the
  // report shows both. Default: the pure link model, every algorithm.
  NcclBehaviour nccl;
  std::string step_cost_source;  // where nccl.step_cost comes from
  std::string launch_order_source;  // where nccl.launch_in_order comes from (launch_order.h)
  std::string nccl_algo;         // NCCL_ALGO as given ("": NCCL's default)
  // Virtual ranks late in one iteration (late_ranks.h; prismd --late): each
  // is kept out of the equivalence classes; a real one is an error.
  std::vector<LateRank> late;
};

class SimulationResult {
 public:
  SimulationReport report;
  // Empty unless trace_ranks was set.
  std::string TraceJson(const graph::Graph& graph) const;
  absl::Status WriteTrace(const graph::Graph& graph, const std::string& path) const;

  std::unique_ptr<EngineWorld> world;
  std::unique_ptr<TraceRecorder> trace;
};

// The iteration count to replay: `requested` if non-zero, else the graph's
// "iterations" attribute, else 1. Errors on a malformed or absurd count.
absl::StatusOr<uint64_t> IterationsFor(const graph::Graph& graph, uint64_t requested);

// Errors: the graph's (ValidateGraph, BuildWorld), the engine's (stall,
// stop, lag), and OutOfRange when a program's memory or the replayed clock
// would leave what the engine represents (a saturated clock is an error,
// never a result).
absl::StatusOr<SimulationResult> Simulate(const graph::Graph& graph, const SimulationOptions& options);

}  // namespace prism::engine

#endif  // PRISM_DAEMON_ENGINE_SIMULATION_H_
