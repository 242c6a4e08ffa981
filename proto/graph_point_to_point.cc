#include "proto/graph_point_to_point.h"

#include <algorithm>
#include <map>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "proto/graph_check_errors.h"

namespace prism::graph::check {
namespace {

// ---- Send/recv sizes: the k-th send from a rank to a peer on a communicator
// meets the peer's k-th receive from that rank (the engine's matching). ----

struct P2POp {
  uint32_t op = 0;
  uint64_t bytes = 0;
};

// (slot, peer, peer_relative, is_send): a distinct send/recv target of a program.
using Target = std::tuple<uint32_t, uint32_t, bool, bool>;

struct ProgramTargets {
  std::vector<Target> targets;
  std::vector<std::vector<P2POp>> ops;  // per target, in program order
};

ProgramTargets CollectTargets(const Program& p) {
  ProgramTargets out;
  std::map<Target, uint32_t> index;
  for (int k = 0; k < p.ops_size(); ++k) {
    const Op& op = p.ops(k);
    if (!op.has_send() && !op.has_recv()) continue;
    const bool send = op.has_send();
    const Target t = send ? Target{op.send().comm_slot(), op.send().peer(), op.send().peer_relative(), true}
                          : Target{op.recv().comm_slot(), op.recv().peer(), op.recv().peer_relative(), false};
    const auto [it, fresh] = index.try_emplace(t, static_cast<uint32_t>(out.targets.size()));
    if (fresh) {
      out.targets.push_back(t);
      out.ops.emplace_back();
    }
    out.ops[it->second].push_back(P2POp{static_cast<uint32_t>(k), send ? op.send().bytes() : op.recv().bytes()});
  }
  return out;
}

// Which (communicator, global rank) a rank addresses through a target.
class PeerResolver {
 public:
  PeerResolver(const Topology& topology, const std::vector<ProgramTargets>& programs) : t_(topology) {
    std::vector<uint8_t> wanted(t_.communicators(), 0);
    for (uint32_t r = 0; r < t_.ranks(); ++r)
      for (const Target& t : programs[t_.program(r)].targets)
        if (std::get<2>(t)) wanted[t_.slots(r)[std::get<0>(t)]] = 1;
    ascending_.assign(t_.communicators(), 0);
    for (uint32_t c = 0; c < t_.communicators(); ++c) {
      if (!wanted[c]) continue;
      const auto members = t_.members(c);
      if (std::is_sorted(members.begin(), members.end())) {  // found by binary search, no entry
        ascending_[c] = 1;
        continue;
      }
      for (size_t i = 0; i < members.size(); ++i) position_[Key(c, members[i])] = static_cast<uint32_t>(i);
    }
  }

  std::pair<uint32_t, uint32_t> Resolve(uint32_t rank, const Target& t) const {
    const auto [slot, peer, relative, send] = t;
    const uint32_t comm = t_.slots(rank)[slot];
    const auto members = t_.members(comm);
    const uint64_t size = static_cast<uint64_t>(members.size());
    uint64_t target = peer % size;
    if (relative) target = (Position(comm, members, rank) + uint64_t{peer}) % size;
    return {comm, members[target]};
  }

 private:
  static uint64_t Key(uint32_t comm, uint32_t rank) { return (uint64_t{comm} << 32) | rank; }
  // The rank's index in the communicator (0 when not a member).
  uint32_t Position(uint32_t comm, absl::Span<const uint32_t> members, uint32_t rank) const {
    if (ascending_[comm]) {
      const auto it = std::lower_bound(members.begin(), members.end(), rank);
      return it != members.end() && *it == rank ? static_cast<uint32_t>(it - members.begin()) : 0;
    }
    const auto it = position_.find(Key(comm, rank));
    return it == position_.end() ? 0 : it->second;
  }
  const Topology& t_;
  std::vector<uint8_t> ascending_;                    // per communicator: members ascend
  absl::flat_hash_map<uint64_t, uint32_t> position_;  // others: (comm, rank) -> index
};

// Every rank's targets resolved once: (comm, peer) per target of its
// program, ranks in order.
class ResolvedTargets {
 public:
  ResolvedTargets(const Topology& t, const std::vector<ProgramTargets>& programs, const PeerResolver& peers) {
    begin_.reserve(static_cast<size_t>(t.ranks()) + 1);
    begin_.push_back(0);
    for (uint32_t r = 0; r < t.ranks(); ++r) {
      for (const Target& target : programs[t.program(r)].targets) to_.push_back(peers.Resolve(r, target));
      begin_.push_back(to_.size());
    }
  }
  const std::pair<uint32_t, uint32_t>& To(uint32_t rank, uint32_t target) const { return to_[begin_[rank] + target]; }

