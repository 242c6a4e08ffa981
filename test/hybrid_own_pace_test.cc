// A captured collective's own pace (graph.proto CollectiveOp.measured_ns,
// docs/capture.md, "A collective's own pace"): a follow capture measures it,
// the engine takes at least it, graph rounds keep it and the step cost the
// graph carries, so --simulate agrees with the hybrid run and refine rounds
// settle. On synthetic recordings and on the GPU host's follow capture of
// TorchTitan FSDP2 at 1024 ranks (test/fixtures/capture/titan-1024-fsdp-follow).
#include <catch2/catch.hpp>

#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "common/ring_step.h"
#include "daemon/engine/nccl_tuning.h"
#include "daemon/engine/network_model.h"
#include "daemon/hybrid/follow_capture.h"
#include "daemon/hybrid/session_recorder.h"
#include "daemon/hybrid/step_cost_fit.h"
#include "daemon/hybrid/torch_trace.h"
#include "graphgen/capture_recording.h"
#include "graphgen/cli.h"
#include "graphgen/extrapolate.h"
#include "proto/graph_file.h"
#include "test/daemon_test_graphs.h"
#include "test/hybrid_harness.h"

namespace g = prism::graph;
using prism::Nanoseconds;

namespace {

const std::string kTitan = std::string(PRISM_HYBRID_FIXTURES) + "/../capture/titan-1024-fsdp-follow";

double Simulated(const g::Graph& graph) {
  auto seconds = prism::testing::SimulatedRingSeconds(graph);
  INFO((seconds.ok() ? "" : std::string(seconds.status().message())));
  REQUIRE(seconds.ok());
  return *seconds;
}

// prism-graphgen extrapolate RECORDINGS --cluster CLUSTER_GRAPH, as prism capture runs it.
g::Graph Extrapolated(const std::vector<prism::graphgen::Recording>& recordings, const std::string& cluster) {
  const std::string dir = "/tmp/prism-own-pace-test-" + std::to_string(::getpid());
  const std::string out = dir + ".graph";
  std::filesystem::remove_all(dir);
  std::filesystem::create_directory(dir);
  for (const auto& r : recordings)
    std::ofstream(dir + "/rank-" + std::to_string(r.header.rank()) + ".capture.jsonl")
        << prism::graphgen::EncodeRecording(r);
  std::ostringstream cli_out, cli_err;
  const int rc = prism::graphgen::RunGraphgenCli({"prism-graphgen", "extrapolate", dir, "--cluster", cluster, "-o", out},
                                                 cli_out, cli_err);
  INFO(cli_err.str());
  REQUIRE(rc == 0);
  auto graph = g::ReadGraphFile(out);
  REQUIRE(graph.ok());
  std::filesystem::remove_all(dir);
  std::remove(out.c_str());
  return *graph;
}

g::Graph WithoutOwnPace(g::Graph graph) {
  for (g::Program& p : *graph.mutable_programs())
    for (g::Op& op : *p.mutable_ops())
      if (op.has_collective()) op.mutable_collective()->clear_measured_ns();
  return graph;
}

struct TitanCapture {
  prism::daemon::Recording sessions;
  g::Graph world;
  prism::daemon::FollowCapture capture;
};

TitanCapture CaptureTitan() {
  TitanCapture t;
  auto sessions = prism::daemon::ReadRecording(kTitan + "/sessions.rec");
  INFO(sessions.status().message());
  REQUIRE(sessions.ok());
  t.sessions = std::move(*sessions);
  auto world = g::ReadGraphFile(kTitan + "/world.graph");
  REQUIRE(world.ok());
  t.world = std::move(*world);
  auto traces = prism::daemon::ReadTorchTraces(kTitan + "/torch");
  REQUIRE(traces.ok());
  auto capture = prism::daemon::CaptureFromFollow(t.sessions, 1, &*traces);
  INFO((capture.ok() ? "" : std::string(capture.status().message())));
  REQUIRE(capture.ok());
  REQUIRE(capture->recordings.size() == 1);
  // NCCL's step cost as prism capture fits it (the follow run played 0).
  const auto timings = prism::daemon::RingOpTimings(t.sessions, t.world);
  const auto fits = prism::daemon::FitStepCost(timings.at(0), t.world.cluster(), Nanoseconds(0));
  bool kept = true;
  for (auto& e : prism::daemon::RoundStepCosts(fits, 0, t.world.cluster(), false, &kept))
    *capture->recordings[0].header.add_nccl_step_costs() = e;
  CHECK_FALSE(kept);
  t.capture = std::move(*capture);
  return t;
}

}  // namespace

