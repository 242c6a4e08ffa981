// A test ScheduleSource: every virtual sender is a plain link of
// `bits_per_second` and `latency_ns`. For each receive connection it pushes
// `window` schedules ahead of the receives the plugin posted, each telling
// the plugin to apply its local link model (ReceiveSchedule.link_*): receive
// k of B bytes completes at wire_end_k + latency, where
// wire_end_k = max(posted_k, wire_end_{k-1}) + B / bandwidth (B = the posted
// buffer size). So the session works standalone, without the replay engine.
//
// Thread-safe.
#ifndef PRISM_DAEMON_SESSION_LINK_SCHEDULE_SOURCE_H_
#define PRISM_DAEMON_SESSION_LINK_SCHEDULE_SOURCE_H_

#include <cstdint>
#include <map>
#include <mutex>
#include <utility>

#include "common/units.h"
#include "daemon/session/schedule_source.h"

namespace prism::daemon {

// Schedules for receive seqs [from, to) of `conn_id`, filled by `make`.
// Helper shared by window-based sources.
class ReceiveWindow {
 public:
  explicit ReceiveWindow(uint64_t window) : window_(window) {}
  // Records events of one batch; appends schedules that became due.
  template <typename MakeFn>
  void Advance(SessionId id, const rpc::EventBatch& batch, MakeFn make, rpc::ScheduleBatch* out);
  void Forget(SessionId id);

 private:
  uint64_t window_;
  std::map<std::pair<SessionId, uint64_t>, uint64_t> next_seq_;  // recv conns only
};

class LinkModelScheduleSource final : public ScheduleSource {
 public:
  LinkModelScheduleSource(BitsPerSecond bandwidth, Nanoseconds latency, uint64_t window = 256);

  void OnEvents(SessionId id, const rpc::EventBatch& batch, rpc::ScheduleBatch* reply) override;
  void OnSessionClosed(SessionId id) override;

 private:
  BitsPerSecond bandwidth_;
  Nanoseconds latency_;
  std::mutex mu_;
  ReceiveWindow window_;
};

// ---- template implementation ----

template <typename MakeFn>
void ReceiveWindow::Advance(SessionId id, const rpc::EventBatch& batch, MakeFn make,
                            rpc::ScheduleBatch* out) {
  for (const rpc::Event& e : batch.events()) {
    uint64_t conn = 0;
    uint64_t upto = 0;
    if (e.has_conn_opened() && !e.conn_opened().is_send()) {
      conn = e.conn_opened().conn_id();
      next_seq_.emplace(std::make_pair(id, conn), 0);
      upto = window_;
    } else if (e.has_posted()) {
      conn = e.posted().conn_id();
      upto = e.posted().seq() + 1 + window_;
    } else if (e.has_conn_closed()) {
      next_seq_.erase({id, e.conn_closed().conn_id()});
      continue;
    } else {
      continue;
    }
    auto it = next_seq_.find({id, conn});
    if (it == next_seq_.end()) continue;  // a send connection
    for (; it->second < upto; ++it->second) {
      rpc::ReceiveSchedule* s = out->add_receives();
      s->set_conn_id(conn);
      s->set_seq(it->second);
      make(s);
    }
  }
}

}  // namespace prism::daemon

#endif  // PRISM_DAEMON_SESSION_LINK_SCHEDULE_SOURCE_H_
