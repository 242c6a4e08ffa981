// Compute, memory and message-size model of one rank of a Megatron job
// (module: compute / memory model). docs/graphgen.md states the formulas.
//
// All figures are per rank and per microbatch unless a name says otherwise.
// Durations: a measured table entry when the job gives one, else a roofline:
//   ns = flops / (peak_bf16 * matmul_efficiency) + bytes / (hbm * memory_efficiency).
// Immutable after construction; thread-safe.
#ifndef PRISM_GRAPHGEN_COST_MODEL_H_
#define PRISM_GRAPHGEN_COST_MODEL_H_

#include <cstdint>
#include <string>

#include "graphgen/job_spec.h"

namespace prism::graphgen {

struct PhaseCost {
  uint64_t fwd_ns = 0;
  uint64_t bwd_ns = 0;
  uint64_t fwd_flops = 0;
  int64_t activation_bytes = 0;     // allocated in forward, freed in backward
};

class CostModel {
 public:
  explicit CostModel(const JobSpec& spec);

  // Sublayers of one transformer layer, and the pipeline ends.
  PhaseCost Attention() const;
  PhaseCost Mlp() const;            // dense MLP, or the MoE block for MoE models
  PhaseCost Embedding() const;      // first stage, first chunk
  PhaseCost Output() const;         // last stage, last chunk: logits + loss
  uint64_t OptimizerNs(uint64_t local_params) const;

  // Parameters held by one rank.
  uint64_t DenseParamsPerLayer() const;    // attention + norms (+ router, + dense MLP)
  uint64_t ExpertParamsPerLayer() const;   // local experts (0 for dense models)
  uint64_t EmbeddingParams() const;        // word (+ learned position) embedding, first stage
  uint64_t OutputParams() const;           // output layer (copy when tied and pp > 1) + final norm, last stage
  uint64_t NormParamsPerLayer() const;     // layernorm weights (TP-replicated)
  uint64_t padded_vocab() const { return padded_vocab_; }

  // Message sizes (bytes, NCCL's full-buffer convention for collectives).
  uint64_t TpCollectiveBytes() const;      // micro * seq/cp * hidden * 2
  uint64_t PpActivationBytes() const;      // micro * seq/cp * hidden * 2 / (tp if SP)
  // What a recomputed layer (or MLP) keeps of its forward: its bf16 input,
  // micro * seq/cp * hidden * 2 / (tp if SP).
  int64_t LayerInputBytes() const { return static_cast<int64_t>(PpActivationBytes()); }
  uint64_t CpKvBytes() const;              // K and V of one sequence chunk
  uint64_t EpAlltoallBytes() const;        // tokens * topk * hidden * 2
  uint64_t LossReductionBytes() const;     // micro * seq/cp * 4: one fp32 per token
  uint64_t GradBytesPerParam() const { return spec_.parallel.grads_fp32 ? 4 : 2; }

  // Resident bytes: bf16 weights (2) + grads (4 or 2) + fp32 master, Adam m, v
  // (12, divided among `optimizer_shards` ranks by the distributed optimizer).
  uint64_t StaticBytes(uint64_t params, uint64_t optimizer_shards) const;

 private:
  uint64_t RooflineNs(double flops, double bytes) const;
  PhaseCost Measured(const std::string& kind, PhaseCost roofline) const;
  double tokens() const;            // micro * seq / cp

  JobSpec spec_;
  uint64_t padded_vocab_ = 0;
};

}  // namespace prism::graphgen

#endif  // PRISM_GRAPHGEN_COST_MODEL_H_
