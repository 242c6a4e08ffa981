// A recording of what the plugin sessions told prismd's hybrid scheduler and
// what it answered (prismd --record-sessions FILE), so that a run on the GPU
// host can be replayed against the engine in CI (test/fixtures/hybrid/,
// daemon/hybrid/session_replay.h): the same events must give the same
// schedules, or the timing logic changed.
//
// Format: JSON lines. The first line is a header
//   {"format":"prism-session-recording/1","start_realtime_ns":N,"lookahead_ns":L,
//    "real_ranks":[...],"graph":"name","iterations":I}
// ("iterations": how many the engine replayed; recordings before 2026-12-02
// lack it, and their replays play the graph's count)
// then, in the order prismd saw them:
//   {"at":T,"comm":{"hash":H,"graph_comm":C,"name":"...","members":[...]}}
//   {"at":T,"session":S,"events":"<base64 of rpc::EventBatch>"}
//   {"at":T,"session":S,"schedule":"<base64 of rpc::OpSchedule>"}
// T is CLOCK_REALTIME nanoseconds when prismd handled the line.
//
// Thread-safety: every method is thread-safe (one mutex around the file).
#ifndef PRISM_DAEMON_HYBRID_SESSION_RECORDER_H_
#define PRISM_DAEMON_HYBRID_SESSION_RECORDER_H_

#include <cstdint>
#include <cstdio>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "daemon/bootstrap/virtual_connections.h"
#include "proto/prism_service.pb.h"

namespace prism::daemon {

class SessionRecorder {
 public:
  // Creates (truncates) `path` and writes the header.
  static absl::StatusOr<std::unique_ptr<SessionRecorder>> Open(const std::string& path, int64_t start_realtime_ns,
                                                               int64_t lookahead_ns,
                                                               const std::vector<uint32_t>& real_ranks,
                                                               const std::string& graph_name, uint64_t iterations = 0);
  ~SessionRecorder();
  SessionRecorder(const SessionRecorder&) = delete;
  SessionRecorder& operator=(const SessionRecorder&) = delete;

  void Communicator(int64_t at, const CommDescription& c);
  void Events(int64_t at, uint64_t session, const rpc::EventBatch& batch);
  void Schedule(int64_t at, uint64_t session, const rpc::OpSchedule& s);
  // False once a line could not be written (a full disk): the file is short.
  bool ok();

 private:
  explicit SessionRecorder(std::FILE* f) : file_(f) {}
  void Line(const std::string& text);

  std::mutex mu_;
  std::FILE* file_;
  bool write_failed_ = false;
};

// One parsed line of a recording.
struct RecordedLine {
  enum Kind { kCommunicator, kEvents, kSchedule } kind;
  int64_t at = 0;
  uint64_t session = 0;
  CommDescription comm;
  rpc::EventBatch events;
  rpc::OpSchedule schedule;
};

struct Recording {
  int64_t start_realtime_ns = 0;
  int64_t lookahead_ns = 0;
  std::vector<uint32_t> real_ranks;
  std::string graph;
  uint64_t iterations = 0;  // the iterations the engine replayed (0: not recorded; the graph's)
  std::vector<RecordedLine> lines;
};

// Parses a whole recording; errors name the line.
absl::StatusOr<Recording> ReadRecording(const std::string& path);

// Writes `rec` (header and lines, each with its own `at`) to `path`, a file
// that must not exist yet: AlreadyExists naming it, InvalidArgument as Open
// when it cannot be created, Internal when a line could not be written.
// ReadRecording of the file gives `rec` back.
absl::Status WriteRecording(const std::string& path, const Recording& rec);

}  // namespace prism::daemon

#endif  // PRISM_DAEMON_HYBRID_SESSION_RECORDER_H_
