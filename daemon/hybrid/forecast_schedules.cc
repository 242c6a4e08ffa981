// HybridScheduler's forecasts (docs/timing.md, "Forecast rings"): when the
// engine can say ahead how a collective's virtual members arrive as a
// function of the real rank's own end of an earlier collective
// (EngineObserver::OnVirtualMembersForecast), the real rank gets that rule
// as a schedule relative to the end (OpSchedule.after), before the members
// arrive and before it reports that end. Its plugin then times the receives
// locally: no hold, no wait for the report's and the schedule's trips.
#include "daemon/hybrid/hybrid_scheduler.h"

namespace prism::daemon {
namespace {

// Collectives per real rank kept as possible anchors (a forecast names the
// rank's collective just before, which is in flight or just ended).
constexpr size_t kMaxAnchors = 64;

}  // namespace

void HybridScheduler::RememberAnchor(RealRank& rr, const Slot& slot, const rpc::OpKey& key) {
  if (!rr.anchors.emplace(slot, Anchor{key, 0}).second) return;
  rr.anchor_order.push_back(slot);
  if (rr.anchor_order.size() <= kMaxAnchors) return;
  rr.anchors.erase(rr.anchor_order.front());
  rr.anchor_order.pop_front();
}

void HybridScheduler::EndAnchor(RealRank& rr, const Slot& slot, int64_t end_ns) {
  if (const auto it = rr.anchors.find(slot); it != rr.anchors.end()) it->second.end_ns = end_ns;
}

std::optional<rpc::OpSchedule> HybridScheduler::ForecastSchedule(const RealRank& rr, const Started& st,
                                                                 const Forecast& f) {
  const auto anchor = rr.anchors.find(f.after);
  if (anchor == rr.anchors.end()) return std::nullopt;
  const rpc::OpSchedule::Mode mode = st.mirror ? rpc::OpSchedule::MIRROR : rpc::OpSchedule::STREAM;
  rpc::OpSchedule s = Schedule(st.key, mode, f.floor, st.stream);
  *s.mutable_after() = anchor->second.key;
  const int64_t offset = mode == rpc::OpSchedule::STREAM ? st.stream.ready_offset.count() : 0;
  s.set_after_delay_ns(static_cast<uint64_t>(std::max<int64_t>(0, f.after_end + offset)));
  return s;
}

bool HybridScheduler::DeliverForecast(uint32_t rank, RealRank& rr, const Slot& slot, const Started& st,
                                      const Forecast& f, rpc::ScheduleBatch* reply) {
  std::optional<rpc::OpSchedule> s = ForecastSchedule(rr, st, f);
  if (!s) return false;
  ++counters_.forecasts;
  Deliver(rank, std::move(*s), reply);
  rr.forecast_sent[slot] = {st, f};
  return true;
}

bool HybridScheduler::ForecastArrived(uint32_t rank, RealRank& rr, const Slot& slot, Nanoseconds arrived) {
  rr.collective_forecast.erase(slot);  // the rank never started it while forecast: the plain schedule waits for it
  const auto sent = rr.forecast_sent.find(slot);
  if (sent == rr.forecast_sent.end()) return false;
  const auto& [st, f] = sent->second;
  const auto anchor = rr.anchors.find(f.after);
  if (anchor != rr.anchors.end() && anchor->second.end_ns > 0 && pacer_ != nullptr) {
    const int64_t end = pacer_->EmulatedFromRealtime(static_cast<uint64_t>(anchor->second.end_ns)).count();
    if (std::max(f.floor, end + f.after_end) != arrived.count()) ++counters_.forecast_misses;
  }
  Deliver(rank, Schedule(st.key, st.mirror ? rpc::OpSchedule::MIRROR : rpc::OpSchedule::STREAM, arrived.count(),
                         st.stream),
          nullptr);
  rr.forecast_sent.erase(sent);
  return true;
}

void HybridScheduler::OnVirtualMembersForecast(uint32_t comm, uint64_t call, uint32_t after_comm,
                                               uint64_t after_call, Nanoseconds floor, Nanoseconds after_end) {
  if (!options_.forecast) return;
  std::lock_guard<std::mutex> lock(mu_);
  const auto* views = comms_.RealViews(comm);
  const auto* after_views = comms_.RealViews(after_comm);
  if (views == nullptr || after_views == nullptr) return;
  for (const auto& [rank, graph_comm] : *views) {
    std::optional<uint32_t> after_graph;
    for (const auto& [r, g] : *after_views)
      if (r == rank) after_graph = g;
    if (!after_graph) continue;  // not the real member the forecast runs from
    RealRank& rr = ranks_[rank];
    const Slot slot{graph_comm, call};
    const Forecast f{floor.count(), after_end.count(), Slot{*after_graph, after_call}};
    const auto started = rr.collective_started.find(slot);
    if (started == rr.collective_started.end()) {
      rr.collective_forecast[slot] = f;  // for when the plugin reports the operation
      continue;
    }
    if (DeliverForecast(rank, rr, slot, started->second, f, nullptr)) rr.collective_started.erase(started);
  }
}

}  // namespace prism::daemon
