// How a real rank's NCCL operations line up with its program in the graph,
// both ways:
//  - an operation the plugin reports (communicator, NCCL function, NCCL's
//    sequence number, or send/recv peer and count) -> the program op it is;
//  - an engine event about the rank's collective call number `call` on a
//    communicator, or its n-th receive from a peer -> the NCCL operation the
//    plugin will see, so that its schedule can be keyed before it starts.
//
// The rules (docs/timing.md, "Which operation is which"): NCCL numbers the
// collectives of each function per communicator from 0 (profiler
// seqNumber), in the order the rank issues them; the graph's ops of a
// communicator are in the same order (one stream per communicator).
// Send/recv are counted per (communicator, peer, direction). Both repeat every iteration.
//
// Immutable after Build; thread-safe for reads.
#ifndef PRISM_DAEMON_HYBRID_REAL_RANK_PROGRAMS_H_
#define PRISM_DAEMON_HYBRID_REAL_RANK_PROGRAMS_H_

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "proto/graph.pb.h"
#include "proto/prism_service.pb.h"

namespace prism::daemon {

// A program op instance: op index and iteration (0-based), and its number
// among the rank's collectives on that communicator (all functions; the
// engine's call index) or among its send/recvs with that peer.
struct ProgramOp {
  uint32_t op = 0;
  uint64_t iteration = 0;
  uint64_t call = 0;
  // One of the program's start-up collectives (Program.startup_ops), issued
  // before its first iteration: no program op, iteration or call (the
  // engine does not replay them).
  bool startup = false;
};

class RealRankPrograms {
 public:
  // Indexes the programs of `real_ranks` (each < world size).
  static absl::StatusOr<RealRankPrograms> Build(const graph::Graph& graph, const std::vector<uint32_t>& real_ranks);

  bool IsReal(uint32_t rank) const { return ranks_.count(rank) != 0; }
  std::vector<uint32_t> RealRanks() const {
    std::vector<uint32_t> out;
    for (const auto& [rank, index] : ranks_) out.push_back(rank);
    return out;
  }
  size_t real_count() const { return ranks_.size(); }

  // A graph communicator whose members are all real ranks, by its members
  // (global ranks in communicator-rank order): its id and name. For a
  // communicator the store did not name (its id did not come through
  // PyTorch's store): the hybrid scheduler then learns its members from the
  // real ranks' own reports. Several graph communicators may have the same
  // members (Megatron's pipeline and embedding groups at PP=2): the first in
  // creation order that is not in `bound` (those already taken by another
  // NCCL communicator); nullopt when none is left.
  struct NamedComm {
    uint32_t id = 0;
    std::string name;
  };
  std::optional<NamedComm> AllRealCommunicator(const std::vector<uint32_t>& members,
                                               const std::set<uint32_t>& bound = {}) const;

  // The `seq`-th collective of `kind` by `rank` on graph communicator
  // `comm`: one of its start-up collectives (the first ones of that kind
  // there, ProgramOp::startup), else the iterations' (numbered after the
  // start-up's); nullopt when the program has none of that kind there.
  std::optional<ProgramOp> Collective(uint32_t rank, uint32_t comm, rpc::OpKind kind, uint64_t seq) const;
  // The `seq`-th send (or receive) of `rank` with global rank `peer` on graph
  // communicator `comm` (NCCL counts them per communicator, peer and
  // direction); nullopt when the program has none.
  std::optional<ProgramOp> PointToPoint(uint32_t rank, uint32_t comm, uint32_t peer, bool send, uint64_t seq) const;

  // The NCCL identity (function, sequence number) of `rank`'s collective
  // number `call` (all functions counted, 0-based, start-up not counted) on
  // graph communicator `comm`; NCCL's number counts the start-up's
  // collectives of that function first.
  std::optional<std::pair<rpc::OpKind, uint64_t>> CallToNccl(uint32_t rank, uint32_t comm, uint64_t call) const;

  // The graph communicator each slot of `rank`'s program names (Rank.comm_slots).
  std::vector<uint32_t> GraphSlots(uint32_t rank) const;
  // Bytes the graph gives op `op` of `rank`'s program.
  uint64_t Bytes(uint32_t rank, uint32_t op) const;
  // Graph communicator that `rank`'s canonical slot for `op` names.
  std::string OpName(uint32_t rank, uint32_t op) const;

  // NCCL's function for a graph collective kind (BARRIER: all-reduce).
  static rpc::OpKind NcclKind(graph::CollectiveKind kind);

 private:
  struct CommCalls {
    std::vector<uint32_t> ops;                    // collective ops on this comm, program order
    std::map<rpc::OpKind, std::vector<uint32_t>> by_kind;  // positions in `ops` per function
  };
  struct RankIndex {
    const graph::Program* program = nullptr;
    const graph::Rank* rank = nullptr;
    std::map<uint32_t, CommCalls> comms;          // graph communicator -> its collectives
    std::map<std::pair<uint32_t, rpc::OpKind>, uint64_t> startup;  // (communicator, function) -> start-up collectives
    std::map<std::tuple<uint32_t, uint32_t, bool>, std::vector<uint32_t>> p2p;  // (comm, peer, is_send) -> ops
  };

  // Start-up collectives of `kind` by `rank` on `comm`.
  uint64_t StartupCount(const RankIndex& ix, uint32_t comm, rpc::OpKind kind) const;

  std::map<uint32_t, RankIndex> ranks_;
  std::map<std::vector<uint32_t>, std::vector<NamedComm>> all_real_comms_;  // creation order
};

}  // namespace prism::daemon

#endif  // PRISM_DAEMON_HYBRID_REAL_RANK_PROGRAMS_H_
