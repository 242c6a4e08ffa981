// NCCL's step cost on the real ranks of a live hybrid run, fitted at its end
// the way prism-session-capture fits it from a recording (step_cost_fit.h):
// a ScheduleSource in front of the hybrid scheduler that forwards every call
// and keeps the communicators and the operation reports (OpStarted,
// OpFinished; no per-message events). At 8192 ranks one microsecond of the
// figure is about 3% of an iteration (docs/network-model.md, "The figure
// moves with the host"), so a run's --simulate needs the run's own figure.
//
// Ownership: `next` is not owned and must outlive the watch.
// Thread-safety: the ScheduleSource calls may come from several session
// threads (one mutex, taken only for a batch with operation reports and for
// a communicator); Report from any thread.
#ifndef PRISM_DAEMON_HYBRID_STEP_COST_WATCH_H_
#define PRISM_DAEMON_HYBRID_STEP_COST_WATCH_H_

#include <cstddef>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "common/units.h"
#include "daemon/hybrid/session_recorder.h"
#include "daemon/hybrid/step_cost_fit.h"
#include "daemon/session/schedule_source.h"
#include "proto/graph.pb.h"

namespace prism::daemon {

// Operation events kept at most (a few hundred bytes each): a run longer
// than that is fitted on its first ones.
inline constexpr size_t kStepCostWatchMaxEvents = 200'000;

class StepCostWatch final : public ScheduleSource {
 public:
  explicit StepCostWatch(ScheduleSource* next) : next_(next) {}
  StepCostWatch(const StepCostWatch&) = delete;
  StepCostWatch& operator=(const StepCostWatch&) = delete;

  void OnSessionOpened(SessionId id, const rpc::Hello& hello, ScheduleSink* sink) override {
    next_->OnSessionOpened(id, hello, sink);
  }
  void OnEvents(SessionId id, const rpc::EventBatch& batch, rpc::ScheduleBatch* reply) override;
  void OnSessionClosed(SessionId id) override { next_->OnSessionClosed(id); }
  void OnCommunicator(const CommDescription& c) override;

  // Every operation the real ranks reported with a first send and an end,
  // per real rank (RingOpTimings of what the watch kept; StepCostReport fits
  // them, op_time_report.h puts the collectives against the model). Walks
  // the kept events: call once, at the run's end.
  std::map<uint32_t, std::vector<RingOpTiming>> Timings(const graph::Graph& graph) const;

 private:
  ScheduleSource* next_;
  mutable std::mutex mu_;
  Recording kept_;     // communicators and operation events, in arrival order (mu_)
  size_t events_ = 0;  // operation events in kept_ (mu_)
};

// One line per real rank of `timings` (StepCostWatch::Timings) that ran ring
// collectives (DescribeFits), then, when the figure prismd would play from a
// graph carrying these fits (engine::GraphNcclStepCost) differs from `played`
// by more than a quarter microsecond, a line naming the --step-cost-us that
// gives --simulate this run's NCCL. `cluster`: the cluster of the graph the
// run played. Pure function.
std::vector<std::string> StepCostReport(const std::map<uint32_t, std::vector<RingOpTiming>>& timings,
                                        const graph::Cluster& cluster, Nanoseconds played);

}  // namespace prism::daemon

#endif  // PRISM_DAEMON_HYBRID_STEP_COST_WATCH_H_