 private:
  std::vector<uint64_t> begin_;
  std::vector<std::pair<uint32_t, uint32_t>> to_;
};

// Targets of `rank` (sends or receives) that resolve to (comm, peer).
// (Into `ids`, cleared first: kept for its capacity.)
void TargetsTo(const ResolvedTargets& resolved, const ProgramTargets& program, uint32_t rank, bool sends,
               std::pair<uint32_t, uint32_t> to, std::vector<uint32_t>& ids) {
  ids.clear();
  for (uint32_t i = 0; i < program.targets.size(); ++i)
    if (std::get<3>(program.targets[i]) == sends && resolved.To(rank, i) == to) ids.push_back(i);
}

// Whether (programs, send targets, receive targets) was compared already:
// one integer for the usual one send and one receive target, a string
// otherwise.
class ComparedPairs {
 public:
  bool Insert(uint32_t src_program, uint32_t dst_program, const std::vector<uint32_t>& sends,
              const std::vector<uint32_t>& recvs) {
    if (sends.size() == 1 && recvs.size() == 1 && src_program < 0x10000 && dst_program < 0x10000 &&
        sends[0] < 0x10000 && recvs[0] < 0x10000)
      return single_.insert((uint64_t{src_program} << 48) | (uint64_t{dst_program} << 32) | (sends[0] << 16) | recvs[0])
          .second;
    std::string key = absl::StrCat(src_program, "/", dst_program, ":");
    for (uint32_t i : sends) absl::StrAppend(&key, i, ",");
    absl::StrAppend(&key, ":");
    for (uint32_t i : recvs) absl::StrAppend(&key, i, ",");
    return other_.insert(std::move(key)).second;
  }

 private:
  absl::flat_hash_set<uint64_t> single_;
  absl::flat_hash_set<std::string> other_;
};

std::vector<P2POp> Sequence(const ProgramTargets& program, const std::vector<uint32_t>& ids) {
  std::vector<P2POp> seq;
  for (uint32_t i : ids) seq.insert(seq.end(), program.ops[i].begin(), program.ops[i].end());
  std::sort(seq.begin(), seq.end(), [](const P2POp& a, const P2POp& b) { return a.op < b.op; });
  return seq;
}

}  // namespace

absl::Status ValidatePointToPoint(const Graph& g, const Topology& topology) {
  std::vector<ProgramTargets> programs;
  bool any = false;
  for (const Program& p : g.programs()) {
    programs.push_back(CollectTargets(p));
    any |= !programs.back().targets.empty();
  }
  if (!any) return absl::OkStatus();
  const ResolvedTargets resolved(topology, programs, PeerResolver(topology, programs));
  ComparedPairs compared;  // (program, send targets, program, recv targets) already checked
  std::vector<uint32_t> sends, recvs;
  for (uint32_t src = 0; src < topology.ranks(); ++src) {
    const uint32_t src_program = topology.program(src);
    const ProgramTargets& mine = programs[src_program];
    for (uint32_t t = 0; t < mine.targets.size(); ++t) {
      if (!std::get<3>(mine.targets[t])) continue;
      const auto [comm, dst] = resolved.To(src, t);
      TargetsTo(resolved, mine, src, true, {comm, dst}, sends);
      if (sends.front() != t) continue;  // this (comm, dst) was checked with an earlier target
      const uint32_t dst_program = topology.program(dst);
      TargetsTo(resolved, programs[dst_program], dst, false, {comm, src}, recvs);
      if (recvs.empty()) continue;  // no receive at all: the replay reports the stall
      if (!compared.Insert(src_program, dst_program, sends, recvs)) continue;
      const std::vector<P2POp> a = Sequence(mine, sends), b = Sequence(programs[dst_program], recvs);
      for (size_t i = 0; i < std::min(a.size(), b.size()); ++i)
        if (a[i].bytes != b[i].bytes)
          return Invalid(absl::StrCat("rank ", src, " (program ", src_program, " op ", a[i].op, ") sends ", a[i].bytes,
                                      " bytes to rank ", dst, " on communicator ", comm, ", whose matching receive (",
                                      "program ", dst_program, " op ", b[i].op, ") expects ", b[i].bytes,
                                      " bytes; a send and its receive must have one size"));
    }
  }
  return absl::OkStatus();
}

}  // namespace prism::graph::check
