// The wire profiles' layouts hold together, and virtual ranks' records are
// written where each release reads them. Facts: NCCL's source at each tag
// (docs/nccl-releases.md for 2.21.5 .. 2.27.7, 2.29.7 and
// 2.30.7; NCCL's source at v2.28.9-1 for 2.28.9).
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
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

constexpr size_t kNo = SIZE_MAX;  // the release has no such field

// (offset, size) pairs, leaving out fields the release does not have.
using Fields = std::vector<std::pair<size_t, size_t>>;
void AddIfPresent(Fields& f, size_t offset, size_t size) {
  if (offset != kNo) f.push_back({offset, size});
}

// (offset, size) of every ncclPeerInfo field the profile names.
Fields PeerFields(const PeerInfoLayout& l) {
  Fields f = {{l.rank, 4},     {l.cuda_dev, 4}, {l.nvml_dev, 4},      {l.gdr_support, 4},
              {l.host_hash, 8}, {l.pid_hash, 8}, {l.bus_id, 8},        {l.comm_ptr, 8},
              {l.cuda_comp_cap, 4}, {l.fabric_info, l.fabric_info_size}};
  AddIfPresent(f, l.total_global_mem, 8);
  AddIfPresent(f, l.cu_mem_support, 4);
  AddIfPresent(f, l.version, 4);
  AddIfPresent(f, l.gpu_uuid, 16);
  AddIfPresent(f, l.mlo_part, 4);
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
      {l.topo_ranks + l.nvls_heads, arr},     {l.topo_ranks + l.nvls_head_num, 4}};
  AddIfPresent(f, l.cpu_arch, 4);
  AddIfPresent(f, l.cpu_vendor, 4);
  if (l.cross_nic_ring != SIZE_MAX) f.push_back({l.topo_ranks + l.cross_nic_ring, 4});
  return f;
}

// extInfo (root check-in) and the ring record.
Fields ExtFields(const WireProfile& p) {
  Fields f = {{p.ext_rank, 4}, {p.ext_nranks, 4}, {p.ext_listen_root_addr, 28},
              {p.ext_connect_info, p.ring_connect_info_size}};
  AddIfPresent(f, p.ext_iroot, 4);
  AddIfPresent(f, p.ext_nroots, 4);
  return f;
}
Fields RingRecordFields(const WireProfile& p) {
  Fields f = {{p.ring_record_p2p, 28}};
  AddIfPresent(f, p.ring_record_proxy, 28);
  AddIfPresent(f, p.ring_record_uds, 8);
  if (p.ring_record_ras != kNo) f.push_back({p.ring_record_ras, p.ring_record_size - p.ring_record_ras});
  return f;
}

// No two fields overlap and all lie inside the record.
void CheckDisjoint(Fields fields, size_t size) {
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
    CheckDisjoint(ExtFields(p), p.ext_info_size);
    CheckDisjoint(RingRecordFields(p), p.ring_record_size);
    CHECK(p.topo_info.graph_info_entry * p.topo_info.num_algorithms <= p.topo_info.topo_ranks);
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
  for (int code : {22105, 22203, 22304, 22403, 22501, 22606, 22707, 22809, 22907}) {
    const WireProfile& p = Profile(code);
    INFO("NCCL " << p.name);
    CHECK(p.peer_info.gpu_uuid == SIZE_MAX);
    const Bytes tmpl = DefaultPeerInfoTemplate(p);
    VirtualIdentity who;
    who.global_rank = 3;
    CHECK(MakePeerInfo(p, tmpl, who, 1).size() == p.peer_info.size);
  }
}

