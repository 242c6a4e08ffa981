#include "plugin/op_relay.h"

#include "plugin/clock.h"

namespace prism::plugin {

std::shared_ptr<DaemonSession> OpRelay::Session() {
  std::lock_guard<std::mutex> lock(mu_);
  if (!session_) {
    session_ = std::make_shared<DaemonSession>(*env_, /*comm_id=*/0);
    session_->Start();
  }
  return session_;
}

void OpRelay::OnOpStarted(const OpInfo& info) {
  if (!env_->settings->daemon_configured) return;
  SessionEvent e;
  e.kind = SessionEvent::kOpStarted;
  e.op = std::make_shared<const OpInfo>(info);
  e.at_ns = info.enqueued_ns;
  Session()->Emit(e);
}

void OpRelay::OnOpFinished(const OpInfo& info, const OpSummary& summary) {
  if (env_->schedules != nullptr) env_->schedules->Finish(OpKey::Of(info), summary.end_ns);
  if (!env_->settings->daemon_configured) return;
  SessionEvent e;
  e.kind = SessionEvent::kOpFinished;
  e.op = std::make_shared<const OpInfo>(info);
  e.summary = summary;
  e.at_ns = WallNowNs();
  Session()->Emit(e);
}

}  // namespace prism::plugin
