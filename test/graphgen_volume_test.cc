// Per-iteration communication volumes against closed forms computed here
// from the model dimensions (not from the generator's cost model).
#include <catch2/catch.hpp>

#include "test/graphgen_test_util.h"

namespace pg = prism::graph;
using prism::graphgen::testing::GraphOf;
using prism::graphgen::testing::LabelOf;
using prism::graphgen::testing::SlotOf;
using prism::graphgen::testing::SmallJobYaml;
using prism::graphgen::testing::TallyOps;

namespace {

// The SmallJobYaml model: 8 layers, h=1024, 16 heads (MHA), s=1024,
// V=32768 (a multiple of 128*tp, so no padding), ffn = 4h, GeLU MLP, learned
// position embedding, tied embeddings.
constexpr uint64_t kH = 1024, kS = 1024, kV = 32768, kF = 4 * kH, kLayers = 8;

uint64_t LayerParams(uint64_t tp) { return 4 * kH * kH / tp + 2 * kH * kF / tp + 2 * kH; }
uint64_t EmbeddingParams(uint64_t tp) { return kV / tp * kH + kS * kH; }
uint64_t OutputParams(uint64_t tp, uint64_t pp) { return (pp > 1 ? kV / tp * kH : 0) + kH; }

uint64_t StageParams(uint64_t tp, uint64_t pp, uint64_t stage) {
  uint64_t p = kLayers / pp * LayerParams(tp);
  if (stage == 0) p += EmbeddingParams(tp);
  if (stage == pp - 1) p += OutputParams(tp, pp);
  return p;
}

auto Is(const pg::Program& p, const std::string& slot, pg::CollectiveKind kind, const std::string& label_prefix = "") {
  return [&p, slot, kind, label_prefix](const pg::Op& op) {
    return op.has_collective() && op.collective().kind() == kind && SlotOf(p, op) == slot &&
           LabelOf(op).rfind(label_prefix, 0) == 0;
  };
}

}  // namespace

TEST_CASE("DDP all-reduces every gradient once, in fp32", "[graphgen][volume]") {
  const auto g = GraphOf(SmallJobYaml("{tp: 2, pp: 2, dp: 2, global_batch: 8, distributed_optimizer: false}"));
  REQUIRE(g.programs_size() == 2);
  for (uint32_t stage = 0; stage < 2; ++stage) {
    const auto& p = g.programs(stage);
    const auto ar = TallyOps(p, Is(p, "dp_cp", pg::ALLREDUCE));
    CHECK(ar.bytes == StageParams(2, 2, stage) * 4);
    CHECK(ar.count == kLayers / 2);  // one bucket per layer
    CHECK(TallyOps(p, Is(p, "dp_cp", pg::REDUCESCATTER)).count == 0);
    // Overlap: every DP op runs on stream 1 and depends on a backward op.
    for (const auto& op : p.ops())
      if (SlotOf(p, op) == "dp_cp") {
        CHECK(op.stream() == 1);
        CHECK(op.deps_size() == 1);
      }
  }
  // grad_dtype: bf16 halves the volume.
  const auto g16 = GraphOf(SmallJobYaml("{tp: 2, pp: 2, dp: 2, distributed_optimizer: false, grad_dtype: bf16}"));
  const auto& p16 = g16.programs(0);
  CHECK(TallyOps(p16, Is(p16, "dp_cp", pg::ALLREDUCE)).bytes == StageParams(2, 2, 0) * 2);
}

TEST_CASE("distributed optimizer reduce-scatters fp32 grads and all-gathers bf16 params", "[graphgen][volume]") {
  const auto g = GraphOf(SmallJobYaml("{tp: 2, pp: 2, dp: 2, sequence_parallel: true, distributed_optimizer: true}"));
  for (uint32_t stage = 0; stage < 2; ++stage) {
    const auto& p = g.programs(stage);
    CHECK(TallyOps(p, Is(p, "dp_cp", pg::REDUCESCATTER)).bytes == StageParams(2, 2, stage) * 4);
    CHECK(TallyOps(p, Is(p, "dp_cp", pg::ALLGATHER)).bytes == StageParams(2, 2, stage) * 2);
    CHECK(TallyOps(p, Is(p, "dp_cp", pg::ALLREDUCE)).count == 0);
  }
  // The optimizer waits for every reduce-scatter; the all-gathers come after it.
  const auto& p = g.programs(0);
  int optimizer = -1;
  for (int i = 0; i < p.ops_size(); ++i)
    if (p.ops(i).has_compute() && p.ops(i).compute().label() == "optimizer") optimizer = i;
  REQUIRE(optimizer >= 0);
  for (int i = 0; i < p.ops_size(); ++i) {
    const auto& op = p.ops(i);
    if (op.has_collective() && op.collective().kind() == pg::ALLGATHER && SlotOf(p, op) == "dp_cp") CHECK(i > optimizer);
  }
}

