// prismd's NCCL bootstrap emulation for virtual ranks: the public API.
//
// BootstrapService plays every virtual rank of the communicators in a
// BootstrapPlan on NCCL's bootstrap wire protocol (root check-in, ring,
// ring all-gathers, point-to-point bootstrap messages, split, transport
// setup). One thread owns all protocol state (an epoll loop over
// non-blocking sockets); Start() spawns it, Stop() joins it. Stats(),
// HostRoot() and JoinRoot() may be called from any other thread.
//
// Where communicators come from:
//  * with `comm_id` (NCCL_COMM_ID): the plan's init communicators, one at a
//    time in plan order, all from the id NCCL builds for that address;
//  * without it: on demand, from ids exchanged through PyTorch's store
//    (daemon/rendezvous): HostRoot() when comm rank 0 is virtual (prismd
//    mints the id and hosts the root), JoinRoot() when a real comm rank 0
//    made the id. Any number of such roots may be live at once.
// Split children come from their parent's split all-gather either way.
// See docs/bootstrap.md.
#ifndef PRISM_DAEMON_BOOTSTRAP_BOOTSTRAP_SERVICE_H_
#define PRISM_DAEMON_BOOTSTRAP_BOOTSTRAP_SERVICE_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "daemon/bootstrap/bootstrap_plan.h"
#include "daemon/bootstrap/nccl_ids.h"
#include "daemon/bootstrap/wire_profile.h"

namespace prism::daemon {
class VirtualConnectionBroker;
}

namespace prism::bootstrap {

enum class AddressMode {
  // One listener on bootstrap_port; every virtual endpoint is a distinct
  // 127.64.x.y address on that port. The listener must be bound to the
  // wildcard address (a socket bound to 127.0.0.1 never sees connections
  // dialled to 127.64/10), so it drops every connection that is not from a
  // loopback address to a loopback address: real ranks on this host only.
  kLoopbackAliases,
  // One listener per virtual endpoint on advertise_host (routable, for real
  // ranks on other hosts; costs an fd per endpoint). Peers: allowed_peers.
  kPortPerEndpoint,
};

enum class ContributionSource {
  // Virtual AG1/AG3/ring-connect records are built from the first real
  // rank's record of the same all-gather; virtual slice data is held back
  // until it arrives (a real rank sends its own slice at step 0 without
  // waiting for data, docs/bootstrap.md).
  kFirstRealRecord,
  // Built from the configured templates only (no waiting).
  kTemplate,
};

struct BootstrapConfig {
  // The real ranks' NCCL version code (--wire-profile), whose wire profile
  // is played. 0: learnt from the first real rank (SetNcclVersion); until
  // then nothing that needs the profile runs, and a real rank's bootstrap
  // connection is refused with the fix.
  int nccl_version = 22809;
  bool allow_unverified_profile = false;  // --allow-unverified-wire-profile
  // NCCL_COMM_ID "host:port": every init communicator uses the id NCCL
  // builds for it. Empty: ids come from HostRoot()/JoinRoot().
  std::string comm_id;
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
  // Peers accepted (and dialled) besides loopback ones, "a.b.c.d[/len]";
  // kPortPerEndpoint only (loopback-alias mode accepts loopback only).
  // Empty in kPortPerEndpoint = any peer.
  std::vector<std::string> allowed_peers;
  int max_unidentified_connections = 256;  // accepted, no valid header yet
  int max_connections = 8192;              // all bootstrap connections
  int header_timeout_ms = 10000;           // accepted, no valid header: closed
  int accept_backoff_ms = 100;             // first pause when accept4 runs out of fds
  // A communicator with no progress for this long is reported as waiting
  // (WaitReport in Stats, a warning on the log).
  int stall_report_ms = 3000;
  // prismd --follow: the plan lists only the world; the virtual ranks join
  // the groups the real ranks split off (split_source.h) instead of the
  // plan's (a split the plan does not list is then no divergence).
  bool follow_real_ranks = false;
};

// Something prismd waits for that only a real rank can bring: never a silent
// wait (docs/bootstrap.md, "Waiting").
struct WaitReport {
  std::string communicator;        // e.g. "tp[3]"
  std::vector<uint32_t> ranks;     // global ranks (real) it waits for
  std::string waits_for;           // one line, what and where
  double seconds = 0;              // since the last progress
};

// A communicator whose NCCL id comes from outside prismd (PyTorch's store).
struct CommRequest {
  static constexpr uint32_t kUnplanned = UINT32_MAX;
  uint32_t plan_id = kUnplanned;   // the plan entry it is (members from the plan)
  std::vector<uint32_t> members;   // kUnplanned only: global ranks, comm-rank order
  std::string name;                // for logs; default: the plan's name
  // Identity of the request (e.g. the store key of the id): a second
  // HostRoot/JoinRoot with the same key in the same job is answered from
  // the first (same id, no second communicator). Empty: the plan entry.
  std::string key;
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
  uint64_t rejected_connections = 0; // dropped before a valid header (peer, idle, cap, bad header)
  uint64_t accept_failures = 0;      // accept4 out of fds/memory
  uint64_t accept_pauses = 0;        // listener taken out of epoll after such a failure
  uint64_t warnings_suppressed = 0;  // rate-limited log lines
  std::vector<std::string> recent_divergences;  // last 32 messages
  std::vector<WaitReport> waiting;   // current waits (stall_report_ms without progress)
  uint16_t bootstrap_port = 0;       // actual shared listener port
  int nccl_version = 0;              // the wire profile played; 0: not yet known
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

