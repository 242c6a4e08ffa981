#include "daemon/session/link_schedule_source.h"

namespace prism::daemon {

void ReceiveWindow::Forget(SessionId id) {
  for (auto it = next_seq_.begin(); it != next_seq_.end();) {
    it = it->first.first == id ? next_seq_.erase(it) : std::next(it);
  }
}

LinkModelScheduleSource::LinkModelScheduleSource(BitsPerSecond bandwidth, Nanoseconds latency, uint64_t window)
    : bandwidth_(bandwidth), latency_(latency), window_(window) {}

void LinkModelScheduleSource::OnEvents(SessionId id, const rpc::EventBatch& batch, rpc::ScheduleBatch* reply) {
  std::lock_guard<std::mutex> lock(mu_);
  window_.Advance(
      id, batch,
      [this](rpc::ReceiveSchedule* s) {
        s->set_link_bits_per_second(bandwidth_.count());
        s->set_link_latency_ns(static_cast<uint64_t>(latency_.count()));
      },
      reply);
}

void LinkModelScheduleSource::OnSessionClosed(SessionId id) {
  std::lock_guard<std::mutex> lock(mu_);
  window_.Forget(id);
}

}  // namespace prism::daemon
