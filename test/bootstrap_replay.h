// Reads a --record-wire recording (JSON lines, docs/bootstrap.md) into
// events, for fixture tests.
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

// TODO(bootstrap): Replay() against a running server (play the real side,
// rewrite 28-byte socket addresses, compare the daemon's bytes) is not
// written yet; only the reader exists.

}  // namespace prism::bootstrap::testing

#endif  // PRISM_TEST_BOOTSTRAP_REPLAY_H_
