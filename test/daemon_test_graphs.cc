#include "test/daemon_test_graphs.h"

#include <algorithm>
#include <string>

namespace prism::testing {
namespace {

void SetCluster(graph::Graph& g, uint32_t ranks, const ClusterSpec& c) {
  auto* cl = g.mutable_cluster();
  cl->set_gpus_per_node(c.gpus_per_node);
  cl->set_nodes((ranks + c.gpus_per_node - 1) / c.gpus_per_node);
  cl->mutable_nic()->set_count(c.nics_per_node);
  cl->mutable_nic()->set_bandwidth_bps(c.nic_bps);
  cl->mutable_nic()->set_latency_ns(c.nic_latency_ns);
  cl->mutable_intra_node()->set_bandwidth_bps(c.nvlink_bps);
  cl->mutable_intra_node()->set_latency_ns(c.nvlink_latency_ns);
  g.mutable_job()->set_world_size(ranks);
}

graph::Rank* AddRank(graph::Graph& g, uint32_t r, uint32_t program, const ClusterSpec& c) {
  graph::Rank* rk = g.add_ranks();
  rk->set_rank(r);
  rk->set_program(program);
  rk->set_node(r / c.gpus_per_node);
  rk->set_local_gpu(r % c.gpus_per_node);
  return rk;
}

graph::Op* Compute(graph::Program* p, uint64_t ns, const std::string& label, int64_t mem = 0, uint32_t stream = 0) {
  graph::Op* op = p->add_ops();
  op->set_stream(stream);
  op->mutable_compute()->set_duration_ns(ns);
  op->mutable_compute()->set_label(label);
  op->mutable_compute()->set_memory_delta_bytes(mem);
  return op;
}

graph::Op* Collective(graph::Program* p, uint32_t slot, graph::CollectiveKind kind, uint64_t bytes,
                      uint32_t stream = 0) {
  graph::Op* op = p->add_ops();
  op->set_stream(stream);
  op->mutable_collective()->set_comm_slot(slot);
  op->mutable_collective()->set_kind(kind);
  op->mutable_collective()->set_bytes(bytes);
  op->mutable_collective()->set_dtype(graph::BF16);
  return op;
}

void P2P(graph::Program* p, bool send, uint32_t slot, uint32_t rel_peer, uint64_t bytes) {
  graph::Op* op = p->add_ops();
  if (send) {
    auto* s = op->mutable_send();
    s->set_comm_slot(slot), s->set_peer(rel_peer), s->set_peer_relative(true), s->set_bytes(bytes);
  } else {
    auto* r = op->mutable_recv();
    r->set_comm_slot(slot), r->set_peer(rel_peer), r->set_peer_relative(true), r->set_bytes(bytes);
  }
}

void Group(graph::Program* p, bool start) {
  if (start) p->add_ops()->mutable_group_start();
  else p->add_ops()->mutable_group_end();
}

}  // namespace

graph::Graph CollectiveGraph(uint32_t ranks, graph::CollectiveKind kind, uint64_t bytes, graph::Algorithm algorithm,
                             uint32_t count, uint64_t compute_ns, const ClusterSpec& cluster) {
  graph::Graph g;
  g.mutable_job()->set_name("collective-test");
  SetCluster(g, ranks, cluster);
  graph::Communicator* world = g.add_communicators();
  world->set_id(0);
  world->set_kind(graph::COMM_KIND_WORLD);
  world->set_name("world");
  world->mutable_init();
  graph::Program* p = g.add_programs();
  p->set_id(0);
  p->set_name("all");
  p->set_streams(1);
  p->add_comm_slot_names("world");
  for (uint32_t i = 0; i < count; ++i) {
    if (compute_ns > 0) Compute(p, compute_ns, "compute");
    Collective(p, 0, kind, bytes)->mutable_collective()->set_algorithm(algorithm);
  }
  for (uint32_t r = 0; r < ranks; ++r) {
    world->add_members(r);
    AddRank(g, r, 0, cluster)->add_comm_slots(0);
  }
  return g;
}

graph::Graph NormThenGatherGraph(uint32_t ranks, uint64_t norm_bytes, uint64_t compute_ns, uint64_t gather_bytes) {
  const ClusterSpec cluster;
  graph::Graph g;
  g.mutable_job()->set_name("norm-then-gather-test");
  SetCluster(g, ranks, cluster);
  const char* names[] = {"world", "dp[0]", "dp[1]"};
  for (uint32_t i = 0; i < 3; ++i) {
    graph::Communicator* c = g.add_communicators();
    c->set_id(i);
    c->set_kind(i == 0 ? graph::COMM_KIND_WORLD : graph::COMM_KIND_DP);
    c->set_name(names[i]);
    c->mutable_init();
    for (uint32_t r = 0; r < ranks; ++r)
      if (i == 0 || r % 2 == i - 1) c->add_members(r);
  }
  graph::Program* p = g.add_programs();
  p->set_id(0);
  p->set_name("all");
  p->set_streams(2);
  p->add_comm_slot_names("world");
  p->add_comm_slot_names("dp");
  Collective(p, 0, graph::ALLREDUCE, norm_bytes)->mutable_collective()->set_dtype(graph::FP32);
  Compute(p, compute_ns, "optimizer");
  Collective(p, 1, graph::ALLGATHER, gather_bytes, /*stream=*/1)->add_deps(1);
  for (uint32_t r = 0; r < ranks; ++r) {
    graph::Rank* rk = AddRank(g, r, 0, cluster);
    rk->add_comm_slots(0);
    rk->add_comm_slots(1 + r % 2);
  }
  return g;
}

namespace {

struct StageWriter {
  const TrainingSpec& s;
  graph::Program* p;
  uint32_t stage;
  bool first() const { return stage == 0; }
  bool last() const { return stage + 1 == s.pp; }
  uint32_t next() const { return 1; }
  uint32_t prev() const { return s.pp - 1; }

