// The report's throughput (tokens/s, TFLOP/s per GPU, MFU) agrees with the
// iteration time and the model's FLOPs worked by hand, and the pipeline
// bubble is reported apart from the other exposed communication.
#include <catch2/catch.hpp>

#include "daemon/engine/simulation.h"
#include "graphgen/job_graph.h"
#include "graphgen/job_spec.h"
#include "nlohmann/json.hpp"

namespace {

// GPT-like, 8 layers, h = 1024, 16 heads (MHA), s = 1024, vocab 32768
// (already a multiple of 128 * tp), GeLU MLP 4h; TP2 PP2 DP2, 8 sequences.
constexpr const char* kJob = R"(name: mfu
model: {layers: 8, hidden: 1024, heads: 16, seq_len: 1024, vocab: 32768}
parallel: {tp: 2, pp: 2, dp: 2, micro_batch: 1, global_batch: 8, sequence_parallel: true}
cluster:
  gpus_per_node: 8
  gpu: {name: H100, bf16_tflops: 989, hbm_gbps: 3350, memory_gib: 80}
  nic: {count: 8, gbps: 400, latency_us: 5}
  nvlink: {gbps: 3600, latency_us: 1}
)";

prism::engine::SimulationReport Report(const std::string& yaml) {
  auto spec = prism::graphgen::ParseJobSpec(yaml);
  REQUIRE(spec.ok());
  auto graph = prism::graphgen::GenerateJobGraph(*spec);
  REQUIRE(graph.ok());
  auto r = prism::engine::Simulate(*graph, {});
  REQUIRE(r.ok());
  return r->report;
}

}  // namespace

TEST_CASE("throughput: tokens/s, TFLOP/s per GPU and MFU from the iteration time and the model's FLOPs",
          "[engine][report]") {
  const auto report = Report(kJob);
  // Model FLOPs per token, forward (docs/reference.md): per layer
  // 2h(h + 2*kv*d) [QKV] + 2h^2 [projection] + 2sh [causal attention core]
  // + 2*2*h*4h [MLP], then 2hV [logits]; backward twice forward.
  const double h = 1024, s = 1024, layers = 8, vocab = 32768;
  const double per_layer = 2 * h * (h + 2 * h) + 2 * h * h + 2 * s * h + 2 * 2 * h * 4 * h;
  const double forward_per_token = layers * per_layer + 2 * h * vocab;
  const double tokens = 8 * 1024;
  const double model_flops = 3 * forward_per_token * tokens;
  const double seconds = report.mean_iteration.seconds();
  REQUIRE(report.throughput.known);
  CHECK(report.throughput.tokens_per_iteration == 8 * 1024);
  CHECK(report.throughput.model_flops_per_iteration == Approx(model_flops).epsilon(1e-9));
  CHECK(report.throughput.tokens_per_s == Approx(tokens / seconds).epsilon(1e-12));
  CHECK(report.throughput.tflops_per_gpu == Approx(model_flops / seconds / 8 / 1e12).epsilon(1e-9));
  CHECK(report.throughput.peak_tflops_per_gpu == Approx(989));
  CHECK(report.throughput.mfu == Approx(model_flops / seconds / 8 / 989e12).epsilon(1e-9));
  CHECK(report.throughput.mfu > 0);
  CHECK(report.throughput.mfu < 1);

  const auto j = nlohmann::json::parse(report.ToJson());
  CHECK(j["throughput"]["tokens_per_s"].get<double>() == Approx(tokens / seconds).epsilon(1e-12));
  CHECK(j["throughput"]["mfu"].get<double>() == Approx(report.throughput.mfu));
  CHECK(j["throughput"]["tflops_per_gpu"].get<double>() == Approx(report.throughput.tflops_per_gpu));
  CHECK(report.ToText().find("MFU") != std::string::npos);
}

TEST_CASE("throughput: recomputation costs time, not model FLOPs", "[engine][report]") {
  std::string selective = kJob;
  selective.replace(selective.find("sequence_parallel: true"), 23, "sequence_parallel: true, recompute: full");
  const auto plain = Report(kJob), redo = Report(selective);
  CHECK(redo.throughput.model_flops_per_iteration == plain.throughput.model_flops_per_iteration);
  CHECK(redo.mean_iteration > plain.mean_iteration);
  CHECK(redo.throughput.mfu < plain.throughput.mfu);
}

