// The VirtualPairs of prismd's Gloo side (virtual_pair.h), on their own
// EventLoop thread: connects each (at most max_connecting at once, a refused
// or failed connect retried connect_attempts times, the delay doubling),
// keeps their counters, reports a pair that fails, and closes them all when
// a job ends.
//
// Threading: Dial(), EndJob(), Stats() and Stop() from any thread; the pairs
// and `on_error` run on the pool's thread (started by Start(), joined by
// Stop() and the destructor). Not copyable.
#ifndef PRISM_DAEMON_GLOO_PAIR_POOL_H_
#define PRISM_DAEMON_GLOO_PAIR_POOL_H_

#include <atomic>
#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "absl/status/statusor.h"
#include "daemon/gloo/virtual_pair.h"
#include "daemon/net/event_loop.h"

namespace prism::gloo {

struct PairPoolOptions {
  int connect_attempts = 5;
  std::chrono::milliseconds connect_retry{200};
  size_t max_connecting = 128;
};

struct PairPoolStats {
  uint64_t opened = 0;   // connected, since the pool started
  uint64_t open = 0;     // open now
  uint64_t failed = 0;   // never connected, or closed with an error
  PairCounters traffic;  // every pair's, closed ones included (live ones up to 200 ms late)
};

class PairPool : private PairEvents {
 public:
  // `on_error` gets one line per failed pair, on the pool's thread.
  static absl::StatusOr<std::unique_ptr<PairPool>> Start(PairPoolOptions options,
                                                         std::function<void(const std::string&)> on_error);
  ~PairPool() override;
  PairPool(const PairPool&) = delete;
  PairPool& operator=(const PairPool&) = delete;

  void Dial(PairTarget target);
  // Closes every pair and drops the dials not started yet.
  void EndJob();
  PairPoolStats Stats() const;
  void Stop();

 private:
  struct PendingDial {
    PairTarget target;
    int attempts_left = 0;
    std::chrono::milliseconds retry{0};
    uint64_t job = 0;  // EndJob() calls before it
  };

  PairPool(PairPoolOptions options, std::function<void(const std::string&)> on_error);
  // Loop thread.
  void StartDials();
  void OnPairOpen(VirtualPair* pair) override;
  void OnPairClosed(VirtualPair* pair, const absl::Status& why) override;
  void Retire(VirtualPair* pair);
  void CloseAll();
  void PublishTraffic();

  PairPoolOptions options_;
  std::function<void(const std::string&)> on_error_;
  std::atomic<uint64_t> job_{0};

  mutable std::mutex mu_;  // stats_
  PairPoolStats stats_;
  PairCounters closed_traffic_;

  // Loop thread only.
  net::EventLoop loop_;
  std::thread thread_;
  std::deque<PendingDial> dials_;
  std::map<VirtualPair*, std::unique_ptr<VirtualPair>> pairs_;
  std::map<VirtualPair*, PendingDial> connecting_;
};

}  // namespace prism::gloo

#endif  // PRISM_DAEMON_GLOO_PAIR_POOL_H_
