// prismd's hybrid mode in one call: real ranks among virtual ones.
//
// RunHybrid wires, in this order: the replay engine's inbox and wall-clock
// pacer; the HybridScheduler (plugin events -> engine, engine -> schedules);
// the ControlPlane (plugin sessions, NCCL bootstrap of the virtual ranks,
// PyTorch's store); the gRPC server; then replays the graph paced to the
// wall clock on its own thread until a stop signal, and prints the report
// (and writes the trace) of what it replayed. docs/timing.md tells the story.
#ifndef PRISM_DAEMON_HYBRID_HYBRID_RUN_H_
#define PRISM_DAEMON_HYBRID_HYBRID_RUN_H_

#include <signal.h>

#include <string>

#include "absl/status/status.h"
#include "common/units.h"
#include "daemon/engine/simulation.h"
#include "daemon/hybrid/control_plane.h"
#include "daemon/hybrid/divergence_watch.h"
#include "daemon/hybrid/hybrid_scheduler.h"
#include "daemon/server/metrics.h"
#include "daemon/server/status.h"
#include "proto/graph.pb.h"

namespace prism::daemon {

struct HybridOptions {
  ControlPlaneOptions control;        // real ranks, store, bootstrap (control.real_ranks == engine.real_ranks)
  engine::SimulationOptions engine;   // real_ranks, iterations (0: HybridIterations), classes, trace ranks
  std::string listen;                 // gRPC address; empty: the per-user default
  std::string trace_path;             // empty: no trace
  std::string record_sessions_path;   // empty: no session recording (session_recorder.h)
  // How far ahead of the wall clock the engine may replay virtual ranks
  // (their schedules reach the plugins that much ahead). 0: causal, every
  // report arrives before the events it could delay (docs/timing.md).
  Nanoseconds lookahead = FromMilliseconds(0);
  // What a divergence from the graph does (divergence_watch.h).
  OnDivergence on_divergence = OnDivergence::kStop;
  // Hold a real rank's ring collective until the engine's virtual members
  // reach it (HybridSchedulerOptions::hold_early_rings; prismd --ring-hold).
  bool ring_hold = true;
  // Forecast schedules (HybridSchedulerOptions::forecast; prismd --ring-forecast).
  bool ring_forecast = true;
  // How long a stall (HybridScheduler::StallReport) lasts before prismd
  // reports it, as a divergence; 0: never.
  Nanoseconds stall_after = FromSeconds(5);
};

// The iterations a hybrid run replays: `requested` (prismd --iterations) if
// not 0, else the larger of the graph's count and kHybridIterations (a job
// graph says 1, the count --simulate plays; a training under prism run runs
// as many as its program says).
uint64_t HybridIterations(const graph::Graph& graph, uint64_t requested);

// Serves until one of `stop_signals` (blocked in every thread beforehand) is
// received, or, with OnDivergence::kStop, until the real ranks diverge from
// the graph: then prismd shuts down within a second and returns Aborted
// whose message is the divergence (prismd exits kExitDiverged). Errors say
// what to fix; a replay that stopped on its own (the graph's iterations
// done) is reported on stderr and /status while prismd keeps serving.
absl::Status RunHybrid(const graph::Graph& graph, HybridOptions options, server::StatusBoard* status,
                       server::Metrics* metrics, const sigset_t& stop_signals);

}  // namespace prism::daemon

#endif  // PRISM_DAEMON_HYBRID_HYBRID_RUN_H_
