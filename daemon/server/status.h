// The daemon's state as one JSON document, served at GET /status on the
// metrics port and by the Daemon.Status RPC. Thread-safe: setters from any
// thread (engine observer, session service), Json() from server threads.
#ifndef PRISM_DAEMON_SERVER_STATUS_H_
#define PRISM_DAEMON_SERVER_STATUS_H_

#include <cstdint>
#include <mutex>
#include <string>

#include "common/units.h"

namespace prism::server {

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

  std::string Json() const;

 private:
  mutable std::mutex mu_;
  std::string graph_, mode_ = "starting", state_ = "loading";
  uint64_t world_size_ = 0, iterations_planned_ = 0, events_ = 0, iterations_done_ = 0;
  int64_t emulated_ns_ = 0, lag_ns_ = 0, last_iteration_ns_ = 0, sessions_ = 0;
};

}  // namespace prism::server

#endif  // PRISM_DAEMON_SERVER_STATUS_H_
