#include "daemon/server/status.h"

#include "nlohmann/json.hpp"

namespace prism::server {

void StatusBoard::SetGraph(const std::string& name, uint64_t world_size, uint64_t iterations_planned) {
  std::lock_guard<std::mutex> l(mu_);
  graph_ = name, world_size_ = world_size, iterations_planned_ = iterations_planned;
}
void StatusBoard::SetMode(const std::string& mode) { std::lock_guard<std::mutex> l(mu_); mode_ = mode; }
void StatusBoard::SetState(const std::string& state) { std::lock_guard<std::mutex> l(mu_); state_ = state; }
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

std::string StatusBoard::Json() const {
  std::lock_guard<std::mutex> l(mu_);
  nlohmann::ordered_json j;
  j["daemon"] = "prismd";
  j["mode"] = mode_;
  j["state"] = state_;
  j["graph"] = graph_;
  j["world_size"] = world_size_;
  j["iterations_planned"] = iterations_planned_;
  j["iterations_done"] = iterations_done_;
  j["emulated_time_s"] = static_cast<double>(emulated_ns_) * 1e-9;
  j["last_iteration_time_s"] = static_cast<double>(last_iteration_ns_) * 1e-9;
  j["events"] = events_;
  j["engine_lag_s"] = static_cast<double>(lag_ns_) * 1e-9;
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
  return j.dump() + "\n";
}

}  // namespace prism::server