TEST_CASE("own pace: the engine takes a long latency-bound ring's measured own pace when it is over the "
          "model's time, and only there",
          "[hybrid][own_pace]") {
  prism::testing::ClusterSpec links;  // TorchTitan's runs: one GPU per node, 10 Gbit/s, 10 us
  links.gpus_per_node = 1;
  links.nics_per_node = 1;
  links.nic_bps = 10'000'000'000;
  links.nic_latency_ns = 10'000;
  auto with_pace = [](g::Graph graph, uint64_t ns) {
    for (g::Program& p : *graph.mutable_programs())
      for (g::Op& op : *p.mutable_ops())
        if (op.has_collective()) op.mutable_collective()->set_measured_ns(ns);
    return graph;
  };
  // An all-gather of 4 KiB per member over 64 ranks: 3.3 us of wire per step, latency-bound.
  const g::Graph ring = prism::testing::CollectiveGraph(64, g::ALLGATHER, 64 << 12, g::ALGORITHM_RING, 1, 0, links);
  const double model = Simulated(ring);
  CHECK(Simulated(with_pace(ring, 1)) == model);  // under the model's time: the model's
  const auto over = static_cast<uint64_t>(model * 1e9) + 5'000'000;
  CHECK(Simulated(with_pace(ring, over)) == Approx(model + 0.005).margin(1e-5));
  // 1 MiB per member: 839 us of wire per step, bandwidth-bound: the link model's time stands.
  const g::Graph wide = prism::testing::CollectiveGraph(64, g::ALLGATHER, 64 << 20, g::ALGORITHM_RING, 1, 0, links);
  const double wide_model = Simulated(wide);
  CHECK(Simulated(with_pace(wide, static_cast<uint64_t>(wide_model * 1e9) + 5'000'000)) == wide_model);
  // A ring of 8 (7 steps): too short for NCCL's step cost to be its pace.
  const g::Graph short_ring = prism::testing::CollectiveGraph(8, g::ALLGATHER, 8 << 12, g::ALGORITHM_RING, 1, 0, links);
  const double short_model = Simulated(short_ring);
  CHECK(Simulated(with_pace(short_ring, static_cast<uint64_t>(short_model * 1e9) + 5'000'000)) == short_model);
}

