// Memory per rank: hand-worked activation figures with and without
// activation recomputation, uneven pipeline stages, and the flag for a peak
// over the GPU's memory (docs/graphgen.md, "Memory").
#include <catch2/catch.hpp>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <tuple>

#include "graphgen/cli.h"
#include "graphgen/inspect.h"
#include "graphgen/job_spec.h"
#include "test/graphgen_test_util.h"

namespace {

namespace pg = prism::graph;
using prism::graphgen::testing::GraphOf;
using prism::graphgen::testing::SpecOf;

constexpr int64_t kMiB = int64_t{1} << 20;

// One stage, one microbatch: t = 1024 tokens, h = 1024, so t*h = 1 Mi and
// every activation term of docs/graphgen.md is a whole number of MiB.
std::string OneStageJob(const std::string& recompute) {
  return "name: t\n"
         "model: {layers: 2, hidden: 1024, heads: 16, seq_len: 1024, vocab: 32768}\n"
         "parallel: {micro_batch: 1, global_batch: 1, recompute: " + recompute + "}\n"
         "cluster: {gpus_per_node: 8}\n";
}

int64_t PeakActivations(const pg::Program& p) {
  int64_t live = 0, peak = 0;
  for (const pg::Op& op : p.ops())
    if (op.has_compute()) peak = std::max(peak, live += op.compute().memory_delta_bytes());
  REQUIRE(live == 0);  // everything allocated is freed by the end of the iteration
  return peak;
}

}  // namespace

TEST_CASE("memory: hand-worked peaks without, with selective and with full recomputation",
          "[graphgen][memory]") {
  // Per layer (bytes per t*h, tp = 1, no SP): attention 10 + 5 = 15, MLP
  // 14 + 5 = 19, a layer's input 2; the embedding keeps 2, the logits t*v*4
  // = 1024 * 32768 * 4 = 128 MiB.
  // none:      2 + 2 * (15 + 19) + 128 = 198 MiB, at the end of the forward.
  // selective: 2 + 2 * (15 + 2)  + 128 = 164 MiB (each MLP keeps its input).
  // full:      2 + 2 * 2         + 128 = 134 MiB (each layer keeps its input;
  //            in backward at most 6 + 13 + 19 = 38 MiB are live).
  CHECK(PeakActivations(GraphOf(OneStageJob("none")).programs(0)) == 198 * kMiB);
  CHECK(PeakActivations(GraphOf(OneStageJob("selective")).programs(0)) == 164 * kMiB);
  CHECK(PeakActivations(GraphOf(OneStageJob("full")).programs(0)) == 134 * kMiB);
  // Static: parameters 2 * (4h^2 + 8h^2 + 2h) + (32768 + 1024) * h + h
  // = 57 Mi + 5120, times 2 (bf16) + 4 (fp32 grads) + 12 (optimizer, one shard).
  CHECK(GraphOf(OneStageJob("none")).programs(0).static_memory_bytes() == 18 * (57 * kMiB + 5120));
}

TEST_CASE("memory: recomputation adds forward time, no model FLOPs", "[graphgen][memory]") {
  auto totals = [](const pg::Program& p) {
    uint64_t ns = 0, flops = 0, redo = 0;
    for (const pg::Op& op : p.ops()) {
      if (!op.has_compute()) continue;
      ns += op.compute().duration_ns();
      flops += op.compute().flops();
      redo += op.compute().label().rfind("r.", 0) == 0;
    }
    return std::tuple{ns, flops, redo};
  };
  const auto [none_ns, none_flops, none_redo] = totals(GraphOf(OneStageJob("none")).programs(0));
  const auto [sel_ns, sel_flops, sel_redo] = totals(GraphOf(OneStageJob("selective")).programs(0));
  const auto [full_ns, full_flops, full_redo] = totals(GraphOf(OneStageJob("full")).programs(0));
  CHECK(none_redo == 0);
  CHECK(sel_redo == 2);   // one MLP per layer
  CHECK(full_redo == 4);  // attention and MLP per layer
  CHECK(none_flops == sel_flops);
  CHECK(none_flops == full_flops);
  CHECK(none_ns < sel_ns);
  CHECK(sel_ns < full_ns);
}

