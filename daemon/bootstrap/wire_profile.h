// Per-NCCL-version wire profiles of the bootstrap protocol (data, not code).
//
// A WireProfile lists every version-dependent fact the bootstrap emulation
// needs: version code, record sizes and field offsets, the all-gather
// algorithm on the bootstrap ring and the order of communicator-wide
// operations. Facts come from NCCL's public source at v2.28.9-1 (docs/bootstrap.md) and,
// for the other releases, docs/nccl-releases.md.
//
// Absent facts: an offset of SIZE_MAX means the release has no such field
// (the record does not carry it), a size of 0 means no such message, and a
// tag of kTagAbsent means the release never sends a message with that role.
// Differences that are not data (another message framing, another hash, more
// all-gathers than RingOp can name) are listed in docs/nccl-releases.md
// ("not expressible as profile data"); their profiles stay partial.
//
// Only complete profiles are usable; SelectWireProfile() refuses partial ones
// ("not yet supported") and unknown versions with a message naming the
// version and the supported ones. Profiles are immutable static data: the
// returned pointers live for the whole program and are thread-safe.
#ifndef PRISM_DAEMON_BOOTSTRAP_WIRE_PROFILE_H_
#define PRISM_DAEMON_BOOTSTRAP_WIRE_PROFILE_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "daemon/bootstrap/nccl_ids.h"

namespace prism::bootstrap {

// A tag field holding this: the release sends no message with that role.
inline constexpr int32_t kTagAbsent = -1;

enum class AllGatherAlgorithm {
  kPlainRing,   // <= 2.27: n-1 steps, Ring0 only
  kDoubleRing,  // 2.28+: floor(n/2) steps, both directions but the last (even n)
};

// Communicator-wide operations on the bootstrap ring, in the order NCCL runs
// them. The daemon arms them in this order for init and split children.
enum class RingOp {
  kRingAllInfo,   // ringAllInfo (bootstrapRingData records)
  kPeerInfo,      // AG1: ncclPeerInfo
  kTopoInfo,      // AG3: allGatherInfo
};

// Byte layout of ncclPeerInfo (AG1) fields the daemon writes.
struct PeerInfoLayout {
  size_t size = 0;
  size_t rank = 0, cuda_dev = 0, nvml_dev = 0, host_hash = 0, pid_hash = 0,
         bus_id = 0, comm_ptr = 0, fabric_info = 0, fabric_info_size = 0,
         cu_mem_support = 0, version = 0;   // SIZE_MAX: absent (cuMemSupport in 2.21,
                                             // version before 2.23)
  // total_global_mem: SIZE_MAX before 2.27.
  size_t gdr_support = 12, cuda_comp_cap = 56, total_global_mem = 64;
  // 2.30+ (SIZE_MAX where absent): the GPU's UUID (16 bytes; NCCL refuses
  // two ranks of one host with the same one) and the MLO partition (-1: none).
  size_t gpu_uuid = SIZE_MAX, mlo_part = SIZE_MAX;
};

// Byte layout of allGatherInfo (AG3).
struct TopoInfoLayout {
  size_t size = 0;
  size_t graph_info = 0;          // graphInfo[num_algorithms]
  size_t graph_info_entry = 0;    // bytes per entry
  size_t num_algorithms = 0;
  size_t topo_ranks = 0;          // ncclTopoRanks
  size_t cross_nic_ring = 0;      // offset inside topo_ranks (SIZE_MAX if absent)
  size_t ring_recv = 0, ring_send = 0, ring_prev = 0, ring_next = 0,
         tree_to_parent = 0, tree_to_child0 = 0, tree_to_child1 = 0,
         nvls_heads = 0, nvls_head_num = 0;   // offsets inside topo_ranks
  size_t max_channels = 0;        // ints per array (MAXCHANNELS)
  size_t cpu_arch = 0, cpu_vendor = 0;  // SIZE_MAX: absent (2.21)
};

struct WireProfile {
  std::string name;               // e.g. "2.28.9"
  int version_code = 0;           // NCCL_VERSION_CODE, e.g. 22809
  bool complete = false;          // false: facts known only partly -> refused
  CommHashScheme comm_hash = CommHashScheme::kAccumulator;
  AllGatherAlgorithm allgather = AllGatherAlgorithm::kDoubleRing;
  // ncclUniqueId: the same 128-byte layout in every release (nccl_ids.h,
  // kUniqueIdAddrOffset); 2.29+ add int nRanks @36.
  bool unique_id_has_nranks = false;
  // extInfo (root check-in). ext_iroot/ext_nroots: SIZE_MAX before 2.23.
  size_t ext_info_size = 0;
  size_t ext_rank = 0, ext_nranks = 4, ext_iroot = 8, ext_nroots = 12;
  size_t ext_listen_root_addr = 0, ext_connect_info = 0;
  // What the root sends each rank (its successor's ring listener) and what a
  // split child sends its predecessor: ringConnectInfo (28 = a bare address).
  size_t ring_connect_info_size = 128;
  size_t ring_record_size = 120;       // bootstrapRingData
  size_t ring_record_p2p = 0, ring_record_proxy = 28, ring_record_uds = 56,
         ring_record_ras = 64;         // SIZE_MAX: absent
  size_t split_info_size = 8;          // commSplitInfo {key, color}
  size_t ring_connect_ag_size = 2;     // {useNetPXN, useGdr} after ring setup; 0: none
  PeerInfoLayout peer_info;
  TopoInfoLayout topo_info;
  std::vector<RingOp> init_ops;        // after root check-in + ring connect
  std::vector<RingOp> split_child_ops; // after bootstrapSplit
  // Tags on P2P bootstrap connections (kTagAbsent: no such message).
  int32_t tag_comm_split = 1 << 29;
  int32_t tag_intranode_allgather = 1 << 28;
  int32_t tag_global_barrier = 0xbeef;
  size_t connect_entry_size = 256;     // ncclConnect
};

// Environment of the real ranks that changes the operation sequence.
struct NcclEnv {
  bool runtime_connect = true;   // NCCL_RUNTIME_CONNECT (lazy) and cuMem
  bool register_ag = true;       // NCCL_LOCAL_REGISTER || NCCL_GRAPH_REGISTER
};

// All known profiles (complete and partial).
const std::vector<WireProfile>& AllWireProfiles();

// The complete profile for `version_code` (e.g. 22809). InvalidArgument for
// an unknown version, Unimplemented for a known-but-partial one; both name
// the supported versions. `allow_unverified` (prismd
// --allow-unverified-wire-profile): a partial profile is returned too, for
// verifying it against a real rank of that release.
absl::StatusOr<const WireProfile*> SelectWireProfile(int version_code, bool allow_unverified = false);

// "2.28.9" for 22809.
std::string VersionCodeName(int version_code);

}  // namespace prism::bootstrap

#endif  // PRISM_DAEMON_BOOTSTRAP_WIRE_PROFILE_H_
