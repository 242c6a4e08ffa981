#include "daemon/bootstrap/wire_profile.h"

#include <climits>
#include <cstdint>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

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
// each tag (../shared/nccl-versions-wire-notes.md, sizes checked by
// compiling against the tag's headers), and none has yet served a real rank
// of that release, so SelectWireProfile refuses them (issue 10).

// 2.27: the plain ring all-gather, and ncclTopoRanks without crossNicRing,
// so every topoRanks field sits 4 bytes lower than in 2.28.
WireProfile Profile2_27_7() {
  WireProfile w = Profile2_28_9();
  w.name = "2.27.7";
  w.version_code = 22707;
  w.complete = false;
  w.allgather = AllGatherAlgorithm::kPlainRing;
  TopoInfoLayout& t = w.topo_info;
  t.size = 2288;
  t.cross_nic_ring = SIZE_MAX;
  t.ring_recv = 0, t.ring_send = 256, t.ring_prev = 512, t.ring_next = 768;
  t.tree_to_parent = 1024, t.tree_to_child0 = 1280, t.tree_to_child1 = 1536;
  t.nvls_heads = 1792, t.nvls_head_num = 2048;
  t.cpu_arch = 2276, t.cpu_vendor = 2280;
  return w;
}

// 2.29: nRanks in the id, a 176-byte check-in, GIN fields at the end of
// ncclPeerInfo (virtual ranks leave them 0: no GIN), two AG3 fields.
WireProfile Profile2_29_7() {
  WireProfile w = Profile2_28_9();
  w.name = "2.29.7";
  w.version_code = 22907;
  w.complete = false;
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
      Profile2_27_7(), Profile2_28_9(), Profile2_29_7(), Profile2_30_7()};
  return *kProfiles;
}

std::string VersionCodeName(int code) {
  // NCCL_VERSION(X,Y,Z) = X*10000 + Y*100 + Z for versions >= 2.9.
  return absl::StrCat(code / 10000, ".", (code / 100) % 100, ".", code % 100);
}

absl::StatusOr<const WireProfile*> SelectWireProfile(int version_code) {
  for (const WireProfile& p : AllWireProfiles()) {
    if (p.version_code != version_code) continue;
    if (p.complete) return &p;
    return absl::UnimplementedError(absl::StrCat(
        "NCCL ", p.name, " (version code ", version_code,
        ") is not yet supported by prismd's bootstrap emulation (its wire profile is "
        "partial); supported: ", SupportedList(),
        ". Run the real ranks with a supported NCCL (e.g. PyTorch 2.11's bundled NCCL)."));
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "NCCL version code ", version_code, " (", VersionCodeName(version_code),
      ") has no wire profile in prismd; supported: ", SupportedList(),
      ". Use a supported NCCL, or pass --wire-profile with a supported version."));
}

}  // namespace prism::bootstrap
