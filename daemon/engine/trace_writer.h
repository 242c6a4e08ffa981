// Timeline export: Chrome/Perfetto trace-event JSON of selected ranks.
//
// One "X" (complete) event per op instance with pid = global rank and tid =
// stream, process/thread name metadata, and "s"/"f" flow events joining each
// send to its receive when both ranks are selected. Output is a pure
// function of the graph and the replay: byte-identical across runs.
// TraceRecorder is filled by the engine thread during Run(); write it after.
#ifndef PRISM_DAEMON_ENGINE_TRACE_WRITER_H_
#define PRISM_DAEMON_ENGINE_TRACE_WRITER_H_

#include <cstdint>
#include <ostream>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "common/units.h"
#include "daemon/engine/world.h"
#include "proto/graph.pb.h"

namespace prism::engine {

// Parses "0-15,1024" into sorted, distinct ranks below `world`.
absl::StatusOr<std::vector<uint32_t>> ParseRankList(const std::string& spec, uint32_t world);

class TraceRecorder {
 public:
  // `ranks`: sorted, distinct, < world size. `world` must outlive this.
  TraceRecorder(std::vector<uint32_t> ranks, const EngineWorld& world);
  TraceRecorder(const TraceRecorder&) = delete;
  TraceRecorder& operator=(const TraceRecorder&) = delete;

  bool Traces(uint32_t actor) const { return actor < traced_.size() && traced_[actor]; }
  void RecordOp(uint32_t actor, uint32_t op, Nanoseconds start, Nanoseconds end) {
    ops_.push_back({actor, op, start, end});
  }
  void RecordFlow(uint32_t send_actor, uint32_t send_op, uint32_t recv_actor, uint32_t recv_op,
                  Nanoseconds send_start, Nanoseconds recv_start, Nanoseconds end) {
    flows_.push_back({send_actor, send_op, recv_actor, recv_op, send_start, recv_start, end});
  }

  // One traced op: `start` is when the rank issued it, `end` when it completed.
  struct OpRecord { uint32_t actor, op; Nanoseconds start, end; };
  // Every op recorded so far, in completion order.
  const std::vector<OpRecord>& ops() const { return ops_; }
  // One traced send/recv transfer: each side's issue time and when the data
  // arrived (a send's own op can end before: docs/network-model.md, "Send
  // completion").
  struct FlowRecord {
    uint32_t send_actor, send_op, recv_actor, recv_op;
    Nanoseconds send_start, recv_start, end;
  };
  const std::vector<FlowRecord>& flows() const { return flows_; }

  // The model's NCCL step cost, written into the trace's metadata
  // (nccl_step_cost_us, nccl_step_cost_source) so a reader sees what each
  // ring step was charged.
  void SetStepCost(Nanoseconds cost, std::string source) {
    step_cost_ = cost;
    step_cost_source_ = std::move(source);
  }

  void WriteJson(const graph::Graph& graph, std::ostream& out) const;
  // Writes to `path` atomically (temporary file + rename).
  absl::Status WriteFile(const graph::Graph& graph, const std::string& path) const;

 private:
  void WriteFlows(const graph::Graph& graph, std::ostream& out, bool* first) const;

  std::vector<uint32_t> ranks_;
  Nanoseconds step_cost_{0};
  std::string step_cost_source_;
  const EngineWorld& world_;
  std::vector<uint8_t> traced_;   // per actor
  std::vector<uint8_t> selected_; // per rank
  std::vector<OpRecord> ops_;
  std::vector<FlowRecord> flows_;
};

}  // namespace prism::engine

#endif  // PRISM_DAEMON_ENGINE_TRACE_WRITER_H_
