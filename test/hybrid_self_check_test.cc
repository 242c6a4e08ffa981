// The hybrid path's self-check: real ranks that behave exactly as the model
// plays them must leave the model's timeline unchanged. Their reports are the
// simulation's own (ModelRecording); the replay's iteration times must equal
// prismd --simulate's. A difference is time the hybrid mode adds or loses by
// itself, which would show up as error against every ground truth.
#include <algorithm>
#include <catch2/catch.hpp>

#include "graphgen/job_graph.h"
#include "graphgen/job_spec.h"

#include <filesystem>

#include "daemon/engine/simulation.h"
#include "daemon/hybrid/session_replay.h"
#include "graphgen/fidelity_graph.h"
#include "test/daemon_test_graphs.h"

namespace d = prism::daemon;
namespace g = prism::graph;

namespace {

constexpr int64_t kStart = 1'800'000'000'000'000'000;

g::Graph StepGraph(uint32_t tp, uint32_t pp, uint32_t dp, uint32_t iterations) {
  prism::graphgen::FidelitySpec s;
  s.name = "self-check";
  s.kind = "step";
  s.tp = tp, s.pp = pp, s.dp = dp;
  s.iterations = iterations;
  s.warmup = 0;
  s.microbatches = 4;
  s.layers = 2;
  s.fwd_us = 1500, s.bwd_us = 3000, s.optimizer_us = 1000;
  s.tp_bytes = 2 << 20, s.pp_bytes = 4 << 20, s.dp_bytes = 16 << 20;
  auto graph = prism::graphgen::GenerateFidelityGraph(s);
  REQUIRE(graph.ok());
  return *std::move(graph);
}

g::Graph BenchSpecGraph(const std::string& name, uint32_t iterations) {
  auto spec = prism::graphgen::ParseFidelitySpecFile(std::string(PRISM_FIDELITY_SPECS) + "/" + name);
  REQUIRE(spec.ok());
  spec->iterations = iterations;
  spec->warmup = 0;
  auto graph = prism::graphgen::GenerateFidelityGraph(*spec);
  REQUIRE(graph.ok());
  return *std::move(graph);
}

std::vector<prism::Nanoseconds> Simulated(const g::Graph& graph, bool use_classes = false) {
  prism::engine::SimulationOptions o;
  o.use_classes = use_classes;
  auto r = prism::engine::Simulate(graph, o);
  REQUIRE(r.ok());
  return r->report.iteration_times;
}

// The replay ends with the recording: the real ranks' last iteration cannot
// finish (nothing reports the end of its trailing compute), so iterations
// before it are compared.
void CheckSelfConsistent(const g::Graph& graph, const std::vector<uint32_t>& real) {
  const auto model = Simulated(graph);
  // prismd --simulate plays one actor per equivalence class; a hybrid run
  // cannot (a real rank's neighbours are its own actors). Both must give the
  // same times, whatever order the engine handles simultaneous events in
  // (they differed by 19% on step-n8 while a NIC had one busy-until instant:
  // daemon/engine/nic_calendar.h).
  const auto reduced = Simulated(graph, /*use_classes=*/true);
  REQUIRE(reduced.size() == model.size());
  for (size_t i = 0; i < model.size(); ++i) {
    INFO("iteration " << i << ": one actor per rank " << model[i].count() << " ns, one per class "
                      << reduced[i].count() << " ns");
    CHECK(model[i] == reduced[i]);
  }
  auto rec = d::ModelRecording(graph, real, kStart);
  REQUIRE(rec.ok());
  auto replay = d::ReplaySessions(graph, *rec);
  INFO(replay.status().message());
  REQUIRE(replay.ok());
  CHECK(replay->ops_unmatched == 0);
  CHECK(replay->divergences == 0);
  CHECK(replay->forecast_misses == 0);  // every forecast the members' own arrival (docs/timing.md)
  REQUIRE(model.size() >= 2);
  REQUIRE(replay->iteration_times.size() + 1 >= model.size());
  for (size_t i = 0; i + 1 < model.size(); ++i) {
    INFO("iteration " << i << ": model " << model[i].count() << " ns, hybrid " << replay->iteration_times[i].count()
                      << " ns");
    CHECK(replay->iteration_times[i] == model[i]);
  }
}

}  // namespace

