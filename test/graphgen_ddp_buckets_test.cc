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

TEST_CASE("megatron buckets without overlap: reduced after the whole backward, a tied embedding in its own",
          "[graphgen][ddp]") {
  // tp2 pp2 dp2, tied embeddings, distributed optimizer: the word embedding
  // (stage 0) and its copy in the output layer (stage 1) are shared across
  // stages, so DistributedOptimizer gives each a bucket of its own; both
  // buckets are reduced after the last backward, then the embedding
  // all-reduce, the grad norm, the optimizer, the parameter all-gathers.
  const auto g = GraphOf(SmallJobYaml("{tp: 2, pp: 2, dp: 2, grad_buckets: megatron}"));
  for (const auto& program : g.programs()) {
    CHECK(TailLabels(program) == std::vector<std::string>{"dp.bucket0.rs", "dp.bucket1.rs", "embedding-grads",
                                                          "grad-norm", "optimizer", "dp.bucket0.param-ag",
                                                          "dp.bucket1.param-ag"});
    int last_backward = -1, bucket = -1;
    for (int i = 0; i < program.ops_size(); ++i) {
      const auto& op = program.ops(i);
      if (op.has_compute() && op.compute().label().rfind("b.", 0) == 0) last_backward = i;
      if (op.has_collective() && op.collective().label() == "dp.bucket0.rs" && bucket < 0) bucket = i;
    }
    CHECK(bucket > last_backward);
  }
  CHECK(g.job().attributes().at("grad_buckets") == "megatron");
}

TEST_CASE("megatron buckets: 64-element parameter starts and lcm(dp and 128) bucket ends", "[graphgen][ddp]") {
  // h = 1056 (norms of 1056 elements are not 64-aligned), tp2 pp2 dp7, vocab
  // 32768, tied: worked from DistributedOptimizer's layout (d98e8a64dd):
  //   layer, backward order: fc2 2,230,272, fc1 2,230,272, norm 1,056, qkv 1,672,704, proj 557,568, norm 1,056
  //   stage 0: 4 layers + positions 1024*1056 -> 27,853,952 (padded to 896); the shared word embedding
  //            16384*1056 = 17,301,504 -> 17,301,760
  //   stage 1: the shared output weight -> 17,301,760; final norm + 4 layers -> 26,773,376
  //   without the distributed optimizer, stage 1 is one bucket of 44,074,272 (no padding).
  const std::string model =
      "name: t\nmodel: {layers: 8, hidden: 1056, heads: 16, seq_len: 1024, vocab: 32768}\n"
      "parallel: {tp: 2, pp: 2, dp: 7, grad_buckets: megatron";
  const auto g = GraphOf(model + "}\n");
  CHECK(BytesOf(g.programs(0), "dp.bucket0.rs") == 4 * 27'853'952ull);
  CHECK(BytesOf(g.programs(0), "dp.bucket1.rs") == 4 * 17'301'760ull);
  CHECK(BytesOf(g.programs(1), "dp.bucket0.rs") == 4 * 17'301'760ull);
  CHECK(BytesOf(g.programs(1), "dp.bucket1.rs") == 4 * 26'773'376ull);
  CHECK(BytesOf(g.programs(1), "dp.bucket1.param-ag") == 2 * 26'773'376ull);
  const auto ddp = GraphOf(model + ", distributed_optimizer: false}\n");
  CHECK(TailLabels(ddp.programs(1)).front() == "dp.bucket0.ar");
  CHECK(BytesOf(ddp.programs(1), "dp.bucket0.ar") == 4 * 44'074'272ull);
}

TEST_CASE("megatron buckets with overlap: bucket_size on the first stage, one bucket on the others", "[graphgen][ddp]") {
  // bucket_size 1: every parameter closes a bucket on stage 0 (six per layer).
  const auto g = GraphOf(SmallJobYaml("{tp: 2, pp: 2, dp: 2, grad_buckets: megatron, overlap_grad_reduce: true, "
                                      "bucket_size: 1}", "tied_embeddings: false"));
  const auto first = TailLabels(g.programs(0));
  const auto last = TailLabels(g.programs(1));
  size_t first_buckets = 0;
  for (const auto& l : first) first_buckets += l.find(".rs") != std::string::npos ? 1 : 0;
  CHECK(first_buckets == 4 * 6 + 2);  // 4 layers, positions, word embedding
  CHECK(std::count(last.begin(), last.end(), "dp.bucket0.rs") == 1);
  CHECK(std::find(last.begin(), last.end(), "dp.bucket1.rs") == last.end());
  // On stage 0 the first bucket is reduced during the backward, before the last layer's backward.
  int bucket = -1, last_backward = -1;
  for (int i = 0; i < g.programs(0).ops_size(); ++i) {
    const auto& op = g.programs(0).ops(i);
    if (op.has_compute() && op.compute().label().rfind("b.", 0) == 0) last_backward = i;
    if (op.has_collective() && op.collective().label() == "dp.bucket0.rs") bucket = i;
  }
  CHECK(bucket < last_backward);
  // Megatron's default bucket size (40,000,000 parameters) holds a small model in one bucket.
  const auto defaults = GraphOf(
      "name: t\nmodel: {layers: 4, hidden: 256, heads: 8, seq_len: 128, vocab: 1024, tied_embeddings: false}\n"
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
  const auto g = GraphOf(
      SmallJobYaml("{tp: 2, pp: 2, dp: 2, vpp: 2, global_batch: 4, grad_buckets: megatron}", "tied_embeddings: false"));
  for (const auto& program : g.programs()) {
    const auto labels = TailLabels(program);
    REQUIRE(labels.size() >= 2);
    CHECK(labels[0] == "dp.bucket0.rs");
    CHECK(labels[1] == "dp.bucket1.rs");
  }
  // Stage 0's chunk 0 holds the embedding: its bucket is the larger one.
  CHECK(BytesOf(g.programs(0), "dp.bucket0.rs") > BytesOf(g.programs(0), "dp.bucket1.rs"));
}

TEST_CASE("the next iteration's forward waits for the parameter all-gathers (param-sync), and without them for none",
          "[graphgen][ddp]") {
  const auto g = GraphOf(SmallJobYaml("{tp: 2, pp: 2, dp: 2, grad_buckets: megatron}"));
  for (const auto& program : g.programs()) {
    std::vector<uint32_t> gathers;
    for (int i = 0; i < program.ops_size(); ++i)
      if (program.ops(i).has_collective() && program.ops(i).collective().kind() == pg::ALLGATHER)
        gathers.push_back(static_cast<uint32_t>(i));
    REQUIRE(gathers.size() == 2);
    const auto& last = program.ops(program.ops_size() - 1);
    REQUIRE(last.has_compute());
    CHECK(last.compute().label() == "param-sync");
    CHECK(last.compute().duration_ns() == 0);
    CHECK(last.stream() == 0);  // the stream the next iteration's forward runs on
    CHECK(std::vector<uint32_t>(last.deps().begin(), last.deps().end()) == gathers);
  }
  const auto ddp = GraphOf(SmallJobYaml("{tp: 2, pp: 2, dp: 2, grad_buckets: megatron, distributed_optimizer: false}"));
  for (const auto& program : ddp.programs())
    for (const auto& op : program.ops()) CHECK_FALSE((op.has_compute() && op.compute().label() == "param-sync"));
}
