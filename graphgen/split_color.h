// The ncclCommSplit color and key PyTorch passes for `new_group(ranks)` on a
// default group that was initialised eagerly (init_process_group with
// device_id): every rank of the parent calls ncclCommSplit once per
// new_group, members with
//   color = abs(hash(tuple(sorted(ranks)))) % 2**31   (CPython's tuple hash)
//   key   = the member's index in sorted(ranks)
// and non-members with NCCL_SPLIT_NOCOLOR (checked against PyTorch 2.11 on
// the GPU host; docs/graphgen.md). Graphs record these so that prismd's
// virtual ranks pass exactly what the real ranks' PyTorch passes.
//
// `split_group(parent, split_ranks)` (what DeviceMesh calls on an eagerly
// initialised default group: one call per mesh dimension, every rank a member
// of one group) passes, in PyTorch 2.11, the lowest parent rank of the
// caller's group as the color (ProcessGroupNCCL::split), with the same key.
// Seen on the GPU host (torch 2.11.0+cu130, 2026-12-03): TorchTitan's first
// DeviceMesh split at 16 ranks passed color 0, key 0 on rank 0. Some PyTorch
// sources hash the ranks there instead (c10d's genNcclSplitColor); 2.11's
// build does not. The lowest rank does not say which ranks the group has, so
// prismd --follow cannot learn a split_group group from its color
// (daemon/bootstrap/split_source.h); a graph carries them. Pure functions; thread-safe.
#ifndef PRISM_GRAPHGEN_SPLIT_COLOR_H_
#define PRISM_GRAPHGEN_SPLIT_COLOR_H_

#include <cstdint>
#include <vector>

namespace prism::graphgen {

// CPython 3.8+ (64-bit) hash of a tuple of non-negative ints below 2^61-1.
int64_t PythonTupleHash(const std::vector<uint32_t>& items);

// The same hash built one item at a time: after Add(a), ..., Add(z),
// Value() is the hash of the tuple (a, ..., z). Searching the groups that
// give a color (prismd's follow mode) extends a candidate by one rank at a
// time with it. A plain value.
class PythonTupleHasher {
 public:
  void Add(uint32_t item);
  int64_t Value() const;

 private:
  uint64_t acc_ = 2870177450012600261ull;  // CPython's _PyHASH_XXPRIME_5
  uint64_t items_ = 0;
};

// abs(hash) % 2**31: PyTorch's color from a tuple hash.
int32_t PyTorchColorOfHash(int64_t tuple_hash);

// PyTorch's split color for a group of global ranks (any order).
int32_t PyTorchSplitColor(std::vector<uint32_t> ranks);

// PyTorch 2.11's split_group color for a group of parent ranks (any order,
// not empty): the lowest of them.
int32_t SplitGroupColor(const std::vector<uint32_t>& ranks);

}  // namespace prism::graphgen

#endif  // PRISM_GRAPHGEN_SPLIT_COLOR_H_