// The GPU host's follow capture of TorchTitan FSDP2 at 1024 ranks (main 11645f3, prismd
// --step-cost-us 0; the fixture's README.md). In a run with the captured graph the plugin holds
// each virtual receive to the lockstep floor, the model's ring step with the graph's step cost
// (common/ring_step.h), so a real rank's ring takes the larger of the model's time and its own
// NCCL's; its own is what the follow run measured. --simulate must give that.
TEST_CASE("own pace: TorchTitan FSDP2 at 1024 ranks: --simulate of the captured graph is the hybrid's "
          "max(model, own pace) per ring, and a refine round moves it under 0.5%",
          "[hybrid][follow][capture][own_pace][titan]") {
  TitanCapture t = CaptureTitan();
  const g::Graph captured = Extrapolated(t.capture.recordings, kTitan + "/world.graph");
  const auto chosen = prism::engine::GraphNcclStepCost(captured.cluster());
  REQUIRE(chosen.has_value());
  CHECK(chosen->cost.microseconds() == Approx(10.89).margin(0.005));  // "LL ring 10.89 us per step" on the GPU host
  const double simulated = Simulated(captured);
  const double model_only = Simulated(WithoutOwnPace(captured));

  // The hybrid's expected time: the model's plus, per ring the real rank ran alone, what its own
  // time was over the floor (the model's ring time with the graph's c), per iteration.
  const prism::engine::NetworkModel model(prism::engine::NetworkModel::LinkFiguresFromCluster(captured.cluster()));
  const auto timings = prism::daemon::RingOpTimings(t.sessions, t.world).at(0);
  REQUIRE(timings.size() == 280);  // 10 iterations of 28
  double over_ns = 0;
  for (size_t i = 28; i < timings.size(); ++i) {  // iteration 0 is warm-up
    const auto& op = timings[i];
    const bool overlapped = (i > 0 && timings[i - 1].end > op.first_send) ||
                            (i + 1 < timings.size() && timings[i + 1].first_send < op.end);
    if (overlapped) continue;
    const uint64_t n = op.shape.ranks, h = op.kind == g::ALLREDUCE ? 2 * (n - 1) : n - 1;
    const Nanoseconds wire = model.RingWireTime(op.kind, op.bytes, op.shape);
    const Nanoseconds floor = prism::RingStepsTime(prism::RingStepWire(wire, h), model.HopLatency(op.shape) +
                                                   chosen->cost, h, prism::kNcclRingSlicesPerStep);
    over_ns += static_cast<double>(std::max<int64_t>((op.end - op.first_send - floor).count(), 0));
  }
  const double hybrid = model_only + over_ns / 9 / 1e9;
  INFO("captured graph: " << simulated << " s; without the own paces " << model_only
                          << " s; the hybrid's expected time " << hybrid << " s");
  CHECK(simulated == Approx(hybrid).epsilon(0.005));
  CHECK(model_only != Approx(hybrid).epsilon(0.005));  // the model alone is over 1% faster (the all-gathers)

  // Refine round 1 on the GPU host (a graph run): its measured compute per op; the step cost and the
  // own paces are the graph's (a graph round keeps them).
  std::ifstream in(kTitan + "/round-1-rank-0.capture.jsonl");
  std::stringstream text;
  text << in.rdbuf();
  auto round1 = prism::graphgen::ParseRecording(text.str(), "round-1");
  REQUIRE(round1.ok());
  auto rec = prism::graphgen::RecordingFromGraph(captured, 0);
  REQUIRE(rec.ok());
  size_t k = 0;
  for (g::Op& op : rec->ops) {
    if (!op.has_compute()) continue;
    while (k < round1->ops.size() && !round1->ops[k].has_compute()) ++k;
    REQUIRE(k < round1->ops.size());
    op.mutable_compute()->set_duration_ns(round1->ops[k++].compute().duration_ns());
  }
  bool kept = false;
  const auto again = prism::daemon::RoundStepCosts({}, 0, captured.cluster(), true, &kept);
  CHECK(kept);
  for (const auto& e : again) *rec->header.add_nccl_step_costs() = e;
  const std::string captured_file = "/tmp/prism-own-pace-test-captured-" + std::to_string(::getpid()) + ".graph";
  REQUIRE(g::WriteGraphFile(captured, captured_file).ok());
  const double refined = Simulated(Extrapolated({*rec}, captured_file));
  std::remove(captured_file.c_str());
  INFO("round 1's graph: " << refined << " s");
  CHECK(std::abs(refined / simulated - 1) < 0.005);
}

TEST_CASE("own pace: a graph round keeps its graph's step cost and a follow round takes its fit",
          "[hybrid][step_cost][own_pace]") {
  TitanCapture t = CaptureTitan();
  const auto timings = prism::daemon::RingOpTimings(t.sessions, t.world).at(0);
  // As if the run had played 9 us: most rings come out above it and fit.
  const auto fits = prism::daemon::FitStepCost(timings, t.world.cluster(), Nanoseconds(9'000));
  REQUIRE(fits.size() == 1);
  REQUIRE(fits[0].cost.has_value());
  g::Cluster played = t.world.cluster();
  auto* e = played.add_nccl_step_costs();
  e->set_protocol("LL");
  e->set_algorithm(g::ALGORITHM_RING);
  e->set_cost_ns(9'000);
  e->set_ops(200);
  e->set_source("measured by prism capture on rank 0, 200 ops");
  bool kept = false;
  auto entries = prism::daemon::RoundStepCosts(fits, 0, played, /*graph_round=*/true, &kept);
  CHECK(kept);
  REQUIRE(entries.size() == 1);
  CHECK(entries[0].cost_ns() == 9'000);
  CHECK(entries[0].source() == "kept: measured by prism capture on rank 0, 200 ops");
  entries = prism::daemon::RoundStepCosts(fits, 0, played, /*graph_round=*/false, &kept);
  CHECK_FALSE(kept);
  REQUIRE(entries.size() == 1);
  CHECK(entries[0].cost_ns() == static_cast<uint64_t>(fits[0].cost->count()));
}
