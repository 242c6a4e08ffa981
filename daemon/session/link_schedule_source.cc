#include "daemon/session/link_schedule_source.h"

namespace prism::daemon {

void ReceiveWindow::Forget(SessionId id) {
  for (auto it = next_seq_.begin(); it != next_seq_.end();) {
    it = it->first.first == id ? next_seq_.erase(it) : std::next(it);
  }
}

LinkModelScheduleSource::LinkModelScheduleSource(uint64_t bits_per_second, int64_t latency_ns,
                                                 uint64_t window)
    : bits_per_second_(bits_per_second), latency_ns_(latency_ns), window_(window) {}

void LinkModelScheduleSource::OnEvents(SessionId id, const rpc::EventBatch& batch, rpc::ScheduleBatch* reply) {
  std::lock_guard<std::mutex> lock(mu_);
  window_.Advance(
      id, batch,
      [this](rpc::ReceiveSchedule* s) {
        s->set_link_bits_per_second(bits_per_second_);
        s->set_link_latency_ns(static_cast<uint64_t>(latency_ns_));
      },
      reply);
}

void LinkModelScheduleSource::OnSessionClosed(SessionId id) {
  std::lock_guard<std::mutex> lock(mu_);
  window_.Forget(id);
}

}  // namespace prism::daemon
