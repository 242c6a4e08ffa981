#include "graphgen/fidelity_graph.h"

#include <algorithm>
#include <cmath>
#include <functional>

#include "absl/strings/str_cat.h"
#include "common/limits.h"
#include "common/version.h"
#include "graphgen/collective_graph.h"
#include "graphgen/input_file.h"
#include "graphgen/split_color.h"
#include "graphgen/yaml_reader.h"

namespace prism::graphgen {
namespace {

namespace pg = prism::graph;

// Slots of the step programs.
enum Slot : uint32_t { kWorld = 0, kTp = 1, kPp = 2, kDp = 3 };

absl::Status GetSize(MapReader& m, const std::string& key, uint64_t& out) {
  if (!m.Has(key)) return absl::OkStatus();
  std::string text;
  if (auto s = m.GetString(key, text); !s.ok()) return s;
  auto bytes = ParseByteSize(text);
  if (!bytes.ok()) return KeyError(m.PathOf(key), absl::StrCat("'", Excerpt(text), "' is not a size (4096, 64K, 1M)"));
  out = *bytes;
  return absl::OkStatus();
}

absl::Status ParseStep(const YAML::Node& doc, FidelitySpec& s) {
  MapReader layout(doc["layout"], "layout");
  if (auto st = layout.CheckIsMap(); !st.ok()) return st;
  for (auto [key, v] : {std::pair{"tp", &s.tp}, {"pp", &s.pp}, {"dp", &s.dp}})
    if (auto st = layout.GetUint32(key, *v); !st.ok()) return st;
  if (auto st = layout.Finish(); !st.ok()) return st;
  if (s.tp < 1 || s.pp < 1 || s.dp < 2)
    return KeyError("layout", "tp and pp must be at least 1, dp at least 2 (tp 1: a step without TP all-reduces; "
                              "pp 1: without pipeline sends)");
  MapReader step(doc["step"], "step");
  if (auto st = step.CheckIsMap(); !st.ok()) return st;
  if (auto st = step.GetUint32("microbatches", s.microbatches); !st.ok()) return st;
  if (auto st = step.GetUint32("layers", s.layers); !st.ok()) return st;
  for (auto [key, v] : {std::pair{"fwd_us", &s.fwd_us}, {"bwd_us", &s.bwd_us}, {"optimizer_us", &s.optimizer_us}})
    if (auto st = step.GetUint(key, *v, 0); !st.ok()) return st;
  for (auto [key, v] : {std::pair{"tp_bytes", &s.tp_bytes}, {"pp_bytes", &s.pp_bytes}, {"dp_bytes", &s.dp_bytes}})
    if (auto st = GetSize(step, key, *v); !st.ok()) return st;
  if (auto st = step.Finish(); !st.ok()) return st;
  if ((s.tp > 1 && s.tp_bytes == 0) || (s.pp > 1 && s.pp_bytes == 0) || s.dp_bytes == 0)
    return KeyError("step", "tp_bytes (unless layout.tp is 1), pp_bytes (unless layout.pp is 1) and dp_bytes are "
                            "required (e.g. 4M)");
  if (s.dp_bytes % s.dp != 0) return KeyError("step.dp_bytes", absl::StrCat("must be divisible by layout.dp ", s.dp));
  const uint64_t us_limit = limits::kMaxOpDurationNs / 1000;
  for (uint64_t us : {s.fwd_us, s.bwd_us, s.optimizer_us})
    if (us > us_limit) return KeyError("step", absl::StrCat("durations must be at most ", us_limit, " us"));
  return absl::OkStatus();
}

absl::Status ParseStraggler(const YAML::Node& doc, FidelitySpec& s) {
  if (!doc["straggler"]) return absl::OkStatus();
  MapReader m(doc["straggler"], "straggler");
  if (auto st = m.CheckIsMap(); !st.ok()) return st;
  uint32_t rank = 0;
  if (!m.Has("rank") || !m.Has("compute_scale"))
    return KeyError("straggler", "needs rank and compute_scale (e.g. {rank: 3, compute_scale: 1.1})");
  if (auto st = m.GetUint32("rank", rank, 0); !st.ok()) return st;
  if (auto st = m.GetDouble("compute_scale", s.straggler_scale, 0.01, 100.0); !st.ok()) return st;
  if (auto st = m.Finish(); !st.ok()) return st;
  if (rank >= s.ranks())
    return KeyError("straggler.rank", absl::StrCat(rank, " is outside the ", s.ranks(), "-rank layout"));
  const double us_limit = static_cast<double>(limits::kMaxOpDurationNs / 1000);
  if (static_cast<double>(std::max({s.fwd_us, s.bwd_us, s.optimizer_us})) * s.straggler_scale > us_limit)
    return KeyError("straggler.compute_scale", absl::StrCat("scales a duration past ", us_limit, " us"));
  s.straggler_rank = rank;
  return absl::OkStatus();
}

absl::Status ParseSweep(const YAML::Node& doc, FidelitySpec& s, MapReader& top) {
  if (auto st = top.GetUint32("world", s.world); !st.ok()) return st;
  if (s.world < 2) return KeyError("world", "a sweep needs at least 2 ranks");
  const YAML::Node sweep = top.Child("sweep");
  if (!sweep.IsMap()) return KeyError("sweep", "must be a mapping with ops: and sizes:");
  MapReader m(sweep, "sweep");
  const YAML::Node ops = m.Child("ops"), sizes = m.Child("sizes");
  if (auto st = m.Finish(); !st.ok()) return st;
  if (!ops.IsSequence() || ops.size() == 0) return KeyError("sweep.ops", "must be a non-empty list");
  if (!sizes.IsSequence() || sizes.size() == 0) return KeyError("sweep.sizes", "must be a non-empty list");
  for (const YAML::Node& o : ops) {
    const std::string op = o.as<std::string>();
    if (op != "allreduce" && op != "allgather" && op != "reducescatter" && op != "sendrecv")
      return KeyError("sweep.ops", absl::StrCat("unknown op '", Excerpt(op),
                                                "'; use allreduce, allgather, reducescatter or sendrecv"));
    s.ops.push_back(op);
  }
  for (const YAML::Node& z : sizes) {
    auto bytes = ParseByteSize(z.as<std::string>());
    if (!bytes.ok() || *bytes == 0)
      return KeyError("sweep.sizes", absl::StrCat("'", Excerpt(z.as<std::string>()), "' is not a size (64K, 1M)"));
    if (*bytes % s.world != 0)
      return KeyError("sweep.sizes", absl::StrCat(*bytes, " is not divisible by world ", s.world));
    s.sizes.push_back(*bytes);
  }
  return absl::OkStatus();
}

absl::Status ParseDocument(const YAML::Node& doc, FidelitySpec& s) {
  MapReader top(doc, "");
  if (auto st = top.CheckIsMap(); !st.ok()) return st;
  if (auto st = top.GetString("name", s.name); !st.ok()) return st;
  if (auto st = top.GetString("kind", s.kind); !st.ok()) return st;
  if (s.name.empty()) return KeyError("name", "is required");
  if (s.kind != "step" && s.kind != "sweep") return KeyError("kind", "must be step or sweep");
  MapReader link(top.Child("link"), "link");
  if (auto st = link.GetDouble("gbps", s.link_gbps, 0, static_cast<double>(limits::kMaxBandwidthBps) / 1e9); !st.ok())
    return st;
  if (auto st = link.GetDouble("latency_us", s.link_latency_us, -1e-9,
                               static_cast<double>(limits::kMaxLatencyNs) / 1000.0);
      !st.ok())
    return st;
  if (auto st = link.Finish(); !st.ok()) return st;
  if (auto st = top.GetUint32("iterations", s.iterations); !st.ok()) return st;
  if (auto st = top.GetUint32("warmup", s.warmup, 0); !st.ok()) return st;
  if (auto st = top.GetString("algorithm", s.algorithm); !st.ok()) return st;
  if (s.algorithm != "ring" && s.algorithm != "tree" && s.algorithm != "pat")
    return KeyError("algorithm", "must be ring, tree or pat");
  if (s.kind == "step") {
    top.Child("layout");
    top.Child("step");
    top.Child("straggler");
    if (auto st = ParseStep(doc, s); !st.ok()) return st;
    if (auto st = ParseStraggler(doc, s); !st.ok()) return st;
  } else if (auto st = ParseSweep(doc, s, top); !st.ok()) {
    return st;
  }
  if (auto st = top.Finish(); !st.ok()) return st;
  if (s.ranks() > limits::kMaxRanks) return KeyError("layout", absl::StrCat("more than ", limits::kMaxRanks, " ranks"));
  return absl::OkStatus();
}

// ---- graph building ----

class ProgramWriter {
 public:
  ProgramWriter(pg::Program* p, const FidelitySpec& s)
      : p_(p),
        allreduce_algorithm_(s.algorithm == "tree" ? pg::ALGORITHM_TREE : pg::ALGORITHM_RING),
        gather_algorithm_(s.algorithm == "pat" ? pg::ALGORITHM_PAT : pg::ALGORITHM_RING) {}
  uint32_t Compute(uint64_t us, const std::string& label, uint32_t stream = 0, std::vector<uint32_t> deps = {}) {
    pg::Op* op = Add(stream, deps);
    op->mutable_compute()->set_duration_ns(us * 1000);
    op->mutable_compute()->set_label(label);
    return Last();
  }
  uint32_t Collective(Slot slot, pg::CollectiveKind kind, uint64_t bytes, const std::string& label,
                      uint32_t stream = 0, std::vector<uint32_t> deps = {}) {
    auto* c = Add(stream, deps)->mutable_collective();
    c->set_comm_slot(slot);
    c->set_kind(kind);
    c->set_bytes(bytes);
    c->set_dtype(pg::BF16);
    c->set_algorithm(kind == pg::ALLREDUCE                                 ? allreduce_algorithm_
                     : kind == pg::ALLGATHER || kind == pg::REDUCESCATTER ? gather_algorithm_
                                                                           : pg::ALGORITHM_RING);
    c->set_label(label);
    return Last();
  }
  void P2P(bool send, Slot slot, uint32_t peer, bool relative, uint64_t bytes, const std::string& label) {
    pg::Op* op = Add(0, {});
    if (send) {
      auto* s = op->mutable_send();
      s->set_comm_slot(slot), s->set_peer(peer), s->set_peer_relative(relative), s->set_bytes(bytes);
      s->set_label(label);
    } else {
      auto* r = op->mutable_recv();
      r->set_comm_slot(slot), r->set_peer(peer), r->set_peer_relative(relative), r->set_bytes(bytes);
      r->set_label(label);
    }
  }
  void Group(bool start) {
    if (start) Add(0, {})->mutable_group_start();
    else Add(0, {})->mutable_group_end();
  }