  // Ids from PyTorch's store. Blocking until the loop thread has acted;
  // never call from the loop thread. `id` bytes as NCCL makes them (128
  // bytes). With comm_id set, HostRoot answers NCCL_COMM_ID's id and JoinRoot
  // only checks that the id is that one (the plan order plays them).
  // prismd plays comm rank 0: mints an id whose root prismd hosts (an
  // endpoint of this communicator) and returns it for the store.
  absl::StatusOr<UniqueId> HostRoot(const CommRequest& request);
  // The real ranks run NCCL `version_code` (a plugin announced it). With
  // nccl_version 0 the first call chooses the wire profile (an unknown or
  // unverified release is refused, naming the supported ones) and starts
  // what waited for it; later calls must name the same release. Blocks
  // until the loop thread has acted; never call from the loop thread.
  absl::Status SetNcclVersion(int version_code);
  // A real comm rank 0 made `id`: the virtual members check in to its root.
  absl::Status JoinRoot(const CommRequest& request, const UniqueId& id);
  // A real comm rank 0 made `id` for a communicator whose members are all
  // real ranks: prismd plays none of it, but tells the broker (Communicator
  // Known) its commHash (the hash of `id` under the real ranks' NCCL) with
  // request.plan_id, so that the real ranks' operations on it are matched to
  // that graph communicator even when others have the same members
  // (Megatron's pipeline and embedding groups at PP=2). Once the wire profile
  // is known, before the real ranks' NCCL can report an operation on it.
  // With comm_id set (every communicator the same id and hash) it does
  // nothing. Blocks until the loop thread has acted.
  absl::Status RealRanksOnly(const CommRequest& request, const UniqueId& id);
  // prismd --follow: real rank `rank` (global) is about to make a
  // split_group call that puts it with `members` (global ranks), as prism
  // capture's ranks announce through PyTorch's store (split_source.h,
  // SplitSource::Announce). Blocks until the loop thread has recorded it, so
  // that the split that follows finds it. An error for a rank that is not real.
  absl::Status AnnounceSplitGroup(uint32_t rank, std::vector<uint32_t> members);
  // The real ranks are gone (their store connections closed): unless every
  // communicator finishes within `grace_ms`, the job is failed with `why`
  // and the next one is served.
  void EndJob(const std::string& why, int grace_ms = 2000);
  // The shared bootstrap port after Start() (for tests and logs).
  uint16_t port() const;

 private:
  std::unique_ptr<BootstrapServer> server_;
};

}  // namespace prism::bootstrap

#endif  // PRISM_DAEMON_BOOTSTRAP_BOOTSTRAP_SERVICE_H_
