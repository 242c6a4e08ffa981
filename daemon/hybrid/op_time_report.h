// A real rank's collectives against the model, at the end of a hybrid run:
// where its iteration went past what --simulate plays, without a recording
// (bench/hybrid_gap.py and hybrid_explain split a recording further, op by
// op).
//
// Alike operations (collective kind, the algorithm NCCL ran, bytes, the
// communicator's members and nodes) form a group: the all-reduces,
// all-gathers and reduce-scatters NCCL ran as a ring, a tree or PAT. Per
// group: how many the rank ran, the median of their time from the rank's
// first send to their end (what the plugin reports: OpStarted's first send,
// OpFinished), and what the model gives one such operation once every member
// has arrived (NetworkModel::CollectiveTime with that algorithm; the model
// falls back to the ring where the algorithm does not apply). The difference times the
// group's operations per iteration is what the group added to the rank's
// iteration, the waits for late virtual members included (a ring's first
// send waits for nothing; its receives do). Groups are listed by that, the
// most first.
//
// Pure functions; thread-safe.
#ifndef PRISM_DAEMON_HYBRID_OP_TIME_REPORT_H_
#define PRISM_DAEMON_HYBRID_OP_TIME_REPORT_H_

#include <cstdint>
#include <string>
#include <vector>

#include "common/units.h"
#include "daemon/engine/network_model.h"
#include "daemon/hybrid/step_cost_fit.h"

namespace prism::daemon {

struct OpTimeGroup {
  graph::CollectiveKind kind = graph::ALLREDUCE;
  graph::Algorithm algorithm = graph::ALGORITHM_RING;
  Bytes bytes;
  engine::CommShape shape;
  uint64_t count = 0;
  Nanoseconds median;  // first send to end, over the group's operations
  Nanoseconds model;   // NetworkModel::CollectiveTime of one, the ring
  // (median - model) * count / iterations: what the group added to an
  // iteration (negative: took away). `iterations` at least 1.
  Nanoseconds AddedPerIteration(uint64_t iterations) const;
};

// The collectives of `ops` NCCL ran as a ring, a tree or PAT (with a first
// send) in groups, the group that added most per iteration first.
std::vector<OpTimeGroup> GroupCollectiveOps(const std::vector<RingOpTiming>& ops, const engine::NetworkModel& model);

// One line for a person, the `most` groups that added most first:
// "collectives against the model, rank R (first send to end, median; what
// each group added to an iteration, of I): all-reduce 2.00 MiB on 2 ranks (1
// node) x68.0: 88.4 us against 30.5 us, +3.94 ms; all-gather (PAT) ...".
// The algorithm is named when it is not the ring. `iterations` 0 (a run
// that completed no iteration of its graph, e.g. a follow capture, whose
// graph is the world alone): the counts and additions are the whole run's,
// and the line says so. Empty when there is no group.
std::string DescribeOpTimes(const std::vector<OpTimeGroup>& groups, uint32_t rank, uint64_t iterations,
                            size_t most = 4);

}  // namespace prism::daemon

#endif  // PRISM_DAEMON_HYBRID_OP_TIME_REPORT_H_