 private:
  pg::Op* Add(uint32_t stream, const std::vector<uint32_t>& deps) {
    pg::Op* op = p_->add_ops();
    op->set_stream(stream);
    for (uint32_t d : deps) op->add_deps(d);
    return op;
  }
  uint32_t Last() const { return static_cast<uint32_t>(p_->ops_size() - 1); }
  pg::Program* p_;
  pg::Algorithm allreduce_algorithm_;
  pg::Algorithm gather_algorithm_;
};

void SetCluster(const FidelitySpec& s, pg::Graph& g) {
  const uint32_t n = s.ranks();
  auto* cl = g.mutable_cluster();
  cl->set_nodes(n);
  cl->set_gpus_per_node(1);
  cl->mutable_gpu()->set_name("H200");
  cl->mutable_gpu()->set_peak_bf16_flops(989000000000000ull);
  cl->mutable_gpu()->set_hbm_bytes_per_s(4800000000000ull);
  cl->mutable_gpu()->set_memory_bytes(141ull << 30);
  cl->mutable_nic()->set_count(1);
  cl->mutable_nic()->set_bandwidth_bps(static_cast<uint64_t>(std::llround(s.link_gbps * 1e9)));
  cl->mutable_nic()->set_latency_ns(static_cast<uint64_t>(std::llround(s.link_latency_us * 1000.0)));
  cl->mutable_intra_node()->set_bandwidth_bps(3600000000000ull);
  cl->mutable_intra_node()->set_latency_ns(1000);
}

pg::Communicator* AddComm(pg::Graph& g, pg::CommKind kind, const std::string& name, std::vector<uint32_t> members) {
  auto* c = g.add_communicators();
  c->set_id(static_cast<uint32_t>(g.communicators_size() - 1));
  c->set_kind(kind);
  c->set_name(name);
  for (uint32_t m : members) c->add_members(m);
  if (c->id() == 0) {
    c->mutable_init();
  } else {
    auto* split = c->mutable_split();
    split->set_parent(0);
    split->set_color(PyTorchSplitColor(members));
    split->set_key(0);
  }
  return c;
}

// One pipeline stage's iteration (see the header).
void StepProgram(const FidelitySpec& s, uint32_t stage, pg::Program* p) {
  ProgramWriter w(p, s);
  const uint32_t P = s.pp, M = s.microbatches, L = s.layers;
  const uint32_t start = w.Compute(0, "iteration start");
  std::vector<uint32_t> gathered(L);
  for (uint32_t l = 0; l < L; ++l)
    gathered[l] = w.Collective(kDp, pg::ALLGATHER, s.dp_bytes, absl::StrCat("dp all-gather layer ", l), 1, {start});
  auto transfer = [&](std::vector<std::pair<bool, int>> parts, const char* what) {
    // parts: (send?, peer stage offset); a pair goes in one NCCL group.
    if (parts.empty()) return;
    if (parts.size() > 1) w.Group(true);
    for (auto [send, offset] : parts)
      w.P2P(send, kPp, static_cast<uint32_t>(static_cast<int>(stage) + offset), false, s.pp_bytes, what);
    if (parts.size() > 1) w.Group(false);
  };
  const bool first = stage == 0, last = stage == P - 1;
  auto recv_forward = [&] { if (!first) transfer({{false, -1}}, "recv activation"); };
  auto send_forward = [&] { if (!last) transfer({{true, +1}}, "send activation"); };
  auto recv_backward = [&] { if (!last) transfer({{false, +1}}, "recv gradient"); };
  auto send_backward = [&] { if (!first) transfer({{true, -1}}, "send gradient"); };
  auto forward = [&](uint32_t m) {
    for (uint32_t l = 0; l < L; ++l) {
      std::vector<uint32_t> deps;
      if (m == 0) deps.push_back(gathered[l]);
      w.Compute(s.fwd_us, absl::StrCat("fwd mb ", m, " layer ", l), 0, deps);
      if (s.tp > 1)
        w.Collective(kTp, pg::ALLREDUCE, s.tp_bytes, absl::StrCat("tp all-reduce fwd mb ", m, " layer ", l));
    }
  };
  std::vector<uint32_t> scattered;
  auto backward = [&](uint32_t m) {
    for (uint32_t i = 0; i < L; ++i) {
      const uint32_t l = L - 1 - i;
      const uint32_t c = w.Compute(s.bwd_us, absl::StrCat("bwd mb ", m, " layer ", l));
      if (s.tp > 1)
        w.Collective(kTp, pg::ALLREDUCE, s.tp_bytes, absl::StrCat("tp all-reduce bwd mb ", m, " layer ", l));
      if (m == M - 1)
        scattered.push_back(
            w.Collective(kDp, pg::REDUCESCATTER, s.dp_bytes, absl::StrCat("dp reduce-scatter layer ", l), 1, {c}));
    }
  };
  const uint32_t warmup = std::min(P - stage - 1, M);
  const uint32_t steady = M - warmup;
  for (uint32_t i = 0; i < warmup; ++i) {
    recv_forward();
    forward(i);
    send_forward();
  }
  if (steady > 0) recv_forward();
  for (uint32_t i = 0; i < steady; ++i) {
    forward(warmup + i);
    if (!last) transfer({{true, +1}, {false, +1}}, "send activation, recv gradient");
    backward(i);
    if (i == steady - 1) send_backward();
    else if (!first) transfer({{true, -1}, {false, -1}}, "send gradient, recv activation");
  }
  for (uint32_t i = steady; i < M; ++i) {
    recv_backward();
    backward(i);
    send_backward();
  }
  w.Compute(s.optimizer_us, "optimizer", 0, scattered);
}

// The straggler's own program: its stage's, every compute duration scaled.
void AddStraggler(const FidelitySpec& s, pg::Graph& g) {
  pg::Rank* rank = g.mutable_ranks(static_cast<int>(s.straggler_rank));
  pg::Program* p = g.add_programs();
  *p = g.programs(static_cast<int>(rank->program()));
  p->set_id(static_cast<uint32_t>(g.programs_size() - 1));
  p->set_name(absl::StrCat(p->name(), " straggler x", s.straggler_scale));
  for (pg::Op& op : *p->mutable_ops())
    if (op.has_compute())
      op.mutable_compute()->set_duration_ns(
          static_cast<uint64_t>(std::llround(static_cast<double>(op.compute().duration_ns()) * s.straggler_scale)));
  rank->set_program(p->id());
}

pg::Graph StepGraph(const FidelitySpec& s) {
  pg::Graph g;
  const uint32_t tp = s.tp, pp = s.pp, dp = s.dp, n = s.ranks();
  auto rank_of = [&](uint32_t stage, uint32_t d, uint32_t t) { return stage * tp * dp + d * tp + t; };
  std::vector<uint32_t> world(n);
  for (uint32_t r = 0; r < n; ++r) world[r] = r;
  AddComm(g, pg::COMM_KIND_WORLD, "world", world);
  // One group of `kind` per (outer, inner) pair, members along the third
  // axis; `group_of[r]` is each member's group id.
  auto add_groups = [&](pg::CommKind kind, const char* name, uint32_t outer_n, uint32_t inner_n, uint32_t size,
                        const std::function<uint32_t(uint32_t, uint32_t, uint32_t)>& rank,
                        std::vector<uint32_t>& group_of) {
    for (uint32_t o = 0; o < outer_n; ++o)
      for (uint32_t i = 0; i < inner_n; ++i) {
        std::vector<uint32_t> m;
        for (uint32_t k = 0; k < size; ++k) m.push_back(rank(o, i, k));
        const uint32_t id = AddComm(g, kind, absl::StrCat(name, "[", o * inner_n + i, "]"), m)->id();
        for (uint32_t r : m) group_of[r] = id;
      }
  };
  // tp 1: no TP groups (no op uses the slot; it names the world).
  std::vector<uint32_t> tp_of(n, 0), pp_of(n, 0), dp_of(n, 0);
  if (tp > 1)
    add_groups(pg::COMM_KIND_TP, "tp", pp, dp, tp,
               [&](uint32_t stage, uint32_t d, uint32_t t) { return rank_of(stage, d, t); }, tp_of);
  // pp 1: no pipeline groups (no op uses the slot; it names the world).
  if (pp > 1)
    add_groups(pg::COMM_KIND_PP, "pp", dp, tp, pp,
               [&](uint32_t d, uint32_t t, uint32_t stage) { return rank_of(stage, d, t); }, pp_of);
  // tp 1 and pp 1: the DP group is the world (one communicator, as an FSDP
  // job's world-wide all-gathers use).
  if (tp > 1 || pp > 1)
    add_groups(pg::COMM_KIND_DP, "dp", pp, tp, dp,
               [&](uint32_t stage, uint32_t t, uint32_t d) { return rank_of(stage, d, t); }, dp_of);
  for (uint32_t stage = 0; stage < pp; ++stage) {
    auto* p = g.add_programs();
    p->set_id(stage);
    p->set_name(absl::StrCat("stage-", stage));
    p->set_streams(2);
    for (const char* slot : {"world", "tp", "pp", "dp"}) p->add_comm_slot_names(slot);
    StepProgram(s, stage, p);
  }
  for (uint32_t r = 0; r < n; ++r) {
    auto* rk = g.add_ranks();
    rk->set_rank(r);
    rk->set_program(r / (tp * dp));
    rk->set_node(r);
    rk->set_local_gpu(0);
    for (uint32_t c : {0u, tp_of[r], pp_of[r], dp_of[r]}) rk->add_comm_slots(c);
  }
  if (s.straggler_rank >= 0) AddStraggler(s, g);
  auto* layout = g.mutable_layout();
  layout->set_tp(tp), layout->set_pp(pp), layout->set_dp(dp), layout->set_cp(1), layout->set_ep(1), layout->set_vpp(1);
  layout->set_schedule("1f1b");
  layout->set_order("tp-dp-pp");
  layout->set_micro_batch(1);
  layout->set_global_batch(s.microbatches * dp);
  return g;
}

pg::Graph SweepGraph(const FidelitySpec& s) {
  pg::Graph g;
  std::vector<uint32_t> world(s.world);
  for (uint32_t r = 0; r < s.world; ++r) world[r] = r;
  AddComm(g, pg::COMM_KIND_WORLD, "world", world);
  auto* p = g.add_programs();
  p->set_id(0);
  p->set_name("sweep");
  p->set_streams(1);
  p->add_comm_slot_names("world");
  ProgramWriter w(p, s);
  for (const std::string& op : s.ops)
    for (uint64_t bytes : s.sizes) {
      const std::string label = absl::StrCat(op, " ", bytes);
      for (uint32_t k = 0; k < s.warmup + s.iterations; ++k) {
        if (op == "sendrecv") {
          w.Group(true);
          w.P2P(true, kWorld, 1, true, bytes, label);
          w.P2P(false, kWorld, s.world - 1, true, bytes, label);
          w.Group(false);
        } else {
          const pg::CollectiveKind kind =
              op == "allreduce" ? pg::ALLREDUCE : op == "allgather" ? pg::ALLGATHER : pg::REDUCESCATTER;
          w.Collective(kWorld, kind, bytes, label);
        }
      }
    }
  for (uint32_t r = 0; r < s.world; ++r) {
    auto* rk = g.add_ranks();
    rk->set_rank(r);
    rk->set_program(0);
    rk->set_node(r);
    rk->set_local_gpu(0);
    rk->add_comm_slots(0);
  }
  auto* layout = g.mutable_layout();
  layout->set_tp(1), layout->set_pp(1), layout->set_dp(s.world), layout->set_cp(1), layout->set_ep(1), layout->set_vpp(1);
  return g;
}

}  // namespace

absl::StatusOr<FidelitySpec> ParseFidelitySpec(const std::string& yaml_text, const std::string& origin) {
  YAML::Node doc;
  try {
    doc = YAML::Load(yaml_text);
  } catch (const YAML::Exception& e) {
    return absl::InvalidArgumentError(absl::StrCat(origin, " is not valid YAML: ", Excerpt(e.what(), 200)));
  }
  FidelitySpec spec;
  try {
    if (auto s = CheckDocument(doc); !s.ok())
      return absl::InvalidArgumentError(absl::StrCat(origin, ": ", std::string(s.message())));
    if (auto s = ParseDocument(doc, spec); !s.ok())
      return absl::InvalidArgumentError(absl::StrCat(origin, ": ", std::string(s.message())));
  } catch (const YAML::Exception& e) {
    return absl::InvalidArgumentError(absl::StrCat(origin, ": malformed spec: ", Excerpt(e.what(), 200)));
  }
  return spec;
}

absl::StatusOr<FidelitySpec> ParseFidelitySpecFile(const std::string& path) {
  auto text = ReadInputFile(path, "fidelity spec");
  if (!text.ok()) return text.status();
  return ParseFidelitySpec(*text, path);
}

absl::StatusOr<pg::Graph> GenerateFidelityGraph(const FidelitySpec& s) {
  pg::Graph g = s.kind == "step" ? StepGraph(s) : SweepGraph(s);
  SetCluster(s, g);
  auto* job = g.mutable_job();
  job->set_name(s.name);
  job->set_generator(absl::StrCat(prism::kGraphgenGenerator, " fidelity"));
  job->set_description(s.kind == "step" ? absl::StrCat("synthetic step tp", s.tp, " pp", s.pp, " dp", s.dp)
                                        : absl::StrCat("collective sweep over ", s.world, " ranks"));
  job->set_world_size(s.ranks());
  auto& a = *job->mutable_attributes();
  a["spec"] = s.name;
  a["kind"] = s.kind;
  // The step graph is one iteration (the driver runs warmup + iterations);
  // the sweep graph is the whole run.
  a["iterations"] = absl::StrCat(s.kind == "step" ? s.warmup + s.iterations : 1);
  a["warmup"] = absl::StrCat(s.warmup);
  // No nccl_launch_order: each stream on its own. (Until 2026-12-04 these
  // graphs asked for program order, from truths whose per-operation CUDA
  // events held a rank's sends behind its collectives; without the events
  // they do not: docs/network-model.md, "Launch order".)
  return g;
}

}  // namespace prism::graphgen
