// Forwards the profiler role's operation boundaries to prismd on a session of
// the process's own (prismd pushes the operations' schedules back on it), and
// forgets an operation's schedule when it ends.
//
// Does nothing unless PRISM_DAEMON is set (a ground truth without prismd
// loads the same library). The session opens on the first operation.
// Thread-safety: thread-safe (NCCL reports operations from several threads).
#ifndef PRISM_PLUGIN_OP_RELAY_H_
#define PRISM_PLUGIN_OP_RELAY_H_

#include <memory>
#include <mutex>

#include "plugin/comm.h"
#include "plugin/daemon_session.h"
#include "plugin/op_schedules.h"
#include "plugin/op_tracker.h"

namespace prism::plugin {

class OpRelay final : public OpListener {
 public:
  // `env` (its settings, logger and schedule book) must outlive the relay.
  explicit OpRelay(const CommEnv* env) : env_(env) {}
  OpRelay(const OpRelay&) = delete;
  OpRelay& operator=(const OpRelay&) = delete;

  void OnOpStarted(const OpInfo& info) override;
  void OnOpFinished(const OpInfo& info, const OpSummary& summary) override;

 private:
  std::shared_ptr<DaemonSession> Session();

  const CommEnv* env_;
  std::mutex mu_;
  std::shared_ptr<DaemonSession> session_;
};

}  // namespace prism::plugin

#endif  // PRISM_PLUGIN_OP_RELAY_H_
