// PyTorch 2.11's names for NCCL ids in its store, and which communicator of
// the graph a PyTorch process group is (PyTorch 2.11's c10d, docs/bootstrap.md;
// section 1; docs/bootstrap.md "Ids from PyTorch's store").
//
// Key grammar (after the TCPStore client's leading '/'):
//   [default_pg/]0//[<group>//]cuda//<tail>
//   <group> = decimal counter of new_group() calls, or the 40-hex SHA-1 name
//             of a use_local_synchronization group; absent = the default group
//   <tail>  = N (the group's N-th communicator) | lo:hi (a lone send/recv
//             pair, ranks of the group) | UniqueNCCLID:i (scalable init root i)
//
// Group rule (GroupResolver): PyTorch names the default group "0" and
// numbers new_group() calls 1, 2, ... in the order the program makes them,
// Gloo groups included. A graph with a process-group list
// (Graph.process_groups, prism-graphgen's job graphs) says what group "k" is:
// an NCCL communicator or a Gloo group. Without one, group "k" is graph
// communicator k (the graph lists communicators in creation order, world
// first). A hashed name is the SHA-1 of "<sorted members joined by _>_<n>"
// (n = process groups the rank had made before); it matches the group with
// those members.
// The children of one split_group call (same_call) are one group number.
// Limits: a program that makes groups the graph does not list or in another
// order shifts the numbering; the group's members then disagree with the
// real ranks' check-ins and prismd names the mismatch. Pure functions and
// immutable data; thread-safe.
#ifndef PRISM_DAEMON_RENDEZVOUS_TORCH_GROUPS_H_
#define PRISM_DAEMON_RENDEZVOUS_TORCH_GROUPS_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "daemon/bootstrap/bootstrap_plan.h"

namespace prism::rendezvous {

struct NcclIdKey {
  enum class Kind { kCommunicator, kPair, kScalableRoot };
  std::string key;            // as the store saw it
  bool env_prefix = false;    // "default_pg/" (env://, tcp://, torchrun)
  std::string group = "0";    // "0" = the default group
  Kind kind = Kind::kCommunicator;
  int64_t index = 0;          // kCommunicator: N; kScalableRoot: i
  int64_t lo = 0, hi = 0;     // kPair: group ranks
};

// nullopt for keys that are not NCCL ids.
std::optional<NcclIdKey> ParseNcclIdKey(const std::string& store_key);

// What prism capture's ranks set before a split_group call
// (scripts/prism_torch/prism_group_announce.py): key "[prefix/]prism/
// split_group/<global rank>/<k>", value {"members": [r, ...]} (global ranks).
struct SplitGroupAnnouncement {
  uint32_t rank = 0;
  std::vector<uint32_t> members;
};
// nullopt for other keys; an error naming the key for such a key whose rank
// or value does not parse.
std::optional<absl::StatusOr<SplitGroupAnnouncement>> ParseSplitGroupAnnouncement(const std::string& store_key,
                                                                                   const std::string& value);

// A process group resolved to the graph.
struct ResolvedGroup {
  uint32_t plan_id = 0;              // graph communicator (not for a Gloo group)
  std::vector<uint32_t> members;     // global ranks, group-rank order
  std::string name;                  // "tp[0] (PyTorch group 3)"
  bool gloo = false;                 // a Gloo group of the graph: no NCCL communicator
};

class GroupResolver {
 public:
  // `plan` must outlive the resolver.
  explicit GroupResolver(const bootstrap::BootstrapPlan& plan);

  // The graph's group for PyTorch group `group` (see the rule above): an
  // NCCL communicator, or a Gloo group (gloo = true). NotFound /
  // FailedPrecondition name the group and how to fix the mismatch.
  absl::StatusOr<ResolvedGroup> Resolve(const std::string& group) const;

  // As Resolve, for a store key of an NCCL id: a Gloo group there is a
  // mismatch (FailedPrecondition naming both).
  absl::StatusOr<ResolvedGroup> ResolveNccl(const std::string& group) const;

 private:
  // Groups PyTorch numbers: the process-group list, or the communicators.
  uint32_t GroupCount() const;
  // The process-group list's entry of PyTorch group `number`.
  uint32_t EntryOf(uint32_t number) const;
  std::vector<uint32_t> SortedMembers(uint32_t k) const;
  absl::StatusOr<uint32_t> ResolveHashed(const std::string& name) const;
  const bootstrap::BootstrapPlan& plan_;
  // Empty: group k is entry k. Else the entry of each group number, where
  // one split_group call's children (SplitCreation.same_call) share the
  // number of the first (a member's view: a rank in none of them numbers
  // its later groups one lower, which the rule cannot know).
  std::vector<uint32_t> entry_of_number_;
};

}  // namespace prism::rendezvous

#endif  // PRISM_DAEMON_RENDEZVOUS_TORCH_GROUPS_H_
