#include "graphgen/megatron_buckets.h"

#include <numeric>

namespace prism::graphgen {
namespace {

uint64_t PadUp(uint64_t v, uint64_t multiple) { return (v + multiple - 1) / multiple * multiple; }

}  // namespace

std::vector<MegatronParam> MegatronLayerParamsBackward(const JobSpec& spec) {
  const ModelSpec& m = spec.model;
  const uint64_t tp = spec.parallel.tp;
  const uint64_t h = m.hidden;
  std::vector<MegatronParam> out;
  if (m.moe()) {
    out.push_back({h * m.experts});  // router (the experts are the expert buffer's)
  } else {
    out.push_back({h * m.ffn_hidden / tp});                           // linear_fc2
    out.push_back({(m.gated_mlp ? 2 : 1) * m.ffn_hidden * h / tp});   // linear_fc1
  }
  out.push_back({h});                                                  // pre_mlp_layernorm
  out.push_back({(h + 2 * m.kv_heads * m.head_dim()) * h / tp});     // linear_qkv
  out.push_back({h * h / tp});                                         // linear_proj
  out.push_back({h});                                                  // input_layernorm
  return out;
}

MegatronGradBuffer::MegatronGradBuffer(std::optional<uint64_t> bucket_size, bool distributed_optimizer, uint64_t dp)
    : bucket_size_(bucket_size),
      distributed_optimizer_(distributed_optimizer),
      end_divisor_(std::lcm(std::max<uint64_t>(dp, 1), uint64_t{128})) {}

uint64_t MegatronGradBuffer::Finalize(uint64_t end) {
  const uint64_t padded_end = distributed_optimizer_ ? PadUp(end, end_divisor_) : end;
  const uint64_t numel = padded_end - bucket_start_;
  bucket_start_ = cursor_ = padded_end;
  params_in_bucket_ = 0;
  return numel;
}

std::vector<uint64_t> MegatronGradBuffer::Add(const MegatronParam& p) {
  std::vector<uint64_t> closed;
  const bool own_bucket = distributed_optimizer_ && p.shared_embedding;
  if (distributed_optimizer_) cursor_ = PadUp(cursor_, 64);
  if (own_bucket && params_in_bucket_ > 0) closed.push_back(Finalize(cursor_));
  const uint64_t end = cursor_ + p.numel;
  ++params_in_bucket_;
  if ((bucket_size_ && end - bucket_start_ >= *bucket_size_) || own_bucket) {
    closed.push_back(Finalize(end));
  } else {
    cursor_ = end;
  }
  return closed;
}

std::optional<uint64_t> MegatronGradBuffer::Close() {
  if (params_in_bucket_ == 0) return std::nullopt;
  return Finalize(cursor_);
}

}  // namespace prism::graphgen
