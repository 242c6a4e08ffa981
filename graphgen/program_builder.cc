#include "graphgen/program_builder.h"

#include <algorithm>
#include <cstdint>
#include <optional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "graphgen/megatron_buckets.h"
#include "graphgen/schedule.h"

namespace prism::graphgen {
namespace {

namespace pg = prism::graph;

constexpr uint32_t kComputeStream = 0;
constexpr uint32_t kDpStream = 1;
constexpr uint32_t kCpStream = 2;

uint64_t PadTo(uint64_t v, uint64_t multiple) { return multiple <= 1 ? v : (v + multiple - 1) / multiple * multiple; }

class StageBuilder {
 public:
  explicit StageBuilder(const StageInputs& in)
      : in_(in), spec_(*in.spec), par_(in.spec->parallel), cost_(*in.cost) {
    const std::vector<uint32_t> chunk_layers = ChunkLayers(spec_);
    uint32_t first = 0;
    for (size_t v = 0; v < chunk_layers.size(); ++v) {
      if (v % par_.pp == in_.stage) chunks_.push_back({first, chunk_layers[v]});
      first += chunk_layers[v];
    }
    attn_ = cost_.Attention();
    mlp_ = cost_.Mlp();
    layer_input_bytes_ = cost_.LayerInputBytes();
  }
  StageBuilder(const StageBuilder&) = delete;
  StageBuilder& operator=(const StageBuilder&) = delete;

  pg::Program Build() {
    prog_.set_name(absl::StrCat("pp-stage-", in_.stage));
    prog_.set_streams(par_.cp > 1 ? 3 : 2);
    for (const auto& s : in_.slot_names) prog_.add_comm_slot_names(s);
    const uint32_t m = par_.microbatches();
    for (const PipelineAction& a : StageActions(par_.schedule, par_.pp, par_.vpp, in_.stage, m)) {
      if (a.is_exchange) Exchange(a.exchange);
      else if (a.step.forward) Forward(a.step);
      else Backward(a.step, a.step.microbatch == m - 1);
    }
    Finalize();
    prog_.set_static_memory_bytes(cost_.StaticBytes(dense_params_, OptimizerShards(in_.dp_cp_size)) +
                                  cost_.StaticBytes(expert_params_, OptimizerShards(in_.edp_size)));
    return std::move(prog_);
  }

 private:
  bool Has(const std::string& slot) const {
    return std::find(in_.slot_names.begin(), in_.slot_names.end(), slot) != in_.slot_names.end();
  }
  uint32_t Slot(const std::string& slot) const {
    return static_cast<uint32_t>(std::find(in_.slot_names.begin(), in_.slot_names.end(), slot) -
                                 in_.slot_names.begin());
  }
  uint64_t OptimizerShards(uint64_t group) const { return par_.distributed_optimizer ? group : 1; }
  bool FirstChunk(uint32_t chunk) const { return in_.stage == 0 && chunk == 0; }
  bool LastChunk(uint32_t chunk) const { return in_.stage == par_.pp - 1 && chunk == par_.vpp - 1; }
  uint32_t GlobalLayer(uint32_t chunk, uint32_t i) const { return chunks_[chunk].first + i; }
  uint32_t ChunkSize(uint32_t chunk) const { return chunks_[chunk].layers; }
  bool Selective() const { return par_.recompute == Recompute::kSelective; }
  bool Full() const { return par_.recompute == Recompute::kFull; }

  pg::Op* NewOp(uint32_t stream, const std::vector<uint32_t>& deps = {}) {
    pg::Op* op = prog_.add_ops();
    op->set_stream(stream);
    for (uint32_t d : deps) op->add_deps(d);
    return op;
  }
  uint32_t LastIndex() const { return static_cast<uint32_t>(prog_.ops_size() - 1); }

  uint32_t Compute(const std::string& label, uint64_t ns, int64_t memory_delta, uint64_t flops,
                   std::vector<uint32_t> deps = {}) {
    auto* c = NewOp(kComputeStream, deps)->mutable_compute();
    c->set_duration_ns(ns);
    c->set_label(label);
    c->set_memory_delta_bytes(memory_delta);
    c->set_flops(flops);
    return LastIndex();
  }