  void Forward(uint32_t mb) {
    for (uint32_t l = 0; l < s.layers_per_stage; ++l) {
      Compute(p, s.layer_fwd_ns, "fwd/attn", l == 0 ? s.activation_memory : 0);
      Collective(p, 0, graph::ALLREDUCE, s.activation_bytes);
      Compute(p, s.layer_fwd_ns, "fwd/mlp");
      Collective(p, 0, graph::ALLREDUCE, s.activation_bytes);
    }
    (void)mb;
  }
  void Backward(uint32_t mb) {
    for (uint32_t l = 0; l < s.layers_per_stage; ++l) {
      Compute(p, 2 * s.layer_fwd_ns, "bwd/mlp");
      Collective(p, 0, graph::ALLREDUCE, s.activation_bytes);
      Compute(p, 2 * s.layer_fwd_ns, "bwd/attn", l + 1 == s.layers_per_stage ? -s.activation_memory : 0);
      Collective(p, 0, graph::ALLREDUCE, s.activation_bytes);
    }
    (void)mb;
  }
  void SendRecvPair(bool send_next, bool recv_next) {
    // send to next & recv from next (fwd->bwd), or send to prev & recv from prev.
    Group(p, true);
    P2P(p, true, 1, send_next ? next() : prev(), s.activation_bytes);
    P2P(p, false, 1, recv_next ? next() : prev(), s.activation_bytes);
    Group(p, false);
  }

