// The wire profiles' layouts hold together, and virtual ranks' records are
// written where each release reads them. Facts: NCCL's source at each tag
// (../shared/nccl-versions-wire-notes.md for 2.27.7, 2.29.7 and 2.30.7;
// nccl-2.28-wire-notes.md for 2.28.9).
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "daemon/bootstrap/contributions.h"
#include "daemon/bootstrap/wire_profile.h"

namespace prism::bootstrap {
namespace {

const WireProfile& Profile(int version_code) {
  for (const WireProfile& p : AllWireProfiles())
    if (p.version_code == version_code) return p;
  FAIL("no profile " << version_code);
  return AllWireProfiles().front();
}

// (offset, size) of every ncclPeerInfo field the profile names.
std::vector<std::pair<size_t, size_t>> PeerFields(const PeerInfoLayout& l) {
  std::vector<std::pair<size_t, size_t>> f = {
      {l.rank, 4},          {l.cuda_dev, 4},         {l.nvml_dev, 4},           {l.gdr_support, 4},
      {l.host_hash, 8},     {l.pid_hash, 8},         {l.bus_id, 8},             {l.comm_ptr, 8},
      {l.cuda_comp_cap, 4}, {l.total_global_mem, 8}, {l.fabric_info, l.fabric_info_size},
      {l.cu_mem_support, 4}, {l.version, 4}};
  if (l.gpu_uuid != SIZE_MAX) f.push_back({l.gpu_uuid, 16});
  if (l.mlo_part != SIZE_MAX) f.push_back({l.mlo_part, 4});
  return f;
}

// (offset, size) of the AG3 fields, topoRanks' arrays at their place in it.
std::vector<std::pair<size_t, size_t>> TopoFields(const TopoInfoLayout& l) {
  const size_t arr = 4 * l.max_channels;
  std::vector<std::pair<size_t, size_t>> f = {
      {l.graph_info, l.graph_info_entry * l.num_algorithms}, {l.topo_ranks + l.ring_recv, arr},
      {l.topo_ranks + l.ring_send, arr},      {l.topo_ranks + l.ring_prev, arr},
      {l.topo_ranks + l.ring_next, arr},      {l.topo_ranks + l.tree_to_parent, arr},
      {l.topo_ranks + l.tree_to_child0, arr}, {l.topo_ranks + l.tree_to_child1, arr},
      {l.topo_ranks + l.nvls_heads, arr},     {l.topo_ranks + l.nvls_head_num, 4},
      {l.cpu_arch, 4},                        {l.cpu_vendor, 4}};
  if (l.cross_nic_ring != SIZE_MAX) f.push_back({l.topo_ranks + l.cross_nic_ring, 4});
  return f;
}

// No two fields overlap and all lie inside the record.
void CheckDisjoint(std::vector<std::pair<size_t, size_t>> fields, size_t size) {
  std::sort(fields.begin(), fields.end());
  for (size_t i = 0; i < fields.size(); ++i) {
    INFO("field at " << fields[i].first << " (" << fields[i].second << " bytes) of a " << size << "-byte record");
    CHECK(fields[i].first + fields[i].second <= size);
    if (i + 1 < fields.size()) CHECK(fields[i].first + fields[i].second <= fields[i + 1].first);
  }
}

}  // namespace

TEST_CASE("every wire profile's record layouts are disjoint and inside their records",
          "[bootstrap][profile]") {
  for (const WireProfile& p : AllWireProfiles()) {
    INFO("NCCL " << p.name);
    CheckDisjoint(PeerFields(p.peer_info), p.peer_info.size);
    CheckDisjoint(TopoFields(p.topo_info), p.topo_info.size);
  }
}

TEST_CASE("2.27.7 has no crossNicRing: topoRanks fields sit 4 bytes lower than in 2.28.9",
          "[bootstrap][profile]") {
  const WireProfile& p27 = Profile(22707);
  const WireProfile& p28 = Profile(22809);
  CHECK(p27.topo_info.size == 2288);
  CHECK(p27.topo_info.cross_nic_ring == SIZE_MAX);
  CHECK(p27.topo_info.ring_recv + 4 == p28.topo_info.ring_recv);
  CHECK(p27.topo_info.nvls_head_num + 4 == p28.topo_info.nvls_head_num);
  CHECK(p27.topo_info.cpu_vendor + 4 == p28.topo_info.cpu_vendor);
  CHECK(p27.allgather == AllGatherAlgorithm::kPlainRing);
  // A virtual rank's ringRecv of channel 0 is at the start of topoRanks.
  VirtualIdentity who;
  who.comm_rank = 5;
  VirtualNodeLayout node;
  node.ranks = {5};
  const Bytes topo = MakeTopoInfo(p27, DefaultTopoInfoTemplate(p27), who, node);
  REQUIRE(topo.size() == 2288);
  CHECK(ReadAt<int32_t>(topo.data(), p27.topo_info.topo_ranks) == 5);
}

TEST_CASE("2.30.7 peer infos: each virtual GPU its own UUID, fields after it 16 bytes on",
          "[bootstrap][profile]") {
  const WireProfile& p = Profile(23007);
  const PeerInfoLayout& l = p.peer_info;
  CHECK(l.size == 144);
  CHECK(l.gpu_uuid == 48);
  CHECK(l.comm_ptr == 64);
  CHECK(l.version == 128);
  Bytes tmpl = DefaultPeerInfoTemplate(p);
  for (size_t k = 0; k < 16; ++k) tmpl[l.gpu_uuid + k] = 0xab;  // the real rank's UUID
  VirtualIdentity a, b;
  a.comm_rank = 1, a.global_rank = 1, a.node = 7;
  b.comm_rank = 2, b.global_rank = 2, b.node = 7;  // same virtual host
  const Bytes pa = MakePeerInfo(p, tmpl, a, 0x1234);
  const Bytes pb = MakePeerInfo(p, tmpl, b, 0x1234);
  const Bytes pa_other_comm = MakePeerInfo(p, tmpl, a, 0x9876);
  auto uuid = [&](const Bytes& r) { return std::string(r.begin() + l.gpu_uuid, r.begin() + l.gpu_uuid + 16); };
  CHECK(uuid(pa) != uuid(pb));
  CHECK(uuid(pa) != uuid(tmpl));
  CHECK(uuid(pa) == uuid(pa_other_comm));  // a GPU has one UUID in every communicator
  CHECK(ReadAt<int32_t>(pa.data(), l.mlo_part) == -1);
  CHECK(ReadAt<int32_t>(pa.data(), l.version) == 23007);
  CHECK(ReadAt<int32_t>(pa.data(), l.cuda_comp_cap) == 90);
  CHECK(ReadAt<uint64_t>(pa.data(), l.comm_ptr) == 0);
}

TEST_CASE("releases before 2.30 have no GPU UUID in their peer infos", "[bootstrap][profile]") {
  for (int code : {22707, 22809, 22907}) {
    const WireProfile& p = Profile(code);
    INFO("NCCL " << p.name);
    CHECK(p.peer_info.gpu_uuid == SIZE_MAX);
    const Bytes tmpl = DefaultPeerInfoTemplate(p);
    VirtualIdentity who;
    who.global_rank = 3;
    CHECK(MakePeerInfo(p, tmpl, who, 1).size() == p.peer_info.size);
  }
}

}  // namespace prism::bootstrap
