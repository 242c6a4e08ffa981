// prismd's NCCL bootstrap emulation for virtual ranks: the public API.
//
// BootstrapService plays every virtual rank of the communicators in a
// BootstrapPlan on NCCL's bootstrap wire protocol (root check-in, ring,
// ring all-gathers, point-to-point bootstrap messages, split, transport
// setup). One thread owns all protocol state (an epoll loop over
// non-blocking sockets); Start() spawns it, Stop() joins it. Stats() is a
// thread-safe snapshot. See docs/bootstrap.md.
#ifndef PRISM_DAEMON_BOOTSTRAP_BOOTSTRAP_SERVICE_H_
#define PRISM_DAEMON_BOOTSTRAP_BOOTSTRAP_SERVICE_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "daemon/bootstrap/bootstrap_plan.h"
#include "daemon/bootstrap/wire_profile.h"

namespace prism::daemon {
class VirtualConnectionBroker;
}

namespace prism::bootstrap {

enum class AddressMode {
  // One listener on listen_host:bootstrap_port; every virtual endpoint is a
  // distinct 127.64.x.y address on that port (real ranks on this host only).
  kLoopbackAliases,
  // One listener per virtual endpoint on advertise_host (routable; costs an
  // fd per endpoint).
  kPortPerEndpoint,
};

enum class ContributionSource {
  // Virtual AG1/AG3/ring-connect records are built from the first real
  // rank's record of the same all-gather; virtual slice data is held back
  // until it arrives (a real rank sends its own slice at step 0 without
  // waiting for data, wire notes 2.6).
  kFirstRealRecord,
  // Built from the configured templates only (no waiting).
  kTemplate,
};

struct BootstrapConfig {
  int nccl_version = 22809;          // --wire-profile / Hello.nccl_version
  std::string comm_id;               // NCCL_COMM_ID "host:port" (required)
  std::string listen_host = "0.0.0.0";
  uint16_t bootstrap_port = 0;       // --bootstrap-port; 0 = kernel's choice
  AddressMode address_mode = AddressMode::kLoopbackAliases;
  std::string advertise_host = "127.0.0.1";  // kPortPerEndpoint only
  ContributionSource contributions = ContributionSource::kFirstRealRecord;
  std::vector<uint8_t> peer_info_template;   // empty = built-in H200 record
  std::vector<uint8_t> topo_info_template;   // empty = built-in H200 record
  NcclEnv env;                       // the real ranks' NCCL env
  std::string record_wire_dir;       // --record-wire DIR; empty = off
  int max_concurrent_checkins = 64;  // outstanding connections to a real root
  int root_connect_timeout_ms = 600000;
};

// Thread-safe snapshot of counters (exported as metrics by prismd).
struct BootstrapStats {
  uint64_t jobs_started = 0;
  uint64_t jobs_completed = 0;
  uint64_t jobs_failed = 0;
  uint64_t comms_initialized = 0;    // communicators whose init/split finished
  uint64_t comms_destroyed = 0;
  uint64_t allgathers_completed = 0;
  uint64_t p2p_messages_in = 0;
  uint64_t p2p_messages_out = 0;
  uint64_t p2p_setups = 0;
  uint64_t barriers = 0;
  uint64_t broker_mints = 0;
  uint64_t broker_connects = 0;
  uint64_t broker_errors = 0;
  uint64_t divergences = 0;          // real rank did what the plan/profile did not predict
  uint64_t real_rank_failures = 0;   // real rank closed mid-protocol
  uint64_t accepted_connections = 0;
  uint64_t open_fds = 0;
  std::vector<std::string> recent_divergences;  // last 32 messages
  uint16_t bootstrap_port = 0;       // actual shared listener port
  std::string last_init_summary;     // e.g. "world: 1024 ranks, 1 real, 0.213 s"
};

class BootstrapServer;

class BootstrapService {
 public:
  // `broker` must outlive the service; may be null when no transport setup
  // is expected (then P2pSetup replies carry zero handles and count errors).
  BootstrapService(BootstrapConfig config, BootstrapPlan plan,
                   daemon::VirtualConnectionBroker* broker);
  ~BootstrapService();
  BootstrapService(const BootstrapService&) = delete;
  BootstrapService& operator=(const BootstrapService&) = delete;

  // Validates config/plan/profile, binds listeners, starts the thread.
  absl::Status Start();
  void Stop();
  BootstrapStats Stats() const;
  // The shared bootstrap port after Start() (for tests and logs).
  uint16_t port() const;

 private:
  std::unique_ptr<BootstrapServer> server_;
};

}  // namespace prism::bootstrap

#endif  // PRISM_DAEMON_BOOTSTRAP_BOOTSTRAP_SERVICE_H_
