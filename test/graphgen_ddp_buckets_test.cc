// parallel.grad_buckets: megatron, Megatron-core's DistributedDataParallel
// buckets in the op order of a small job (docs/graphgen.md "Data parallel").
#include <catch2/catch.hpp>

#include <algorithm>
#include <string>
#include <vector>

#include "graphgen/job_graph.h"
#include "graphgen/job_spec.h"
#include "proto/graph_file.h"
#include "test/graphgen_test_util.h"

namespace pg = prism::graph;
using prism::graphgen::testing::GraphOf;
using prism::graphgen::testing::SmallJobYaml;

namespace {

// Labels of the collectives of `program`, in issue order, that are not
// tensor-parallel or pipeline traffic (what finish_grad_sync and the
// optimizer step issue), each with its dependency on an earlier op's label.
std::vector<std::string> TailLabels(const pg::Program& program) {
  std::vector<std::string> out;
  for (const auto& op : program.ops()) {
    std::string label;
    if (op.has_collective()) label = op.collective().label();
    else if (op.has_compute() && op.compute().label() == "optimizer") label = "optimizer";
    if (label.empty() || label.rfind("f.", 0) == 0 || label.rfind("b.", 0) == 0) continue;
    out.push_back(label);
  }
  return out;
}

uint64_t BytesOf(const pg::Program& program, const std::string& label) {
  for (const auto& op : program.ops())
    if (op.has_collective() && op.collective().label() == label) return op.collective().bytes();
  return 0;
}

}  // namespace

TEST_CASE("megatron buckets without overlap: one bucket reduced after the whole backward", "[graphgen][ddp]") {
  // tp2 pp2 dp2, tied embeddings: stage 0 and 1 each reduce one bucket, then
  // the embedding all-reduce, the grad norm, the optimizer, the param all-gather.
  const auto g = GraphOf(SmallJobYaml("{tp: 2, pp: 2, dp: 2, grad_buckets: megatron}"));
  for (const auto& program : g.programs()) {
    CHECK(TailLabels(program) == std::vector<std::string>{"dp.bucket0.rs", "embedding-grads", "grad-norm", "optimizer",
                                                          "dp.bucket0.param-ag"});
    // After the last backward compute, in program order.
    int last_backward = -1, bucket = -1;
    for (int i = 0; i < program.ops_size(); ++i) {
      const auto& op = program.ops(i);
      if (op.has_compute() && op.compute().label().rfind("b.", 0) == 0) last_backward = i;
      if (op.has_collective() && op.collective().label() == "dp.bucket0.rs") bucket = i;
    }
    CHECK(bucket > last_backward);
  }
  CHECK(g.job().attributes().at("grad_buckets") == "megatron");
}

TEST_CASE("megatron buckets: padded to lcm(dp size and 128) with the distributed optimizer", "[graphgen][ddp]") {
  const auto layer = GraphOf(SmallJobYaml("{tp: 2, pp: 2, dp: 2}"));
  const auto megatron = GraphOf(SmallJobYaml("{tp: 2, pp: 2, dp: 2, grad_buckets: megatron}"));
  const auto& p = megatron.programs(1);
  uint64_t per_layer_params = 0;  // the per-layer buckets padded to 2: their sum is the stage's parameters
  for (const auto& op : layer.programs(1).ops())
    if (op.has_collective() && op.collective().kind() == pg::REDUCESCATTER && op.stream() == 1)
      per_layer_params += op.collective().bytes() / 4;
  const uint64_t bucket = BytesOf(p, "dp.bucket0.rs") / 4;  // fp32 grads
  CHECK(bucket % 128 == 0);
  CHECK(bucket >= per_layer_params - 2 * 4);  // every layer's parameters, padding aside
  CHECK(bucket < per_layer_params + 128);
}