TEST_CASE("memory: uneven stages, 126 layers on PP16 (Llama 3 405B)", "[graphgen][memory]") {
  const std::string yaml =
      "name: t\n"
      "model: {layers: 126, hidden: 1024, heads: 16, seq_len: 1024, vocab: 32768}\n"
      "parallel: {pp: 16, vpp: 2, first_stage_layers: 7, last_stage_layers: 7, global_batch: 16}\n"
      "cluster: {gpus_per_node: 8}\n";
  const auto spec = SpecOf(yaml);
  const std::vector<uint32_t> chunks = prism::graphgen::ChunkLayers(spec);
  REQUIRE(chunks.size() == 32);
  CHECK(chunks[0] == 3);    // stage 0, chunk 0: beside the embedding
  CHECK(chunks[16] == 4);   // stage 0, chunk 1
  CHECK(chunks[15] == 4);   // stage 15, chunk 0
  CHECK(chunks[31] == 3);   // stage 15, chunk 1: beside the output layer
  for (uint32_t s = 1; s < 15; ++s) CHECK(prism::graphgen::StageLayers(spec, s) == 8);
  uint32_t total = 0;
  for (uint32_t c : chunks) total += c;
  CHECK(total == 126);
  // Each stage's program runs its own layers, every layer exactly once.
  const pg::Graph g = GraphOf(yaml);
  std::vector<int> seen(126, 0);
  for (const pg::Program& p : g.programs())
    for (const pg::Op& op : p.ops())
      if (op.has_compute() && op.compute().label().rfind("f.L", 0) == 0 &&
          op.compute().label().find(".attn") != std::string::npos) {
        const int layer = std::stoi(op.compute().label().substr(3));
        REQUIRE(layer < 126);
        ++seen[layer];
      }
  for (int l = 0; l < 126; ++l) CHECK(seen[l] == 16);  // one forward per microbatch
}

TEST_CASE("memory: uneven stages that do not add up are refused by key", "[graphgen][memory]") {
  auto error = [](const std::string& parallel) {
    auto spec = prism::graphgen::ParseJobSpec(prism::graphgen::testing::SmallJobYaml(parallel));
    REQUIRE_FALSE(spec.ok());
    return std::string(spec.status().message());
  };
  CHECK(error("{pp: 4, first_stage_layers: 3}").find("parallel.first_stage_layers") != std::string::npos);
  CHECK(error("{pp: 4, first_stage_layers: 9}").find("parallel.first_stage_layers") != std::string::npos);
  CHECK(error("{pp: 2, vpp: 2, first_stage_layers: 1, last_stage_layers: 7, global_batch: 2}")
            .find("fewer than parallel.vpp") != std::string::npos);
  CHECK(error("{recompute: some}").find("parallel.recompute: must be none, selective or full") != std::string::npos);
}

TEST_CASE("memory: Llama 3 405B peaks over 80 GiB and fits with selective recomputation",
          "[graphgen][memory]") {
  const std::string path = std::string(PRISM_EXAMPLES_DIR) + "/llama3-405b-16384.yaml";
  const pg::Graph g = GraphOf([&] {
    std::ostringstream y;
    y << std::ifstream(path).rdbuf();
    return y.str();
  }());
  const auto summary = prism::graphgen::InspectGraph(g, false);
  const std::string warning = prism::graphgen::MemoryWarning(summary);
  // The middle stages (8 layers) hold the most; the end stages' 7 keep
  // stage 0, which holds the most microbatches in flight, under 80 GiB.
  CHECK(warning.find("pp-stage-1 (1024 ranks) peaks at") != std::string::npos);
  CHECK(warning.find("parallel.recompute") != std::string::npos);
  CHECK(summary["classes"][0]["memory"]["over_capacity"] == false);
  CHECK(summary["classes"][1]["memory"]["over_capacity"] == true);

  std::ostringstream y;
  y << std::ifstream(path).rdbuf();
  std::string text = y.str();
  text.replace(text.find("recompute: none"), 15, "recompute: selective");
  const auto fits = prism::graphgen::InspectGraph(GraphOf(text), false);
  CHECK(prism::graphgen::MemoryWarning(fits).empty());
  for (const auto& c : fits["classes"]) CHECK(c["memory"]["over_capacity"] == false);
}

TEST_CASE("memory: prism-graphgen job warns on stderr and still writes the graph", "[graphgen][memory]") {
  const std::string out_path = prism::graphgen::testing::TempPath("405b.graph");
  std::ostringstream out, err;
  const int rc = prism::graphgen::RunGraphgenCli(
      {"prism-graphgen", "job", std::string(PRISM_EXAMPLES_DIR) + "/llama3-405b-16384.yaml", "-o", out_path}, out,
      err);
  CHECK(rc == 0);
  CHECK(err.str().find("prism-graphgen: warning: memory: pp-stage-1") != std::string::npos);
  CHECK(out.str().find("wrote ") != std::string::npos);
  std::remove(out_path.c_str());
}
