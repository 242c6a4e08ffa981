#include "daemon/bootstrap/contributions.h"

#include <cstdint>
#include <string>

#include "absl/strings/str_cat.h"

namespace prism::bootstrap {
namespace {

void FillChannels(uint8_t* topo, size_t offset, size_t channels, int32_t value) {
  for (size_t c = 0; c < channels; ++c) WriteAt<int32_t>(topo, offset + 4 * c, value);
}

// Fields a release does not have are SIZE_MAX in its profile: not written.
template <typename T>
void WriteIfPresent(uint8_t* base, size_t offset, T value) {
  if (offset != SIZE_MAX) WriteAt<T>(base, offset, value);
}

}  // namespace

Bytes DefaultPeerInfoTemplate(const WireProfile& p) {
  const PeerInfoLayout& l = p.peer_info;
  Bytes b(l.size, 0);
  WriteAt<int32_t>(b.data(), l.gdr_support, 1);
  WriteAt<int32_t>(b.data(), l.cuda_comp_cap, 90);                       // H200
  WriteIfPresent<uint64_t>(b.data(), l.total_global_mem, uint64_t{140} << 30);
  WriteIfPresent<int32_t>(b.data(), l.cu_mem_support, 1);
  WriteIfPresent<int32_t>(b.data(), l.version, p.version_code);
  return b;
}

Bytes DefaultTopoInfoTemplate(const WireProfile& p) {
  const TopoInfoLayout& l = p.topo_info;
  Bytes b(l.size, 0);
  struct Entry { int32_t pattern, channels; float bw_intra, bw_inter; int32_t type_inter; };
  // Tree, Ring, CollNetDirect, CollNetChain, NVLS, NVLSTree, PAT.
  const Entry entries[] = {{3, 1, 2.4f, 1.2f, 8}, {4, 1, 1.2f, 1.2f, 8}, {6, 0, 0, 0, 0},
                           {3, 0, 0, 0, 0},        {5, 0, 0, 0, 0},        {5, 0, 0, 0, 0},
                           {3, 1, 2.4f, 1.2f, 8}};
  for (size_t a = 0; a < l.num_algorithms && a < 7; ++a) {
    uint8_t* e = b.data() + l.graph_info + a * l.graph_info_entry;
    WriteAt<int32_t>(e, 0, entries[a].pattern);
    WriteAt<int32_t>(e, 4, entries[a].channels);
    WriteAt<int32_t>(e, 8, entries[a].channels > 0 ? 1 : 0);
    WriteAt<float>(e, 12, entries[a].bw_intra);
    WriteAt<float>(e, 16, entries[a].bw_inter);
    WriteAt<int32_t>(e, 24, entries[a].type_inter);
  }
  WriteIfPresent<int32_t>(b.data(), l.cpu_arch, 1);
  WriteIfPresent<int32_t>(b.data(), l.cpu_vendor, 1);
  return b;
}

uint64_t VirtualHostHash(uint32_t node) {
  const std::string s = absl::StrCat("prism-virtual-host/", node);
  return NcclHash(s.data(), s.size());
}

uint64_t VirtualPidHash(uint32_t global_rank) {
  const std::string s = absl::StrCat("prism-virtual-rank/", global_rank);
  return NcclHash(s.data(), s.size());
}

Bytes MakeRingRecord(const WireProfile& p, const Ipv4Endpoint& p2p, uint64_t uds_id) {
  Bytes b(p.ring_record_size, 0);
  const SockAddrBytes peer = EncodeSockAddr(p2p);
  std::memcpy(b.data() + p.ring_record_p2p, peer.data(), peer.size());
  // Proxy listener: only same-host ranks dial it; any non-zero address.
  const SockAddrBytes proxy = EncodeSockAddr({p2p.ip, 1});
  if (p.ring_record_proxy != SIZE_MAX) std::memcpy(b.data() + p.ring_record_proxy, proxy.data(), proxy.size());
  WriteIfPresent<uint64_t>(b.data(), p.ring_record_uds, uds_id);
  return b;
}

Bytes MakePeerInfo(const WireProfile& p, const Bytes& tmpl, const VirtualIdentity& who,
                   uint64_t comm_hash) {
  const PeerInfoLayout& l = p.peer_info;
  Bytes b = tmpl;
  b.resize(l.size, 0);
  uint8_t* d = b.data();
  WriteAt<int32_t>(d, l.rank, who.comm_rank);
  WriteAt<int32_t>(d, l.cuda_dev, static_cast<int32_t>(who.local_gpu));
  WriteAt<int32_t>(d, l.nvml_dev, static_cast<int32_t>(who.local_gpu));
  WriteAt<uint64_t>(d, l.host_hash, VirtualHostHash(who.node) + comm_hash);
  WriteAt<uint64_t>(d, l.pid_hash, VirtualPidHash(who.global_rank) + comm_hash);
  WriteAt<int64_t>(d, l.bus_id, int64_t{0x18000} + int64_t{0x10000} * who.local_gpu);
  WriteAt<uint64_t>(d, l.comm_ptr, 0);
  std::memset(d + l.fabric_info, 0, l.fabric_info_size);  // never MNNVL
  WriteIfPresent<int32_t>(d, l.version, p.version_code);
  if (l.gpu_uuid != SIZE_MAX) {  // one per virtual GPU, never the real one's
    const uint64_t tag = VirtualPidHash(who.global_rank);
    WriteAt<uint64_t>(d, l.gpu_uuid, 0x76726d7369727070ull);  // "pprismrv"
    WriteAt<uint64_t>(d, l.gpu_uuid + 8, tag);
  }
  if (l.mlo_part != SIZE_MAX) WriteAt<int32_t>(d, l.mlo_part, -1);
  return b;
}

Bytes MakeTopoInfo(const WireProfile& p, const Bytes& tmpl, const VirtualIdentity& who,
                   const VirtualNodeLayout& node) {
  const TopoInfoLayout& l = p.topo_info;
  Bytes b = tmpl;
  b.resize(l.size, 0);
  uint8_t* t = b.data() + l.topo_ranks;
  const auto& rs = node.ranks;
  size_t index = 0;
  while (index < rs.size() && rs[index] != who.comm_rank) ++index;
  const int32_t first = rs.empty() ? who.comm_rank : rs.front();
  const int32_t last = rs.empty() ? who.comm_rank : rs.back();
  const int32_t prev = index == 0 ? -1 : rs[index - 1];
  const int32_t next = index + 1 >= rs.size() ? -1 : rs[index + 1];
  const int32_t second = rs.size() > 1 ? rs[1] : first;
  const int32_t tree_pattern = ReadAt<int32_t>(b.data(), l.graph_info);
  const bool balanced = tree_pattern == 1 || tree_pattern == 2;
  const size_t ch = l.max_channels;
  if (l.cross_nic_ring != SIZE_MAX) WriteAt<int32_t>(t, l.cross_nic_ring, 0);
  FillChannels(t, l.ring_recv, ch, first);
  FillChannels(t, l.ring_send, ch, last);
  FillChannels(t, l.ring_prev, ch, prev);
  FillChannels(t, l.ring_next, ch, next);
  FillChannels(t, l.tree_to_parent, ch, first);
  FillChannels(t, l.tree_to_child0, ch, balanced ? second : first);
  FillChannels(t, l.tree_to_child1, ch, first);
  FillChannels(t, l.nvls_heads, ch, 0);
  WriteAt<int32_t>(t, l.nvls_head_num, 0);
  // NVLS / collnet stay off: zero channels.
  for (size_t a : {size_t{2}, size_t{3}, size_t{4}, size_t{5}}) {
    if (a < l.num_algorithms) WriteAt<int32_t>(b.data(), l.graph_info + a * l.graph_info_entry + 4, 0);
  }
  return b;
}

Bytes MakeRingConnectRecord(const WireProfile& p, const Bytes* real_record) {
  Bytes b(p.ring_connect_ag_size, 0);
  if (real_record != nullptr && real_record->size() >= 2) b[1] = (*real_record)[1];
  return b;
}

Bytes MakeSplitInfo(int32_t key, int32_t color) {
  Bytes b(8, 0);
  WriteAt<int32_t>(b.data(), 0, key);
  WriteAt<int32_t>(b.data(), 4, color);
  return b;
}

}  // namespace prism::bootstrap
