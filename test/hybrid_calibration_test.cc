// Calibration of all-virtual collectives by a real rank's measurement
// (docs/timing.md, "Calibration"): a measurement from the start-up iteration,
// where NCCL connects and warms up, calibrates nothing. On the GPU host
// (Megatron-core at 1024 ranks, real rank 5, 2026-12-02) the real rank's
// first DP all-reduce took 39.6 ms from its first send, later ones 9 ms; the
// first one timed every all-virtual DP all-reduce of its stage for the rest
// of the run, and the virtual half of the real rank's TP pairs started each
// iteration 32 ms after it.
#include <catch2/catch.hpp>

#include <optional>

#include "absl/container/flat_hash_map.h"

#include "daemon/engine/simulation.h"
#include "daemon/hybrid/session_replay.h"
#include "test/daemon_test_graphs.h"

namespace d = prism::daemon;
namespace g = prism::graph;
using prism::Nanoseconds;

namespace {

constexpr int64_t kStart = 1'800'000'000'000'000'000;

// TP2 PP2 DP`dp`, 4 microbatches of 2 layers a stage, 2 MiB activations,
// `gpus_per_node` GPUs (and NICs) a node, the DP collectives on a second
// stream or on the compute one.
g::Graph Tp2Pp2(uint32_t dp, uint64_t grad_bytes, bool dp_on_second_stream, uint32_t gpus_per_node,
                uint32_t iterations) {
  prism::testing::TrainingSpec s;
  s.tp = 2, s.pp = 2, s.dp = dp;
  s.microbatches = 4;
  s.layers_per_stage = 2;
  s.activation_bytes = 2 << 20;
  s.grad_bytes = grad_bytes;
  s.dp_on_second_stream = dp_on_second_stream;
  s.cluster.gpus_per_node = gpus_per_node;
  s.cluster.nics_per_node = gpus_per_node;
  g::Graph graph = prism::testing::TrainingGraph(s);
  (*graph.mutable_job()->mutable_attributes())["iterations"] = std::to_string(iterations);
  return graph;
}

// TP2 PP2 DP4, two GPUs per node (a TP pair per node), the DP collectives on
// the compute stream: the DP groups {0,2,4,6} and {1,3,5,7} of the first
// stage have the same shape, and with real rank 0 the second is all-virtual.
g::Graph Tp2Pp2Dp4(uint32_t iterations) { return Tp2Pp2(4, 64 << 20, false, 2, iterations); }

// The model-exact recording of real rank 0, except that its first DP
// reduce-scatter of iteration `iteration` (of `iterations`) starts sending `late` after the model's time and
// ends `late + slow` after it (everything the rank does from its first send
// on moves by that much): a clean measurement `slow` longer than the model's.
// `nth`: which of the iteration's operations of `kind` (default the first).
d::Recording SlowOperation(d::Recording rec, prism::rpc::OpKind kind, uint64_t iteration, uint64_t iterations,
                           Nanoseconds late, Nanoseconds slow, uint64_t nth = 0) {
  std::vector<uint64_t> ids;
  for (const auto& line : rec.lines)
    for (const auto& e : line.events.events())
      if (e.has_op_started() && e.op_started().key().kind() == kind) ids.push_back(e.op_started().op_id());
  REQUIRE(ids.size() % iterations == 0);
  REQUIRE(!ids.empty());
  REQUIRE(nth < ids.size() / iterations);
  const uint64_t op_id = ids[iteration * (ids.size() / iterations) + nth];
  uint64_t first_send = 0;
  for (const auto& line : rec.lines)
    for (const auto& e : line.events.events())
      if (e.has_op_finished() && e.op_finished().op_id() == op_id) first_send = e.op_finished().first_send_ns();
  REQUIRE(first_send > 0);
  const auto move = [&](uint64_t t) { return t >= first_send ? t + static_cast<uint64_t>((late + slow).count()) : t; };
  for (auto& line : rec.lines) {
    if (line.at >= static_cast<int64_t>(first_send)) line.at += (late + slow).count();
    for (auto& e : *line.events.mutable_events()) {
      if (e.has_op_started()) e.mutable_op_started()->set_at_ns(move(e.op_started().at_ns()));
      if (!e.has_op_finished()) continue;
      auto* f = e.mutable_op_finished();
      f->set_end_ns(move(f->end_ns()));
      f->set_first_send_ns(f->op_id() == op_id ? first_send + late.count() : move(f->first_send_ns()));
    }
  }
  return rec;
}

d::Recording SlowReduceScatter(const g::Graph& graph, uint64_t iteration, uint64_t iterations, Nanoseconds late,
                               Nanoseconds slow) {
  auto rec = d::ModelRecording(graph, {0}, kStart);
  REQUIRE(rec.ok());
  return SlowOperation(*std::move(rec), prism::rpc::OP_REDUCE_SCATTER, iteration, iterations, late, slow);
}

// `rec` as a PyTorch program reports it: its CPU runs ahead of the GPU, so
// NCCL reaches an operation long before the GPU gets there. Each OpStarted
// of `kind` moves into the line that reported the latest end of an
// operation of `after` (stamped then): the side stream's reduce-scatter,
// reached once the all-gather before it ended, is in flight for the engine
// through the whole iteration while it waits on the GPU for its backward.
d::Recording ReachedEarly(d::Recording rec, prism::rpc::OpKind kind, prism::rpc::OpKind after) {
  std::vector<std::pair<size_t, prism::rpc::Event>> moved;  // (target line, event)
  std::optional<size_t> after_line;
  absl::flat_hash_map<uint64_t, prism::rpc::OpKind> kinds;  // op_id -> kind
  for (size_t i = 0; i < rec.lines.size(); ++i) {
    auto* events = rec.lines[i].events.mutable_events();
    for (int j = 0; j < events->size();) {
      const auto& e = events->Get(j);
      if (e.has_op_started()) kinds[e.op_started().op_id()] = e.op_started().key().kind();
      if (e.has_op_started() && e.op_started().key().kind() == kind && after_line && *after_line < i) {
        prism::rpc::Event early = e;
        early.mutable_op_started()->set_at_ns(rec.lines[*after_line].at);
        moved.emplace_back(*after_line, std::move(early));
        events->DeleteSubrange(j, 1);
        continue;
      }
      if (e.has_op_finished() && kinds[e.op_finished().op_id()] == after) after_line = i;
      ++j;
    }
  }
  for (auto& [line, event] : moved) *rec.lines[line].events.add_events() = std::move(event);
  return rec;
}

std::vector<Nanoseconds> Replayed(const g::Graph& graph, const d::Recording& rec,
                                  const prism::engine::NcclBehaviour& nccl = prism::engine::NcclBehaviour()) {
  auto replay = d::ReplaySessions(graph, rec, {}, nccl);
  INFO(replay.status().message());
  REQUIRE(replay.ok());
  CHECK(replay->divergences == 0);
  return replay->iteration_times;
}

}  // namespace

