// The plugin context's gRPC session with prismd (proto/prism_service.proto,
// PluginSession.Session): one bidirectional stream, opened on first need by
// Start() without blocking the caller. Events go out in batches (at most
// PRISM_EVENT_FLUSH_US late); schedules and incoming connections come back
// and are kept per connection until the comms take them.
//
// Threads: an I/O thread connects and writes batches, a reader thread reads.
// Every public method is thread-safe. The destructor says Goodbye, cancels
// the stream and joins both threads (bounded by PRISM_DAEMON_TIMEOUT_MS).
//
// Failure: if prismd cannot be reached, ends the stream, reports a
// SessionError, or stays silent for PRISM_DAEMON_TIMEOUT_MS while work waits
// on it, Healthy() turns false with a message saying what to do.
#ifndef PRISM_PLUGIN_DAEMON_SESSION_H_
#define PRISM_PLUGIN_DAEMON_SESSION_H_

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "plugin/comm.h"
#include "plugin/op_tracker.h"

namespace prism::plugin {

// One receive schedule (ReceiveSchedule in the proto), as the comms use it.
struct Schedule {
  uint64_t bytes = 0;
  int64_t earliest_ns = 0;
  bool has_after_send = false;
  uint64_t after_send_conn = 0;
  uint64_t after_send_seq = 0;
  int64_t delay_ns = 0;
  uint64_t link_bits_per_second = 0;
  int64_t link_latency_ns = 0;
};

// Per-connection state shared between the session's threads and one comm.
class ConnState {
 public:
  // Receive side: the schedule for `seq`, if prismd sent it (removed).
  bool TakeSchedule(uint64_t seq, Schedule* out);
  void PutSchedule(uint64_t seq, const Schedule& s);
  // Send side: when send `seq` left the wire (modelled); false if unknown yet.
  void RecordSent(uint64_t seq, int64_t wire_done_ns);
  bool SentAt(uint64_t seq, int64_t* at) const;

 private:
  static constexpr size_t kSentWindow = 1 << 16;  // sends remembered per conn
  mutable std::mutex mu_;
  std::unordered_map<uint64_t, Schedule> schedules_;
  std::deque<int64_t> sent_;  // sent_[i] is send (sent_base_ + i)
  uint64_t sent_base_ = 0;
};

// Events the comms and the profiler role report (converted to proto in the
// I/O thread).
struct SessionEvent {
  enum Kind : uint8_t {
    kConnOpened,
    kListenOpened,
    kListenClosed,
    kPosted,
    kCompleted,
    kConnClosed,
    kOpStarted,
    kOpFinished,
  };
  Kind kind = kConnOpened;
  bool is_send = false;
  int32_t dev = 0;
  int32_t tag = 0;
  uint64_t id = 0;   // conn_id, or listen_id for kListen*
  uint64_t seq = 0;
  uint64_t bytes = 0;
  int64_t at_ns = 0;
  uint64_t op_id = 0;      // kPosted/kCompleted: the transfer's operation (0: unknown)
  uint32_t channel = 0;
  uint32_t step = 0;
  int64_t late_ns = 0;           // kCompleted of a receive: completed this much after its schedule
  bool waited_for_schedule = false;  // kCompleted of a receive: it waited for prismd's schedule
  std::shared_ptr<const OpInfo> op;  // kOpStarted/kOpFinished
  OpSummary summary;             // kOpFinished
};

// Says which NCCL this process runs (`nccl_version`, 0 if unknown) to
// prismd (PluginSession.Announce), blocking up to PRISM_DAEMON_TIMEOUT_MS:
// once per process at the plugin's init, before NCCL's bootstrap starts, so
// that prismd plays that release's bootstrap. Empty when prismd accepted it
// (or is too old to be asked); else the reason to fail NCCL's init with,
// naming the fix (unreachable prismd, untrusted owner, refused release).
std::string AnnounceToDaemon(const Settings& settings, int nccl_version);

class DaemonSession {
 public:
  // `env.schedules` receives the operation schedules prismd pushes.
  DaemonSession(const CommEnv& env, uint64_t comm_id);
  ~DaemonSession();
  DaemonSession(const DaemonSession&) = delete;
  DaemonSession& operator=(const DaemonSession&) = delete;

  // Starts connecting in the background (idempotent, never blocks).
  void Start();

  void Emit(const SessionEvent& e);
  // A copy of the events not yet written to prismd (tests: a session never
  // started keeps every event it was given).
  std::vector<SessionEvent> PendingEvents();
  // The state of connection `conn_id` (created on first use).
  std::shared_ptr<ConnState> Conn(uint64_t conn_id);
  void ForgetConn(uint64_t conn_id);
  // An incoming virtual connection prismd announced on `listen_id`.
  bool TakeIncoming(uint64_t listen_id, uint64_t* conn_id);

  // False once the session failed; with `waiting` also when prismd has been
  // silent for longer than PRISM_DAEMON_TIMEOUT_MS. `*why` says why.
  bool Healthy(bool waiting, std::string* why);

 private:
  class Stream;  // gRPC objects (daemon_session.cc)

  void IoMain();
  void ReaderMain();
  // Runs a thread's body; an exception fails the session instead of
  // terminating the process.
  template <typename Body>
  void Guarded(const char* thread, Body&& body);
  void Fail(const std::string& why);
  bool WriteBatch(std::vector<SessionEvent>* batch);

  CommEnv env_;
  uint64_t comm_id_;
  std::once_flag started_;
  std::unique_ptr<Stream> stream_;
  std::thread io_thread_;
  std::thread reader_thread_;

  std::mutex mu_;                      // guards the members below
  std::condition_variable cv_;
  std::vector<SessionEvent> pending_;  // not yet written
  bool stopping_ = false;
  bool read_ended_ = false;            // the daemon's side of the stream ended
  std::unordered_map<uint64_t, std::shared_ptr<ConnState>> conns_;
  std::unordered_map<uint64_t, std::deque<uint64_t>> incoming_;  // listen_id -> conn ids
  std::string failure_;

  std::atomic<bool> failed_{false};
  std::atomic<int64_t> last_heard_ns_{0};  // monotonic
};

}  // namespace prism::plugin

#endif  // PRISM_PLUGIN_DAEMON_SESSION_H_