  uint32_t Collective(const std::string& slot, pg::CollectiveKind kind, uint64_t bytes, pg::DType dtype,
                      const std::string& label, uint32_t stream = kComputeStream,
                      std::vector<uint32_t> deps = {}) {
    auto* c = NewOp(stream, deps)->mutable_collective();
    c->set_comm_slot(Slot(slot));
    c->set_kind(kind);
    c->set_bytes(bytes);
    c->set_dtype(dtype);
    c->set_label(label);
    return LastIndex();
  }

  // ---- pipeline send/recv: one exchange = one NCCL group (Megatron's batched p2p) ----
  void P2P(bool send, uint32_t peer, const char* label) {
    pg::Op* op = NewOp(kComputeStream);
    const uint64_t bytes = cost_.PpActivationBytes();
    if (send) {
      auto* s = op->mutable_send();
      s->set_comm_slot(Slot("pp"));
      s->set_peer(peer);
      s->set_bytes(bytes);
      s->set_label(label);
    } else {
      auto* r = op->mutable_recv();
      r->set_comm_slot(Slot("pp"));
      r->set_peer(peer);
      r->set_bytes(bytes);
      r->set_label(label);
    }
  }
  void Exchange(const PipelineExchange& e) {
    const int ops = e.send_prev + e.recv_prev + e.send_next + e.recv_next;
    if (ops > 1) NewOp(kComputeStream)->mutable_group_start();
    if (e.send_prev) P2P(true, PrevStage(), "pp.send-grad");
    if (e.recv_prev) P2P(false, PrevStage(), "pp.recv-act");
    if (e.send_next) P2P(true, NextStage(), "pp.send-act");
    if (e.recv_next) P2P(false, NextStage(), "pp.recv-grad");
    if (ops > 1) NewOp(kComputeStream)->mutable_group_end();
  }
  uint32_t PrevStage() const { return (in_.stage + par_.pp - 1) % par_.pp; }
  uint32_t NextStage() const { return (in_.stage + 1) % par_.pp; }

  // ---- tensor-parallel wrappers around a sublayer ----
  bool Tp() const { return par_.tp > 1; }
  void TpBefore(const std::string& l, bool fwd) {
    if (Tp() && par_.sequence_parallel)
      Collective("tp", pg::ALLGATHER, cost_.TpCollectiveBytes(), pg::BF16, l + (fwd ? ".tp-ag" : ".tp-ag-grad"));
  }
  void TpAfter(const std::string& l, bool fwd) {
    if (!Tp()) return;
    const uint64_t b = cost_.TpCollectiveBytes();
    if (!par_.sequence_parallel) {
      Collective("tp", pg::ALLREDUCE, b, pg::BF16, l + ".tp-ar");
    } else if (fwd) {
      Collective("tp", pg::REDUCESCATTER, b, pg::BF16, l + ".tp-rs");
    } else {
      Collective("tp", pg::ALLGATHER, b, pg::BF16, l + ".tp-ag-input");
      Collective("tp", pg::REDUCESCATTER, b, pg::BF16, l + ".tp-rs-grad");
    }
  }

  // Activation bytes a layer's forward keeps: full recomputation keeps only
  // the layer's input (on the attention op), selective the MLP's input in
  // place of its activations. The recomputation before the backward
  // allocates the rest; the backward frees all of it.
  int64_t AttnKept() const { return Full() ? layer_input_bytes_ : attn_.activation_bytes; }
  int64_t MlpKept() const { return Full() ? 0 : Selective() ? layer_input_bytes_ : mlp_.activation_bytes; }

