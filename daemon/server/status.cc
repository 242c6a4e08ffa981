#include "daemon/server/status.h"

#include <algorithm>
#include <cmath>

#include "nlohmann/json.hpp"

namespace prism::server {
namespace {

using nlohmann::ordered_json;

std::string Cut(const std::string& text) {
  return text.size() <= StatusBoard::kMaxText ? text : text.substr(0, StatusBoard::kMaxText - 3) + "...";
}

double Seconds(int64_t ns) { return static_cast<double>(ns) * 1e-9; }
double Round3(double s) { return std::round(s * 1000.0) / 1000.0; }

}  // namespace

StatusBoard::StatusBoard() : start_(std::chrono::steady_clock::now()) {}

double StatusBoard::Uptime() const {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
}

void StatusBoard::SetGraph(const std::string& name, uint64_t world_size, uint64_t iterations_planned) {
  std::lock_guard<std::mutex> l(mu_);
  graph_ = name, world_size_ = world_size, iterations_planned_ = iterations_planned;
}
void StatusBoard::SetMode(const std::string& mode) { std::lock_guard<std::mutex> l(mu_); mode_ = mode; }
void StatusBoard::SetState(const std::string& state) { std::lock_guard<std::mutex> l(mu_); state_ = Cut(state); }
void StatusBoard::SetProgress(Nanoseconds emulated, uint64_t events, uint64_t iterations_done, Nanoseconds lag) {
  std::lock_guard<std::mutex> l(mu_);
  emulated_ns_ = emulated.count(), events_ = events, iterations_done_ = iterations_done, lag_ns_ = lag.count();
}
void StatusBoard::SetLastIterationTime(Nanoseconds t) { std::lock_guard<std::mutex> l(mu_); last_iteration_ns_ = t.count(); }
void StatusBoard::SetPluginSessions(int64_t sessions) { std::lock_guard<std::mutex> l(mu_); sessions_ = sessions; }

void StatusBoard::SetWaiting(std::vector<StatusWait> waits, std::vector<std::string> startup_errors) {
  std::lock_guard<std::mutex> l(mu_);
  waits_ = std::move(waits);
  startup_errors_ = std::move(startup_errors);
}

void StatusBoard::AddIteration(uint64_t index, Nanoseconds duration) {
  std::lock_guard<std::mutex> l(mu_);
  last_iteration_ns_ = duration.count();
  iterations_.emplace_back(index, duration.count());
  if (iterations_.size() > kIterationHistory) iterations_.pop_front();
}

void StatusBoard::SetRealRanks(const std::vector<uint32_t>& ranks) {
  std::lock_guard<std::mutex> l(mu_);
  real_ranks_.clear();
  const double now = Uptime();
  for (uint32_t r : ranks) real_ranks_[r] = RealRank{false, "not connected yet", now, false, 0, now};
}

void StatusBoard::UpdateRealRank(uint32_t rank, bool connected, const std::string& doing) {
  std::lock_guard<std::mutex> l(mu_);
  auto [it, fresh] = real_ranks_.try_emplace(rank, RealRank{false, "", 0, false, 0, Uptime()});
  RealRank& r = it->second;
  r.connected = connected, r.doing = Cut(doing), r.updated_s = Uptime();
  r.ever_connected |= connected;
}

void StatusBoard::CountRealRankOp(uint32_t rank) {
  std::lock_guard<std::mutex> l(mu_);
  auto [it, fresh] = real_ranks_.try_emplace(rank, RealRank{true, "", Uptime(), true, 0, Uptime()});
  ++it->second.ops_matched;
}

std::vector<std::pair<uint32_t, double>> StatusBoard::RealRanksNeverConnected() const {
  std::lock_guard<std::mutex> l(mu_);
  std::vector<std::pair<uint32_t, double>> out;
  const double now = Uptime();
  for (const auto& [rank, r] : real_ranks_)
    if (!r.ever_connected && r.ops_matched == 0) out.emplace_back(rank, now - r.declared_s);
  return out;
}

void StatusBoard::SetFractionDone(double fraction) {
  std::lock_guard<std::mutex> l(mu_);
  fraction_done_ = std::clamp(fraction, 0.0, 1.0);
}

void StatusBoard::SetCommunicator(const CommunicatorRow& row) {
  std::lock_guard<std::mutex> l(mu_);
  CommunicatorRow kept = row;
  kept.name = Cut(row.name), kept.kind = Cut(row.kind), kept.state = Cut(row.state);
  if (auto it = communicator_index_.find(kept.name); it != communicator_index_.end()) {
    communicators_[it->second] = {std::move(kept), Uptime()};
  } else if (communicators_.size() < kMaxCommunicatorRows) {
    communicator_index_[kept.name] = communicators_.size();
    communicators_.emplace_back(std::move(kept), Uptime());
  } else {
    omitted_.insert(kept.name);
  }
}

void StatusBoard::AddDivergence(const std::string& text) {
  std::lock_guard<std::mutex> l(mu_);
  ++divergence_count_;
  divergences_.push_back(Timed{Cut(text), Uptime()});
  if (divergences_.size() > kMaxDivergences) divergences_.pop_front();
}

void StatusBoard::SetAlert(const std::string& key, const std::string& text) {
  std::lock_guard<std::mutex> l(mu_);
  auto [it, inserted] = alerts_.try_emplace(key, Timed{"", Uptime()});
  it->second.text = Cut(text);
}

void StatusBoard::ClearAlert(const std::string& key) { std::lock_guard<std::mutex> l(mu_); alerts_.erase(key); }

std::string StatusBoard::Json() const {
  std::lock_guard<std::mutex> l(mu_);
  ordered_json j;
  j["daemon"] = "prismd";
  j["mode"] = mode_;
  j["state"] = state_;
  j["graph"] = graph_;
  j["world_size"] = world_size_;
  j["iterations_planned"] = iterations_planned_;
  j["iterations_done"] = iterations_done_;
  j["percent_done"] = Round3(fraction_done_ * 100);
  j["emulated_time_s"] = Seconds(emulated_ns_);
  j["last_iteration_time_s"] = Seconds(last_iteration_ns_);
  j["events"] = events_;
  j["engine_lag_s"] = Seconds(lag_ns_);
  j["plugin_sessions"] = sessions_;
  j["waiting"] = nlohmann::ordered_json::array();
  for (const StatusWait& w : waits_) {
    nlohmann::ordered_json e;
    e["source"] = w.source;
    e["communicator"] = w.communicator;
    e["ranks"] = w.ranks;
    e["waits_for"] = w.waits_for;
    e["seconds"] = w.seconds;
    j["waiting"].push_back(std::move(e));
  }
  j["startup_errors"] = startup_errors_;
  j["uptime_s"] = Round3(Uptime());
  AddRowsJson(j);
  return j.dump() + "\n";
}

void StatusBoard::AddRowsJson(ordered_json& j) const {
  j["iteration_times"] = ordered_json::array();
  for (const auto& [index, ns] : iterations_)
    j["iteration_times"].push_back({{"iteration", index}, {"time_s", Seconds(ns)}});
  j["real_ranks"] = ordered_json::array();
  for (const auto& [rank, r] : real_ranks_)
    j["real_ranks"].push_back({{"rank", rank}, {"connected", r.connected}, {"doing", r.doing},
                               {"updated_s", Round3(r.updated_s)}, {"ops_matched", r.ops_matched}});
  j["communicators"] = ordered_json::array();
  for (const auto& [c, updated] : communicators_)
    j["communicators"].push_back({{"name", c.name}, {"kind", c.kind}, {"members", c.members},
                                  {"ops_done", c.ops_done}, {"ops_planned", c.ops_planned}, {"bytes", c.bytes},
                                  {"state", c.state}, {"updated_s", Round3(updated)}});
  j["communicators_omitted"] = omitted_.size();
  ordered_json recent = ordered_json::array();
  for (const Timed& d : divergences_) recent.push_back({{"at_s", Round3(d.at_s)}, {"text", d.text}});
  j["divergences"] = {{"count", divergence_count_}, {"recent", std::move(recent)}};
  j["alerts"] = ordered_json::array();
  for (const auto& [key, a] : alerts_)
    j["alerts"].push_back({{"key", key}, {"text", a.text}, {"since_s", Round3(a.at_s)}});
}

}  // namespace prism::server