TEST_CASE("self-check: a ring all-reduce sequence with a model-exact real rank keeps the model's times",
          "[hybrid][self-check]") {
  g::Graph graph = prism::testing::CollectiveGraph(8, g::ALLREDUCE, 1 << 20, g::ALGORITHM_RING, 4, 1'000'000);
  (*graph.mutable_job()->mutable_attributes())["iterations"] = "3";
  CheckSelfConsistent(graph, {0});
}

TEST_CASE("self-check: TP2 PP2 DP2 step with one model-exact real rank keeps the model's times",
          "[hybrid][self-check]") {
  CheckSelfConsistent(StepGraph(2, 2, 2, 3), {0});
}

TEST_CASE("self-check: TP2 PP2 DP2 step with two model-exact real ranks keeps the model's times",
          "[hybrid][self-check]") {
  CheckSelfConsistent(StepGraph(2, 2, 2, 3), {0, 4});
}

TEST_CASE("self-check: TP2 PP2 DP4 step with one model-exact real rank keeps the model's times",
          "[hybrid][self-check]") {
  CheckSelfConsistent(StepGraph(2, 2, 4, 3), {0});
}

// The experiments measured on the GPU host (bench/fidelity/specs), with the
// real ranks those runs used.
TEST_CASE("self-check: bench step-n8 with real ranks 0 and 4, and with 0", "[hybrid][self-check]") {
  const g::Graph graph = BenchSpecGraph("step-n8.yaml", 3);
  CheckSelfConsistent(graph, {0, 4});
  CheckSelfConsistent(graph, {0});
}

TEST_CASE("self-check: bench step-n16 with real rank 0, and with 0 and 1", "[hybrid][self-check]") {
  const g::Graph graph = BenchSpecGraph("step-n16.yaml", 3);
  CheckSelfConsistent(graph, {0});
  CheckSelfConsistent(graph, {0, 1});
}

// The slower-link variants the 16-core host's truths hold (2026-12-01, commit 38ec962).
TEST_CASE("self-check: bench step-n8-2g5 and step-n16-2g5 with the real ranks the GPU runs used",
          "[hybrid][self-check]") {
  const g::Graph n8 = BenchSpecGraph("step-n8-2g5.yaml", 3);
  CheckSelfConsistent(n8, {0, 4});
  CheckSelfConsistent(n8, {0});
  CheckSelfConsistent(BenchSpecGraph("step-n16-2g5.yaml", 3), {0, 4});
}

// The layouts the fidelity issue (22) added, with the real ranks run-gpu.sh's hybrid1 and hybrid2 use
// (0, and SECOND_REAL = tp * dp): TP4 PP2 DP2, TP2 PP4 DP2 (and its slow virtual rank), TP1 PP2 DP8, and the
// TP2 PP2 DP2 step the issue was filed from.
TEST_CASE("self-check: bench step-n16-tp4-2g5, step-n16-pp4-2g5(-slow), step-n16-dp8-2g5, step-n8-mb6-2g5",
          "[hybrid][self-check]") {
  for (const auto& [spec, second] : std::vector<std::pair<std::string, uint32_t>>{
           {"step-n16-tp4-2g5.yaml", 8}, {"step-n16-pp4-2g5.yaml", 4}, {"step-n16-pp4-2g5-slow.yaml", 4},
           {"step-n16-dp8-2g5.yaml", 8}, {"step-n8-mb6-2g5.yaml", 4}}) {
    INFO(spec);
    const g::Graph graph = BenchSpecGraph(spec, 3);
    CheckSelfConsistent(graph, {0});
    CheckSelfConsistent(graph, {0, second});
  }
}

