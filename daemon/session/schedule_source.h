// Who decides when a real rank's receive from a virtual peer completes.
//
// The session service (session_service.h) feeds every plugin session's
// events to one ScheduleSource; the source answers with schedules (per NCCL
// operation, OpSchedule; or per message, ReceiveSchedule), either at once
// (the `reply` of OnEvents, sent on that session's stream right after the
// batch) or later from any thread through the ScheduleSink it was given.
// Schedules should run ahead of need (before the plugin posts the receive)
// so that no completion waits for a round trip.
//
// prismd's hybrid mode uses the replay engine's source (daemon/hybrid/);
// tests use LinkModelScheduleSource (link_schedule_source.h).
#ifndef PRISM_DAEMON_SESSION_SCHEDULE_SOURCE_H_
#define PRISM_DAEMON_SESSION_SCHEDULE_SOURCE_H_

#include <cstdint>
#include <vector>

#include "daemon/bootstrap/virtual_connections.h"
#include "proto/prism_service.pb.h"

namespace prism::daemon {

using SessionId = uint64_t;

// Thread-safe; implemented by the session service.
class ScheduleSink {
 public:
  virtual ~ScheduleSink() = default;
  // Sends `batch` to session `id`. False when that session is gone.
  virtual bool PushSchedules(SessionId id, rpc::ScheduleBatch batch) = 0;
};

// Called from the sessions' stream threads, possibly concurrently for
// different sessions (implementations synchronise their own state); calls
// for one session are sequential and in stream order.
class ScheduleSource {
 public:
  virtual ~ScheduleSource() = default;

  // `sink` stays valid until OnSessionClosed(id) returns.
  virtual void OnSessionOpened(SessionId id, const rpc::Hello& hello, ScheduleSink* sink) {}
  // `reply` starts empty; what the source adds is sent at once.
  virtual void OnEvents(SessionId id, const rpc::EventBatch& batch, rpc::ScheduleBatch* reply) = 0;
  virtual void OnSessionClosed(SessionId id) {}
  // The bootstrap created a communicator (called from its thread).
  virtual void OnCommunicator(const CommDescription& c) {}
};

}  // namespace prism::daemon

#endif  // PRISM_DAEMON_SESSION_SCHEDULE_SOURCE_H_