  // Attention compute; with cp > 1 split into cp chunks, chunk k waiting for
  // the k-th KV block of the ring (stream 2). A recomputation (`redo`) is a
  // forward that allocates what the first forward did not keep and carries
  // no model FLOPs.
  void AttentionCompute(const std::string& l, bool fwd, bool redo = false) {
    const uint64_t ns = fwd ? attn_.fwd_ns : attn_.bwd_ns;
    const int64_t mem = redo ? attn_.activation_bytes - AttnKept() : fwd ? AttnKept() : -attn_.activation_bytes;
    const uint64_t flops = redo ? 0 : fwd ? attn_.fwd_flops : 2 * attn_.fwd_flops;
    if (par_.cp == 1) {
      Compute(l, ns, mem, flops);
      return;
    }
    const uint64_t ring_bytes = cost_.CpKvBytes() * (fwd ? 1 : 2);  // backward also returns dKV
    const uint32_t cp = par_.cp;
    for (uint32_t k = 0; k < cp; ++k) {
      std::vector<uint32_t> deps;
      if (k + 1 < cp) {
        NewOp(kCpStream)->mutable_group_start();
        auto* s = NewOp(kCpStream)->mutable_send();
        s->set_comm_slot(Slot("cp"));
        s->set_peer(1);
        s->set_peer_relative(true);
        s->set_bytes(ring_bytes);
        s->set_label(l + ".cp-ring");
        auto* r = NewOp(kCpStream)->mutable_recv();
        r->set_comm_slot(Slot("cp"));
        r->set_peer(cp - 1);
        r->set_peer_relative(true);
        r->set_bytes(ring_bytes);
        r->set_label(l + ".cp-ring");
        NewOp(kCpStream)->mutable_group_end();
        ring_end_.push_back(LastIndex());
      }
      if (k > 0) deps.push_back(ring_end_[ring_end_.size() - (k + 1 < cp ? 2 : 1)]);
      const int64_t chunk_mem = fwd ? (k == 0 ? mem : 0) : (k + 1 == cp ? mem : 0);
      Compute(absl::StrCat(l, ".cp", k), ns / cp, chunk_mem, flops / cp, deps);
    }
    ring_end_.clear();
  }

  void MlpCompute(const std::string& l, bool fwd, bool redo = false) {
    const bool a2a = spec_.model.moe() && par_.ep > 1;
    if (a2a) Collective("ep", pg::ALLTOALL, cost_.EpAlltoallBytes(), pg::BF16, l + (fwd ? ".ep-dispatch" : ".ep-combine-grad"));
    const int64_t mem = redo ? mlp_.activation_bytes - MlpKept() : fwd ? MlpKept() : -mlp_.activation_bytes;
    Compute(l, fwd ? mlp_.fwd_ns : mlp_.bwd_ns, mem, redo ? 0 : fwd ? mlp_.fwd_flops : 2 * mlp_.fwd_flops);
    if (a2a) Collective("ep", pg::ALLTOALL, cost_.EpAlltoallBytes(), pg::BF16, l + (fwd ? ".ep-combine" : ".ep-dispatch-grad"));
  }

  // A layer's forward; `redo`: its recomputation before the backward (labels
  // "r.L<n>..."), the whole layer with full recomputation.
  void LayerForward(uint32_t layer, bool redo = false) {
    const char* prefix = redo ? "r.L" : "f.L";
    const std::string a = absl::StrCat(prefix, layer, ".attn"), m = absl::StrCat(prefix, layer, ".mlp");
    TpBefore(a, true);
    AttentionCompute(a, true, redo);
    TpAfter(a, true);
    TpBefore(m, true);
    MlpCompute(m, true, redo);
    TpAfter(m, true);
  }

  void LayerBackward(uint32_t layer) {
    const std::string a = absl::StrCat("b.L", layer, ".attn"), m = absl::StrCat("b.L", layer, ".mlp");
    if (Full()) LayerForward(layer, true);
    // Selective: the MLP's forward again from its kept input (the TP
    // all-gather before it is not repeated in this model).
    if (Selective()) MlpCompute(absl::StrCat("r.L", layer, ".mlp"), true, true);
    TpBefore(m, false);
    MlpCompute(m, false);
    TpAfter(m, false);
    TpBefore(a, false);
    AttentionCompute(a, false);
    TpAfter(a, false);
  }

