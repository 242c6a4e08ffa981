// Synthesis of the slices virtual ranks contribute to the bootstrap
// all-gathers (docs/bootstrap.md).
//
// Virtual hosts are clones of real hosts: a virtual AG1/AG3 record is a copy
// of a template (by default the first real rank's own record of the same
// all-gather, see docs/bootstrap.md) with the rank-specific fields rewritten.
// Pure functions; thread-safe.
#ifndef PRISM_DAEMON_BOOTSTRAP_CONTRIBUTIONS_H_
#define PRISM_DAEMON_BOOTSTRAP_CONTRIBUTIONS_H_

#include <cstdint>
#include <cstring>
#include <vector>

#include "daemon/bootstrap/nccl_ids.h"
#include "daemon/bootstrap/wire_profile.h"

namespace prism::bootstrap {

using Bytes = std::vector<uint8_t>;

template <typename T>
T ReadAt(const uint8_t* data, size_t offset) {
  T v;
  std::memcpy(&v, data + offset, sizeof(T));
  return v;
}
template <typename T>
void WriteAt(uint8_t* data, size_t offset, T v) {
  std::memcpy(data + offset, &v, sizeof(T));
}

// Who a virtual rank is, inside one communicator.
struct VirtualIdentity {
  int32_t comm_rank = 0;
  uint32_t global_rank = 0;
  uint32_t node = 0;        // graph node
  uint32_t local_gpu = 0;   // GPU index inside the node
};

// The virtual "NCCL node" a virtual rank belongs to inside one communicator:
// the communicator's virtual ranks of one graph node, in ascending comm rank.
struct VirtualNodeLayout {
  std::vector<int32_t> ranks;  // comm ranks, ascending
};

// Records an H200 node reported (docs/bootstrap.md, NET/Socket, 1 GPU): the
// fallback templates when no real record is available yet.
Bytes DefaultPeerInfoTemplate(const WireProfile& profile);
Bytes DefaultTopoInfoTemplate(const WireProfile& profile);

// Synthetic hostHash of a virtual node (before adding commHash): never the
// hash of a real host name (salted).
uint64_t VirtualHostHash(uint32_t node);
uint64_t VirtualPidHash(uint32_t global_rank);

// ringAllInfo record: P2P listener, a fake non-zero proxy address, a UDS id
// and zero RAS (RAS ignores all-zero entries).
Bytes MakeRingRecord(const WireProfile& profile, const Ipv4Endpoint& p2p, uint64_t uds_id);

// AG1 record from `tmpl` (same size as profile.peer_info.size).
Bytes MakePeerInfo(const WireProfile& profile, const Bytes& tmpl, const VirtualIdentity& who,
                   uint64_t comm_hash);

// AG3 record from `tmpl`: graphInfo copied (homogeneous nodes), topoRanks set
// for `who` inside `node` (ringRecv first, ringSend last, chain prev/next,
// tree per the template's tree pattern), crossNicRing 0, NVLS heads 0.
Bytes MakeTopoInfo(const WireProfile& profile, const Bytes& tmpl, const VirtualIdentity& who,
                   const VirtualNodeLayout& node);

// {useNetPXN 0, useGdr} of the ring-connect all-gather; useGdr copied from
// the template record (a real rank's), default 0.
Bytes MakeRingConnectRecord(const WireProfile& profile, const Bytes* real_record);

// {key, color} of the split all-gather.
Bytes MakeSplitInfo(int32_t key, int32_t color);

}  // namespace prism::bootstrap

#endif  // PRISM_DAEMON_BOOTSTRAP_CONTRIBUTIONS_H_