// Sizes and offsets measured by compiling sizeof/offsetof probes against each
// tag's own headers and structs (docs/nccl-releases.md, "Bootstrap").
// Written out here rather than derived, so that a wrong number in a profile
// fails.
namespace {

struct Measured {
  int code;
  size_t ext_size, ext_iroot, ext_nroots, ext_listen_root, ext_connect_info, ring_connect_info;
  size_t record, record_proxy, record_uds, record_ras;
  size_t peer, peer_comm, peer_comp_cap, peer_total_mem, peer_fabric, peer_cu_mem, peer_version;
  size_t topo, topo_ranks, algorithms, channels, cross_nic, ring_recv, nvls_head_num, cpu_arch, cpu_vendor;
  size_t connect;
};
const Measured kMeasured[] = {
    // code, extInfo (size, iroot, nroots, root listener, ring info, root reply), ring record (size,
    // proxy, uds, ras), ncclPeerInfo (size, comm, cudaCompCap, totalGlobalMem, fabricInfo, cuMemSupport,
    // version), allGatherInfo (size, topoRanks, algorithms, MAXCHANNELS, crossNicRing, ringRecv,
    // nvlsHeadNum, cpuArch, cpuVendor), ncclConnect
    {22105,  64, kNo, kNo, 8, 36, 28,  28, kNo, kNo, kNo,  96, 48, 56, kNo, 60, kNo, kNo,
     1220, 192, 6, 32, kNo, 0, 1024, kNo, kNo,  128},
    {22203,  64, kNo, kNo, 8, 36, 28,  28, kNo, kNo, kNo,  104, 48, 56, kNo, 60, 96, kNo,
     1228, 192, 6, 32, kNo, 0, 1024, 1220, 1224,  128},
    {22304,  172, 8, 12, 16, 44, 128,  64, 28, 56, kNo,  104, 48, 56, kNo, 60, 96, 100,
     1260, 224, 7, 32, kNo, 0, 1024, 1252, 1256,  256},
    {22403,  172, 8, 12, 16, 44, 128,  104, 28, 56, 64,  104, 48, 56, kNo, 60, 96, 100,
     1260, 224, 7, 32, kNo, 0, 1024, 1252, 1256,  256},
    {22501,  172, 8, 12, 16, 44, 128,  104, 28, 56, 64,  104, 48, 56, kNo, 60, 96, 100,
     2284, 224, 7, 64, kNo, 0, 2048, 2276, 2280,  256},
    {22606,  172, 8, 12, 16, 44, 128,  120, 28, 56, 64,  104, 48, 56, kNo, 60, 96, 100,
     2284, 224, 7, 64, kNo, 0, 2048, 2276, 2280,  256},
    {22707,  172, 8, 12, 16, 44, 128,  120, 28, 56, 64,  120, 48, 56, 64, 72, 108, 112,
     2288, 224, 7, 64, kNo, 0, 2048, 2276, 2280,  256},
    {22809,  172, 8, 12, 16, 44, 128,  120, 28, 56, 64,  120, 48, 56, 64, 72, 108, 112,
     2292, 224, 7, 64, 0, 4, 2052, 2280, 2284,  256},
    {22907,  176, 8, 12, 20, 48, 128,  120, 28, 56, 64,  128, 48, 56, 64, 72, 108, 112,
     2300, 224, 7, 64, 0, 4, 2052, 2280, 2284,  256},
    {23007,  176, 8, 12, 20, 48, 128,  120, 28, 56, 64,  144, 64, 72, 80, 88, 124, 128,
     2320, 224, 7, 64, 0, 4, 2052, 2280, 2284,  256},
};

}  // namespace

TEST_CASE("profiles exist for NCCL 2.21.5 .. 2.30.7, and those served on the GPU host are complete",
          "[bootstrap][profile]") {
  const auto served = [](int code) { return code >= 22304; };  // 2.23.4 .. 2.30.7
  std::vector<int> codes;
  for (const WireProfile& p : AllWireProfiles()) {
    codes.push_back(p.version_code);
    CHECK(p.name == VersionCodeName(p.version_code));
    // Complete: the releases whose real ranks prismd has served on the GPU host.
    CHECK(p.complete == served(p.version_code));
    // commHash: DJB2a up to 2.25 (2.23 without splitCount in a child's text).
    const CommHashScheme want = p.version_code >= 22606   ? CommHashScheme::kAccumulator
                                : p.version_code >= 22403 ? CommHashScheme::kDjb2aCountColor
                                                          : CommHashScheme::kDjb2aColor;
    CHECK(p.comm_hash == want);
  }
  CHECK(codes == std::vector<int>{22105, 22203, 22304, 22403, 22501, 22606, 22707, 22809, 22907, 23007});
  for (int code : codes) {
    if (served(code)) continue;
    auto s = SelectWireProfile(code);
    REQUIRE_FALSE(s.ok());
    CHECK(absl::IsUnimplemented(s.status()));
    CHECK(std::string(s.status().message()).find("--allow-unverified-wire-profile") != std::string::npos);
    // Served only when asked for, to verify it against a real rank.
    auto unverified = SelectWireProfile(code, /*allow_unverified=*/true);
    REQUIRE(unverified.ok());
    CHECK((*unverified)->version_code == code);
    CHECK_FALSE((*unverified)->complete);
  }
  CHECK(absl::IsInvalidArgument(SelectWireProfile(22000, true).status()));  // no profile at all
}

