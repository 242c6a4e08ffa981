// Counters, divergences, warnings and "waiting for" reports of the bootstrap
// emulation (internal header).
//
// Thread-safety: every method may be called from any thread (the loop thread
// writes, Stats() readers copy a snapshot). Warnings are rate limited per
// category: at most kBurst lines per kWindow, then one line saying how many
// were suppressed, so a hostile or broken peer cannot flood the log.
#ifndef PRISM_DAEMON_BOOTSTRAP_REPORTER_H_
#define PRISM_DAEMON_BOOTSTRAP_REPORTER_H_

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "daemon/bootstrap/bootstrap_service.h"

namespace prism::bootstrap {

class Reporter {
 public:
  static constexpr int kBurst = 5;
  static constexpr std::chrono::seconds kWindow{10};

  // A real rank did what the plan or the wire profile did not predict:
  // counted, kept in recent_divergences, logged (rate limited).
  void Diverge(const std::string& message);
  // A connection dropped before it identified itself as a real rank's
  // (wrong peer, unknown endpoint, bad header, idle, over the cap): counted
  // as rejected_connections, logged under `category` (rate limited), never a
  // divergence.
  void Reject(const std::string& category, const std::string& message);
  // A rate-limited warning that is neither (resource trouble, stalls).
  void Warn(const std::string& category, const std::string& message);
  // Mutates the counters under the lock.
  void Update(const std::function<void(BootstrapStats&)>& fn);
  // Replaces the current "waiting for" list (loop thread, once a second).
  void SetWaiting(std::vector<WaitReport> waiting);
  BootstrapStats Snapshot() const;

 private:
  // True if a line of `category` may be logged now; `suppressed` receives the
  // count of lines dropped since the last one that was logged.
  bool Admit(const std::string& category, uint64_t* suppressed);

  struct Budget {
    std::chrono::steady_clock::time_point window_start;
    int used = 0;
    uint64_t suppressed = 0;
  };
  mutable std::mutex mu_;
  BootstrapStats stats_;
  std::map<std::string, Budget> budgets_;
};

}  // namespace prism::bootstrap

#endif  // PRISM_DAEMON_BOOTSTRAP_REPORTER_H_
