// What the replay engine knows of one real rank's communication ops (hybrid
// mode, docs/timing.md): how many instances of each op the rank reached, the
// instances in flight (a collective: which call of which engine
// communicator; a send/recv: when the engine issued it), and completion
// reports that came before the engine issued the op (they are applied when
// it does). Engine thread only.
#ifndef PRISM_DAEMON_ENGINE_REAL_RANK_OPS_H_
#define PRISM_DAEMON_ENGINE_REAL_RANK_OPS_H_

#include <cstdint>
#include <deque>
#include <optional>
#include <vector>

namespace prism::engine {

class RealRankOps {
 public:
  struct OpenCall {
    uint32_t comm;
    uint64_t call;
    Nanoseconds issued;
  };
  // A completion report: the op ended at `at`, its first transfer left at `started` (0: unknown).
  struct Report {
    Nanoseconds at, started;
  };

  explicit RealRankOps(size_t ops) : reached_(ops, 0), calls_(ops), p2p_(ops), early_(ops) {}

  uint64_t reached(uint32_t op) const { return reached_[op]; }
  // The rank reached `op` once more; returns how often it had before.
  uint64_t Reach(uint32_t op) { return reached_[op]++; }

  void IssueCollective(uint32_t op, OpenCall call) { calls_[op].push_back(call); }
  void IssueP2P(uint32_t op, Nanoseconds now) { p2p_[op].push_back(now); }
  // The oldest report of `op` that came before the engine issued it.
  std::optional<Report> TakeEarly(uint32_t op) { return Take(early_[op]); }

  // `op` finished (`report`): its oldest collective instance in flight, or,
  // when the engine has not issued it yet, nothing (the report waits for it).
  std::optional<OpenCall> CollectiveDone(uint32_t op, Report report) { return Done(calls_[op], op, report); }
  // The same for a send/recv: when the engine issued it.
  std::optional<Nanoseconds> P2PDone(uint32_t op, Report report) { return Done(p2p_[op], op, report); }

 private:
  template <typename T>
  static std::optional<T> Take(std::deque<T>& q) {
    if (q.empty()) return std::nullopt;
    T front = q.front();
    q.pop_front();
    return front;
  }
  template <typename T>
  std::optional<T> Done(std::deque<T>& open, uint32_t op, Report report) {
    std::optional<T> oldest = Take(open);
    if (!oldest) early_[op].push_back(report);
    return oldest;
  }

  std::vector<uint64_t> reached_;
  std::vector<std::deque<OpenCall>> calls_;
  std::vector<std::deque<Nanoseconds>> p2p_;
  std::vector<std::deque<Report>> early_;
};

}  // namespace prism::engine

#endif  // PRISM_DAEMON_ENGINE_REAL_RANK_OPS_H_