TEST_CASE("profile layouts equal the sizes and offsets measured against each tag's headers",
          "[bootstrap][profile]") {
  for (const Measured& m : kMeasured) {
    const WireProfile& p = Profile(m.code);
    INFO("NCCL " << p.name);
    CHECK(sizeof(UniqueId) == 128);        // the same id layout in every release
    CHECK(kUniqueIdAddrOffset == 8);
    CHECK(p.unique_id_has_nranks == (m.code >= 22907));
    CHECK(p.ext_info_size == m.ext_size);
    CHECK(p.ext_rank == 0);
    CHECK(p.ext_nranks == 4);
    CHECK(p.ext_iroot == m.ext_iroot);
    CHECK(p.ext_nroots == m.ext_nroots);
    CHECK(p.ext_listen_root_addr == m.ext_listen_root);
    CHECK(p.ext_connect_info == m.ext_connect_info);
    CHECK(p.ring_connect_info_size == m.ring_connect_info);
    CHECK(p.ring_record_size == m.record);
    CHECK(p.ring_record_p2p == 0);
    CHECK(p.ring_record_proxy == m.record_proxy);
    CHECK(p.ring_record_uds == m.record_uds);
    CHECK(p.ring_record_ras == m.record_ras);
    const PeerInfoLayout& l = p.peer_info;
    CHECK(l.size == m.peer);
    CHECK(l.rank == 0);
    CHECK(l.cuda_dev == 4);
    CHECK(l.nvml_dev == 8);
    CHECK(l.gdr_support == 12);
    CHECK(l.host_hash == 16);
    CHECK(l.pid_hash == 24);
    CHECK(l.bus_id == 40);
    CHECK(l.comm_ptr == m.peer_comm);
    CHECK(l.cuda_comp_cap == m.peer_comp_cap);
    CHECK(l.total_global_mem == m.peer_total_mem);
    CHECK(l.fabric_info == m.peer_fabric);
    CHECK(l.fabric_info_size == 36);
    CHECK(l.cu_mem_support == m.peer_cu_mem);
    CHECK(l.version == m.peer_version);
    const TopoInfoLayout& t = p.topo_info;
    CHECK(t.size == m.topo);
    CHECK(t.graph_info == 0);
    CHECK(t.graph_info_entry == 32);
    CHECK(t.num_algorithms == m.algorithms);
    CHECK(t.topo_ranks == m.topo_ranks);
    CHECK(t.max_channels == m.channels);
    CHECK(t.cross_nic_ring == m.cross_nic);
    // The eight int[MAXCHANNELS] arrays follow each other, then nvlsHeadNum.
    const size_t a = 4 * m.channels;
    CHECK(t.ring_recv == m.ring_recv);
    CHECK(t.ring_send == m.ring_recv + a);
    CHECK(t.ring_prev == m.ring_recv + 2 * a);
    CHECK(t.ring_next == m.ring_recv + 3 * a);
    CHECK(t.tree_to_parent == m.ring_recv + 4 * a);
    CHECK(t.tree_to_child0 == m.ring_recv + 5 * a);
    CHECK(t.tree_to_child1 == m.ring_recv + 6 * a);
    CHECK(t.nvls_heads == m.ring_recv + 7 * a);
    CHECK(t.nvls_head_num == m.nvls_head_num);
    CHECK(t.cpu_arch == m.cpu_arch);
    CHECK(t.cpu_vendor == m.cpu_vendor);
    CHECK(p.connect_entry_size == m.connect);
    CHECK(p.split_info_size == (m.code < 22304 ? 4u : 8u));  // two int all-gathers before 2.23
  }
}

TEST_CASE("all-gather algorithm, ring-connect all-gather and tags per release", "[bootstrap][profile]") {
  for (const WireProfile& p : AllWireProfiles()) {
    INFO("NCCL " << p.name);
    const int v = p.version_code;
    CHECK(p.allgather == (v < 22809 ? AllGatherAlgorithm::kPlainRing : AllGatherAlgorithm::kDoubleRing));
    CHECK(p.ring_connect_ag_size == (v < 22403 ? 0u : 2u));  // generic.cc's {useNetPXN, useGdr} from 2.24
    CHECK(p.tag_comm_split == (v < 22304 ? -2 : 1 << 29));
    CHECK(p.tag_intranode_allgather == (v < 22304 ? 0 : 1 << 28));
    CHECK(p.tag_global_barrier == (v < 22809 ? kTagAbsent : 0xbeef));
    const std::vector<RingOp> ops = {RingOp::kRingAllInfo, RingOp::kPeerInfo, RingOp::kTopoInfo};
    CHECK(p.init_ops == ops);
    CHECK(p.split_child_ops == ops);
  }
}

