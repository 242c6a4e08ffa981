// Replays a --record-wire recording (JSON lines, docs/bootstrap.md) against a
// running bootstrap server, playing the real rank(s): it re-opens the
// connections the real side opened, accepts the ones the daemon opened,
// sends the recorded "in" bytes and checks the daemon's "out" bytes.
// Addresses that differ between runs (ports, the real side's listeners) are
// rewritten wherever a 28-byte socket address appears.
#ifndef PRISM_TEST_BOOTSTRAP_REPLAY_H_
#define PRISM_TEST_BOOTSTRAP_REPLAY_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "daemon/bootstrap/nccl_ids.h"

namespace prism::bootstrap::testing {

struct WireEvent {
  int64_t t_ns = 0;
  uint64_t conn = 0;
  enum Kind { kOpen, kData, kClose } kind = kData;
  bool daemon_side = false;     // open: daemon connected; data: daemon sent
  Ipv4Endpoint local, remote;   // open only (daemon's view)
  std::string note;
  std::string bytes;
};

absl::StatusOr<std::vector<WireEvent>> ReadRecording(const std::string& path);

struct ReplayResult {
  size_t connections = 0;
  size_t bytes_in = 0;          // sent to the daemon
  size_t bytes_out_checked = 0; // daemon bytes compared
  std::vector<std::string> mismatches;
};

// `old_port` / `new_port`: the daemon's shared port in the recording and now;
// `old_root` / `new_root`: NCCL_COMM_ID then and now.
absl::StatusOr<ReplayResult> Replay(const std::vector<WireEvent>& events, uint16_t old_port,
                                    uint16_t new_port, const Ipv4Endpoint& old_root,
                                    const Ipv4Endpoint& new_root, int timeout_ms);

}  // namespace prism::bootstrap::testing

#endif  // PRISM_TEST_BOOTSTRAP_REPLAY_H_