// TP 1: no TP groups and no TP all-reduces; pp and dp still at least 2.
TEST_CASE("a fidelity step with tp 1 has no TP group and no TP all-reduce", "[hybrid][spec]") {
  auto spec = prism::graphgen::ParseFidelitySpec(
      "name: t\nkind: step\nlayout: {tp: 1, pp: 2, dp: 4}\nstep: {pp_bytes: 1M, dp_bytes: 4M}\n", "test");
  REQUIRE(spec.ok());
  auto graph = prism::graphgen::GenerateFidelityGraph(*spec);
  REQUIRE(graph.ok());
  CHECK(graph->ranks_size() == 8);
  for (const g::Communicator& c : graph->communicators()) CHECK(c.kind() != g::COMM_KIND_TP);
  int dp_ops = 0;
  for (const g::Op& op : graph->programs(0).ops()) {
    if (!op.has_collective()) continue;
    CHECK(op.collective().kind() != g::ALLREDUCE);
    ++dp_ops;
  }
  CHECK(dp_ops == 4);  // two layers: an all-gather and a reduce-scatter each
  auto bad = prism::graphgen::ParseFidelitySpec(
      "name: t\nkind: step\nlayout: {tp: 2, pp: 2, dp: 1}\nstep: {tp_bytes: 1M, pp_bytes: 1M, dp_bytes: 4M}\n",
      "test");
  REQUIRE_FALSE(bad.ok());
  CHECK(std::string(bad.status().message()).find("dp at least 2") != std::string::npos);
  auto no_tp_bytes = prism::graphgen::ParseFidelitySpec(
      "name: t\nkind: step\nlayout: {tp: 2, pp: 2, dp: 2}\nstep: {pp_bytes: 1M, dp_bytes: 4M}\n", "test");
  REQUIRE_FALSE(no_tp_bytes.ok());
  CHECK(std::string(no_tp_bytes.status().message()).find("tp_bytes") != std::string::npos);
}

// The graph of an inline fidelity spec (the spec and the graph must be good).
g::Graph InlineSpecGraph(const std::string& yaml) {
  auto spec = prism::graphgen::ParseFidelitySpec(yaml, "test");
  INFO(spec.status().message());
  REQUIRE(spec.ok());
  auto graph = prism::graphgen::GenerateFidelityGraph(*spec);
  INFO(graph.status().message());
  REQUIRE(graph.ok());
  return *std::move(graph);
}

// PP 1 (TP 1 too): an FSDP-like step, its DP all-gathers and reduce-scatters
// on the world communicator, no pipeline group, no send; it plays and
// replays to itself with a real rank.
TEST_CASE("a fidelity step with pp 1 has no pipeline and, with tp 1, its DP collectives on the world",
          "[hybrid][spec]") {
  const g::Graph graph = InlineSpecGraph(
      "name: t\nkind: step\niterations: 3\nwarmup: 0\nlayout: {tp: 1, pp: 1, dp: 8}\n"
      "step: {microbatches: 2, layers: 2, fwd_us: 100, bwd_us: 200, optimizer_us: 50, dp_bytes: 8M}\n");
  CHECK(graph.ranks_size() == 8);
  CHECK(graph.programs_size() == 1);
  CHECK(graph.communicators_size() == 1);  // the world alone
  int collectives = 0;
  for (const g::Op& op : graph.programs(0).ops()) {
    CHECK_FALSE(op.has_send());
    CHECK_FALSE(op.has_recv());
    if (!op.has_collective()) continue;
    ++collectives;
    CHECK(graph.programs(0).comm_slot_names(static_cast<int>(op.collective().comm_slot())) == "dp");
  }
  CHECK(collectives == 4);  // two layers: an all-gather and a reduce-scatter each
  for (const g::Rank& r : graph.ranks()) CHECK(r.comm_slots(3) == graph.communicators(0).id());
  CheckSelfConsistent(graph, {0});
  CheckSelfConsistent(graph, {0, 1});
  // TP 2, PP 1: TP groups and DP groups, still no pipeline group.
  const g::Graph tp2 =
      InlineSpecGraph("name: t\nkind: step\nlayout: {tp: 2, pp: 1, dp: 4}\nstep: {tp_bytes: 1M, dp_bytes: 4M}\n");
  for (const g::Communicator& c : tp2.communicators()) CHECK(c.kind() != g::COMM_KIND_PP);
}

// Every spec in the folder parses and makes a graph (a spec is the whole
// experiment: a broken one would only show on the GPU host).
TEST_CASE("every bench fidelity spec parses and generates its graph", "[hybrid][spec]") {
  int specs = 0;
  for (const auto& entry : std::filesystem::directory_iterator(PRISM_FIDELITY_SPECS)) {
    if (entry.path().extension() != ".yaml") continue;
    INFO(entry.path().string());
    auto spec = prism::graphgen::ParseFidelitySpecFile(entry.path().string());
    REQUIRE(spec.ok());
    if (spec->ranks() > 64) continue;  // step-n8192: its own test above
    spec->iterations = 1;
    spec->warmup = 0;
    CHECK(prism::graphgen::GenerateFidelityGraph(*spec).ok());
    ++specs;
  }
  CHECK(specs >= 15);
}

