#include "graphgen/cost_model.h"

#include <cmath>
#include <cstdint>

namespace prism::graphgen {
namespace {

// Elementwise HBM traffic per sublayer, in units of tokens*hidden*2 bytes:
// the part sharded by TP, and the part sharded only with sequence parallel
// (layernorm, residual, dropout).
constexpr double kTpShardedTraffic = 6.0;
constexpr double kReplicatedTraffic = 4.0;
// Activation bytes per token*hidden of one layer, after Korthikanti et al.
// with flash attention (no s^2 term): 34 in total, attention 15, MLP 19; the
// replicated part without SP is 5 + 5 (attention + MLP) of them.
constexpr double kAttnActSharded = 10.0, kAttnActReplicated = 5.0;
constexpr double kMlpActSharded = 14.0, kMlpActReplicated = 5.0;
// Adam step traffic per locally owned parameter (read fp32 param, grad, m, v;
// write param, m, v, bf16 copy).
constexpr double kOptimizerBytesPerParam = 32.0;

// Range-checked double -> integer conversions: a value outside the target's
// range (or NaN) would be undefined behaviour; it saturates instead, and the
// graph's limits (common/limits.h) then refuse the saturated figure by name.
uint64_t SaturatingU64(double v) {
  if (!(v > 0)) return 0;
  if (v >= 18446744073709551616.0) return UINT64_MAX;  // 2^64
  return static_cast<uint64_t>(v);
}

int64_t SaturatingI64(double v) {
  if (std::isnan(v)) return 0;
  if (v >= 9223372036854775808.0) return INT64_MAX;  // 2^63
  if (v < -9223372036854775808.0) return INT64_MIN;
  return static_cast<int64_t>(v);
}

}  // namespace

CostModel::CostModel(const JobSpec& spec) : spec_(spec) {
  // Megatron pads the vocabulary to a multiple of 128 * tp.
  const uint64_t multiple = 128ull * spec.parallel.tp;
  padded_vocab_ = (spec.model.vocab + multiple - 1) / multiple * multiple;
}

double CostModel::tokens() const {
  return static_cast<double>(spec_.parallel.micro_batch) * static_cast<double>(spec_.model.seq_len) /
         spec_.parallel.cp;
}

uint64_t CostModel::RooflineNs(double flops, double bytes) const {
  const double peak = static_cast<double>(spec_.cluster.bf16_tflops) * 1e12 * spec_.compute.matmul_efficiency;
  const double hbm = static_cast<double>(spec_.cluster.hbm_gbps) * 1e9 * spec_.compute.memory_efficiency;
  const double seconds = flops / peak + bytes / hbm;
  return SaturatingU64(std::ceil(seconds * 1e9));
}

PhaseCost CostModel::Measured(const std::string& kind, PhaseCost roofline) const {
  auto it = spec_.compute.table.find(kind);
  if (it == spec_.compute.table.end()) return roofline;
  roofline.fwd_ns = it->second.fwd_ns;
  roofline.bwd_ns = it->second.bwd_ns;
  return roofline;
}

uint64_t CostModel::NormParamsPerLayer() const { return 2 * spec_.model.hidden; }

uint64_t CostModel::DenseParamsPerLayer() const {
  const ModelSpec& m = spec_.model;
  const uint64_t tp = spec_.parallel.tp;
  const uint64_t qkv = m.hidden * (m.hidden + 2 * m.kv_heads * m.head_dim());
  const uint64_t attn = (qkv + m.hidden * m.hidden) / tp;
  const uint64_t mlp_mats = m.gated_mlp ? 3 : 2;
  const uint64_t mlp = m.moe() ? m.hidden * m.experts : mlp_mats * m.hidden * m.ffn_hidden / tp;
  return attn + mlp + NormParamsPerLayer();
}

uint64_t CostModel::ExpertParamsPerLayer() const {
  const ModelSpec& m = spec_.model;
  if (!m.moe()) return 0;
  const uint64_t mats = m.gated_mlp ? 3 : 2;
  return (m.experts / spec_.parallel.ep) * mats * m.hidden * m.moe_ffn_hidden / spec_.parallel.expert_tp;
}

uint64_t CostModel::EmbeddingParams() const {
  const ModelSpec& m = spec_.model;
  uint64_t p = padded_vocab_ / spec_.parallel.tp * m.hidden;
  if (m.learned_position_embedding) p += m.seq_len * m.hidden;
  return p;
}

uint64_t CostModel::OutputParams() const {
  const ModelSpec& m = spec_.model;
  const bool own_copy = !m.tied_embeddings || spec_.parallel.pp > 1;
  return (own_copy ? padded_vocab_ / spec_.parallel.tp * m.hidden : 0) + m.hidden;
}

uint64_t CostModel::TpCollectiveBytes() const {
  return static_cast<uint64_t>(tokens()) * spec_.model.hidden * 2;
}

uint64_t CostModel::PpActivationBytes() const {
  const uint64_t sp_shards = spec_.parallel.sequence_parallel ? spec_.parallel.tp : 1;
  return TpCollectiveBytes() / sp_shards;
}

uint64_t CostModel::CpKvBytes() const {
  const ModelSpec& m = spec_.model;
  return 2 * static_cast<uint64_t>(tokens()) * (m.kv_heads / spec_.parallel.tp) * m.head_dim() * 2;
}

uint64_t CostModel::EpAlltoallBytes() const {
  const uint64_t sp_shards = spec_.parallel.sequence_parallel ? spec_.parallel.tp : 1;
  return static_cast<uint64_t>(tokens()) / sp_shards * spec_.model.topk * spec_.model.hidden * 2;
}

uint64_t CostModel::LossReductionBytes() const { return static_cast<uint64_t>(tokens()) * 4; }

PhaseCost CostModel::Attention() const {
  const ModelSpec& m = spec_.model;
  const ParallelSpec& p = spec_.parallel;
  const double t = tokens(), h = static_cast<double>(m.hidden), tp = p.tp;
  const double sp = p.sequence_parallel ? tp : 1.0;
  const double qkv_cols = h + 2.0 * m.kv_heads * m.head_dim();
  // QKV + output projection + causal attention core (half of 4*t*s*h).
  const double flops = 2.0 * t * h * qkv_cols / tp + 2.0 * t * h * h / tp + 2.0 * t * m.seq_len * h / tp;
  const double weights = (h * qkv_cols + h * h) / tp * 2.0;
  const double traffic = t * h * 2.0 * (kTpShardedTraffic / tp + kReplicatedTraffic / sp);
  PhaseCost c;
  c.fwd_flops = SaturatingU64(flops);
  c.fwd_ns = RooflineNs(flops, weights + traffic);
  c.bwd_ns = RooflineNs(2.0 * flops, 2.0 * (weights + traffic));
  c.activation_bytes = SaturatingI64(t * h * (kAttnActSharded / tp + kAttnActReplicated / sp));
  return Measured("attention", c);
}

PhaseCost CostModel::Mlp() const {
  const ModelSpec& m = spec_.model;
  const ParallelSpec& p = spec_.parallel;
  const double t = tokens(), h = static_cast<double>(m.hidden), tp = p.tp;
  const double sp = p.sequence_parallel ? tp : 1.0;
  const double mats = m.gated_mlp ? 3.0 : 2.0;
  double flops = 0, weights = 0, act_scale = 1.0;
  if (m.moe()) {
    // Router on every token, then each token through topk experts.
    flops = 2.0 * t * h * m.experts + 2.0 * t * m.topk * mats * h * m.moe_ffn_hidden / p.expert_tp;
    weights = static_cast<double>(ExpertParamsPerLayer()) * 2.0;
    act_scale = m.topk;
  } else {
    flops = 2.0 * t * mats * h * m.ffn_hidden / tp;
    weights = mats * h * m.ffn_hidden / tp * 2.0;
  }
  const double traffic = t * h * 2.0 * (kTpShardedTraffic * act_scale / tp + kReplicatedTraffic / sp);
  PhaseCost c;
  c.fwd_flops = SaturatingU64(flops);
  c.fwd_ns = RooflineNs(flops, weights + traffic);
  c.bwd_ns = RooflineNs(2.0 * flops, 2.0 * (weights + traffic));
  c.activation_bytes = SaturatingI64(t * h * (kMlpActSharded * act_scale / tp + kMlpActReplicated / sp));
  return Measured(m.moe() ? "moe" : "mlp", c);
}

PhaseCost CostModel::Embedding() const {
  const double t = tokens(), h = static_cast<double>(spec_.model.hidden);
  const double sp = spec_.parallel.sequence_parallel ? spec_.parallel.tp : 1.0;
  PhaseCost c;
  c.fwd_ns = RooflineNs(0, t * h * 2.0 * 2.0);
  c.bwd_ns = RooflineNs(0, t * h * 2.0 * 3.0);
  c.activation_bytes = SaturatingI64(t * h * 2.0 / sp);
  return Measured("embedding", c);
}

PhaseCost CostModel::Output() const {
  const double t = tokens(), h = static_cast<double>(spec_.model.hidden);
  const double v = static_cast<double>(padded_vocab_) / spec_.parallel.tp;
  const double flops = 2.0 * t * h * v;
  PhaseCost c;
  c.fwd_flops = SaturatingU64(flops);
  // Logits in fp32 are written, read by the loss, and read again in backward.
  c.fwd_ns = RooflineNs(flops, v * h * 2.0 + t * v * 4.0 * 2.0);
  c.bwd_ns = RooflineNs(2.0 * flops, 2.0 * v * h * 2.0 + t * v * 4.0 * 2.0);
  c.activation_bytes = SaturatingI64(t * v * 4.0);
  return Measured("output", c);
}

uint64_t CostModel::OptimizerNs(uint64_t local_params) const {
  auto it = spec_.compute.table.find("optimizer");
  if (it != spec_.compute.table.end()) return it->second.fwd_ns;
  return RooflineNs(0, static_cast<double>(local_params) * kOptimizerBytesPerParam);
}

uint64_t CostModel::StaticBytes(uint64_t params, uint64_t optimizer_shards) const {
  const uint64_t shards = optimizer_shards == 0 ? 1 : optimizer_shards;
  return params * (2 + GradBytesPerParam()) + params * 12 / shards;
}

}  // namespace prism::graphgen