  void Forward(const PipelineStep& step) {
    if (FirstChunk(step.chunk)) {
      const PhaseCost e = cost_.Embedding();
      Compute("f.embedding", e.fwd_ns, e.activation_bytes, e.fwd_flops);
      if (Tp()) {
        Collective("tp", par_.sequence_parallel ? pg::REDUCESCATTER : pg::ALLREDUCE, cost_.TpCollectiveBytes(),
                   pg::BF16, par_.sequence_parallel ? "f.embedding.tp-rs" : "f.embedding.tp-ar");
      }
    }
    for (uint32_t i = 0; i < ChunkSize(step.chunk); ++i) LayerForward(GlobalLayer(step.chunk, i));
    if (LastChunk(step.chunk)) {
      const PhaseCost o = cost_.Output();
      TpBefore("f.output", true);
      Compute("f.output+loss", o.fwd_ns, o.activation_bytes, o.fwd_flops);
      VocabParallelLoss();
    }
  }

  // Megatron's vocab-parallel cross-entropy: all-reduce of the logits' max
  // (MAX), of the target logits and of the sums of exponentials (SUM), fp32
  // per token, on the tensor-parallel group; its backward needs no exchange.
  void VocabParallelLoss() {
    if (!Tp()) return;
    const uint64_t b = cost_.LossReductionBytes();
    for (const char* what : {"max", "target", "sum-exp"})
      Collective("tp", pg::ALLREDUCE, b, pg::FP32, absl::StrCat("f.loss.tp-ar-", what));
  }

  void Backward(const PipelineStep& step, bool last_microbatch) {
    if (LastChunk(step.chunk)) {
      const PhaseCost o = cost_.Output();
      Compute("b.output+loss", o.bwd_ns, -o.activation_bytes, 2 * o.fwd_flops);
      if (Tp())
        Collective("tp", par_.sequence_parallel ? pg::REDUCESCATTER : pg::ALLREDUCE, cost_.TpCollectiveBytes(),
                   pg::BF16, par_.sequence_parallel ? "b.output.tp-rs-grad" : "b.output.tp-ar");
    }
    for (uint32_t i = ChunkSize(step.chunk); i-- > 0;) {
      const uint32_t layer = GlobalLayer(step.chunk, i);
      LayerBackward(layer);
      const bool embedding_follows = FirstChunk(step.chunk) && i == 0;
      if (last_microbatch && !embedding_follows) ReduceLayerGrads(step.chunk, i);
    }
    if (FirstChunk(step.chunk)) {
      const PhaseCost e = cost_.Embedding();
      Compute("b.embedding", e.bwd_ns, -e.activation_bytes, 0);
      if (last_microbatch) ReduceLayerGrads(step.chunk, 0);
    }
  }

  // ---- data-parallel gradient reduction, one bucket per layer ----
  void ReduceLayerGrads(uint32_t chunk, uint32_t i) {
    const uint32_t layer = GlobalLayer(chunk, i);
    uint64_t dense = cost_.DenseParamsPerLayer();
    if (FirstChunk(chunk) && i == 0) dense += cost_.EmbeddingParams();
    if (LastChunk(chunk) && i == ChunkSize(chunk) - 1) dense += cost_.OutputParams();
    const uint64_t experts = cost_.ExpertParamsPerLayer();
    dense_params_ += dense;
    expert_params_ += experts;
    if (par_.megatron_buckets) {
      FillMegatronBuckets(chunk, i, experts);
      return;
    }
    ReduceBucket("dp_cp", in_.dp_cp_size, dense, absl::StrCat("L", layer, ".grads"));
    if (experts > 0) ReduceBucket("edp", in_.edp_size, experts, absl::StrCat("L", layer, ".expert-grads"));
  }

