// --record-wire: records every byte exchanged with real ranks as JSON lines,
// one object per event (format in docs/bootstrap.md):
//   {"t_ns":123,"conn":7,"ev":"open","dir":"out"|"in","local":"ip:port",
//    "remote":"ip:port","note":"..."}
//   {"t_ns":130,"conn":7,"ev":"data","dir":"in"|"out","hex":"0a0b..."}
//   {"t_ns":140,"conn":7,"ev":"close"}
// "open" dir: "out" = the daemon connected, "in" = the daemon accepted.
// Data dir: "in" = bytes the real rank sent, "out" = bytes the daemon sent.
// Not thread-safe: used from the server's loop thread only.
#ifndef PRISM_DAEMON_BOOTSTRAP_WIRE_RECORDER_H_
#define PRISM_DAEMON_BOOTSTRAP_WIRE_RECORDER_H_

#include <chrono>
#include <cstdint>
#include <fstream>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "daemon/bootstrap/nccl_ids.h"

namespace prism::bootstrap {

class WireRecorder {
 public:
  // Creates DIR if needed and opens DIR/wire-<unix-time>-<pid>.jsonl.
  static absl::StatusOr<std::unique_ptr<WireRecorder>> Open(const std::string& dir);

  void Opened(uint64_t conn, bool daemon_connected, const Ipv4Endpoint& local,
              const Ipv4Endpoint& remote, const std::string& note);
  void Data(uint64_t conn, bool from_real, const char* data, size_t size);
  void Closed(uint64_t conn);
  const std::string& path() const { return path_; }

 private:
  WireRecorder() = default;
  int64_t Now() const;
  std::ofstream out_;
  std::string path_;
  std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now();
};

}  // namespace prism::bootstrap

#endif  // PRISM_DAEMON_BOOTSTRAP_WIRE_RECORDER_H_