TEST_CASE("records of older releases: absent fields are not written, arrays are MAXCHANNELS long",
          "[bootstrap][profile]") {
  VirtualIdentity who;
  who.comm_rank = 6, who.global_rank = 6, who.node = 3, who.local_gpu = 1;
  VirtualNodeLayout node;
  node.ranks = {5, 6, 7};

  SECTION("2.21.5: no cuMemSupport/version in ncclPeerInfo, no cpuArch/cpuVendor in allGatherInfo") {
    const WireProfile& p = Profile(22105);
    const Bytes peer = MakePeerInfo(p, DefaultPeerInfoTemplate(p), who, 0x55);
    REQUIRE(peer.size() == 96);
    CHECK(ReadAt<int32_t>(peer.data(), 56) == 90);  // cudaCompCap
    for (size_t i = 60; i < 96; ++i) CHECK(peer[i] == 0);  // fabricInfo to the end: never MNNVL
    const Bytes topo = MakeTopoInfo(p, DefaultTopoInfoTemplate(p), who, node);
    REQUIRE(topo.size() == 1220);
    CHECK(ReadAt<int32_t>(topo.data(), 5 * 32 + 4) == 0);  // NVLSTree channels, the 6th and last entry
    CHECK(ReadAt<int32_t>(topo.data(), 192) == 5);         // ringRecv[0] right after six graphInfo entries
    CHECK(ReadAt<int32_t>(topo.data(), 192 + 1024) == 0);  // nvlsHeadNum is the record's last field
    const Bytes ring = MakeRingRecord(p, {0x7f000001, 4242}, 9);
    REQUIRE(ring.size() == 28);  // the first of three address all-gathers: the P2P listener only
    CHECK(ring[0] == 2);         // AF_INET
  }
  SECTION("2.22.3: cuMemSupport at 96, cpuArch/cpuVendor after topoRanks") {
    const WireProfile& p = Profile(22203);
    const Bytes peer = DefaultPeerInfoTemplate(p);
    REQUIRE(peer.size() == 104);
    CHECK(ReadAt<int32_t>(peer.data(), 96) == 1);
    CHECK(ReadAt<int32_t>(peer.data(), 100) == 0);  // tail padding, no version field yet
    const Bytes topo = DefaultTopoInfoTemplate(p);
    REQUIRE(topo.size() == 1228);
    CHECK(ReadAt<int32_t>(topo.data(), 1220) == 1);
    CHECK(ReadAt<int32_t>(topo.data(), 1224) == 1);
  }
  SECTION("2.23.4 .. 2.26.6: version at 100; 64/104/120-byte ring records") {
    for (int code : {22304, 22403, 22501, 22606}) {
      const WireProfile& p = Profile(code);
      INFO("NCCL " << p.name);
      const Bytes peer = MakePeerInfo(p, DefaultPeerInfoTemplate(p), who, 0x55);
      REQUIRE(peer.size() == 104);
      CHECK(ReadAt<int32_t>(peer.data(), 100) == code);
      CHECK(ReadAt<int32_t>(peer.data(), 96) == 1);  // cuMemSupport
      for (size_t i = 60; i < 96; ++i) CHECK(peer[i] == 0);
      const Bytes ring = MakeRingRecord(p, {0x7f000001, 4242}, 0x1122334455667788ull);
      REQUIRE(ring.size() == p.ring_record_size);
      CHECK(ReadAt<uint64_t>(ring.data(), 56) == 0x1122334455667788ull);  // peerUDS
      for (size_t i = 64; i < ring.size(); ++i) CHECK(ring[i] == 0);     // RAS part: all zero
    }
  }
  SECTION("MAXCHANNELS 32 (2.24.3) and 64 (2.25.1): each array ends where the next begins") {
    for (int code : {22403, 22501}) {
      const WireProfile& p = Profile(code);
      INFO("NCCL " << p.name);
      const size_t ch = code < 22501 ? 32 : 64;
      const Bytes topo = MakeTopoInfo(p, DefaultTopoInfoTemplate(p), who, node);
      const uint8_t* r = topo.data() + 224;
      CHECK(ReadAt<int32_t>(r, 4 * (ch - 1)) == 5);        // ringRecv[last] = node's first rank
      CHECK(ReadAt<int32_t>(r, 4 * ch) == 7);              // ringSend[0] = node's last rank
      CHECK(ReadAt<int32_t>(r, 2 * 4 * ch) == 5);          // ringPrev[0]
      CHECK(ReadAt<int32_t>(r, 3 * 4 * ch) == 7);          // ringNext[0]
      CHECK(ReadAt<int32_t>(r, 8 * 4 * ch) == 0);          // nvlsHeadNum
      CHECK(ReadAt<int32_t>(topo.data(), 224 + 8 * 4 * ch + 4) == 1);  // cpuArch right after
    }
  }
}

}  // namespace prism::bootstrap
