// Replays a --record-wire recording (wire_recorder.h) against a fresh
// BootstrapService, so CI covers the bootstrap protocol without a GPU.
//
// The replayer plays the REAL side of every recorded connection, in recorded
// order, and compares what the new prismd sends with what was recorded.
// Contract (docs/bootstrap.md, "Wire replay"):
//  * Causality: the real side's k-th recorded action (connect, send a chunk,
//    close) is performed only once every byte and connection prismd had
//    produced before it in the recording has arrived in this run.
//  * Comparison: prismd's bytes of each connection must equal the recorded
//    bytes except in renamed fields, which must be renamed CONSISTENTLY
//    (the first occurrence of a recorded value learns its new value, every
//    later occurrence must carry the same new value, and two recorded values
//    never map to one new value):
//      - every 28-byte AF_INET ncclSocketAddress (family 2, port and address
//        non-zero, 20 trailing zero bytes) that is not a real-side listener
//        (prismd's endpoints, 127.64/10 aliases, fake proxy addresses);
//      - the 8-byte magic of connections prismd opens (child commHash);
//      - hostHash and pidHash of ncclPeerInfo frames, peerUDS of ring
//        records (derived from commHash);
//      - conn_id of VirtualHandle entries (minted by the broker; mask only).
//    Real-side listener addresses inside prismd's bytes must equal the
//    replayer's new listener addresses exactly.
//  * Rewriting: before the real side sends recorded bytes, every renamed
//    address and hash (learned, plus the commHash of every planned
//    communicator and the NCCL_COMM_ID address) and every real listener
//    address is replaced by its new value.
// The first divergence is reported with connection, offset, expected and got.
// Thread-safety: the functions are reentrant; each call owns its sockets and
// service. Blocking: a replay runs until done or options.stall_timeout_ms
// passes without progress.
#ifndef PRISM_DAEMON_BOOTSTRAP_REPLAY_WIRE_REPLAY_H_
#define PRISM_DAEMON_BOOTSTRAP_REPLAY_WIRE_REPLAY_H_

#include <atomic>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "daemon/bootstrap/bootstrap_service.h"
#include "daemon/bootstrap/nccl_ids.h"
#include "daemon/bootstrap/virtual_connections.h"

namespace prism::bootstrap {

// One line of a recording.
struct WireRecordEvent {
  enum Kind { kOpen, kData, kClose };
  int line = 0;                 // 1-based line in the file
  int64_t t_ns = 0;
  uint64_t conn = 0;
  Kind kind = kData;
  bool from_daemon = false;     // open: prismd connected; data: prismd sent
  Ipv4Endpoint local, remote;   // open only, prismd's view
  std::string note;
  std::string bytes;            // data only
};

// Reads DIR/*.jsonl or one file (.jsonl). InvalidArgument names file:line.
absl::StatusOr<std::vector<WireRecordEvent>> ReadWireRecording(const std::string& path);

// manifest.json of a fixture directory (format in docs/bootstrap.md).
struct WireManifest {
  std::string name;
  std::string recording;            // file name in the fixture directory
  int nccl_version = 22809;
  std::string nccl_comm_id;         // NCCL_COMM_ID of the recorded run
  BootstrapPlan plan;
  NcclEnv env;
  AddressMode address_mode = AddressMode::kLoopbackAliases;
  ContributionSource contributions = ContributionSource::kFirstRealRecord;
  bool expect_job_complete = true;  // recording covers the job up to destroy
};

absl::StatusOr<WireManifest> ReadWireManifest(const std::string& fixture_dir);

// Mints sequential conn ids and accepts every real listen handle.
class ReplayBroker : public daemon::VirtualConnectionBroker {
 public:
  VirtualHandle MintReceiveHandle(const daemon::VirtualLinkInfo& link) override;
  absl::Status ConnectToRealListener(const RealListenHandle& listen,
                                     const daemon::VirtualLinkInfo& link) override;

 private:
  std::atomic<uint64_t> next_conn_{1};
};

struct ReplayOptions {
  int stall_timeout_ms = 15000;    // no progress for this long = failure
};

struct ReplayReport {
  bool matched = false;             // no divergence, everything arrived
  std::string divergence;           // first problem; empty when matched
  size_t connections = 0;
  size_t events = 0;
  uint64_t bytes_compared = 0;      // prismd bytes checked exactly
  uint64_t bytes_renamed = 0;       // prismd bytes in renamed fields
  uint64_t bytes_sent = 0;          // real-side bytes played
  size_t renamed_values = 0;        // distinct learned renamings
  BootstrapStats server;            // the replayed prismd's counters
};

// Replays `events` against a fresh BootstrapService configured from
// `manifest` (new NCCL_COMM_ID on 127.0.0.1, ports chosen by the kernel).
// A non-OK status means the replay could not be set up (bad manifest,
// unplayable recording); protocol mismatches are in the report.
absl::StatusOr<ReplayReport> ReplayRecording(const std::vector<WireRecordEvent>& events,
                                             const WireManifest& manifest,
                                             const ReplayOptions& options = {});

// ReadWireManifest + ReadWireRecording + ReplayRecording.
absl::StatusOr<ReplayReport> ReplayFixture(const std::string& fixture_dir,
                                           const ReplayOptions& options = {});

// Fixture directories (those holding manifest.json) directly under `root`,
// sorted.
std::vector<std::string> ListWireFixtures(const std::string& root);

}  // namespace prism::bootstrap

#endif  // PRISM_DAEMON_BOOTSTRAP_REPLAY_WIRE_REPLAY_H_