// The full-scale step, one real rank (about a second of CPU).
TEST_CASE("self-check: bench step-n8192 with real rank 0", "[hybrid][self-check]") {
  CheckSelfConsistent(BenchSpecGraph("step-n8192.yaml", 3), {0});
}

// The FSDP-like step over all 8192 ranks (PAT all-gathers and
// reduce-scatters on the world), one real rank.
TEST_CASE("self-check: bench step-n8192-fsdp-pat with real rank 0", "[hybrid][self-check]") {
  CheckSelfConsistent(BenchSpecGraph("step-n8192-fsdp-pat.yaml", 3), {0});
}

TEST_CASE("a fidelity spec's algorithm makes its all-reduces tree, other collectives stay ring", "[hybrid][spec]") {
  const std::string yaml =
      "name: t\nkind: sweep\nalgorithm: tree\nworld: 4\nsweep: {ops: [allreduce, allgather], sizes: [16M]}\n";
  auto spec = prism::graphgen::ParseFidelitySpec(yaml, "test");
  REQUIRE(spec.ok());
  CHECK(spec->algorithm == "tree");
  auto graph = prism::graphgen::GenerateFidelityGraph(*spec);
  REQUIRE(graph.ok());
  int tree = 0, ring = 0;
  for (const g::Op& op : graph->programs(0).ops()) {
    if (!op.has_collective()) continue;
    const bool is_tree = op.collective().algorithm() == g::ALGORITHM_TREE;
    CHECK(is_tree == (op.collective().kind() == g::ALLREDUCE));
    (is_tree ? tree : ring)++;
  }
  CHECK(tree > 0);
  CHECK(ring > 0);
  auto bad = prism::graphgen::ParseFidelitySpec(
      "name: t\nkind: sweep\nalgorithm: nvls\nworld: 4\nsweep: {ops: [allreduce], sizes: [16M]}\n", "test");
  REQUIRE_FALSE(bad.ok());
  CHECK(std::string(bad.status().message()).find("algorithm") != std::string::npos);
}

TEST_CASE("a fidelity spec's pat makes its all-gathers and reduce-scatters PAT", "[hybrid][spec][pat]") {
  auto spec = prism::graphgen::ParseFidelitySpec(
      "name: t\nkind: sweep\nalgorithm: pat\nworld: 4\nsweep: {ops: [allreduce, allgather, reducescatter], "
      "sizes: [16M]}\n",
      "test");
  REQUIRE(spec.ok());
  auto graph = prism::graphgen::GenerateFidelityGraph(*spec);
  REQUIRE(graph.ok());
  int pat = 0;
  for (const g::Op& op : graph->programs(0).ops()) {
    if (!op.has_collective()) continue;
    const bool gathers = op.collective().kind() == g::ALLGATHER || op.collective().kind() == g::REDUCESCATTER;
    CHECK((op.collective().algorithm() == g::ALGORITHM_PAT) == gathers);
    pat += gathers;
  }
  CHECK(pat > 0);
}

TEST_CASE("self-check: PAT all-gathers and reduce-scatters with a model-exact real rank keep the model's times",
          "[hybrid][self-check][pat]") {
  prism::testing::ClusterSpec one_gpu_nodes;
  one_gpu_nodes.gpus_per_node = 1;
  one_gpu_nodes.nics_per_node = 1;
  for (g::CollectiveKind kind : {g::ALLGATHER, g::REDUCESCATTER}) {
    g::Graph graph = prism::testing::CollectiveGraph(8, kind, 4 << 20, g::ALGORITHM_PAT, 4, 1'000'000, one_gpu_nodes);
    (*graph.mutable_job()->mutable_attributes())["iterations"] = "3";
    CheckSelfConsistent(graph, {0});
  }
}