TEST_CASE("throughput: the pipeline bubble apart from the other exposed communication", "[engine][report]") {
  const auto report = Report(kJob);
  // Two stages, four microbatches: each stage waits on the other.
  CHECK(report.pipeline_wait_s_mean > 0);
  CHECK(report.pipeline_wait_s_mean <= report.exposed_comm_s_mean);
  CHECK(report.pipeline_wait_s_max <= report.exposed_comm_s_max);
  const auto j = nlohmann::json::parse(report.ToJson());
  CHECK(j["pipeline_wait_s"]["mean_per_rank"].get<double>() == Approx(report.pipeline_wait_s_mean));
  CHECK(j["exposed_other_communication_s"]["mean_per_rank"].get<double>() ==
        Approx(report.exposed_comm_s_mean - report.pipeline_wait_s_mean));

  std::string one_stage = kJob;
  one_stage.replace(one_stage.find("pp: 2, dp: 2"), 12, "pp: 1, dp: 4");
  const auto flat = Report(one_stage);
  CHECK(flat.pipeline_wait_s_mean == 0);
  CHECK(flat.exposed_comm_s_mean > 0);
}

TEST_CASE("throughput: null in the JSON when the graph gives no FLOPs or batch", "[engine][report]") {
  const prism::engine::SimulationReport report;
  CHECK_FALSE(report.throughput.known);
  CHECK(nlohmann::json::parse(report.ToJson())["throughput"].is_null());
  CHECK(report.ToText().find("MFU") == std::string::npos);
}

TEST_CASE("throughput: a hybrid run's report reads its steady iterations, the start-up iteration apart",
          "[engine][report]") {
  auto spec = prism::graphgen::ParseJobSpec(kJob);
  REQUIRE(spec.ok());
  auto graph = prism::graphgen::GenerateJobGraph(*spec);
  REQUIRE(graph.ok());
  prism::engine::SimulationOptions options;
  options.iterations = 3;
  auto r = prism::engine::Simulate(*graph, options);
  REQUIRE(r.ok());
  prism::engine::SimulationReport report = r->report;
  // As a live run's: iteration 0 held the real ranks' start-up (NCCL's set-up), ten times a step.
  const prism::Nanoseconds step = report.iteration_times[1];
  report.iteration_times[0] = prism::Nanoseconds(10 * step.count());
  report.mean_iteration = prism::Nanoseconds((10 * step.count() + 2 * step.count()) / 3);

  prism::engine::MarkHybridRun(*graph, report);
  CHECK(report.hybrid);
  CHECK(report.SteadyIteration().count() == (report.iteration_times[1].count() + report.iteration_times[2].count()) / 2);
  REQUIRE(report.throughput.known);
  CHECK(report.throughput.tokens_per_s == Approx(8 * 1024 / report.SteadyIteration().seconds()).epsilon(1e-12));
  CHECK(report.throughput.tflops_per_gpu ==
        Approx(report.throughput.model_flops_per_iteration / report.SteadyIteration().seconds() / 8 / 1e12)
            .epsilon(1e-9));
  const std::string text = report.ToText();
  CHECK(text.find("predicted iteration time") == std::string::npos);
  CHECK(text.find("this hybrid run's iteration time: ") != std::string::npos);
  CHECK(text.find("steady (mean of iterations 1-2; iteration 0, the start-up,") != std::string::npos);
  const auto j = nlohmann::json::parse(report.ToJson());
  CHECK(j["hybrid"].get<bool>());
  CHECK(j["steady_iteration_time_s"].get<double>() == Approx(report.SteadyIteration().seconds()));

  // Iteration 0 alone: no steady figure, and no throughput from a start-up.
  prism::engine::SimulationReport first = r->report;
  first.iteration_times.resize(1);
  prism::engine::MarkHybridRun(*graph, first);
  CHECK_FALSE(first.throughput.known);
  CHECK(first.ToText().find("no steady iteration") != std::string::npos);
}