TEST_CASE("tensor-parallel collectives per layer, without and with SP", "[graphgen][volume]") {
  const uint64_t microbatches = 4, layers_per_stage = kLayers / 2, buffer = 1 * kS * kH * 2;
  SECTION("no sequence parallel: 2 all-reduces forward, 2 backward") {
    const auto g = GraphOf(SmallJobYaml("{tp: 2, pp: 2, dp: 2, global_batch: 8, sequence_parallel: false}"));
    for (const auto& p : g.programs()) {
      const auto f = TallyOps(p, Is(p, "tp", pg::ALLREDUCE, "f.L"));
      const auto b = TallyOps(p, Is(p, "tp", pg::ALLREDUCE, "b.L"));
      CHECK(f.count == 2 * layers_per_stage * microbatches);
      CHECK(b.count == 2 * layers_per_stage * microbatches);
      CHECK(f.bytes == f.count * buffer);
      CHECK(b.bytes == b.count * buffer);
      CHECK(TallyOps(p, Is(p, "tp", pg::ALLGATHER, "f.L")).count == 0);
    }
  }
  SECTION("sequence parallel: AG+RS per sublayer forward; 2 AG + RS backward") {
    const auto g = GraphOf(SmallJobYaml("{tp: 2, pp: 2, dp: 2, global_batch: 8, sequence_parallel: true}"));
    for (const auto& p : g.programs()) {
      CHECK(TallyOps(p, Is(p, "tp", pg::ALLREDUCE, "f.L")).count == 0);
      const auto fag = TallyOps(p, Is(p, "tp", pg::ALLGATHER, "f.L"));
      const auto frs = TallyOps(p, Is(p, "tp", pg::REDUCESCATTER, "f.L"));
      const auto bag = TallyOps(p, Is(p, "tp", pg::ALLGATHER, "b.L"));
      const auto brs = TallyOps(p, Is(p, "tp", pg::REDUCESCATTER, "b.L"));
      CHECK(fag.count == 2 * layers_per_stage * microbatches);
      CHECK(frs.count == 2 * layers_per_stage * microbatches);
      CHECK(bag.count == 4 * layers_per_stage * microbatches);
      CHECK(brs.count == 2 * layers_per_stage * microbatches);
      CHECK(fag.bytes + frs.bytes + bag.bytes + brs.bytes == (fag.count + frs.count + bag.count + brs.count) * buffer);
    }
  }
}

TEST_CASE("pipeline activations per microbatch and direction", "[graphgen][volume]") {
  const uint64_t microbatches = 4;
  for (bool sp : {false, true}) {
    const auto g = GraphOf(SmallJobYaml(std::string("{tp: 2, pp: 2, dp: 2, global_batch: 8, sequence_parallel: ") +
                                        (sp ? "true" : "false") + "}"));
    const uint64_t per_message = 1 * kS * kH * 2 / (sp ? 2 : 1);
    const auto& first = g.programs(0);
    const auto& last = g.programs(1);
    auto sends = [](const pg::Op& op) { return op.has_send(); };
    auto recvs = [](const pg::Op& op) { return op.has_recv(); };
    // First stage: sends activations forward, receives gradients back.
    CHECK(TallyOps(first, sends).count == microbatches);
    CHECK(TallyOps(first, sends).bytes == microbatches * per_message);
    CHECK(TallyOps(first, recvs).bytes == microbatches * per_message);
    CHECK(TallyOps(last, sends).bytes == microbatches * per_message);
    CHECK(TallyOps(last, recvs).bytes == microbatches * per_message);
    for (const auto& op : first.ops())
      if (op.has_send()) {
        CHECK(op.send().peer() == 1);  // pp comm rank of stage 1
        CHECK_FALSE(op.send().peer_relative());
      }
  }
}

