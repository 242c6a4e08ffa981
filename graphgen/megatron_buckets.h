// Megatron-core's DistributedDataParallel gradient buckets (module: program
// builder, `parallel.grad_buckets: megatron`), as
// megatron/core/distributed/param_and_grad_buffer.py (without the
// distributed optimizer) and DistributedOptimizer's parameter layout (with
// it) lay them out at d98e8a64dd: parameters in backward order (the reverse
// of registration), a bucket closed once it holds `bucket_size` elements;
// with the distributed optimizer every parameter starts on a multiple of 64
// elements, a bucket's end is padded to a multiple of lcm(dp, 128), and a
// shared (tied, pp > 1) embedding weight gets a bucket of its own.
// Plain values; not thread-safe.
#ifndef PRISM_GRAPHGEN_MEGATRON_BUCKETS_H_
#define PRISM_GRAPHGEN_MEGATRON_BUCKETS_H_

#include <cstdint>
#include <optional>
#include <vector>

#include "graphgen/job_spec.h"

namespace prism::graphgen {

// One parameter tensor, in elements.
struct MegatronParam {
  uint64_t numel = 0;
  bool shared_embedding = false;  // the word embedding / output weight tied across stages (pp > 1)
};

// The dense parameters of one transformer layer in backward order: MLP
// (fc2, fc1, or the MoE router), pre-MLP norm, attention (qkv, proj),
// input norm; RMSNorm weights and no linear biases (what CostModel counts).
std::vector<MegatronParam> MegatronLayerParamsBackward(const JobSpec& spec);

// One gradient buffer of one DistributedDataParallel.
class MegatronGradBuffer {
 public:
  // `bucket_size`: nullopt = one bucket (Megatron's None). `dp`: the
  // buffer's data-parallel group size.
  MegatronGradBuffer(std::optional<uint64_t> bucket_size, bool distributed_optimizer, uint64_t dp);

  // Adds the next parameter in backward order; returns the buckets it
  // closed (element counts, padding included), oldest first.
  std::vector<uint64_t> Add(const MegatronParam& p);
  // Closes the open bucket, if any (the end of the layout).
  std::optional<uint64_t> Close();

 private:
  uint64_t Finalize(uint64_t end);

  std::optional<uint64_t> bucket_size_;
  bool distributed_optimizer_;
  uint64_t end_divisor_;
  uint64_t cursor_ = 0, bucket_start_ = 0;
  uint32_t params_in_bucket_ = 0;
};

}  // namespace prism::graphgen

#endif  // PRISM_GRAPHGEN_MEGATRON_BUCKETS_H_
