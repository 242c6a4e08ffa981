// NCCL's per-step cost, fitted from a real rank's own ring collectives in a
// session recording (prismd --record-sessions; docs/network-model.md,
// "NCCL's step cost", and docs/capture.md, "NCCL's step cost, measured").
//
// The model times a ring of h steps that moves W of wire time per member as
//   h * (W/(h k) + L + c) + (k-1) * W/(h k)        (network_model.h)
// with k = 2 slices per step (NCCL's Simple ring; the model times every
// protocol so), L the hop latency and c NCCL's own cost per step. The plugin
// reports each operation's first send and its end (OpFinished), so for one
// operation
//   c = (duration - trail) / h - W/(h k) - L,   trail = (k-1) * W/(h k),
// the c with which the model's formula gives the measured duration (for LL,
// which moves a step in one transfer of twice the bytes, that holds the
// difference too). Only latency-bound rings say anything about c: an
// operation is used when its ring has at least kMinFitSteps steps, a step's
// wire time W/h is at most the hop latency plus the standing figure
// (DefaultNcclStepCost), so that the latency and NCCL's cost make up half
// the step or more, its steps carry kMinFitChunkBytes or more per member
// (steps that carry no data are not paced like the others), and no other
// operation of the rank with network traffic overlapped it (two operations
// share the NIC and NCCL's proxy thread).
//
// In a hybrid run a receive from a virtual peer is held to the ring's
// lockstep floor, the model's step W/(2h) + L + c with the run's c
// (plugin/arrival.h, common/ring_step.h): an operation the floor paced comes
// out at the run's c (less c/h: the real rank paid its first c before its
// first send; plus what its NCCL took after the last receive, over h). An
// operation whose c comes out below the run's plus kFloorHeldMargin was
// possibly paced by that floor and only bounds NCCL's cost from above: it
// is left out, and when such operations are over a quarter of the
// used and left-out ones the protocol gets no figure (capture with prismd's --step-cost-us 0 to
// measure below the floor). The figure per protocol (ring only) is the
// median of the used operations' c; a protocol with fewer than kMinFitOps
// of them gets none, and the fit says why.
// Pure functions; thread-safe.
#ifndef PRISM_DAEMON_HYBRID_STEP_COST_FIT_H_
#define PRISM_DAEMON_HYBRID_STEP_COST_FIT_H_

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "common/units.h"
#include "daemon/engine/link_figures.h"
#include "daemon/hybrid/session_recorder.h"
#include "proto/graph.pb.h"

namespace prism::daemon {

inline constexpr uint32_t kMinFitOps = 8;
inline constexpr uint64_t kMinFitSteps = 15;
inline constexpr uint64_t kMinFitChunkBytes = 64;
// Per step above the run's c within which an operation counts as paced by
// the lockstep floor (the real rank's work after its last receive, spread
// over the ring's steps).
inline constexpr Nanoseconds kFloorHeldMargin{250};

// One operation of a real rank with its network traffic, as the plugin
// reported it (OpStarted, OpFinished).
struct RingOpTiming {
  graph::CollectiveKind kind = graph::ALLREDUCE;  // meaningful when `collective`
  bool collective = false;                        // a ring all-reduce, all-gather or reduce-scatter
  std::string algorithm;                          // NCCL's name, upper case ("RING", "TREE", "PAT"; "" for p2p)
  std::string protocol;                           // NCCL's name, upper case ("SIMPLE", "LL", "LL128")
  engine::CommShape shape;
  Bytes bytes;                                    // the graph's full-buffer convention
  Nanoseconds first_send;                         // 0: sent nothing through the plugin
  Nanoseconds end;
};

// Per real rank (global rank), every operation that reported a first send
// and an end, in the recording's order. `placement` gives each rank's node
// (its ranks; or rank / gpus_per_node when it has none); an operation on a
// communicator the recording does not name is left out.
std::map<uint32_t, std::vector<RingOpTiming>> RingOpTimings(const Recording& recording,
                                                            const graph::Graph& placement);

struct StepCostFit {
  std::string protocol;
  std::optional<Nanoseconds> cost;  // none: refused (detail says why)
  uint32_t ring_ops = 0;            // ring collectives of this protocol seen
  uint32_t used_ops = 0;            // the latency-bound, non-overlapped ones the figure comes from
  Nanoseconds p10, p90;             // of the used operations' c
  std::string detail;               // which operations were used, or why none is given
};

// One fit per protocol that ran a ring collective on the rank, protocols by
// name. `cluster`: the links the run played (the graph prismd ran with);
// `run_step_cost`: the step cost that run played (its lockstep floor).
std::vector<StepCostFit> FitStepCost(const std::vector<RingOpTiming>& ops, const graph::Cluster& cluster,
                                     Nanoseconds run_step_cost);

// The fits that gave a figure, as the capture header's and the graph's
// entries: source "measured by prism capture on rank R, N ops (...)".
std::vector<graph::NcclStepCost> StepCostEntries(const std::vector<StepCostFit>& fits, uint32_t rank);

// A capture round's header entries: the fits' figures; none of its own, or
// a graph round (`graph_round`: the run played a graph, not --follow) whose
// graph has a figure: the run graph's (`run_cluster`), sources marked
// "kept: ". A graph round's rings were held to the lockstep floor with that
// figure, so only the operations slower than the floor fit, and their pace is
// their own (CollectiveOp.measured_ns), not the ring's: fitting them would
// raise the figure round after round (docs/capture.md, "Refine rounds").
// `kept`: whether the run graph's figure was taken.
std::vector<graph::NcclStepCost> RoundStepCosts(const std::vector<StepCostFit>& fits, uint32_t rank,
                                                const graph::Cluster& run_cluster, bool graph_round, bool* kept);

// One line for a person: "step cost, rank R: SIMPLE ring 9.80 us per step
// (median of N latency-bound ring ops, p10 .. p90 ..); LL ring: none (...)".
std::string DescribeFits(const std::vector<StepCostFit>& fits, uint32_t rank);

}  // namespace prism::daemon

#endif  // PRISM_DAEMON_HYBRID_STEP_COST_FIT_H_