TEST_CASE("calibration: a slow DP reduce-scatter in the start-up iteration does not time the all-virtual ones after it",
          "[hybrid][calibration]") {
  const g::Graph graph = Tp2Pp2Dp4(4);
  prism::engine::SimulationOptions o;
  auto model = prism::engine::Simulate(graph, o);
  REQUIRE(model.ok());
  const auto& simulated = model->report.iteration_times;
  REQUIRE(simulated.size() == 4);
  const Nanoseconds late(20'000'000), slow(40'000'000);

  // Iteration 0: the real rank's slow all-reduce delays iteration 0 only.
  const auto startup = Replayed(graph, SlowReduceScatter(graph, 0, 4, late, slow));
  REQUIRE(startup.size() >= 3);
  CHECK(startup[0] >= simulated[0] + slow);
  for (size_t i = 1; i + 1 < simulated.size(); ++i) {
    INFO("iteration " << i << ": model " << simulated[i].count() << " ns, hybrid " << startup[i].count() << " ns");
    CHECK(startup[i] == simulated[i]);
  }
  // The engine before 2026-12-02 (NcclBehaviour::startup_calibrates, which
  // recordings made with it replay to): every later all-virtual
  // reduce-scatter of that shape took the 40 ms more.
  prism::engine::NcclBehaviour before;
  before.startup_calibrates = true;
  const auto old = Replayed(graph, SlowReduceScatter(graph, 0, 4, late, slow), before);
  REQUIRE(old.size() >= 2);
  CHECK(old[1] >= simulated[1] + slow);

  // Iteration 1: a steady iteration's clean measurement still calibrates: the
  // all-virtual group's all-reduce of iteration 2 takes it.
  const auto steady = Replayed(graph, SlowReduceScatter(graph, 1, 4, late, slow));
  REQUIRE(steady.size() >= 3);
  INFO("iteration 2: model " << simulated[2].count() << " ns, hybrid " << steady[2].count() << " ns");
  CHECK(steady[2] >= simulated[2] + Nanoseconds(slow.count() / 2));
}