TEST_CASE("megatron buckets with overlap: bucket_size on the first stage, one bucket on the others", "[graphgen][ddp]") {
  // SmallJobYaml's layers hold well over 1,000 parameters each: with
  // bucket_size 1 every layer closes a bucket on stage 0.
  const auto g = GraphOf(SmallJobYaml("{tp: 2, pp: 2, dp: 2, grad_buckets: megatron, overlap_grad_reduce: true, "
                                      "bucket_size: 1}"));
  const auto first = TailLabels(g.programs(0));
  const auto last = TailLabels(g.programs(1));
  size_t first_buckets = 0;
  for (const auto& l : first) first_buckets += l.find(".rs") != std::string::npos ? 1 : 0;
  CHECK(first_buckets > 1);
  CHECK(std::count(last.begin(), last.end(), "dp.bucket0.rs") == 1);
  CHECK(std::find(last.begin(), last.end(), "dp.bucket1.rs") == last.end());
  // Megatron's default bucket size (40,000,000 parameters) holds a small model in one bucket.
  const auto defaults = GraphOf(
      "name: t\nmodel: {layers: 4, hidden: 256, heads: 8, seq_len: 128, vocab: 1024}\n"
      "parallel: {tp: 2, pp: 2, dp: 2, grad_buckets: megatron, overlap_grad_reduce: true}\n");
  const auto labels = TailLabels(defaults.programs(0));
  CHECK(labels.front() == "dp.bucket0.rs");
  CHECK(std::find(labels.begin(), labels.end(), "dp.bucket1.rs") == labels.end());
}

TEST_CASE("bucket_size without grad_buckets: megatron is a named error", "[graphgen][ddp]") {
  auto spec = prism::graphgen::ParseJobSpec(SmallJobYaml("{tp: 2, bucket_size: 100}"));
  REQUIRE_FALSE(spec.ok());
  CHECK(std::string(spec.status().message()).find("parallel.bucket_size: applies to Megatron's buckets only") !=
        std::string::npos);
}

TEST_CASE("clip_grad: false drops the grad-norm all-reduce (a torch optimizer)", "[graphgen][ddp]") {
  const auto g = GraphOf(SmallJobYaml("{tp: 2, pp: 2, dp: 2, grad_buckets: megatron, distributed_optimizer: false, "
                                      "clip_grad: false}"));
  CHECK(TailLabels(g.programs(0)) == std::vector<std::string>{"dp.bucket0.ar", "embedding-grads", "optimizer"});
}

TEST_CASE("examples/megatron: one fp32 bucket of the stage's parameters, all-reduced, then the optimizer",
          "[graphgen][ddp]") {
  // Megatron-core's GPT with RMSNorm, no linear biases, untied embeddings, TP2,
  // h = 1024, ffn = 4096, 4 layers a stage, by parameter shape:
  //   layer: qkv 3h*h/2 + proj h*h/2 + fc1, fc2 2*h*ffn/2 + 2 norms h = 6,293,504
  //   stage 0: + word embedding 16384/2*h + positions 1024*h; stage 1: + output 16384/2*h + final norm h.
  const uint64_t layer = 6'293'504;
  const uint64_t stage0 = 4 * layer + 8'388'608 + 1'048'576;
  const uint64_t stage1 = 4 * layer + 8'388'608 + 1'024;
  for (const char* name : {"gpt-8", "gpt-1024"}) {
    INFO(name);
    auto spec = prism::graphgen::ParseJobSpecFile(std::string(PRISM_EXAMPLES_DIR) + "/megatron/" + name + ".yaml");
    REQUIRE(spec.ok());
    auto g = prism::graphgen::GenerateJobGraph(*spec);
    REQUIRE(g.ok());
    CHECK(prism::graph::ValidateGraph(*g).ok());
    for (int s = 0; s < 2; ++s) {
      CHECK(TailLabels(g->programs(s)) == std::vector<std::string>{"dp.bucket0.ar", "optimizer"});
      CHECK(BytesOf(g->programs(s), "dp.bucket0.ar") == 4 * (s == 0 ? stage0 : stage1));
    }
    CHECK(g->job().attributes().at("megatron_version") == "core_v0.19.0");
  }
}

TEST_CASE("megatron buckets with virtual pipeline: one DDP per model chunk, reduced in chunk order",
          "[graphgen][ddp]") {
  // vpp 2: each stage holds chunks 0 and 1, each its own DistributedDataParallel and bucket.
  const auto g = GraphOf(SmallJobYaml("{tp: 2, pp: 2, dp: 2, vpp: 2, global_batch: 4, grad_buckets: megatron}"));
  for (const auto& program : g.programs()) {
    const auto labels = TailLabels(program);
    REQUIRE(labels.size() >= 2);
    CHECK(labels[0] == "dp.bucket0.rs");
    CHECK(labels[1] == "dp.bucket1.rs");
  }
  // Stage 0's chunk 0 holds the embedding: its bucket is the larger one.
  CHECK(BytesOf(g.programs(0), "dp.bucket0.rs") > BytesOf(g.programs(0), "dp.bucket1.rs"));
}