// A slower virtual rank the graph names (spec `straggler:`) delays the real
// ranks as the model says: its own program, every compute scaled, and a
// model-exact real rank's hybrid iterations equal the model's.
TEST_CASE("self-check: a straggler from the spec gets its own slower program and delays the real rank",
          "[hybrid][self-check][spec]") {
  const std::string base = R"(name: straggler
kind: step
link: {gbps: 2.5, latency_us: 10}
iterations: 3
warmup: 0
layout: {tp: 2, pp: 2, dp: 2}
step: {microbatches: 4, layers: 2, fwd_us: 1500, bwd_us: 3000, optimizer_us: 1000,
       tp_bytes: 2M, pp_bytes: 4M, dp_bytes: 16M}
)";
  auto plain = prism::graphgen::ParseFidelitySpec(base, "plain");
  auto slow = prism::graphgen::ParseFidelitySpec(base + "straggler: {rank: 3, compute_scale: 1.2}\n", "slow");
  REQUIRE(plain.ok());
  REQUIRE(slow.ok());
  auto plain_graph = prism::graphgen::GenerateFidelityGraph(*plain);
  auto slow_graph = prism::graphgen::GenerateFidelityGraph(*slow);
  REQUIRE(plain_graph.ok());
  REQUIRE(slow_graph.ok());
  // Rank 3 (stage 0) runs a third program; rank 2, same stage, keeps stage 0's.
  REQUIRE(slow_graph->programs_size() == 3);
  CHECK(slow_graph->ranks(3).program() == 2);
  CHECK(slow_graph->ranks(2).program() == 0);
  const g::Program& stage0 = slow_graph->programs(0);
  const g::Program& straggler = slow_graph->programs(2);
  REQUIRE(straggler.ops_size() == stage0.ops_size());
  int scaled = 0;
  for (int i = 0; i < stage0.ops_size(); ++i) {
    if (!stage0.ops(i).has_compute()) continue;
    CHECK(straggler.ops(i).compute().duration_ns() == stage0.ops(i).compute().duration_ns() * 6 / 5);
    scaled += stage0.ops(i).compute().duration_ns() > 0;
  }
  CHECK(scaled == 17);  // 8 forwards, 8 backwards, the optimizer
  // Everyone waits for it: each iteration gets longer. (By 40.7 ms, 401.4 ->
  // 442.1 ms, for the straggler's own 7.4 ms of extra compute: the engine
  // gives a collective its members' NICs for its whole duration, so TP
  // all-reduces shifted into the DP all-gather wait behind all of it. Whether
  // NCCL's interleaving does that is what bench/fidelity's
  // step-n8-2g5-straggler is for; docs/timing.md "Limits".)
  const auto before = Simulated(*plain_graph);
  const auto after = Simulated(*slow_graph);
  REQUIRE(before.size() == after.size());
  for (size_t i = 0; i < before.size(); ++i) {
    INFO("iteration " << i << ": " << before[i].count() << " -> " << after[i].count() << " ns");
    CHECK(after[i].count() > before[i].count() + 1'000'000);
  }
  CheckSelfConsistent(*slow_graph, {0});
  // Bad straggler entries name the key.
  auto outside = prism::graphgen::ParseFidelitySpec(base + "straggler: {rank: 8, compute_scale: 1.2}\n", "x");
  REQUIRE_FALSE(outside.ok());
  CHECK_THAT(std::string(outside.status().message()),
             Catch::Contains("straggler.rank: 8 is outside the 8-rank layout"));
  auto half = prism::graphgen::ParseFidelitySpec(base + "straggler: {rank: 1}\n", "x");
  REQUIRE_FALSE(half.ok());
  CHECK_THAT(std::string(half.status().message()), Catch::Contains("needs rank and compute_scale"));
}

