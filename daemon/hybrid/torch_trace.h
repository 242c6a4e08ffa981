// What a real rank's program asked of torch.distributed, as
// scripts/prism_torch/prism_torch_trace.py writes it under `prism capture`
// (FOLDER/torch-rank-<r>.jsonl; docs/capture.md, "Streams, dependencies and
// memory"): its calls in call order (function, process group, async_op,
// bytes, dtype, peer, batch), when it waited for their works, and the CUDA
// caching allocator's memory at each call. A follow capture
// (follow_capture.h) matches these calls to the NCCL operations the plugin
// reported and takes from them what the plugin cannot see: the order of a
// batch's sends and receives, which operations overlap the program (a
// separate stream, with the dependencies PyTorch's stream waits make) and
// the program's memory.
//
// Pure functions; thread-safe.
#ifndef PRISM_DAEMON_HYBRID_TORCH_TRACE_H_
#define PRISM_DAEMON_HYBRID_TORCH_TRACE_H_

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "proto/graph.pb.h"
#include "proto/prism_service.pb.h"

namespace prism::daemon {

struct TorchGroup {
  uint32_t number = 0;            // the trace's numbering (order of first use)
  std::vector<uint32_t> ranks;    // global ranks, in group-rank order
  std::string backend;            // "nccl", "gloo", "cpu:gloo,cuda:nccl", ...
  bool Nccl() const { return backend.find("nccl") != std::string::npos; }
};

struct TorchCall {
  uint64_t number = 0;            // call order, from 0
  std::string fn;                 // "all_reduce", "isend", ...
  uint32_t group = 0;             // a TorchGroup's number
  bool async = false;             // async_op (isend/irecv and batch members: true)
  uint64_t bytes = 0;             // the graph's full-buffer convention
  std::string dtype;              // torch's name, "torch.bfloat16"; empty when unknown
  int64_t peer = -1;              // send/recv: global rank
  int64_t batch = -1;             // batch_isend_irecv number, -1 outside one
  int64_t at_ns = 0;              // CLOCK_REALTIME at the call
  std::optional<int64_t> allocated, peak;  // allocator bytes at the call (absent before CUDA)
  // The current CUDA stream's handle when the call was made on a side stream
  // (FSDP2's all-gather and reduce-scatter streams); absent: the default stream.
  std::optional<int64_t> side_stream;
  // The program waited for this call's work before its call number
  // `waited_before` (that many calls had been made); absent: never waited
  // (for a call that was not async, PyTorch waited at once).
  std::optional<uint64_t> waited_before;
  uint64_t batch_last = 0;        // the last call number of its batch (itself outside one)
  // The compute stream went on only after this call's work, before any other call was made
  // (a call on a side stream holds that stream, not the compute stream).
  bool Inline() const { return !side_stream && (!async || (waited_before && *waited_before == batch_last + 1)); }
};

struct TorchTrace {
  uint32_t rank = 0;
  std::vector<TorchGroup> groups;   // by number
  std::vector<TorchCall> calls;     // by number
};

// InvalidArgument naming the file and line: not a trace, a line that is not
// JSON or lacks a field, a call on a group not yet described, a wait naming
// an unknown call.
absl::StatusOr<TorchTrace> ReadTorchTrace(const std::string& path);
// Every torch-rank-*.jsonl of `folder`, by rank; NotFound when there is none.
absl::StatusOr<std::map<uint32_t, TorchTrace>> ReadTorchTraces(const std::string& folder);

// The NCCL operation a call makes (barrier: an all-reduce); nullopt for
// calls NCCL does as several (all_to_all: sends and receives) or not at all.
std::optional<rpc::OpKind> NcclKindOf(const std::string& fn);
// torch's dtype name as the graph's; DTYPE_UNSPECIFIED when it has none.
graph::DType GraphDtypeOf(const std::string& torch_dtype);

}  // namespace prism::daemon

#endif  // PRISM_DAEMON_HYBRID_TORCH_TRACE_H_