  void Write() {
    const uint32_t m = s.microbatches;
    const uint32_t warmup = std::min(s.pp - stage - 1, m);
    uint32_t f = 0, b = 0;
    for (uint32_t i = 0; i < warmup; ++i) {
      if (!first()) P2P(p, false, 1, prev(), s.activation_bytes);
      Forward(f++);
      if (!last()) P2P(p, true, 1, next(), s.activation_bytes);
    }
    const uint32_t steady = m - warmup;
    if (steady > 0 && !first()) P2P(p, false, 1, prev(), s.activation_bytes);
    for (uint32_t j = 0; j < steady; ++j) {
      Forward(f++);
      if (!last()) SendRecvPair(true, true);
      Backward(b++);
      if (!first()) {
        if (j + 1 == steady) P2P(p, true, 1, prev(), s.activation_bytes);
        else SendRecvPair(false, false);
      }
    }
    for (uint32_t i = 0; i < warmup; ++i) {
      if (!last()) P2P(p, false, 1, next(), s.activation_bytes);
      Backward(b++);
      if (!first()) P2P(p, true, 1, prev(), s.activation_bytes);
    }
    const uint32_t grad_stream = s.dp_on_second_stream ? 1 : 0;
    graph::Op* rs = Collective(p, 2, graph::REDUCESCATTER, s.grad_bytes, grad_stream);
    rs->add_deps(static_cast<uint32_t>(p->ops_size() - 2));
    Compute(p, s.layer_fwd_ns, "optimizer", 0, grad_stream);
    Collective(p, 2, graph::ALLGATHER, s.grad_bytes, grad_stream);
    p->set_streams(grad_stream + 1);
  }
};

}  // namespace

graph::Graph TrainingGraph(const TrainingSpec& s) {
  graph::Graph g;
  const uint32_t ranks = s.tp * s.pp * s.dp;
  g.mutable_job()->set_name("training-test");
  SetCluster(g, ranks, s.cluster);
  auto rank_of = [&](uint32_t t, uint32_t d, uint32_t p) { return t + s.tp * (d + s.dp * p); };
  auto add_comm = [&](graph::CommKind kind, const std::string& name) {
    graph::Communicator* c = g.add_communicators();
    c->set_id(static_cast<uint32_t>(g.communicators_size() - 1));
    c->set_kind(kind);
    c->set_name(name);
    c->mutable_init();
    return c;
  };
  std::vector<uint32_t> tp_of(ranks), pp_of(ranks), dp_of(ranks);
  for (uint32_t p = 0; p < s.pp; ++p)
    for (uint32_t d = 0; d < s.dp; ++d) {
      graph::Communicator* c = add_comm(graph::COMM_KIND_TP, "tp[" + std::to_string(d) + "," + std::to_string(p) + "]");
      for (uint32_t t = 0; t < s.tp; ++t) c->add_members(rank_of(t, d, p)), tp_of[rank_of(t, d, p)] = c->id();
    }
  for (uint32_t t = 0; t < s.tp; ++t)
    for (uint32_t d = 0; d < s.dp; ++d) {
      graph::Communicator* c = add_comm(graph::COMM_KIND_PP, "pp[" + std::to_string(t) + "," + std::to_string(d) + "]");
      for (uint32_t p = 0; p < s.pp; ++p) c->add_members(rank_of(t, d, p)), pp_of[rank_of(t, d, p)] = c->id();
    }
  for (uint32_t t = 0; t < s.tp; ++t)
    for (uint32_t p = 0; p < s.pp; ++p) {
      graph::Communicator* c = add_comm(graph::COMM_KIND_DP, "dp[" + std::to_string(t) + "," + std::to_string(p) + "]");
      for (uint32_t d = 0; d < s.dp; ++d) c->add_members(rank_of(t, d, p)), dp_of[rank_of(t, d, p)] = c->id();
    }
  for (uint32_t p = 0; p < s.pp; ++p) {
    graph::Program* prog = g.add_programs();
    prog->set_id(p);
    prog->set_name("pp-stage-" + std::to_string(p));
    for (const char* n : {"tp", "pp", "dp"}) prog->add_comm_slot_names(n);
    prog->set_static_memory_bytes(20ull << 30);
    StageWriter{s, prog, p}.Write();
  }
  for (uint32_t r = 0; r < ranks; ++r) {
    const uint32_t p = r / (s.tp * s.dp);
    graph::Rank* rk = AddRank(g, r, p, s.cluster);
    rk->add_comm_slots(tp_of[r]);
    rk->add_comm_slots(pp_of[r]);
    rk->add_comm_slots(dp_of[r]);
  }
  auto* layout = g.mutable_layout();
  layout->set_tp(s.tp), layout->set_pp(s.pp), layout->set_dp(s.dp), layout->set_schedule("1f1b");
  layout->set_order("tp-dp-pp");
  return g;
}

TrainingSpec SmallTrainingSpec() {
  TrainingSpec s;
  s.tp = 2, s.pp = 4, s.dp = 4, s.microbatches = 6, s.layers_per_stage = 2;
  s.cluster.gpus_per_node = 4;
  s.cluster.nics_per_node = 2;
  return s;
}

}  // namespace prism::testing