  // ---- Megatron-core's DistributedDataParallel buckets (megatron_buckets.h) ----
  // One DistributedDataParallel per model chunk, each with a dense and an
  // expert buffer. A layer's parameters join them after the layer's last
  // backward (the output layer and final norm before the last layer's, the
  // embedding after the first's). With overlap_grad_reduce a bucket is
  // reduced as soon as it closes; without, every bucket is reduced by
  // finish_grad_sync after the backward, chunk after chunk (Finalize).
  struct ChunkBuffers {
    MegatronGradBuffer dense, expert;
    std::vector<uint64_t> closed_dense, closed_expert;  // closed, not yet reduced (no overlap)
  };
  std::optional<uint64_t> MegatronBucketSize() const {
    if (!par_.overlap_grad_reduce || in_.stage > 0) return std::nullopt;  // Megatron's None
    if (par_.bucket_size > 0) return par_.bucket_size;
    return std::max<uint64_t>(40'000'000, 1'000'000 * in_.dp_cp_size);
  }
  ChunkBuffers& BuffersOf(uint32_t chunk) {
    while (buffers_.size() <= chunk) {
      buffers_.push_back(ChunkBuffers{
          MegatronGradBuffer(MegatronBucketSize(), par_.distributed_optimizer, in_.dp_cp_size),
          MegatronGradBuffer(MegatronBucketSize(), par_.distributed_optimizer, in_.edp_size), {}, {}});
    }
    return buffers_[chunk];
  }
  void FillMegatronBuckets(uint32_t chunk, uint32_t i, uint64_t experts) {
    const bool tied_copy = spec_.model.tied_embeddings && par_.pp > 1;
    std::vector<MegatronParam> params;
    if (LastChunk(chunk) && i == ChunkSize(chunk) - 1) {
      if (!spec_.model.tied_embeddings || par_.pp > 1)
        params.push_back({cost_.padded_vocab() / par_.tp * spec_.model.hidden, tied_copy});  // output_layer
      params.push_back({spec_.model.hidden});                                                // final norm
    }
    for (const MegatronParam& p : MegatronLayerParamsBackward(spec_)) params.push_back(p);
    if (FirstChunk(chunk) && i == 0) {
      if (spec_.model.learned_position_embedding)
        params.push_back({uint64_t{spec_.model.seq_len} * spec_.model.hidden});           // position_embeddings
      params.push_back({cost_.padded_vocab() / par_.tp * spec_.model.hidden, tied_copy});  // word_embeddings
    }
    ChunkBuffers& b = BuffersOf(chunk);
    for (const MegatronParam& p : params)
      for (uint64_t numel : b.dense.Add(p)) b.closed_dense.push_back(numel);
    if (experts > 0)
      for (uint64_t numel : b.expert.Add({experts})) b.closed_expert.push_back(numel);
    if (par_.overlap_grad_reduce) ReduceClosed(b);
  }
  void ReduceClosed(ChunkBuffers& b) {
    for (uint64_t numel : std::exchange(b.closed_dense, {}))
      ReduceBucket("dp_cp", in_.dp_cp_size, numel, absl::StrCat("bucket", buckets_++));
    for (uint64_t numel : std::exchange(b.closed_expert, {}))
      ReduceBucket("edp", in_.edp_size, numel, absl::StrCat("expert-bucket", expert_buckets_++));
  }
  void CloseMegatronBuckets() {  // finish_grad_sync of each chunk's DDP, in model order
    for (ChunkBuffers& b : buffers_) {
      if (auto last = b.dense.Close()) b.closed_dense.push_back(*last);
      if (auto last = b.expert.Close()) b.closed_expert.push_back(*last);
      ReduceClosed(b);
    }
  }

  void ReduceBucket(const std::string& slot, uint64_t group, uint64_t params, const std::string& label) {
    if (group <= 1 || !Has(slot)) return;
    const uint32_t after = LastIndex();
    const uint64_t grad = cost_.GradBytesPerParam();
    const pg::DType dtype = grad == 4 ? pg::FP32 : pg::BF16;
    if (par_.distributed_optimizer) {
      // Megatron's buckets come padded (MegatronGradBuffer); a per-layer
      // bucket is padded to the group size.
      const uint64_t padded = par_.megatron_buckets ? params : PadTo(params, group);
      dp_ops_.push_back(Collective(slot, pg::REDUCESCATTER, padded * grad, dtype, "dp." + label + ".rs", kDpStream,
                                   {after}));
      gathers_.push_back({slot, padded * 2, "dp." + label + ".param-ag"});
    } else {
      dp_ops_.push_back(Collective(slot, pg::ALLREDUCE, params * grad, dtype, "dp." + label + ".ar", kDpStream,
                                   {after}));
    }
  }

