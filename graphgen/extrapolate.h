// From the capture recordings of a slice (a few real ranks, one or more per
// role) to the full graph of the target job (docs/capture.md).
//
// Every recording carries every communicator the program created (the same
// list on every rank), so each rank's own communicators are known: rank r's
// k-th slot is the k-th communicator, in creation order, that r is a member
// of. A rank's ROLE is what its program can depend on: the size of each of
// its communicators and its position in those communicators that some
// recorded program uses with an absolute peer or a root (send/recv,
// broadcast, reduce). Ranks of one role get the program of the role's
// recorded rank(s) on their own communicators; compute durations are the
// mean of the role's recorded ranks, memory that of its lowest recorded
// rank. Refused, with the reason: recordings that disagree on the world or on
// the communicators; a role no recorded rank covers (naming its ranks and one
// to add to the slice); two recorded ranks of one role whose programs differ
// (apart from durations), naming the first differing op.
// Pure function; thread-safe.
#ifndef PRISM_GRAPHGEN_EXTRAPOLATE_H_
#define PRISM_GRAPHGEN_EXTRAPOLATE_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "graphgen/capture_recording.h"
#include "graphgen/job_spec.h"
#include "proto/graph.pb.h"

namespace prism::graphgen {

struct ExtrapolationOptions {
  std::string name = "captured";  // job name
  ClusterSpec cluster;            // the target's cluster (job file keys cluster.*)
};

struct RoleReport {
  std::string program;            // the role's program name
  std::vector<uint32_t> measured; // its recorded ranks, ascending
  std::vector<uint32_t> ranks;    // every rank of the role, ascending
};

struct Extrapolation {
  prism::graph::Graph graph;
  std::vector<RoleReport> roles;  // in program order
  // "measured: ranks 0, 512 (2 of 1024)" then one line per role:
  // "pp-stage-0: 512 ranks (0-511), 511 extrapolated from rank 0 (measured: 0)".
  std::string Summary() const;
};

// Contract: every recording passed ParseRecording's checks (RecordingFromGraph's do).
absl::StatusOr<Extrapolation> Extrapolate(std::vector<Recording> recordings, const ExtrapolationOptions& options);

// "0-511", "0, 2, 4, ... (256 ranks)": a list of ranks for people.
std::string RankList(const std::vector<uint32_t>& ranks);

}  // namespace prism::graphgen

#endif  // PRISM_GRAPHGEN_EXTRAPOLATE_H_
