// The daemon's state as one JSON document, served at GET /status on the
// metrics port and by the Daemon.Status RPC. Thread-safe: setters from any
// thread (engine observer, session service), Json() from server threads.
#ifndef PRISM_DAEMON_SERVER_STATUS_H_
#define PRISM_DAEMON_SERVER_STATUS_H_

#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

#include "common/units.h"

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

class StatusBoard {
 public:
  StatusBoard() = default;
  StatusBoard(const StatusBoard&) = delete;
  StatusBoard& operator=(const StatusBoard&) = delete;

  void SetGraph(const std::string& name, uint64_t world_size, uint64_t iterations_planned);
  void SetMode(const std::string& mode);          // "simulate", "hybrid"
  void SetState(const std::string& state);        // "loading", "running", "finished", "failed: ..."
  void SetProgress(Nanoseconds emulated, uint64_t events, uint64_t iterations_done, Nanoseconds lag);
  void SetLastIterationTime(Nanoseconds t);
  void SetPluginSessions(int64_t sessions);
  // Current waits and start-up errors (mismatches between the program and
  // the graph), replaced as a whole; shown as "waiting" and "startup_errors".
  void SetWaiting(std::vector<StatusWait> waits, std::vector<std::string> startup_errors);

  std::string Json() const;

 private:
  mutable std::mutex mu_;
  std::string graph_, mode_ = "starting", state_ = "loading";
  uint64_t world_size_ = 0, iterations_planned_ = 0, events_ = 0, iterations_done_ = 0;
  int64_t emulated_ns_ = 0, lag_ns_ = 0, last_iteration_ns_ = 0, sessions_ = 0;
  std::vector<StatusWait> waits_;
  std::vector<std::string> startup_errors_;
};

}  // namespace prism::server

#endif  // PRISM_DAEMON_SERVER_STATUS_H_
