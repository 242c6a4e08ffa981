#include "daemon/bootstrap/reporter.h"

#include "spdlog/spdlog.h"

namespace prism::bootstrap {

bool Reporter::Admit(const std::string& category, uint64_t* suppressed) {
  const auto now = std::chrono::steady_clock::now();
  Budget& b = budgets_[category];
  if (b.used == 0 || now - b.window_start >= kWindow) {
    b.window_start = now;
    b.used = 0;
  }
  if (b.used >= kBurst) {
    ++b.suppressed;
    ++stats_.warnings_suppressed;
    return false;
  }
  ++b.used;
  *suppressed = b.suppressed;
  b.suppressed = 0;
  return true;
}

void Reporter::Diverge(const std::string& message) {
  uint64_t suppressed = 0;
  bool log = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    ++stats_.divergences;
    stats_.recent_divergences.push_back(message);
    if (stats_.recent_divergences.size() > 32) {
      stats_.recent_divergences.erase(stats_.recent_divergences.begin());
    }
    log = Admit("divergence", &suppressed);
  }
  if (!log) return;
  if (suppressed > 0) spdlog::warn("bootstrap: ({} similar divergences not logged)", suppressed);
  spdlog::warn("bootstrap: divergence: {}", message);
}

void Reporter::Reject(const std::string& category, const std::string& message) {
  uint64_t suppressed = 0;
  bool log = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    ++stats_.rejected_connections;
    log = Admit(category, &suppressed);
  }
  if (!log) return;
  if (suppressed > 0) spdlog::warn("bootstrap: ({} more '{}' rejections not logged)", suppressed, category);
  spdlog::warn("bootstrap: rejected connection ({}): {}", category, message);
}

void Reporter::Warn(const std::string& category, const std::string& message) {
  uint64_t suppressed = 0;
  bool log = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    log = Admit(category, &suppressed);
  }
  if (!log) return;
  if (suppressed > 0) spdlog::warn("bootstrap: ({} more '{}' warnings not logged)", suppressed, category);
  spdlog::warn("bootstrap: {}", message);
}

void Reporter::Update(const std::function<void(BootstrapStats&)>& fn) {
  std::lock_guard<std::mutex> lock(mu_);
  fn(stats_);
}

void Reporter::SetWaiting(std::vector<WaitReport> waiting) {
  std::lock_guard<std::mutex> lock(mu_);
  stats_.waiting = std::move(waiting);
}

BootstrapStats Reporter::Snapshot() const {
  std::lock_guard<std::mutex> lock(mu_);
  return stats_;
}

}  // namespace prism::bootstrap
