// Replay engine semantics: streams, deps, groups, send/recv, NIC
// serialisation, iterations, memory, determinism of report and trace.
#include <catch2/catch.hpp>

#include "daemon/engine/launch_order.h"
#include "daemon/engine/network_model.h"
#include "daemon/engine/simulation.h"
#include "nlohmann/json.hpp"
#include "test/daemon_test_graphs.h"

namespace {

namespace g = prism::graph;
using prism::engine::Simulate;
using prism::engine::SimulationOptions;

// ranks on `nodes` nodes (gpn each), one communicator per entry of `comms`
// (member lists), one program per rank given by `programs[rank]`.
g::Graph Custom(uint32_t ranks, uint32_t gpn, const std::vector<std::vector<uint32_t>>& comms,
                const std::vector<g::Program>& programs, const std::vector<uint32_t>& program_of,
                const std::vector<std::vector<uint32_t>>& slots) {
  g::Graph gr;
  gr.mutable_job()->set_name("custom");
  auto* cl = gr.mutable_cluster();
  cl->set_gpus_per_node(gpn);
  cl->set_nodes((ranks + gpn - 1) / gpn);
  cl->mutable_nic()->set_count(1);
  cl->mutable_nic()->set_bandwidth_bps(100'000'000'000ull);
  cl->mutable_nic()->set_latency_ns(2000);
  cl->mutable_intra_node()->set_bandwidth_bps(800'000'000'000ull);
  cl->mutable_intra_node()->set_latency_ns(500);
  for (size_t c = 0; c < comms.size(); ++c) {
    auto* comm = gr.add_communicators();
    comm->set_id(static_cast<uint32_t>(c));
    comm->set_name("c" + std::to_string(c));
    comm->set_kind(g::COMM_KIND_OTHER);
    for (uint32_t m : comms[c]) comm->add_members(m);
  }
  for (size_t p = 0; p < programs.size(); ++p) {
    *gr.add_programs() = programs[p];
    gr.mutable_programs(static_cast<int>(p))->set_id(static_cast<uint32_t>(p));
  }
  for (uint32_t r = 0; r < ranks; ++r) {
    auto* rk = gr.add_ranks();
    rk->set_rank(r), rk->set_program(program_of[r]), rk->set_node(r / gpn), rk->set_local_gpu(r % gpn);
    for (uint32_t s : slots[r]) rk->add_comm_slots(s);
  }
  return gr;
}

g::Op* AddCompute(g::Program& p, uint64_t ns, uint32_t stream = 0) {
  g::Op* op = p.add_ops();
  op->set_stream(stream);
  op->mutable_compute()->set_duration_ns(ns);
  return op;
}
g::Op* AddCollective(g::Program& p, uint32_t slot, uint64_t bytes, uint32_t stream = 0) {
  g::Op* op = p.add_ops();
  op->set_stream(stream);
  op->mutable_collective()->set_comm_slot(slot);
  op->mutable_collective()->set_kind(g::ALLREDUCE);
  op->mutable_collective()->set_bytes(bytes);
  op->mutable_collective()->set_algorithm(g::ALGORITHM_RING);
  return op;
}
g::Op* AddP2P(g::Program& p, bool send, uint32_t peer, uint64_t bytes) {
  g::Op* op = p.add_ops();
  if (send) op->mutable_send()->set_peer(peer), op->mutable_send()->set_bytes(bytes);
  else op->mutable_recv()->set_peer(peer), op->mutable_recv()->set_bytes(bytes);
  return op;
}

int64_t IterationNs(const g::Graph& gr, SimulationOptions o = {}) {
  auto r = Simulate(gr, o);
  INFO((r.ok() ? "" : std::string(r.status().message())));
  REQUIRE(r.ok());
  return r->report.mean_iteration.count();
}

prism::engine::NetworkModel ModelOf(const g::Graph& gr) {
  return prism::engine::NetworkModel(prism::engine::NetworkModel::LinkFiguresFromCluster(gr.cluster()));
}

}  // namespace

TEST_CASE("ops on a stream run in order, deps join streams, a collective waits for the last member", "[daemon][engine]") {
  g::Program fast, slow;
  fast.set_streams(2), slow.set_streams(2);
  fast.add_comm_slot_names("w"), slow.add_comm_slot_names("w");
  AddCompute(fast, 1000, 0);
  AddCompute(fast, 5000, 1);
  AddCollective(fast, 0, 1 << 20)->add_deps(1);  // waits for stream 1's 5 us
  AddCompute(slow, 1000, 0);
  AddCompute(slow, 9000, 0);                     // arrives at 10 us
  AddCollective(slow, 0, 1 << 20);
  const g::Graph gr = Custom(2, 2, {{0, 1}}, {fast, slow}, {0, 1}, {{0}, {0}});
  prism::engine::CommShape shape{2, 1, 2, 2};
  const int64_t coll = ModelOf(gr).CollectiveTime(g::ALLREDUCE, g::ALGORITHM_RING, prism::Bytes(1 << 20), shape).count();
  CHECK(IterationNs(gr) == 10000 + coll);
}

TEST_CASE("send/recv match in order per pair, grouped pairs do not deadlock", "[daemon][engine]") {
  g::Program a, b;
  for (g::Program* p : {&a, &b}) p->set_streams(1), p->add_comm_slot_names("pair");
  // a: send 1 MB, then group{send 2 MB, recv 2 MB}; b: recv 1 MB, then group{send, recv}.
  AddP2P(a, true, 1, 1 << 20);
  a.add_ops()->mutable_group_start();
  AddP2P(a, true, 1, 2 << 20);
  AddP2P(a, false, 1, 2 << 20);
  a.add_ops()->mutable_group_end();
  AddCompute(b, 3000);
  AddP2P(b, false, 0, 1 << 20);
  b.add_ops()->mutable_group_start();
  AddP2P(b, false, 0, 2 << 20);
  AddP2P(b, true, 0, 2 << 20);
  b.add_ops()->mutable_group_end();
  const g::Graph gr = Custom(2, 1, {{0, 1}}, {a, b}, {0, 1}, {{0}, {0}});  // two nodes: NIC hops
  const auto m = ModelOf(gr);
  const int64_t t1 = m.PointToPointTime(prism::Bytes(1 << 20), false).count();
  const int64_t t2 = m.PointToPointTime(prism::Bytes(2 << 20), false).count();
  // The first pair waits for b's 3 us; the grouped transfers go opposite ways: full duplex, they overlap.
  CHECK(IterationNs(gr) == 3000 + t1 + t2);
}

// NCCL's send kernel is done once its last byte is in the connection's
// buffers (docs/network-model.md, "Send completion"): a send that fits is done
// when posted, even with its receiver 10 us late; a larger one once the
// wire has drained all but a buffer's worth, counted from when the receiver
// came. Rank 0 computes 1 ms after its send, so its end shows when the send
// was done; rank 1 receives after 10 us of compute.
TEST_CASE("a send is done once the connection's buffers hold its last byte, its receive when the data arrived",
          "[daemon][engine][p2p]") {
  auto pair = [](uint64_t bytes) {
    g::Program a, b;
    for (g::Program* p : {&a, &b}) p->set_streams(1), p->add_comm_slot_names("pair");
    AddP2P(a, true, 1, bytes);
    AddCompute(a, 1'000'000);
    AddCompute(b, 10'000);
    AddP2P(b, false, 0, bytes);
    return Custom(2, 1, {{0, 1}}, {a, b}, {0, 1}, {{0}, {0}});  // two nodes, 100 Gbit/s, 2 us
  };
  SimulationOptions unbuffered;
  unbuffered.nccl.p2p_buffer = prism::Bytes(0);
  // 1 MiB fits in the default 2 MiB: done at 0, rank 0 ends at 1 ms (its receive ends at 10 + 2 + 83.886 us).
  CHECK(IterationNs(pair(1 << 20)) == 1'000'000);
  // Unbuffered (the model before): 10,000 + 2,000 + 83,887 ns (1 MiB at 100 Gbit/s, rounded up), then 1 ms.
  CHECK(IterationNs(pair(1 << 20), unbuffered) == 10'000 + 2'000 + 83'887 + 1'000'000);
  // 8 MiB: the receiver posts at 10 us; the kernel is done when 6 MiB have left (503,317 ns at 100 Gbit/s).
  CHECK(IterationNs(pair(8 << 20)) == 10'000 + 503'317 + 1'000'000);
  CHECK(IterationNs(pair(8 << 20), unbuffered) == 10'000 + 2'000 + 671'089 + 1'000'000);
  const auto m = ModelOf(pair(1));
  CHECK(m.SendHeldTime(prism::Bytes(8 << 20), false).count() == 503'317);
  CHECK(m.SendHeldTime(prism::Bytes(2 << 20), false).count() == 0);
  // One node (NCCL's P2P transport): the send still ends with its receive.
  CHECK(m.SendHeldTime(prism::Bytes(1 << 20), true) == m.PointToPointTime(prism::Bytes(1 << 20), true));
}

// NCCL's launch order (docs/network-model.md, "Launch order"): rank 0 issues
// all-reduce C1 (stream 1), 10 us of compute (stream 0), all-reduce C2
// (stream 1), then a 1 MiB send to rank 2 (stream 0); rank 1 is C1 and C2's
// other member; rank 2 receives, then computes 1 ms. The send does not start
// before C2 is issued (C1's end) and, a send behind a collective, not before
// C2 has ended: rank 2's receive ends at 2 Tc + t_p2p. Each stream on its own
// (--launch-order false, the default), the send goes at 10 us, between the
// all-reduces.
namespace {

// The graph of the launch-order tests above: rank 0's C1, 10 us, C2 on
// stream 1 and the 1 MiB send on stream 0; with the closed forms Tc, t_p2p.
struct LaunchCase {
  g::Graph graph;
  int64_t tc = 0, tp = 0;
};

LaunchCase LaunchGraph() {
  g::Program a, b, c;
  for (g::Program* p : {&a, &b}) p->set_streams(2), p->add_comm_slot_names("dp");
  a.add_comm_slot_names("pair");
  c.set_streams(1), c.add_comm_slot_names("pair");
  AddCollective(a, 0, 8 << 20, 1);
  AddCompute(a, 10'000, 0);
  AddCollective(a, 0, 8 << 20, 1);
  AddP2P(a, true, 1, 1 << 20);  // slot 1: the pair {0, 2}, its peer comm rank 1
  a.mutable_ops(3)->mutable_send()->set_comm_slot(1);
  AddCollective(b, 0, 8 << 20, 1);
  AddCollective(b, 0, 8 << 20, 1);
  AddP2P(c, false, 0, 1 << 20);
  AddCompute(c, 1'000'000);
  LaunchCase lc;
  lc.graph = Custom(3, 1, {{0, 1}, {0, 2}}, {a, b, c}, {0, 1, 2}, {{0, 1}, {0}, {1}});
  const auto m = ModelOf(lc.graph);
  lc.tc = m.CollectiveTime(g::ALLREDUCE, g::ALGORITHM_RING, prism::Bytes(8 << 20), prism::engine::CommShape{2, 2, 1, 1})
              .count();
  lc.tp = m.PointToPointTime(prism::Bytes(1 << 20), false).count();
  return lc;
}

}  // namespace

TEST_CASE("a rank's communication ops start in issue order, a send after the collectives issued before it",
          "[daemon][engine][p2p][launch]") {
  const LaunchCase lc = LaunchGraph();
  SimulationOptions in_order;
  in_order.nccl.launch_in_order = true;
  CHECK(IterationNs(lc.graph, in_order) == 2 * lc.tc + lc.tp + 1'000'000);
  CHECK(IterationNs(lc.graph) < 2 * lc.tc + lc.tp + 1'000'000 - lc.tc / 2);  // the default: each stream on its own
}

// The graph says how its ranks launch (JobInfo.attributes["nccl_launch_order"],
// launch_order.h): prismd's --launch-order graph (the default) follows it,
// true or false override it; without the attribute each stream on its own.
TEST_CASE("the launch order comes from the graph unless --launch-order overrides it",
          "[daemon][engine][p2p][launch]") {
  using prism::engine::ResolveLaunchOrder;
  LaunchCase lc = LaunchGraph();
  const int64_t in_order = 2 * lc.tc + lc.tp + 1'000'000;
  auto iteration = [&](const std::string& flag) {
    auto choice = ResolveLaunchOrder(flag, lc.graph.job());
    REQUIRE(choice.ok());
    SimulationOptions o;
    o.nccl.launch_in_order = choice->in_order;
    return IterationNs(lc.graph, o);
  };
  CHECK(iteration("graph") < in_order - lc.tc / 2);  // no attribute: each stream on its own
  CHECK(ResolveLaunchOrder("graph", lc.graph.job())->source == "default: the graph does not say");
  CHECK(iteration("true") == in_order);
  auto& attributes = *lc.graph.mutable_job()->mutable_attributes();
  attributes["nccl_launch_order"] = "program";
  CHECK(iteration("graph") == in_order);
  CHECK(ResolveLaunchOrder("graph", lc.graph.job())->source == "the graph's nccl_launch_order");
  CHECK(iteration("false") < in_order - lc.tc / 2);
  attributes["nccl_launch_order"] = "streams";
  CHECK(iteration("graph") < in_order - lc.tc / 2);
  CHECK(iteration("true") == in_order);
  attributes["nccl_launch_order"] = "fifo";
  const auto bad = ResolveLaunchOrder("graph", lc.graph.job());
  REQUIRE_FALSE(bad.ok());
  CHECK_THAT(std::string(bad.status().message()), Catch::Contains("program or streams"));
  CHECK_FALSE(ResolveLaunchOrder("yes", lc.graph.job()).ok());
}

// A send that fits in the buffers goes on the wire when posted, not when its
// receive is (NCCL's receiver posted its buffers when its host enqueued the
// receive): the receive ends when the data is there, or when posted if later.
// Rank 1 computes `late` ns, receives 1 MiB from rank 0 (posted at 0), then
// computes 1 ms: the iteration ends 1 ms after the receive.
TEST_CASE("with --p2p-eager a send that fits in the buffers goes on the wire when posted, before its receive",
          "[daemon][engine][p2p]") {
  auto pair = [](uint64_t late, uint64_t bytes) {
    g::Program a, b;
    for (g::Program* p : {&a, &b}) p->set_streams(1), p->add_comm_slot_names("pair");
    AddP2P(a, true, 1, bytes);
    AddCompute(b, late);
    AddP2P(b, false, 0, bytes);
    AddCompute(b, 1'000'000);
    return Custom(2, 1, {{0, 1}}, {a, b}, {0, 1}, {{0}, {0}});  // two nodes, 100 Gbit/s, 2 us
  };
  SimulationOptions eager, unbuffered;
  eager.nccl.p2p_eager = true;
  unbuffered.nccl.p2p_buffer = prism::Bytes(0);
  unbuffered.nccl.p2p_eager = true;
  // 1 MiB: on the wire from 0, there at 2,000 + 83,887 ns; posted at 10 us, the receive waits for it.
  CHECK(IterationNs(pair(10'000, 1 << 20), eager) == 85'887 + 1'000'000);
  // Posted at 200 us: the data is there; the receive ends when posted.
  CHECK(IterationNs(pair(200'000, 1 << 20), eager) == 200'000 + 1'000'000);
  // Without p2p_eager (the engine's default; prismd's is on), unbuffered, and 8 MiB
  // (more than the buffers): the transfer starts when the receive is posted.
  CHECK(IterationNs(pair(10'000, 1 << 20)) == 10'000 + 85'887 + 1'000'000);
  CHECK(IterationNs(pair(10'000, 1 << 20), unbuffered) == 10'000 + 85'887 + 1'000'000);
  CHECK(IterationNs(pair(10'000, 8 << 20), eager) == 10'000 + 2'000 + 671'089 + 1'000'000);
  // Two in a row to the same receiver, posted at 500 us: the first was on the wire from 0; the second,
  // behind an unmatched one, waits for its receive (at most one message ahead of the receiver).
  g::Program a, b;
  for (g::Program* p : {&a, &b}) p->set_streams(1), p->add_comm_slot_names("pair");
  AddP2P(a, true, 1, 1 << 20);
  AddP2P(a, true, 1, 1 << 20);
  AddCompute(b, 500'000);
  AddP2P(b, false, 0, 1 << 20);
  AddP2P(b, false, 0, 1 << 20);
  AddCompute(b, 1'000'000);
  CHECK(IterationNs(Custom(2, 1, {{0, 1}}, {a, b}, {0, 1}, {{0}, {0}}), eager) == 500'000 + 85'887 + 1'000'000);
}

TEST_CASE("two sends from one GPU to other nodes serialise on its NIC transmit side", "[daemon][engine]") {
  g::Program a, b;
  for (g::Program* p : {&a, &b}) p->set_streams(1), p->add_comm_slot_names("all");
  a.add_ops()->mutable_group_start();
  AddP2P(a, true, 1, 4 << 20);
  AddP2P(a, true, 2, 4 << 20);
  a.add_ops()->mutable_group_end();
  AddP2P(b, false, 0, 4 << 20);
  const g::Graph gr = Custom(3, 1, {{0, 1, 2}}, {a, b}, {0, 1, 1}, {{0}, {0}, {0}});
  const int64_t t = ModelOf(gr).PointToPointTime(prism::Bytes(4 << 20), false).count();
  CHECK(IterationNs(gr) == 2 * t);
}

TEST_CASE("concurrent inter-node collectives of one GPU serialise on its NIC share", "[daemon][engine]") {
  g::Program p;
  p.set_streams(2);
  p.add_comm_slot_names("x"), p.add_comm_slot_names("y");
  AddCollective(p, 0, 64 << 20, 0);
  AddCollective(p, 1, 64 << 20, 1);
  const std::vector<uint32_t> all{0, 1, 2, 3};
  const g::Graph two_nodes = Custom(4, 2, {all, all}, {p}, {0, 0, 0, 0}, {{0, 1}, {0, 1}, {0, 1}, {0, 1}});
  const prism::engine::CommShape shape{4, 2, 2, 2};
  const auto model = ModelOf(two_nodes);
  const int64_t one = model.CollectiveTime(g::ALLREDUCE, g::ALGORITHM_RING, prism::Bytes(64 << 20), shape).count();
  const int64_t wire = model.RingWireTime(g::ALLREDUCE, prism::Bytes(64 << 20), shape).count();
  // Each member's transmit side carries the first one's share, then the
  // second's (NicModel::kQueues): the second ends a share after the first,
  // its latency terms overlapping the first's.
  CHECK(IterationNs(two_nodes) == one + wire);
  const g::Graph one_node = Custom(4, 4, {all, all}, {p}, {0, 0, 0, 0}, {{0, 1}, {0, 1}, {0, 1}, {0, 1}});
  const int64_t nvlink = ModelOf(one_node)
                             .CollectiveTime(g::ALLREDUCE, g::ALGORITHM_RING, prism::Bytes(64 << 20), {4, 1, 4, 4})
                             .count();
  CHECK(IterationNs(one_node) == nvlink);  // NVLink: no NIC serialisation
}

// Rank 1 is in two all-reduces across nodes: a long one with rank 0 from 0,
// and a short one with rank 2, which arrives 1 us later. Queued NICs
// (the default): rank 1's share of the short one leaves after its share of
// the long one (wire W_long), then the short one's latency terms: it ends at
// W_long + T_short. The calendar made it wait for the long one's whole time
// T_long, latency terms included, on every member's NIC: T_long + T_short.
TEST_CASE("a collective waits only for its members' own queued shares, not a gap common to all",
          "[daemon][engine][nic]") {
  g::Program first, second, third;
  first.set_streams(1), second.set_streams(2), third.set_streams(1);
  first.add_comm_slot_names("long");
  second.add_comm_slot_names("long"), second.add_comm_slot_names("short");
  third.add_comm_slot_names("short");
  AddCollective(first, 0, 64 << 20);
  AddCollective(second, 0, 64 << 20, 0);
  AddCollective(second, 1, 1 << 20, 1);
  AddCompute(third, 1000);
  AddCollective(third, 0, 1 << 20);
  const g::Graph gr = Custom(3, 1, {{0, 1}, {1, 2}}, {first, second, third}, {0, 1, 2}, {{0}, {0, 1}, {1}});
  const auto model = ModelOf(gr);
  const prism::engine::CommShape pair{2, 2, 1, 1};
  const int64_t t_long = model.CollectiveTime(g::ALLREDUCE, g::ALGORITHM_RING, prism::Bytes(64 << 20), pair).count();
  const int64_t w_long = model.RingWireTime(g::ALLREDUCE, prism::Bytes(64 << 20), pair).count();
  const int64_t t_short = model.CollectiveTime(g::ALLREDUCE, g::ALGORITHM_RING, prism::Bytes(1 << 20), pair).count();
  REQUIRE(t_long > w_long);
  CHECK(IterationNs(gr) == w_long + t_short);
  SimulationOptions calendar;
  calendar.nic_model = prism::engine::NicModel::kCalendar;
  CHECK(IterationNs(gr, calendar) == t_long + t_short);
}

// A long and a short collective of one GPU become ready at the same instant
// (the long one is handled first, on stream 0): the short one goes first,
// whatever the handling order, as fair sharing would let it finish first.
TEST_CASE("collectives ready at one instant are granted the NIC shortest first", "[daemon][engine][nic]") {
  g::Program p;
  p.set_streams(2);
  p.add_comm_slot_names("long"), p.add_comm_slot_names("short");
  AddCollective(p, 0, 64 << 20, 0);
  AddCollective(p, 1, 1 << 20, 1);
  const g::Graph probe = Custom(2, 1, {{0, 1}, {0, 1}}, {p}, {0, 0}, {{0, 1}, {0, 1}});
  const prism::engine::CommShape shape{2, 2, 1, 1};
  const auto model = ModelOf(probe);
  const int64_t t_long = model.CollectiveTime(g::ALLREDUCE, g::ALGORITHM_RING, prism::Bytes(64 << 20), shape).count();
  const int64_t t_short = model.CollectiveTime(g::ALLREDUCE, g::ALGORITHM_RING, prism::Bytes(1 << 20), shape).count();
  AddCompute(p, static_cast<uint64_t>(t_long), 1);  // after the short one, as long as the long one
  const g::Graph gr = Custom(2, 1, {{0, 1}, {0, 1}}, {p}, {0, 0}, {{0, 1}, {0, 1}});
  // Short first: both streams end at t_short + t_long. Long first (the
  // handling order): the short one waits for it, then the compute runs.
  CHECK(IterationNs(gr) == t_short + t_long);
}

TEST_CASE("iterations repeat the program, the graph attribute sets the default", "[daemon][engine]") {
  g::Graph gr = prism::testing::CollectiveGraph(16, g::ALLREDUCE, 1 << 20, g::ALGORITHM_RING, 2, 1000);
  SimulationOptions o;
  auto one = Simulate(gr, o);
  REQUIRE(one.ok());
  (*gr.mutable_job()->mutable_attributes())["iterations"] = "3";
  auto three = Simulate(gr, o);
  REQUIRE(three.ok());
  CHECK(three->report.iterations == 3);
  REQUIRE(three->report.iteration_times.size() == 3);
  for (auto t : three->report.iteration_times) CHECK(t == one->report.mean_iteration);
  o.iterations = 5;
  CHECK(Simulate(gr, o)->report.iteration_times.size() == 5);
}

TEST_CASE("peak memory is static plus the running maximum of deltas", "[daemon][engine]") {
  g::Program p;
  p.set_streams(1);
  p.set_static_memory_bytes(1000);
  for (int64_t d : {300, 200, -400, 250, -350}) AddCompute(p, 10)->mutable_compute()->set_memory_delta_bytes(d);
  auto r = Simulate(Custom(2, 2, {}, {p}, {0, 0}, {{}, {}}), {});
  REQUIRE(r.ok());
  REQUIRE(r->report.memory.size() == 1);
  CHECK(r->report.memory[0].peak_bytes == 1000 + 500);
  CHECK(r->report.memory[0].ranks == 2);
}

TEST_CASE("the same graph gives byte-identical JSON and trace twice", "[daemon][engine]") {
  prism::testing::TrainingSpec s;
  s.tp = 2, s.pp = 4, s.dp = 2, s.microbatches = 6, s.layers_per_stage = 2;
  s.cluster.gpus_per_node = 4;
  const g::Graph gr = prism::testing::TrainingGraph(s);
  for (bool classes : {true, false}) {
    SimulationOptions o;
    o.use_classes = classes;
    o.trace_ranks = std::vector<uint32_t>{0, 1, 4, 5, 8, 9};
    auto a = Simulate(gr, o);
    auto b = Simulate(gr, o);
    REQUIRE(a.ok());
    REQUIRE(b.ok());
    CHECK(a->report.ToJson(false) == b->report.ToJson(false));
    const std::string ta = a->TraceJson(gr);
    CHECK(ta == b->TraceJson(gr));
    const auto trace = nlohmann::json::parse(ta);  // valid JSON with ops and flows
    int complete = 0, flows = 0;
    for (const auto& e : trace["traceEvents"]) {
      complete += e["ph"] == "X";
      flows += e["ph"] == "s";
    }
    CHECK(complete > 100);
    CHECK(flows > 0);
    const auto json = nlohmann::json::parse(a->report.ToJson());
    for (const char* key : {"iteration_time_s", "iterations", "events", "events_per_second", "wall_s"})
      CHECK(json.contains(key));
  }
}

// Exposed communication (issue 27, item 12): only the time a collective is
// in flight while no compute runs. Two ranks of one node: stream 0 computes
// 10 us while stream 1's all-reduce of C ns (> 10 us) runs from time 0, so
// C - 10 us of it is exposed, per rank and iteration.
TEST_CASE("exposed communication excludes the time compute overlaps it", "[daemon][engine]") {
  g::Program p;
  p.set_streams(2);
  p.add_comm_slot_names("w");
  AddCompute(p, 10'000, 0);
  AddCollective(p, 0, 8 << 20, 1);
  const g::Graph gr = Custom(2, 2, {{0, 1}}, {p}, {0, 0}, {{0}, {0}});
  prism::engine::CommShape shape{2, 1, 2, 2};
  const int64_t coll =
      ModelOf(gr).CollectiveTime(g::ALLREDUCE, g::ALGORITHM_RING, prism::Bytes(8 << 20), shape).count();
  REQUIRE(coll > 10'000);
  auto r = Simulate(gr, {});
  REQUIRE(r.ok());
  CHECK(r->report.mean_iteration.count() == coll);
  CHECK(r->report.exposed_comm_s_mean == Approx(static_cast<double>(coll - 10'000) * 1e-9));
  CHECK(r->report.exposed_comm_s_max == Approx(static_cast<double>(coll - 10'000) * 1e-9));
}
