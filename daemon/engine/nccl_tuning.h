// What the model takes from NCCL's own tuning: which algorithms NCCL may pick
// (NCCL_ALGO) and its own cost per step.
//
// NCCL's own cost per ring or tree step, beyond the link's latency: what one
// step of a collective costs the rank that takes it (NCCL's proxy thread
// noticing the GPU's data, posting the send, polling the receive; the GPU
// noticing the receive and reducing into the next send). On a ring of n
// members it is paid (n-1) times per pass (network_model.h, c), so at 2048
// members it decides a latency-bound collective's time.
//
// The figures are measured (docs/network-model.md, "NCCL's step cost", says
// how): each entry names the NCCL release, protocol and algorithm it was
// measured for. A release, protocol or algorithm without its own entry gets
// the closest measured one (same protocol and algorithm, newest release),
// and `measured` says which figure stands in.
#ifndef PRISM_DAEMON_ENGINE_NCCL_TUNING_H_
#define PRISM_DAEMON_ENGINE_NCCL_TUNING_H_

#include <optional>
#include <string>

#include "absl/status/statusor.h"

#include "common/units.h"
#include "proto/graph.pb.h"

namespace prism::engine {

enum class NcclProtocol { kSimple, kLL, kLL128 };

struct StepCost {
  Nanoseconds cost;
  std::string measured;  // "NCCL 2.28.9 Simple ring, 2026-12-02 (...)": where the figure comes from
};

// The step cost for NCCL `release` (its version code, e.g. 22809; 0: the
// release the project's GPU hosts carry), `protocol` and `algorithm`
// (ring or tree; any other algorithm is taken as ring).
StepCost NcclStepCost(int release, NcclProtocol protocol, graph::Algorithm algorithm);

// What prismd uses unless told otherwise (--step-cost-us): NCCL 2.28's
// Simple ring, the protocol and algorithm of bandwidth-bound training
// collectives.
inline StepCost DefaultNcclStepCost() { return NcclStepCost(0, NcclProtocol::kSimple, graph::ALGORITHM_RING); }

// The figure a graph carries (Cluster.nccl_step_costs: measured on the
// job's real ranks by prism capture): its Simple ring entry, the protocol and
// algorithm the model's ring times are (network_model.h), else its ring entry
// fitted from the most operations (a job whose rings all ran LL; the fit
// uses the model's formula whatever the protocol), with the entry's source;
// none when the graph has no ring entry. prismd uses it before
// DefaultNcclStepCost, --step-cost-us before both.
std::optional<StepCost> GraphNcclStepCost(const graph::Cluster& cluster);

// The algorithms a job's NCCL may choose from, as NCCL_ALGO says (NCCL's
// syntax: a comma-separated list such as "Ring,Tree", or "^Tree" for all but
// those; names are case-insensitive). The model plays ring, tree and PAT;
// the other names NCCL knows (CollnetDirect, CollnetChain, NVLS, NVLSTree:
// off on the targets) are accepted and change nothing.
struct NcclAlgorithms {
  bool ring = true;
  bool tree = true;
  bool pat = true;
  std::string text;  // what was parsed ("" for NCCL's default)
};

// Parses an NCCL_ALGO value; an unknown name or a list that leaves none of
// ring, tree and PAT is an error naming the value and the names accepted.
absl::StatusOr<NcclAlgorithms> ParseNcclAlgo(const std::string& value);

}  // namespace prism::engine

#endif  // PRISM_DAEMON_ENGINE_NCCL_TUNING_H_
