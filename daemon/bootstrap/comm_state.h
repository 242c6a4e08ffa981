// One live communicator as the bootstrap emulation sees it (internal header).
//
// A LiveComm is owned by the CommTable (comm_table.h) and touched only on the
// bootstrap loop thread. Its parts are grouped by the component that writes
// them; other components only read them:
//   identity / addresses   CommTable (at creation)
//   RootProgress           RootCheckin   (root_checkin.h)
//   links, ag, ag_queue    AllGatherEngine (allgather_engine.h)
//   SplitProgress          SplitCoordinator (comm_split.h)
//   BarrierProgress        P2pMessages   (p2p_messages.h)
//   phase, timestamps      CommTable
#ifndef PRISM_DAEMON_BOOTSTRAP_COMM_STATE_H_
#define PRISM_DAEMON_BOOTSTRAP_COMM_STATE_H_

#include <chrono>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "daemon/bootstrap/contributions.h"
#include "daemon/bootstrap/nccl_ids.h"

namespace prism::bootstrap {

using SteadyTime = std::chrono::steady_clock::time_point;

// A bootstrap-ring TCP connection between a virtual rank and a real neighbour.
struct RingLink {
  bool from_real_prev = false;  // true: real R = V-1 connected to V; false: V -> real V+1
  int32_t vrank = 0;
  int32_t real_rank = 0;
  uint64_t conn = 0;            // ConnectionTable id, 0 until connected
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
  SteadyTime started;
};

// True when `l` has exchanged every step of `ag`.
bool LinkFinished(const AgState& ag, const RingLink& l);
// Steps `l` still owes in each direction (for stall reports).
int LinkStepsIn(const AgState& ag, const RingLink& l);
int LinkStepsOut(const AgState& ag, const RingLink& l);

enum class CommPhase : uint8_t { kWaiting, kRoot, kRingOps, kReady, kDone };
const char* CommPhaseName(CommPhase p);

struct PendingMsg {
  int32_t to_rank = 0;
  int32_t from_rank = 0;
  int32_t tag = 0;
  Bytes payload;
};

// Where the communicator's NCCL root is and who plays it.
enum class RootHost : uint8_t {
  kRealRank,      // a real comm rank 0 hosts it; virtual ranks check in as clients
  kDaemonShared,  // prismd, on the NCCL_COMM_ID listener (one init at a time)
  kDaemonOwn,     // prismd, on an endpoint of this communicator (ids from the store)
};

struct RootProgress {
  RootHost host = RootHost::kRealRank;
  UniqueId id{};                  // the unique id this communicator was created from
  Ipv4Endpoint addr;              // the root's address (inside `id`)
  std::vector<Bytes> real_ext;    // daemon-hosted root: real check-ins
  int checked_in = 0;
  int next_checkin = 0;
  int checkins_outstanding = 0;
  int deliveries_seen = 0;
  bool delivered = false;         // daemon root: deliveries sent
  std::string mismatch;           // a refused check-in that did not fit the graph
};

struct SplitProgress {
  int32_t split_count = 0;
  std::deque<std::vector<uint32_t>> pending_calls;  // per ncclCommSplit call, the plan ids of its children
  std::vector<PendingMsg> early_msgs;
  std::map<int32_t, uint32_t> children_by_color;  // of the latest split
  int msgs_pending = 0;                     // COMMSPLIT messages still expected
};

struct BarrierProgress {
  std::map<int32_t, int> msgs_from;
  int started = 0;
};

struct LiveComm {
  // Identity (CommTable, at creation).
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
  // Lifecycle (CommTable).
  CommPhase phase = CommPhase::kWaiting;
  SteadyTime init_started;
  SteadyTime last_progress;         // any wire event of this communicator
  bool real_seen = false;           // a real rank took part already
  // Addresses of the virtual ranks' endpoints (CommTable) and of real ranks.
  std::vector<Ipv4Endpoint> ring_ep, p2p_ep, root_ep;
  std::vector<std::optional<Ipv4Endpoint>> real_p2p;   // from ringAllInfo
  std::vector<std::optional<Ipv4Endpoint>> next_ring;  // virtual V: real V+1's ring listener
  std::vector<VirtualNodeLayout> node_of;              // comm rank -> its virtual node
  // Ring and all-gathers (AllGatherEngine).
  std::map<int32_t, std::unique_ptr<RingLink>> links;  // key: vrank*2 + (from_real_prev)
  std::deque<AgKind> ag_queue;
  std::unique_ptr<AgState> ag;
  Bytes real_peer_info, real_topo_info, real_ring_connect;  // first real records
  bool ring_connect_started = false;
  // Parts owned by the other components.
  RootProgress root;
  SplitProgress split;
  BarrierProgress barrier;
};

}  // namespace prism::bootstrap

#endif  // PRISM_DAEMON_BOOTSTRAP_COMM_STATE_H_
