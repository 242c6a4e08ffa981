#include "daemon/hybrid/step_cost_watch.h"

#include <cstdlib>
#include <map>
#include <optional>

#include "absl/strings/str_format.h"
#include "daemon/engine/nccl_tuning.h"
#include "daemon/hybrid/step_cost_fit.h"

namespace prism::daemon {

void StepCostWatch::OnEvents(SessionId id, const rpc::EventBatch& batch, rpc::ScheduleBatch* reply) {
  bool operations = false;
  for (const rpc::Event& e : batch.events()) operations |= e.has_op_started() || e.has_op_finished();
  if (operations) {
    std::lock_guard<std::mutex> lock(mu_);
    if (events_ < kStepCostWatchMaxEvents) {
      RecordedLine line;
      line.kind = RecordedLine::kEvents;
      line.session = id;
      for (const rpc::Event& e : batch.events())
        if (e.has_op_started() || e.has_op_finished()) *line.events.add_events() = e;
      events_ += static_cast<size_t>(line.events.events_size());
      kept_.lines.push_back(std::move(line));
    }
  }
  next_->OnEvents(id, batch, reply);
}

void StepCostWatch::OnCommunicator(const CommDescription& c) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    RecordedLine line;
    line.kind = RecordedLine::kCommunicator;
    line.comm = c;
    kept_.lines.push_back(std::move(line));
  }
  next_->OnCommunicator(c);
}

std::map<uint32_t, std::vector<RingOpTiming>> StepCostWatch::Timings(const graph::Graph& graph) const {
  std::lock_guard<std::mutex> lock(mu_);
  return RingOpTimings(kept_, graph);
}

std::vector<std::string> StepCostReport(const std::map<uint32_t, std::vector<RingOpTiming>>& timings,
                                        const graph::Cluster& cluster, Nanoseconds played) {
  std::vector<std::string> lines;
  for (const auto& [rank, ops] : timings) {
    const std::vector<StepCostFit> fits = FitStepCost(ops, cluster, played);
    if (fits.empty()) continue;
    lines.push_back(DescribeFits(fits, rank));
    // The figure prismd plays from a graph carrying these fits (engine::GraphNcclStepCost).
    graph::Cluster fitted;
    for (const graph::NcclStepCost& e : StepCostEntries(fits, rank)) *fitted.add_nccl_step_costs() = e;
    const std::optional<engine::StepCost> c = engine::GraphNcclStepCost(fitted);
    if (!c || std::llabs((c->cost - played).count()) <= 250) continue;
    const double took_us = c->cost.count() / 1e3;
    lines.push_back(absl::StrFormat(
        "rank %u's NCCL took %.2f us per ring step (of the fits above, the one prismd plays from a graph) where "
        "this run played %.2f: prismd --simulate --step-cost-us %.2f times the graph as this run's NCCL ran; to "
        "play it in hybrid runs too, put 'nccl_step_cost_us: %.2f' in the job file's cluster (or give prismd "
        "--step-cost-us %.2f) and run again until the fit stays within 0.25 us of what the run played or says "
        "the floor paced the rings (fits moved by about a microsecond from run to run on one GPU host; "
        "docs/network-model.md, \"The figure moves with the host\")",
        rank, took_us, played.count() / 1e3, took_us, took_us, took_us));
  }
  return lines;
}

}  // namespace prism::daemon