TEST_CASE("context parallel KV ring and expert all-to-all volumes", "[graphgen][volume]") {
  SECTION("cp2: one ring step per attention, K and V of the local chunk; backward adds dKV") {
    const auto g = GraphOf(SmallJobYaml("{tp: 2, cp: 2, dp: 2, global_batch: 2}"));
    const auto& p = g.programs(0);
    const uint64_t kv = 2 * (kS / 2) * (16 / 2) * (kH / 16) * 2;  // K,V x tokens x local heads x head dim x bf16
    auto ring = [&p](const std::string& prefix) {
      return [&p, prefix](const pg::Op& op) { return op.has_send() && SlotOf(p, op) == "cp" && LabelOf(op).rfind(prefix, 0) == 0; };
    };
    const uint64_t microbatches = 1;
    CHECK(TallyOps(p, ring("f.L")).count == kLayers * microbatches);
    CHECK(TallyOps(p, ring("f.L")).bytes == kLayers * microbatches * kv);
    CHECK(TallyOps(p, ring("b.L")).bytes == kLayers * microbatches * 2 * kv);
    // TP buffers cover the local sequence chunk only.
    CHECK(TallyOps(p, Is(p, "tp", pg::ALLREDUCE, "f.L")).bytes == 2 * kLayers * (kS / 2) * kH * 2);
  }
  SECTION("ep2, top-2: dispatch and combine, forward and backward, per MoE layer") {
    const auto g = GraphOf(SmallJobYaml("{tp: 2, pp: 2, dp: 4, ep: 2, sequence_parallel: true, global_batch: 4}",
                                        "experts: 4, topk: 2"));
    const uint64_t microbatches = 1, layers_per_stage = kLayers / 2;
    const uint64_t a2a = (kS / 2) * 2 * kH * 2;  // SP-local tokens x topk x hidden x bf16
    for (const auto& p : g.programs()) {
      const auto t = TallyOps(p, Is(p, "ep", pg::ALLTOALL));
      CHECK(t.count == 4 * layers_per_stage * microbatches);
      CHECK(t.bytes == t.count * a2a);
      // Expert gradients go to the expert data-parallel group (edp = 16/(2*2*2) = 2).
      const uint64_t expert_params = (4 / 2) * 2 * kH * kF / 2;
      CHECK(TallyOps(p, Is(p, "edp", pg::REDUCESCATTER)).bytes == layers_per_stage * expert_params * 4);
    }
  }
}

TEST_CASE("memory: activations allocated forward are freed backward", "[graphgen][memory]") {
  const auto g = GraphOf(SmallJobYaml("{tp: 2, pp: 2, dp: 2, global_batch: 8}"));
  for (const auto& p : g.programs()) {
    int64_t live = 0, peak = 0;
    for (const auto& op : p.ops())
      if (op.has_compute()) {
        live += op.compute().memory_delta_bytes();
        peak = std::max(peak, live);
      }
    CHECK(live == 0);
    CHECK(peak > 0);
    CHECK(p.static_memory_bytes() > 0);
  }
  // Stage 0 keeps more microbatches in flight under 1F1B than the last stage.
  auto peak_of = [](const pg::Program& p) {
    int64_t live = 0, peak = 0;
    for (const auto& op : p.ops())
      if (op.has_compute()) peak = std::max(peak, live += op.compute().memory_delta_bytes());
    return peak;
  };
  CHECK(peak_of(g.programs(0)) > peak_of(g.programs(1)));
  // Distributed optimizer shards optimizer state: less static memory than DDP.
  const auto ddp = GraphOf(SmallJobYaml("{tp: 2, pp: 2, dp: 2, distributed_optimizer: false}"));
  const auto dist = GraphOf(SmallJobYaml("{tp: 2, pp: 2, dp: 2, distributed_optimizer: true}"));
  const uint64_t params = StageParams(2, 2, 0);
  CHECK(ddp.programs(0).static_memory_bytes() == params * 18);
  CHECK(dist.programs(0).static_memory_bytes() == params * 6 + params * 12 / 2);
}
