// FLOP counts and compute times against hand-worked figures (issue 27,
// item 12): Megatron's published per-layer formula for GPT-3 175B, the
// backward pass's 2x, and the layernorm-gradient reduction of interleaved
// sequence-parallel stages.
#include <catch2/catch.hpp>

#include <fstream>
#include <iterator>
#include <map>

#include "graphgen/cost_model.h"
#include "test/graphgen_test_util.h"

namespace pg = prism::graph;
using prism::graphgen::CostModel;
using prism::graphgen::testing::GraphOf;
using prism::graphgen::testing::LabelOf;
using prism::graphgen::testing::SmallJobYaml;
using prism::graphgen::testing::SpecOf;

namespace {

std::string ExampleJob(const std::string& name) {
  std::ifstream in(std::string(PRISM_EXAMPLES_DIR) + "/" + name);
  REQUIRE(in.good());
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

// Compute ops of rank 0's program by label.
std::map<std::string, const pg::ComputeOp*> ComputeOps(const pg::Graph& g) {
  std::map<std::string, const pg::ComputeOp*> out;
  const pg::Program& p = g.programs(static_cast<int>(g.ranks(0).program()));
  for (const pg::Op& op : p.ops())
    if (op.has_compute()) out.emplace(LabelOf(op), &op.compute());
  return out;
}

}  // namespace

// Narayanan et al., "Efficient Large-Scale Language Model Training on GPU
// Clusters Using Megatron-LM" (SC'21), section 5.1: one transformer layer's
// forward pass takes 24*B*s*h^2 + 4*B*s^2*h FLOPs. The causal mask halves
// the attention core (QK^T and AV, 4*B*s^2*h of it), which Prism counts:
// 24*B*s*h^2 + 2*B*s^2*h. For GPT-3 175B (h = 12288, s = 2048, B = 1):
//   24 * 2048 * 12288^2        = 7,421,703,487,488
//    2 * 2048^2 * 12288        =   103,079,215,104
//   per layer                  = 7,524,782,702,592, / tp 8 = 940,597,837,824 per GPU,
// of which attention (8*B*s*h^2 + 2*B*s^2*h) / 8 = 322,122,547,200
// and the MLP (16*B*s*h^2) / 8 = 618,475,290,624.
TEST_CASE("GPT-3 175B's per-layer forward FLOPs are Megatron's formula with a causal mask",
          "[graphgen][flops]") {
  const CostModel cm(SpecOf(ExampleJob("gpt3-175b-8192.yaml")));
  CHECK(cm.Attention().fwd_flops == 322'122'547'200ull);
  CHECK(cm.Mlp().fwd_flops == 618'475'290'624ull);
  CHECK((cm.Attention().fwd_flops + cm.Mlp().fwd_flops) * 8 == 7'524'782'702'592ull);
}

// The roofline charges the backward pass twice the forward's FLOPs and
// bytes (dX and dW each cost a forward), so its time is twice the
// forward's, up to the rounding of each to whole nanoseconds.
TEST_CASE("backward compute takes twice the forward's FLOPs and roofline time", "[graphgen][flops]") {
  const CostModel cm(SpecOf(ExampleJob("gpt3-175b-8192.yaml")));
  for (const auto& [name, c] : {std::pair{"attention", cm.Attention()}, std::pair{"mlp", cm.Mlp()}}) {
    INFO(name << ": fwd " << c.fwd_ns << " ns, bwd " << c.bwd_ns << " ns");
    CHECK(c.fwd_ns > 0);
    CHECK(c.bwd_ns >= 2 * c.fwd_ns - 1);
    CHECK(c.bwd_ns <= 2 * c.fwd_ns);
  }
  const pg::Graph g = GraphOf(SmallJobYaml("{tp: 2, dp: 1, global_batch: 1}"));
  const auto ops = ComputeOps(g);
  for (const std::string sub : {"attn", "mlp"}) {
    const auto f = ops.find("f.L0." + sub), b = ops.find("b.L0." + sub);
    INFO(sub);
    REQUIRE(f != ops.end());
    REQUIRE(b != ops.end());
    CHECK(f->second->flops() > 0);
    CHECK(b->second->flops() == 2 * f->second->flops());
  }
}

// With sequence parallelism the layernorm weights are replicated across the
// TP group and their gradients all-reduced over it once per iteration: one
// stage holds layers / pp layers whatever vpp is. SmallJobYaml: 8 layers,
// h = 1024, pp 2, vpp 2: 4 layers x 2 norms x 1024 weights = 8192 gradients
// of 4 bytes (fp32, the default grad_dtype) = 32,768 bytes.
TEST_CASE("interleaved sequence-parallel stages all-reduce every chunk's layernorm gradients",
          "[graphgen][flops]") {
  const pg::Graph g =
      GraphOf(SmallJobYaml("{tp: 2, pp: 2, vpp: 2, dp: 1, global_batch: 4, sequence_parallel: true}"));
  const pg::Program& p = g.programs(static_cast<int>(g.ranks(0).program()));
  int found = 0;
  for (const pg::Op& op : p.ops()) {
    if (!op.has_collective() || op.collective().label() != "tp.layernorm-grads") continue;
    ++found;
    CHECK(op.collective().bytes() == 32'768u);
  }
  CHECK(found == 1);
}
