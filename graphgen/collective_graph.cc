#include "graphgen/collective_graph.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/limits.h"
#include "common/version.h"
#include "graphgen/split_color.h"
#include "graphgen/yaml_reader.h"

namespace prism::graphgen {
namespace {

namespace pg = prism::graph;


absl::Status FlagError(const std::string& flag, const std::string& reason) {
  return absl::InvalidArgumentError(absl::StrCat(flag, ": ", reason));
}

// Range checks before the conversions to bit/s and ns (no wrap, no overflow).
constexpr uint64_t kMaxGbps = limits::kMaxBandwidthBps / 1'000'000'000;
constexpr double kMaxLatencyUs = static_cast<double>(limits::kMaxLatencyNs) / 1000.0;

absl::Status CheckGbps(const std::string& flag, uint64_t gbps) {
  if (gbps == 0 || gbps > kMaxGbps) return FlagError(flag, absl::StrCat("must be 1 to ", kMaxGbps, " (Gbit/s)"));
  return absl::OkStatus();
}

absl::Status CheckLatencyUs(const std::string& flag, double us) {
  if (!(us >= 0 && us <= kMaxLatencyUs))  // also NaN
    return FlagError(flag, absl::StrCat("must be 0 to ", kMaxLatencyUs, " (microseconds)"));
  return absl::OkStatus();
}

uint64_t LatencyNs(double us) { return static_cast<uint64_t>(std::llround(us * 1000.0)); }  // checked range

bool KindOf(const std::string& op, pg::CollectiveKind& kind) {
  if (op == "allreduce") kind = pg::ALLREDUCE;
  else if (op == "allgather") kind = pg::ALLGATHER;
  else if (op == "reducescatter") kind = pg::REDUCESCATTER;
  else if (op == "alltoall") kind = pg::ALLTOALL;
  else if (op == "broadcast") kind = pg::BROADCAST;
  else return false;
  return true;
}

absl::Status Check(const CollectiveJob& j) {
  pg::CollectiveKind kind;
  const bool sendrecv = j.op == "sendrecv";
  if (!sendrecv && !KindOf(j.op, kind))
    return FlagError("--op", absl::StrCat("unknown op '", Excerpt(j.op),
                                          "'; use allreduce, allgather, reducescatter, alltoall, broadcast or sendrecv"));
  if (j.ranks == 0) return FlagError("--ranks", "must be at least 1");
  if (j.subgroup_size > 1 && j.ranks % j.subgroup_size != 0)
    return FlagError("--subgroups", absl::StrCat(j.subgroup_size, " does not divide --ranks ", j.ranks));
  if (sendrecv && j.ranks < 2) return FlagError("--ranks", "sendrecv needs at least 2 ranks");
  if (j.ranks > limits::kMaxRanks)
    return FlagError("--ranks", absl::StrCat(j.ranks, " is above prismd's limit of ", limits::kMaxRanks, " ranks"));
  if (j.bytes == 0) return FlagError("--bytes", "must be at least 1 byte");
  const bool split_buffer = j.op == "allgather" || j.op == "reducescatter" || j.op == "alltoall";
  if (split_buffer && j.bytes % j.ranks != 0)
    return FlagError("--bytes", absl::StrCat(j.bytes, " is not divisible by --ranks ", j.ranks, " (", j.op,
                                             " splits the buffer evenly among ranks)"));
  if (j.gpus_per_node == 0) return FlagError("--gpus-per-node", "must be at least 1");
  if (j.nics_per_node == 0) return FlagError("--nics-per-node", "must be at least 1");
  if (auto s = CheckGbps("--nic-gbps", j.nic_gbps); !s.ok()) return s;
  if (auto s = CheckGbps("--nvlink-gbps", j.nvlink_gbps); !s.ok()) return s;
  if (auto s = CheckLatencyUs("--nic-latency-us", j.nic_latency_us); !s.ok()) return s;
  if (auto s = CheckLatencyUs("--nvlink-latency-us", j.nvlink_latency_us); !s.ok()) return s;
  if (!j.algo.empty() && j.algo != "ring" && j.algo != "tree" && j.algo != "pat")
    return FlagError("--algo", absl::StrCat("must be ring, tree or pat, got '", Excerpt(j.algo), "'"));
  if (!IsUtf8(j.name)) return FlagError("--name", "must be UTF-8 text");
  if (j.iterations == 0 || j.iterations > limits::kMaxIterations)
    return FlagError("--iterations", absl::StrCat("must be 1 to ", limits::kMaxIterations));
  return absl::OkStatus();
}

// One iteration: the collective once, or one {send +1, recv -1} group.
void AddOps(const CollectiveJob& j, pg::Program& p) {
  pg::CollectiveKind kind = pg::COLLECTIVE_KIND_UNSPECIFIED;
  if (!KindOf(j.op, kind)) {
    p.add_ops()->mutable_group_start();
    auto* s = p.add_ops()->mutable_send();
    s->set_peer(1);
    s->set_peer_relative(true);
    s->set_bytes(j.bytes);
    s->set_label(j.op);
    auto* r = p.add_ops()->mutable_recv();
    r->set_peer(j.ranks - 1);
    r->set_peer_relative(true);
    r->set_bytes(j.bytes);
    r->set_label(j.op);
    p.add_ops()->mutable_group_end();
    return;
  }
  auto* c = p.add_ops()->mutable_collective();
  c->set_kind(kind);
  c->set_bytes(j.bytes);
  c->set_dtype(pg::BF16);
  c->set_algorithm(j.algo == "ring" ? pg::ALGORITHM_RING
                   : j.algo == "tree" ? pg::ALGORITHM_TREE
                   : j.algo == "pat"  ? pg::ALGORITHM_PAT
                                      : pg::ALGORITHM_DEFAULT);
  c->set_root(0);
  c->set_label(j.op);
}

}  // namespace

absl::StatusOr<uint64_t> ParseByteSize(const std::string& text) {
  size_t i = 0;
  uint64_t value = 0;
  while (i < text.size() && std::isdigit(static_cast<unsigned char>(text[i]))) {
    const uint64_t digit = static_cast<uint64_t>(text[i] - '0');
    if (value > (UINT64_MAX - digit) / 10) return FlagError("--bytes", absl::StrCat("'", text, "' is too large"));
    value = value * 10 + digit;
    ++i;
  }
  if (i == 0) return FlagError("--bytes", absl::StrCat("'", text, "' is not a size (examples: 4096, 64K, 1M, 1G)"));
  std::string suffix = text.substr(i);
  for (char& ch : suffix) ch = static_cast<char>(std::toupper(static_cast<unsigned char>(ch)));
  int shift = -1;
  if (suffix.empty() || suffix == "B") shift = 0;
  else if (suffix == "K" || suffix == "KB" || suffix == "KIB") shift = 10;
  else if (suffix == "M" || suffix == "MB" || suffix == "MIB") shift = 20;
  else if (suffix == "G" || suffix == "GB" || suffix == "GIB") shift = 30;
  if (shift < 0) return FlagError("--bytes", absl::StrCat("unknown size suffix in '", text, "' (use K, M or G)"));
  if (shift > 0 && value > (UINT64_MAX >> shift)) return FlagError("--bytes", absl::StrCat("'", text, "' is too large"));
  return value << shift;
}

namespace {

// Appends one split-of-world communicator per group (see CollectiveJob).
void AddSubgroups(const CollectiveJob& j, pg::Graph& g) {
  if (j.subgroup_size <= 1) return;
  const uint32_t size = j.subgroup_size;
  const uint32_t tp_groups = j.ranks / size;
  auto add = [&](pg::CommKind kind, const char* name, uint32_t index, std::vector<uint32_t> members) {
    auto* c = g.add_communicators();
    c->set_id(static_cast<uint32_t>(g.communicators_size() - 1));
    c->set_kind(kind);
    c->set_name(absl::StrCat(name, "[", index, "]"));
    for (uint32_t m : members) c->add_members(m);
    auto* split = c->mutable_split();
    split->set_parent(0);
    split->set_color(PyTorchSplitColor(members));
    split->set_key(0);  // PyTorch: the member's index in the sorted group
  };
  const uint32_t tp_limit = j.max_subgroups ? std::min(j.max_subgroups, tp_groups) : tp_groups;
  for (uint32_t t = 0; t < tp_limit; ++t) {
    std::vector<uint32_t> members;
    for (uint32_t k = 0; k < size; ++k) members.push_back(t * size + k);
    add(pg::COMM_KIND_TP, "tp", t, std::move(members));
  }
  const uint32_t dp_limit = j.max_subgroups ? std::min(j.max_subgroups, size) : size;
  for (uint32_t i = 0; i < dp_limit; ++i) {
    std::vector<uint32_t> members;
    for (uint32_t t = 0; t < tp_groups; ++t) members.push_back(t * size + i);
    add(pg::COMM_KIND_DP, "dp", i, std::move(members));
  }
}

}  // namespace

absl::StatusOr<pg::Graph> GenerateCollectiveGraph(const CollectiveJob& j) {
  if (auto s = Check(j); !s.ok()) return s;
  pg::Graph g;
  auto* job = g.mutable_job();
  job->set_name(j.name.empty() ? absl::StrCat(j.op, "-", j.ranks) : j.name);
  job->set_generator(absl::StrCat(prism::kGraphgenGenerator, " collective"));
  job->set_description(absl::StrCat(j.op, " of ", j.bytes, " bytes over ", j.ranks, " ranks, ", j.iterations,
                                    " iterations"));
  job->set_world_size(j.ranks);
  auto& a = *job->mutable_attributes();
  a["iterations"] = absl::StrCat(j.iterations);
  a["op"] = j.op;
  a["bytes"] = absl::StrCat(j.bytes);
  a["algo"] = j.algo.empty() ? "default" : j.algo;

  auto* cl = g.mutable_cluster();
  cl->set_gpus_per_node(j.gpus_per_node);
  cl->set_nodes((j.ranks + j.gpus_per_node - 1) / j.gpus_per_node);
  cl->mutable_gpu()->set_name("H100");
  cl->mutable_gpu()->set_peak_bf16_flops(989000000000000ull);
  cl->mutable_gpu()->set_hbm_bytes_per_s(3350000000000ull);
  cl->mutable_gpu()->set_memory_bytes(80ull << 30);
  cl->mutable_nic()->set_count(j.nics_per_node);
  cl->mutable_nic()->set_bandwidth_bps(j.nic_gbps * 1000000000ull);
  cl->mutable_nic()->set_latency_ns(LatencyNs(j.nic_latency_us));
  cl->mutable_intra_node()->set_bandwidth_bps(j.nvlink_gbps * 1000000000ull);
  cl->mutable_intra_node()->set_latency_ns(LatencyNs(j.nvlink_latency_us));
  auto* layout = g.mutable_layout();
  layout->set_dp(j.ranks);
  layout->set_tp(1);
  layout->set_pp(1);
  layout->set_cp(1);
  layout->set_ep(1);
  layout->set_vpp(1);

  auto* world = g.add_communicators();
  world->set_id(0);
  world->set_kind(pg::COMM_KIND_WORLD);
  world->set_name("world");
  for (uint32_t r = 0; r < j.ranks; ++r) world->add_members(r);
  world->mutable_init();

  AddSubgroups(j, g);

  auto* p = g.add_programs();
  p->set_id(0);
  p->set_name(j.op);
  p->set_streams(1);
  p->add_comm_slot_names("world");
  AddOps(j, *p);
  for (uint32_t r = 0; r < j.ranks; ++r) {
    auto* rk = g.add_ranks();
    rk->set_rank(r);
    rk->set_program(0);
    rk->set_node(r / j.gpus_per_node);
    rk->set_local_gpu(r % j.gpus_per_node);
    rk->add_comm_slots(0);
  }
  return g;
}

}  // namespace prism::graphgen
