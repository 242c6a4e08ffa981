// What prismd does when the real ranks diverge from the graph (prismd
// --on-divergence, docs/timing.md "Divergences"): a real rank's operation the
// graph does not have (HybridScheduler), a bootstrap divergence (a split or
// check-in the plan did not predict), a start-up error in PyTorch's store
// (a group number or id the graph does not have), or a stall (the real ranks
// and the replay wait for each other: HybridScheduler::StallReport).
//
//   stop   (default): the first divergence ends the run: prismd says why and
//          exits with status 3 (prism run stops the ranks and exits 3 with
//          the reason), instead of a wait until the launcher's timeout;
//   follow: prismd keeps serving and says, once per kind of source, what it
//          does instead (the operation's virtual peers are timed as if on
//          time; the real ranks' NCCL result is kept; a start-up error stays
//          on /status and a rank waiting for it may wait for ever).
//
// Report() from any thread; Tick() from prismd's main loop. Thread-safe.
#ifndef PRISM_DAEMON_HYBRID_DIVERGENCE_WATCH_H_
#define PRISM_DAEMON_HYBRID_DIVERGENCE_WATCH_H_

#include <cstdint>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace prism::daemon {

enum class OnDivergence { kStop, kFollow };

// "stop" or "follow"; InvalidArgument naming the flag otherwise.
absl::StatusOr<OnDivergence> ParseOnDivergence(const std::string& text);

enum class DivergenceSource { kOperations, kBootstrap, kStore, kStall };

// prismd's exit status when --on-divergence stop ended the run.
inline constexpr int kExitDiverged = 3;

class DivergenceWatch {
 public:
  explicit DivergenceWatch(OnDivergence mode) : mode_(mode) {}

  // One divergence, with the text that names it.
  void Report(DivergenceSource source, const std::string& text);

  struct Decision {
    std::optional<std::string> stop_reason;  // kStop: the first divergence, once
    std::vector<std::string> notes;          // kFollow: lines for the log, each said once
  };
  // What to do since the last call.
  Decision Tick();

  OnDivergence mode() const { return mode_; }
  uint64_t reported() const;

 private:
  const OnDivergence mode_;
  mutable std::mutex mu_;
  std::optional<std::string> first_;
  bool stop_said_ = false;
  uint64_t reported_ = 0;
  std::set<DivergenceSource> followed_;  // sources whose follow note was given
  std::vector<std::string> pending_notes_;
};

}  // namespace prism::daemon

#endif  // PRISM_DAEMON_HYBRID_DIVERGENCE_WATCH_H_
