// Internal state of the bootstrap server (not a public header): connections,
// ring links, all-gather progress and per-communicator state. Everything here
// is owned and touched only by the server's loop thread.
#ifndef PRISM_DAEMON_BOOTSTRAP_SERVER_STATE_H_
#define PRISM_DAEMON_BOOTSTRAP_SERVER_STATE_H_

#include <chrono>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "daemon/bootstrap/contributions.h"
#include "daemon/bootstrap/event_loop.h"
#include "daemon/bootstrap/nccl_ids.h"

namespace prism::bootstrap {

class BootstrapServer;

enum class EndpointKind : uint8_t { kRootDelivery, kRing, kP2p };

// A virtual rank's advertised listener address.
struct EndpointRef {
  uint32_t comm = 0;   // LiveComm::live_id
  int32_t rank = 0;    // comm rank
  EndpointKind kind = EndpointKind::kP2p;
};

enum class ConnRole : uint8_t {
  kAcceptedUnknown,  // accepted on a virtual endpoint, 12-byte header pending
  kRootIn,           // accepted on the daemon-hosted root: a real rank's check-in
  kRootDeliveryIn,   // a real root delivering "next ring info" to a virtual rank
  kRingFromRealPrev, // real R -> virtual R+1 (R's next socket)
  kRingToRealNext,   // virtual V -> real V+1 (V's next socket)
  kP2pIn,            // bootstrapSend from a real rank to a virtual rank
  kOneShotOut,       // check-in / root delivery / bootstrapSend to a real rank
};

struct Conn : IoHandler {
  BootstrapServer* server = nullptr;
  uint64_t id = 0;
  int fd = -1;
  ConnRole role = ConnRole::kAcceptedUnknown;
  bool connecting = false;
  bool close_after_flush = false;
  bool dead = false;
  bool eof = false;
  Ipv4Endpoint local, remote;
  uint32_t comm = 0;            // LiveComm::live_id
  int32_t rank = -1;            // virtual comm rank this conn belongs to
  uint64_t expect_magic = 0;
  std::string in;
  size_t in_off = 0;
  std::string out;
  size_t out_off = 0;
  std::string note;             // for logs and recordings ("checkin v3", ...)
  bool checkin = false;         // a virtual rank's check-in to a real root
  // Outbound connect retry.
  int attempts = 0;
  std::chrono::steady_clock::time_point give_up;
  void OnIo(uint32_t events) override;
  size_t Available() const { return in.size() - in_off; }
};

// A bootstrap-ring TCP connection between a virtual rank and a real neighbour.
struct RingLink {
  bool from_real_prev = false;  // true: real R = V-1 connected to V; false: V -> real V+1
  int32_t vrank = 0;
  int32_t real_rank = 0;
  uint64_t conn = 0;            // Conn::id, 0 until connected
  std::string pending_out;      // queued before the connection exists
  bool closed = false;
  // Progress of the current all-gather.
  int out_step = 0;
  bool out_header_sent = false;
  int in_step = 0;
};

enum class AgKind : uint8_t { kRingAllInfo, kPeerInfo, kTopoInfo, kSplitInfo, kRingConnect };
const char* AgKindName(AgKind k);

struct AgState {
  AgKind kind = AgKind::kRingAllInfo;
  size_t size = 0;
  std::vector<Bytes> slices;
  std::vector<uint8_t> known;
  bool virtual_filled = false;
  int ring0_steps = 0;   // steps carrying Ring0 (r-s -> next)
  int ring1_steps = 0;   // steps carrying Ring1 (r+s -> prev)
  std::chrono::steady_clock::time_point started;
};

// True when `l` has exchanged every step of `ag`.
bool LinkFinished(const AgState& ag, const RingLink& l);

enum class CommPhase : uint8_t { kWaiting, kRoot, kRingOps, kReady, kDone };

struct PendingMsg {
  int32_t to_rank = 0;
  int32_t from_rank = 0;
  int32_t tag = 0;
  Bytes payload;
};

struct LiveComm {
  uint32_t live_id = 0;
  uint32_t plan_id = 0;
  std::string name;
  int n = 0;
  std::vector<uint32_t> global;     // comm rank -> global rank
  std::vector<uint8_t> real;        // comm rank -> is real
  std::vector<int32_t> top_rank;    // comm rank -> rank in the top-parent comm
  int num_real = 0;
  uint64_t hash = 0;
  uint64_t magic = 0;
  std::optional<uint32_t> parent;   // live id
  CommPhase phase = CommPhase::kWaiting;
  std::chrono::steady_clock::time_point init_started;
  // Addresses.
  std::vector<Ipv4Endpoint> ring_ep, p2p_ep, root_ep;  // virtual ranks' endpoints
  std::vector<std::optional<Ipv4Endpoint>> real_p2p;   // from ringAllInfo
  std::vector<std::optional<Ipv4Endpoint>> next_ring;  // virtual V: real V+1's ring listener
  // Ring.
  std::map<int32_t, std::unique_ptr<RingLink>> links;  // key: vrank*2 + (from_real_prev)
  std::deque<AgKind> ag_queue;
  std::unique_ptr<AgState> ag;
  Bytes real_peer_info, real_topo_info, real_ring_connect;  // first real records
  std::vector<VirtualNodeLayout> node_of;  // comm rank -> its virtual node
  bool ring_connect_started = false;
  // Root.
  std::vector<Bytes> real_ext;      // daemon-hosted root: real check-ins
  int checked_in = 0;
  int next_checkin = 0;
  int checkins_outstanding = 0;
  int deliveries_seen = 0;
  bool real_seen = false;           // a real rank took part already
  int split_msgs_pending = 0;       // COMMSPLIT messages still expected
  // Split.
  int32_t split_count = 0;
  std::deque<uint32_t> pending_split_calls;  // plan ids, one per ncclCommSplit call
  std::vector<PendingMsg> early_split_msgs;
  std::map<int32_t, uint32_t> children_by_color;  // of the latest split
  // Barriers.
  std::map<int32_t, int> barrier_msgs_from;
  int barriers_started = 0;
};

}  // namespace prism::bootstrap

#endif  // PRISM_DAEMON_BOOTSTRAP_SERVER_STATE_H_
