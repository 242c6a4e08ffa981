// The daemon's state as one JSON document, served at GET /status on the
// metrics port (and rendered by the status page at GET /), and by the
// Daemon.Status RPC. Fields: docs/metrics.md.
//
// Thread-safe: every setter may be called from any thread (engine observer,
// session service, bootstrap, control plane) and Json() from server threads;
// one mutex, no call blocks on anything else. Every collection is bounded
// (history lengths and row counts below; texts are cut at kMaxText bytes), so
// callers may report as often as they like. Empty collections render as []
// and the page shows "none yet".
#ifndef PRISM_DAEMON_SERVER_STATUS_H_
#define PRISM_DAEMON_SERVER_STATUS_H_

#include <chrono>
#include <cstdint>
#include <deque>
#include <map>
#include <mutex>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "common/units.h"
#include "nlohmann/json.hpp"

namespace prism::server {

// Something prismd waits for that only a real rank can bring (never a
// silent wait): a communicator's init, an id in PyTorch's store, a rank that
// has not come.
struct StatusWait {
  std::string source;            // "bootstrap" or "store"
  std::string communicator;      // e.g. "tp[3]", or "store"
  std::vector<uint32_t> ranks;   // the real ranks it waits for
  std::string waits_for;         // one line: what, where, what to check
  double seconds = 0;            // since the last progress
};

// One communicator's progress (or an aggregate of several, e.g. "all TP").
struct CommunicatorRow {
  std::string name;            // the key: "tp[3]" (the graph's name) or "all TP"
  std::string kind;            // "TP", "DP_CP", ... (CommKind without COMM_KIND_), "P2P"
  uint64_t members = 0;        // 0: not known
  uint64_t ops_done = 0;       // collectives / send-recv completed so far
  uint64_t ops_planned = 0;    // 0: not known
  uint64_t bytes = 0;          // bytes per rank moved so far
  std::string state;           // free text: "idle", "allreduce 2 MiB", "init: waiting for rank 5"
};

class StatusBoard {
 public:
  static constexpr size_t kIterationHistory = 512;     // iteration times kept
  static constexpr size_t kMaxCommunicatorRows = 256;  // later names are counted, not kept
  static constexpr size_t kMaxDivergences = 100;       // most recent kept; all counted
  static constexpr size_t kMaxText = 300;              // bytes of any text field

  StatusBoard();
  StatusBoard(const StatusBoard&) = delete;
  StatusBoard& operator=(const StatusBoard&) = delete;

  void SetGraph(const std::string& name, uint64_t world_size, uint64_t iterations_planned);
  void SetMode(const std::string& mode);          // "simulate", "hybrid"
  void SetState(const std::string& state);        // "loading", "running", "finished", "failed: ..."
  void SetProgress(Nanoseconds emulated, uint64_t events, uint64_t iterations_done, Nanoseconds lag);
  void SetLastIterationTime(Nanoseconds t);
  // How much of the replay is done, 0 to 1 (shown as percent_done).
  void SetFractionDone(double fraction);
  void SetPluginSessions(int64_t sessions);
  // Current waits and start-up errors (mismatches between the program and
  // the graph), replaced as a whole; shown as "waiting" and "startup_errors".
  void SetWaiting(std::vector<StatusWait> waits, std::vector<std::string> startup_errors);

  // Iteration `index` (0-based) took `duration` of emulated time: appended to
  // the history (the last kIterationHistory are kept) and made the last one.
  void AddIteration(uint64_t index, Nanoseconds duration);

  // The ranks played by real processes (--real-ranks): one row each, not
  // connected, "not connected yet". Replaces any previous rows.
  void SetRealRanks(const std::vector<uint32_t>& ranks);
  // What real rank `rank` is doing now ("NCCL init of tp[0]", "allreduce on
  // dp_cp[1], 64 MiB", "finished"); adds the row if the rank was not declared.
  void UpdateRealRank(uint32_t rank, bool connected, const std::string& doing);
  // One more of real rank `rank`'s operations matched to the graph (its
  // row's ops_matched; prism run warns about a rank that exits at 0).
  void CountRealRankOp(uint32_t rank);
  // Declared real ranks that have never connected (no plugin announced
  // them, no operation seen), with the seconds since they were declared.
  std::vector<std::pair<uint32_t, double>> RealRanksNeverConnected() const;

  // Adds or replaces the row named row.name (insertion order is kept).
  void SetCommunicator(const CommunicatorRow& row);

  // Something a real rank did that the graph or the wire profile did not
  // predict; `text` names the rank, the communicator, what was expected and
  // what came.
  void AddDivergence(const std::string& text);

  // A condition the user must see now (a real rank that has not come, a
  // communicator init that waits), under a caller-chosen key; setting the
  // key again replaces the text and keeps its start time. ClearAlert removes it.
  void SetAlert(const std::string& key, const std::string& text);
  void ClearAlert(const std::string& key);

  std::string Json() const;

 private:
  struct RealRank {
    bool connected = false;
    std::string doing;
    double updated_s = 0;
    bool ever_connected = false;
    uint64_t ops_matched = 0;
    double declared_s = 0;
  };
  struct Timed {
    std::string text;
    double at_s = 0;
  };
  double Uptime() const;  // seconds since construction
  void AddRowsJson(nlohmann::ordered_json& j) const;  // mu_ held

  mutable std::mutex mu_;
  const std::chrono::steady_clock::time_point start_;
  std::string graph_, mode_ = "starting", state_ = "loading";
  uint64_t world_size_ = 0, iterations_planned_ = 0, events_ = 0, iterations_done_ = 0;
  int64_t emulated_ns_ = 0, lag_ns_ = 0, last_iteration_ns_ = 0, sessions_ = 0;
  double fraction_done_ = 0;
  std::vector<StatusWait> waits_;
  std::vector<std::string> startup_errors_;
  std::deque<std::pair<uint64_t, int64_t>> iterations_;  // (index, ns)
  std::map<uint32_t, RealRank> real_ranks_;
  std::vector<std::pair<CommunicatorRow, double>> communicators_;  // (row, updated_s)
  std::unordered_map<std::string, size_t> communicator_index_;
  std::unordered_set<std::string> omitted_;  // names beyond kMaxCommunicatorRows
  std::deque<Timed> divergences_;
  uint64_t divergence_count_ = 0;
  std::map<std::string, Timed> alerts_;
};

}  // namespace prism::server

#endif  // PRISM_DAEMON_SERVER_STATUS_H_