  // ---- after the last backward: finish grad sync, optimizer, param gather ----
  std::vector<uint32_t> TakeDpDeps() { return std::exchange(dp_ops_, {}); }

  void Finalize() {
    const uint64_t grad = cost_.GradBytesPerParam();
    const pg::DType dtype = grad == 4 ? pg::FP32 : pg::BF16;
    if (par_.megatron_buckets) CloseMegatronBuckets();
    if (Tp() && par_.sequence_parallel) {
      const uint64_t norms = cost_.NormParamsPerLayer() * StageLayers(spec_, in_.stage);
      Collective("tp", pg::ALLREDUCE, norms * grad, dtype, "tp.layernorm-grads", kComputeStream, TakeDpDeps());
    }
    const bool embedding_stage = in_.stage == 0 || in_.stage == par_.pp - 1;
    if (spec_.model.tied_embeddings && par_.pp > 1 && embedding_stage && Has("embd")) {
      const uint64_t words = cost_.padded_vocab() / par_.tp * spec_.model.hidden;
      Collective("embd", pg::ALLREDUCE, words * grad, dtype, "embedding-grads", kComputeStream, TakeDpDeps());
    }
    // Megatron's distributed optimizer reduces the norm on its instance group;
    // with process_groups: minimal that group does not exist: the world does it.
    const std::string norm_slot = !par_.distributed_optimizer ? "mp" : Has("dist_opt") ? "dist_opt" : "world";
    const bool norm_group_trivial = par_.distributed_optimizer ? par_.world() == 1 : par_.tp * par_.pp == 1;
    if (par_.clip_grad && Has(norm_slot) && !norm_group_trivial)
      Collective(norm_slot, pg::ALLREDUCE, 4, pg::FP32, "grad-norm", kComputeStream, TakeDpDeps());
    const uint64_t local = dense_params_ / OptimizerShards(in_.dp_cp_size) +
                           expert_params_ / OptimizerShards(in_.edp_size);
    const uint32_t opt = Compute("optimizer", cost_.OptimizerNs(local), 0, 0, TakeDpDeps());
    std::vector<uint32_t> gathered;
    for (const auto& g : gathers_)
      gathered.push_back(Collective(g.slot, pg::ALLGATHER, g.bytes, pg::BF16, g.label, kDpStream,
                                    gathered.empty() ? std::vector<uint32_t>{opt} : std::vector<uint32_t>{}));
    // The next iteration's forward reads the gathered parameters: Megatron's
    // optimizer step returns once its parameter all-gathers are done (without
    // overlap_param_gather), and a training loop that synchronizes the device
    // between iterations waits for them too. Without this edge the model
    // overlapped the all-gathers with the next forward.
    if (!gathered.empty()) Compute("param-sync", 0, 0, 0, gathered);
  }

  struct Gather {
    std::string slot;
    uint64_t bytes;
    std::string label;
  };

  const StageInputs& in_;
  const JobSpec& spec_;
  const ParallelSpec& par_;
  const CostModel& cost_;
  struct Chunk {
    uint32_t first;   // global index of its first layer
    uint32_t layers;
  };
  std::vector<Chunk> chunks_;       // this stage's chunks, in chunk order
  PhaseCost attn_, mlp_;
  int64_t layer_input_bytes_ = 0;
  pg::Program prog_;
  std::vector<uint32_t> ring_end_;
  std::vector<uint32_t> dp_ops_;
  std::vector<Gather> gathers_;
  uint64_t dense_params_ = 0;
  uint64_t expert_params_ = 0;
  std::vector<ChunkBuffers> buffers_;  // per model chunk: Megatron's gradient buffers
  uint32_t buckets_ = 0, expert_buckets_ = 0;
};

}  // namespace

pg::Program BuildStageProgram(const StageInputs& in) {
  StageBuilder b(in);
  return b.Build();
}

}  // namespace prism::graphgen