TEST_CASE("a model-exact real rank reports the algorithm the model played, NCCL's choice included", "[hybrid]") {
  // 64 ranks, one GPU per node: the model plays NCCL's choice for the
  // all-gathers (not the graph's "default"), and the stand-in real rank
  // must report that, as its NCCL would (before 2026-12-02 it reported ring).
  prism::testing::ClusterSpec cluster;
  cluster.gpus_per_node = 1;
  const g::Graph gr =
      prism::testing::CollectiveGraph(64, g::ALLGATHER, 64 << 10, g::ALGORITHM_DEFAULT, 2, 1000, cluster);
  auto sim = prism::engine::Simulate(gr, prism::engine::SimulationOptions());
  REQUIRE(sim.ok());
  std::string played;
  for (const auto& row : sim->report.algorithms)
    if (row.kind == "allgather") played = row.algorithm;
  REQUIRE_FALSE(played.empty());
  INFO("the model plays " << played);
  auto rec = prism::daemon::ModelRecording(gr, {0}, 1'000'000'000);
  REQUIRE(rec.ok());
  int started = 0;
  for (const auto& line : rec->lines) {
    if (line.kind != prism::daemon::RecordedLine::kEvents) continue;
    for (const auto& e : line.events.events()) {
      if (!e.has_op_started()) continue;
      ++started;
      const prism::rpc::OpAlgorithm want = played == "Tree"  ? prism::rpc::OP_ALGO_TREE
                                           : played == "PAT" ? prism::rpc::OP_ALGO_OTHER
                                                             : prism::rpc::OP_ALGO_RING;
      CHECK(e.op_started().algorithm() == want);
    }
  }
  CHECK(started == 2);
}

TEST_CASE("forecasts: with model-exact real ranks, Megatron-core's TP rings are forecast from the rank's previous "
          "ring, and every forecast is the members' arrival", "[hybrid][self-check][forecast]") {
  auto spec = prism::graphgen::ParseJobSpecFile(std::string(PRISM_EXAMPLES_DIR) + "/megatron/gpt-8.yaml");
  REQUIRE(spec.ok());
  auto graph = prism::graphgen::GenerateJobGraph(*spec);
  REQUIRE(graph.ok());
  (*graph->mutable_job()->mutable_attributes())["iterations"] = "3";
  for (const std::vector<uint32_t>& real : {std::vector<uint32_t>{0}, std::vector<uint32_t>{0, 4}}) {
    auto rec = d::ModelRecording(*graph, real, kStart);
    REQUIRE(rec.ok());
    auto replay = d::ReplaySessions(*graph, *rec);
    INFO(replay.status().message());
    REQUIRE(replay.ok());
    uint64_t tp_rings = 0;  // the real ranks' all-reduces over 2 ranks (TP2)
    for (const auto& line : rec->lines)
      if (line.kind == d::RecordedLine::kEvents)
        for (const auto& e : line.events.events())
          tp_rings += e.has_op_started() && e.op_started().key().kind() == prism::rpc::OP_ALL_REDUCE &&
                      e.op_started().comm_size() == 2;
    INFO(real.size() << " real rank(s): " << replay->forecasts.size() << " forecasts, " << tp_rings << " TP rings");
    // An unpaced replay applies most reports before the members arrive (no
    // forecast needed then); those it forecasts must hold to the nanosecond.
    CHECK(replay->forecasts.size() > 0);
    CHECK(replay->forecasts.size() <= tp_rings);
    CHECK(replay->forecast_misses == 0);
  }
}

TEST_CASE("forecasts: with a model-exact real rank of stage 0, its pipeline receives from the virtual stage 1 are "
          "timed before the engine plays the send, at the send's own time", "[hybrid][self-check][forecast]") {
  // Megatron-core TP2 PP2: the virtual stage-1 rank's backward ends with a TP
  // all-reduce with its virtual TP peer, then sends the gradient to the real
  // rank. Once that all-reduce is resolved, the send's first byte is known
  // (docs/timing.md, "Forecast pipeline receives").
  auto spec = prism::graphgen::ParseJobSpecFile(std::string(PRISM_EXAMPLES_DIR) + "/megatron/gpt-8.yaml");
  REQUIRE(spec.ok());
  auto graph = prism::graphgen::GenerateJobGraph(*spec);
  REQUIRE(graph.ok());
  (*graph->mutable_job()->mutable_attributes())["iterations"] = "3";
  auto rec = d::ModelRecording(*graph, {0}, kStart);
  REQUIRE(rec.ok());
  auto replay = d::ReplaySessions(*graph, *rec);
  INFO(replay.status().message());
  REQUIRE(replay.ok());
  // One schedule per pipeline receive (a forecast that held is not sent again).
  std::vector<std::string> recvs;
  for (const auto& s : replay->schedules)
    if (s.schedule.key().kind() == prism::rpc::OP_RECV) recvs.push_back(s.schedule.key().SerializeAsString());
  std::sort(recvs.begin(), recvs.end());
  INFO(recvs.size() << " pipeline receive schedules, " << replay->send_forecasts << " forecast");
  CHECK(recvs.size() > 0);
  CHECK(std::adjacent_find(recvs.begin(), recvs.end()) == recvs.end());
  // Every forecast is the time the engine then played (else a miss).
  CHECK(replay->send_forecasts > 0);
  CHECK(replay->forecast_misses == 0);
}
