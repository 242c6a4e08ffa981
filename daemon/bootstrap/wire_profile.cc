#include "daemon/bootstrap/wire_profile.h"

#include <climits>
#include <cstdint>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/nccl_version.h"

namespace prism::bootstrap {
namespace {

PeerInfoLayout PeerInfo2_28() {
  PeerInfoLayout p;
  p.size = 120;
  p.rank = 0;
  p.cuda_dev = 4;
  p.nvml_dev = 8;
  p.host_hash = 16;
  p.pid_hash = 24;
  p.bus_id = 40;
  p.comm_ptr = 48;
  p.fabric_info = 72;
  p.fabric_info_size = 36;
  p.cu_mem_support = 108;
  p.version = 112;
  return p;
}

TopoInfoLayout TopoInfo2_28() {
  TopoInfoLayout t;
  t.size = 2292;
  t.graph_info = 0;
  t.graph_info_entry = 32;
  t.num_algorithms = 7;
  t.topo_ranks = 224;
  t.cross_nic_ring = 0;
  t.max_channels = 64;
  t.ring_recv = 4;
  t.ring_send = 260;
  t.ring_prev = 516;
  t.ring_next = 772;
  t.tree_to_parent = 1028;
  t.tree_to_child0 = 1284;
  t.tree_to_child1 = 1540;
  t.nvls_heads = 1796;
  t.nvls_head_num = 2052;
  t.cpu_arch = 2280;
  t.cpu_vendor = 2284;
  return t;
}

WireProfile Profile2_28_9() {
  WireProfile w;
  w.name = "2.28.9";
  w.version_code = 22809;
  w.complete = true;
  w.allgather = AllGatherAlgorithm::kDoubleRing;
  w.ext_info_size = 172;
  w.ext_listen_root_addr = 16;
  w.ext_connect_info = 44;
  w.peer_info = PeerInfo2_28();
  w.topo_info = TopoInfo2_28();
  w.init_ops = {RingOp::kRingAllInfo, RingOp::kPeerInfo, RingOp::kTopoInfo};
  w.split_child_ops = w.init_ops;
  return w;
}

// The profiles below are partial: their facts come from NCCL's source at
// each tag (docs/nccl-releases.md, sizes and offsets checked
// by compiling against the tag's headers), and none has yet served a real
// rank of that release, so SelectWireProfile refuses them (issue 10). What a
// release does that no field can say is listed in that file's section "not
// expressible as profile data"; until the daemon learns it, those releases
// stay refused whatever their data says.

// ncclTopoRanks without crossNicRing (before 2.28): eight int[channels]
// arrays from offset 0, then nvlsHeadNum.
void SetTopoRanksWithoutCrossNic(TopoInfoLayout& t, size_t channels) {
  const size_t a = 4 * channels;
  t.cross_nic_ring = SIZE_MAX;
  t.max_channels = channels;
  t.ring_recv = 0, t.ring_send = a, t.ring_prev = 2 * a, t.ring_next = 3 * a;
  t.tree_to_parent = 4 * a, t.tree_to_child0 = 5 * a, t.tree_to_child1 = 6 * a;
  t.nvls_heads = 7 * a, t.nvls_head_num = 8 * a;
}

// 2.27: the plain ring all-gather, and ncclTopoRanks without crossNicRing,
// so every topoRanks field sits 4 bytes lower than in 2.28. No global
// (0xbeef) barrier yet: window registration and device communicators came
// with 2.28.
WireProfile Profile2_27_7() {
  WireProfile w = Profile2_28_9();
  w.name = "2.27.7";
  w.version_code = 22707;
  // Served a real 2.27.7 rank on the GPU host (2026-12-01: 64 ranks, 16
  // groups, collectives, destroy; test/fixtures/wire/gpu-n64-r0-nccl2.27.7).
  w.complete = true;
  w.allgather = AllGatherAlgorithm::kPlainRing;
  TopoInfoLayout& t = w.topo_info;
  t.size = 2288;
  SetTopoRanksWithoutCrossNic(t, 64);
  t.cpu_arch = 2276, t.cpu_vendor = 2280;
  w.tag_global_barrier = kTagAbsent;
  return w;
}

// 2.26: as 2.27 but ncclPeerInfo has no totalGlobalMem (104 bytes, fabricInfo
// right after cudaCompCap) and allGatherInfo no localRanks (2284 bytes).
WireProfile Profile2_26_6() {
  WireProfile w = Profile2_27_7();
  w.name = "2.26.6";
  w.version_code = 22606;
  // Served a real 2.26.6 rank on the GPU host (2026-12-01, as 2.27.7;
  // test/fixtures/wire/gpu-n64-r0-nccl2.26.6).
  w.complete = true;
  PeerInfoLayout& p = w.peer_info;
  p.size = 104;
  p.total_global_mem = SIZE_MAX;
  p.fabric_info = 60;
  p.cu_mem_support = 96;
  p.version = 100;
  w.topo_info.size = 2284;
  return w;
}

// 2.25: the RAS part of the ring record is 40 bytes (no hostHash/pidHash),
// so the record is 104 bytes. commHash is DJB2a, a split child's hashes the
// text "<parent hash>-<splitCount>-<color>" (checked against a real 2.25.1
// and 2.24.3 rank: world 0xb5ea249cf0cc4da2 -> child 0x9f656c5352c2b98e).
WireProfile Profile2_25_1() {
  WireProfile w = Profile2_26_6();
  w.name = "2.25.1";
  w.version_code = 22501;
  // 2.23.4 .. 2.25.1 served real ranks on the GPU host (2026-12-01, as
  // 2.27.7; test/fixtures/wire/gpu-n64-r0-nccl2.2{3.4,4.3,5.1}).
  w.comm_hash = CommHashScheme::kDjb2aCountColor;
  w.ring_record_size = 104;
  return w;
}

// 2.24: MAXCHANNELS 32, so every topoRanks array is half as long.
WireProfile Profile2_24_3() {
  WireProfile w = Profile2_25_1();
  w.name = "2.24.3";
  w.version_code = 22403;
  TopoInfoLayout& t = w.topo_info;
  t.size = 1260;
  SetTopoRanksWithoutCrossNic(t, 32);
  t.cpu_arch = 1252, t.cpu_vendor = 1256;
  return w;
}

// 2.23: the first release with this bootstrap (root, ring record, ack). No
// RAS (64-byte ring record) and no ring-connect all-gather yet. A split
// child's hash has no splitCount ("<parent hash>-<color>"; a real 2.23.4
// rank: 0x5f8ee971ccf56932 for the child above).
WireProfile Profile2_23_4() {
  WireProfile w = Profile2_24_3();
  w.name = "2.23.4";
  w.version_code = 22304;
  w.comm_hash = CommHashScheme::kDjb2aColor;
  w.ring_record_size = 64;
  w.ring_record_ras = SIZE_MAX;
  w.ring_connect_ag_size = 0;
  return w;
}

// 2.22: the older bootstrap (notes: "not expressible"); partial, and so is
// 2.21 built from it. A real 2.22.3 rank's first ring all-gather slice is
// 28 bytes (the bare P2P address) where the ring record would be: the
// daemon cannot yet play it. Its data: a 64-byte
// check-in {rank, nranks, root listener, ring listener}; the root answers
// with a bare 28-byte address; the first ring all-gather carries only the
// 28-byte P2P address (proxy addresses and UDS ids follow in two more
// all-gathers, which RingOp cannot name); split colors and keys are two
// 4-byte all-gathers; the split message has tag -2 and carries 28 bytes;
// ncclConnect is 128 bytes; six algorithms in allGatherInfo.
WireProfile Profile2_22_3() {
  WireProfile w = Profile2_23_4();
  w.name = "2.22.3";
  w.version_code = 22203;
  w.complete = false;
  w.ext_info_size = 64;
  w.ext_iroot = SIZE_MAX;
  w.ext_nroots = SIZE_MAX;
  w.ext_listen_root_addr = 8;
  w.ext_connect_info = 36;
  w.ring_connect_info_size = 28;
  w.ring_record_size = 28;
  w.ring_record_proxy = SIZE_MAX;
  w.ring_record_uds = SIZE_MAX;
  w.ring_record_ras = SIZE_MAX;
  w.split_info_size = 4;
  w.peer_info.version = SIZE_MAX;
  TopoInfoLayout& t = w.topo_info;
  t.size = 1228;
  t.num_algorithms = 6;
  t.topo_ranks = 192;
  t.cpu_arch = 1220, t.cpu_vendor = 1224;
  w.tag_comm_split = -2;
  w.tag_intranode_allgather = 0;
  w.connect_entry_size = 128;
  return w;
}

// 2.21: as 2.22, and ncclPeerInfo has no cuMemSupport either (96 bytes),
// allGatherInfo no cpuArch/cpuVendor (1220 bytes).
WireProfile Profile2_21_5() {
  WireProfile w = Profile2_22_3();
  w.name = "2.21.5";
  w.version_code = 22105;
  w.peer_info.size = 96;
  w.peer_info.cu_mem_support = SIZE_MAX;
  w.topo_info.size = 1220;
  w.topo_info.cpu_arch = SIZE_MAX;
  w.topo_info.cpu_vendor = SIZE_MAX;
  return w;
}

// 2.29: nRanks in the id, a 176-byte check-in, GIN fields at the end of
// ncclPeerInfo (virtual ranks leave them 0: no GIN), two AG3 fields.
WireProfile Profile2_29_7() {
  WireProfile w = Profile2_28_9();
  w.name = "2.29.7";
  w.version_code = 22907;
  // Served a real 2.29.7 rank on the GPU host (2026-12-01, as 2.27.7;
  // test/fixtures/wire/gpu-n64-r0-nccl2.29.7).
  w.complete = true;
  w.unique_id_has_nranks = true;
  w.ext_info_size = 176;
  w.ext_listen_root_addr = 20;
  w.ext_connect_info = 48;
  w.peer_info.size = 128;
  w.topo_info.size = 2300;
  return w;
}

// 2.30: a GPU UUID at 48 in ncclPeerInfo moves everything after it by 16.
WireProfile Profile2_30_7() {
  WireProfile w = Profile2_29_7();
  w.name = "2.30.7";
  w.version_code = 23007;
  // Served a real 2.30.7 rank on the GPU host (2026-12-01, as 2.27.7;
  // test/fixtures/wire/gpu-n64-r0-nccl2.30.7).
  w.complete = true;
  PeerInfoLayout& p = w.peer_info;
  p.size = 144;
  p.gpu_uuid = 48;
  p.comm_ptr = 64;
  p.cuda_comp_cap = 72;
  p.total_global_mem = 80;
  p.fabric_info = 88;
  p.cu_mem_support = 124;
  p.version = 128;
  p.mlo_part = 140;
  w.topo_info.size = 2320;
  return w;
}

std::string SupportedList() {
  std::string out;
  for (const WireProfile& p : AllWireProfiles()) {
    if (!p.complete) continue;
    absl::StrAppend(&out, out.empty() ? "" : ", ", p.name, " (", p.version_code, ")");
  }
  return out;
}

}  // namespace

const std::vector<WireProfile>& AllWireProfiles() {
  static const std::vector<WireProfile>* const kProfiles = new std::vector<WireProfile>{
      Profile2_21_5(), Profile2_22_3(), Profile2_23_4(), Profile2_24_3(), Profile2_25_1(),
      Profile2_26_6(), Profile2_27_7(), Profile2_28_9(), Profile2_29_7(), Profile2_30_7()};
  return *kProfiles;
}

std::string VersionCodeName(int code) { return NcclVersionName(code); }

absl::StatusOr<const WireProfile*> SelectWireProfile(int version_code, bool allow_unverified) {
  for (const WireProfile& p : AllWireProfiles()) {
    if (p.version_code != version_code) continue;
    if (p.complete || allow_unverified) return &p;
    return absl::UnimplementedError(absl::StrCat(
        "NCCL ", p.name, " (version code ", version_code,
        ") is not yet supported by prismd's bootstrap emulation (its wire profile is "
        "partial); supported: ", SupportedList(),
        ". Run the real ranks with a supported NCCL (e.g. PyTorch 2.11's bundled NCCL), or, to verify this "
        "release's profile, start prismd with --allow-unverified-wire-profile."));
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "NCCL version code ", version_code, " (", VersionCodeName(version_code),
      ") has no wire profile in prismd; supported: ", SupportedList(),
      ". Use a supported NCCL, or pass --wire-profile with a supported version."));
}

}  // namespace prism::bootstrap