// How many of `rank`'s all-reduces took at least `at_least` in the replay
// of `rec` (the rank plays virtually).
int LongAllReduces(const g::Graph& graph, const d::Recording& rec, uint32_t rank, Nanoseconds at_least,
                   const prism::engine::NcclBehaviour& nccl = prism::engine::NcclBehaviour()) {
  auto replay = d::ReplaySessions(graph, rec, {rank}, nccl);
  INFO(replay.status().message());
  REQUIRE(replay.ok());
  CHECK(replay->divergences == 0);
  const uint32_t actor = replay->actor_of_rank.at(rank);
  int n = 0;
  for (const auto& r : replay->trace) {
    if (r.actor != actor) continue;
    const g::Op& op = graph.programs(0).ops(static_cast<int>(r.op));
    if (op.has_collective() && op.collective().kind() == g::ALLREDUCE && r.end - r.start >= at_least) ++n;
  }
  return n;
}

TEST_CASE("calibration: a TP all-reduce across nodes calibrates while the side stream's reduce-scatter waits for "
          "its backward",
          "[hybrid][calibration]") {
  // TP2 PP2 DP2, a GPU per node (TP across nodes), the DP reduce-scatter,
  // optimizer and all-gather on a second stream. Ranks 2 and 3, the first
  // stage's other TP pair, are all-virtual and in step with real rank 0.
  constexpr uint64_t kIterations = 4;
  const g::Graph graph = Tp2Pp2(2, 16 << 20, true, 1, kIterations);

  auto rec = d::ModelRecording(graph, {0}, kStart);
  REQUIRE(rec.ok());
  const d::Recording early = ReachedEarly(*std::move(rec), prism::rpc::OP_REDUCE_SCATTER, prism::rpc::OP_ALL_GATHER);
  const Nanoseconds slow(5'000'000);
  // Early reports alone time nothing differently.
  CHECK(LongAllReduces(graph, early, 2, slow) == 0);
  // Iteration 1's third all-reduce (a forward TP one, no DP traffic in
  // flight) starts on time and takes 5 ms longer than the model's: rank 2's
  // next all-reduce takes it. Before 2026-12-05 no measurement was clean
  // here: the reduce-scatter NCCL had reached counted as communication in
  // flight, and the all-reduce's own hold of its virtual member's NIC as
  // other traffic.
  const d::Recording slowed =
      SlowOperation(early, prism::rpc::OP_ALL_REDUCE, 1, kIterations, Nanoseconds(0), slow, 2);
  CHECK(LongAllReduces(graph, slowed, 2, slow) >= 1);
  // prismd --no-calibration: rank 2 plays the model alone.
  prism::engine::NcclBehaviour model_only;
  model_only.calibrate = false;
  CHECK(LongAllReduces(graph, slowed, 2, slow, model_only) == 0);
}
