// HybridScheduler's reports of waits: receives stuck for their virtual
// sender, and stalls (hybrid_scheduler.h).
#include "absl/strings/str_cat.h"
#include "daemon/hybrid/hybrid_scheduler.h"

namespace prism::daemon {

std::vector<std::string> HybridScheduler::StuckReceives(Nanoseconds older_than) const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<std::string> out;
  const int64_t now = RealtimeNowNs();
  for (const auto& [rank, rr] : ranks_)
    for (const auto& [slot, started] : rr.recv_started)
      if (now - started.since_ns > older_than.count())
        out.push_back(absl::StrCat("real rank ", rank, " waits ", (now - started.since_ns) / 1000000,
                                   " ms for virtual rank ", std::get<1>(slot), "'s send #", std::get<2>(slot), " (",
                                   started.what,
                                   "): the engine has not played that send yet (is a virtual rank stuck? see the "
                                   "replay's state on /status)"));
  return out;
}

void HybridScheduler::OnAwaitingRealRanks(const std::vector<engine::RealRankPosition>& positions) {
  std::lock_guard<std::mutex> lock(mu_);
  awaiting_ = EngineAwaiting{RealtimeNowNs(), positions};
}

std::optional<std::string> HybridScheduler::StallReport(Nanoseconds quiet_for) const {
  std::lock_guard<std::mutex> lock(mu_);
  const int64_t last_report_ns = last_report_ns_.load(std::memory_order_relaxed);
  if (!awaiting_ || awaiting_->at_ns < last_report_ns) return std::nullopt;  // reports came since it said so
  const int64_t now = RealtimeNowNs();
  if (now - last_report_ns < quiet_for.count()) return std::nullopt;
  std::map<uint32_t, const Started*> oldest;  // per real rank, what has waited longest for the engine's time
  for (const uint32_t rank : programs_.RealRanks()) {
    const auto it = ranks_.find(rank);
    // A real rank that has not started an operation yet (still starting up) or whose session ended.
    if (it == ranks_.end() || it->second.session == 0) return std::nullopt;
    const RealRank& rr = it->second;
    const Started* o = nullptr;
    auto older = [&o](const Started& st) {
      if (o == nullptr || st.since_ns < o->since_ns) o = &st;
    };
    for (const auto& [slot, st] : rr.collective_started) older(st);
    for (const auto& [slot, st] : rr.recv_started) older(st);
    if (o == nullptr) return std::nullopt;  // it may yet start what the engine waits for, or end what it is in
    oldest[rank] = o;
  }
  if (oldest.empty()) return std::nullopt;
  std::string text = absl::StrCat("the real ranks and the replay wait for each other (no report for ",
                                  (now - last_report_ns) / 1000000, " ms)");
  for (const auto& [rank, st] : oldest) {
    absl::StrAppend(&text, "; real rank ", rank, " is in ", st->what, " (graph op ", st->op.op, " ",
                    programs_.OpName(rank, st->op.op), ", iteration ", st->op.iteration, ") since ",
                    (now - st->since_ns) / 1000000, " ms, waiting for its virtual peers");
    bool said = false;
    for (const engine::RealRankPosition& p : awaiting_->positions) {
      if (p.rank != rank) continue;
      absl::StrAppend(&text, said ? "; and" : ", while the replay", p.reached ? " has it in op " : " waits for it to start op ",
                      p.op, " (", programs_.OpName(rank, p.op), ") of iteration ", p.iteration,
                      p.reached ? ", waiting for that op's peers" : "", " on stream ", p.stream);
      said = true;
    }
    if (!said) absl::StrAppend(&text, ", while the replay has finished that rank's program");
  }
  return text;
}

}  // namespace prism::daemon
