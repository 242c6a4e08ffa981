#include "proto/graph_validate.h"

#include <string>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "common/limits.h"
#include "proto/graph_check_errors.h"
#include "proto/graph_membership.h"
#include "proto/graph_point_to_point.h"
#include "proto/graph_rules.h"
#include "proto/graph_topology.h"

namespace prism::graph {
namespace {

using check::Invalid;
using check::OverLimit;

uint64_t Magnitude(int64_t v) { return v < 0 ? uint64_t{0} - static_cast<uint64_t>(v) : static_cast<uint64_t>(v); }

absl::Status ValidateLink(const std::string& name, uint64_t bandwidth_bps, uint64_t latency_ns) {
  if (bandwidth_bps != 0 && bandwidth_bps < limits::kMinBandwidthBps)
    return absl::OutOfRangeError(absl::StrCat(
        "graph beyond Prism's limits: ", name, " bandwidth is ", bandwidth_bps, " bit/s, under the minimum of ",
        limits::kMinBandwidthBps, " bit/s (common/limits.h); give the link's real bandwidth"));
  if (bandwidth_bps > limits::kMaxBandwidthBps)
    return OverLimit(absl::StrCat(name, " bandwidth is ", bandwidth_bps, " bit/s"), limits::kMaxBandwidthBps,
                     " bit/s");
  if (latency_ns > limits::kMaxLatencyNs)
    return OverLimit(absl::StrCat(name, " latency is ", latency_ns, " ns"), limits::kMaxLatencyNs, " ns");
  return absl::OkStatus();
}

absl::Status ValidateCluster(const Graph& g, uint64_t ranks) {
  if (ranks > limits::kMaxRanks)
    return OverLimit(absl::StrCat("the world is ", ranks, " ranks"), limits::kMaxRanks, " ranks");
  const Cluster& cl = g.cluster();
  if (cl.nodes() == 0 || cl.gpus_per_node() == 0) return Invalid("cluster has zero nodes or GPUs per node");
  if (cl.gpus_per_node() > limits::kMaxGpusPerNode)
    return OverLimit(absl::StrCat("a node has ", cl.gpus_per_node(), " GPUs"), limits::kMaxGpusPerNode, " GPUs");
  if (cl.nodes() > limits::kMaxRanks)
    return OverLimit(absl::StrCat("the cluster has ", cl.nodes(), " nodes"), limits::kMaxRanks, " nodes");
  if (cl.nic().count() > limits::kMaxNicsPerNode)
    return OverLimit(absl::StrCat("a node has ", cl.nic().count(), " NICs"), limits::kMaxNicsPerNode, " NICs");
  if (static_cast<uint64_t>(cl.nodes()) * cl.gpus_per_node() < ranks)
    return Invalid(absl::StrCat("cluster of ", cl.nodes(), "x", cl.gpus_per_node(), " GPUs cannot hold ",
                                ranks, " ranks"));
  if (cl.nic().count() > 0 && cl.nic().bandwidth_bps() == 0) return Invalid("NIC bandwidth is zero");
  if (auto s = ValidateLink("NIC", cl.nic().bandwidth_bps(), cl.nic().latency_ns()); !s.ok()) return s;
  return ValidateLink("intra-node link", cl.intra_node().bandwidth_bps(), cl.intra_node().latency_ns());
}

absl::Status ValidateCompute(const ComputeOp& c, const std::string& where) {
  if (c.duration_ns() > limits::kMaxOpDurationNs)
    return OverLimit(absl::StrCat(where, " has a duration of ", c.duration_ns(), " ns"), limits::kMaxOpDurationNs,
                     " ns");
  if (Magnitude(c.memory_delta_bytes()) > limits::kMaxMemoryBytes)
    return OverLimit(absl::StrCat(where, " changes memory by ", c.memory_delta_bytes(), " bytes"),
                     limits::kMaxMemoryBytes, " bytes");
  return absl::OkStatus();
}

absl::Status ValidateBytes(uint64_t bytes, const std::string& where) {
  if (bytes > limits::kMaxOpBytes)
    return OverLimit(absl::StrCat(where, " moves ", bytes, " bytes"), limits::kMaxOpBytes, " bytes");
  return absl::OkStatus();
}

absl::Status ValidateCollective(const CollectiveOp& c, const std::string& where) {
  if (!CollectiveKind_IsValid(c.kind()) || c.kind() == COLLECTIVE_KIND_UNSPECIFIED)
    return Invalid(absl::StrCat(where, " has collective kind ", static_cast<int>(c.kind()),
                                ", which is not one of ALLREDUCE..BARRIER (1..7)"));
  if (!Algorithm_IsValid(c.algorithm()))
    return Invalid(absl::StrCat(where, " has algorithm ", static_cast<int>(c.algorithm()),
                                ", which this build does not know"));
  if (!DType_IsValid(c.dtype()))
    return Invalid(absl::StrCat(where, " has dtype ", static_cast<int>(c.dtype()), ", which this build does not know"));
  return ValidateBytes(c.bytes(), where);
}

// The kind-specific checks of one op; `*slot` is its comm slot, or -1.
absl::Status ValidateOpKind(const Op& op, const std::string& where, int64_t* slot) {
  *slot = -1;
  switch (op.kind_case()) {
    case Op::kCompute: return ValidateCompute(op.compute(), where);
    case Op::kCollective: *slot = op.collective().comm_slot(); return ValidateCollective(op.collective(), where);
    case Op::kSend: *slot = op.send().comm_slot(); return ValidateBytes(op.send().bytes(), where);
    case Op::kRecv: *slot = op.recv().comm_slot(); return ValidateBytes(op.recv().bytes(), where);
    case Op::KIND_NOT_SET: return Invalid(absl::StrCat(where, " has no kind"));
    default: return absl::OkStatus();
  }
}

// GroupStart..GroupEnd pair up on each stream, without nesting (the engine
// issues a group's ops together; a stream left inside a group never
// finishes its iteration).
absl::Status ValidateGroups(const Program& p, int index) {
  absl::flat_hash_map<uint32_t, int> open;  // stream -> op index of its open GroupStart
  for (int k = 0; k < p.ops_size(); ++k) {
    const Op& op = p.ops(k);
    if (!op.has_group_start() && !op.has_group_end()) continue;
    const auto it = open.find(op.stream());
    if (op.has_group_start() && it != open.end())
      return Invalid(absl::StrCat("program ", index, " op ", k, " starts a group on stream ", op.stream(),
                                  " inside the group op ", it->second, " started (nested groups are not supported)"));
    if (op.has_group_end() && it == open.end())
      return Invalid(absl::StrCat("program ", index, " op ", k, " ends a group on stream ", op.stream(),
                                  " that no group_start opened"));
    if (op.has_group_start()) open[op.stream()] = k;
    else open.erase(it);
  }
  if (!open.empty())
    return Invalid(absl::StrCat("program ", index, " op ", open.begin()->second, " starts a group on stream ",
                                open.begin()->first, " that no group_end closes"));
  return absl::OkStatus();
}

absl::Status ValidateProgram(const Program& p, int index) {
  if (p.id() != static_cast<uint32_t>(index))
    return Invalid(absl::StrCat("program ", index, " has id ", p.id()));
  if (static_cast<uint64_t>(p.ops_size()) > limits::kMaxOpsPerProgram)
    return OverLimit(absl::StrCat("program ", index, " has ", p.ops_size(), " ops"), limits::kMaxOpsPerProgram,
                     " ops");
  if (p.static_memory_bytes() > limits::kMaxMemoryBytes)
    return OverLimit(absl::StrCat("program ", index, " holds ", p.static_memory_bytes(), " bytes of static memory"),
                     limits::kMaxMemoryBytes, " bytes");
  const uint32_t slots = p.comm_slot_names_size();
  for (int k = 0; k < p.ops_size(); ++k) {
    const Op& op = p.ops(k);
    const std::string where = absl::StrCat("program ", index, " op ", k);
    if (op.stream() >= p.streams()) return Invalid(absl::StrCat(where, " uses stream ", op.stream(),
                                                                " of ", p.streams()));
    if (op.stream() >= limits::kMaxStreams)
      return OverLimit(absl::StrCat(where, " uses stream ", op.stream()), limits::kMaxStreams, " streams");
    for (uint32_t d : op.deps())
      if (d >= static_cast<uint32_t>(k)) return Invalid(absl::StrCat(where, " depends on later op ", d));
    int64_t slot = -1;
    if (auto s = ValidateOpKind(op, where, &slot); !s.ok()) return s;
    if (slot >= static_cast<int64_t>(slots))
      return Invalid(absl::StrCat(where, " uses comm slot ", slot, " of ", slots));
  }
  if (static_cast<uint64_t>(p.startup_ops_size()) > limits::kMaxOpsPerProgram)
    return OverLimit(absl::StrCat("program ", index, " has ", p.startup_ops_size(), " start-up ops"),
                     limits::kMaxOpsPerProgram, " ops");
  for (int k = 0; k < p.startup_ops_size(); ++k) {
    const Op& op = p.startup_ops(k);
    const std::string where = absl::StrCat("program ", index, " start-up op ", k);
    if (!op.has_collective()) return Invalid(absl::StrCat(where, " is not a collective (start-up ops are collectives)"));
    if (op.stream() != 0 || op.deps_size() != 0) return Invalid(absl::StrCat(where, " has a stream or deps"));
    if (auto s = ValidateCollective(op.collective(), where); !s.ok()) return s;
    if (op.collective().comm_slot() >= slots)
      return Invalid(absl::StrCat(where, " uses comm slot ", op.collective().comm_slot(), " of ", slots));
  }
  return ValidateGroups(p, index);
}

}  // namespace

absl::Status ValidateGraph(const Graph& g) {
  if (!g.has_rules()) return ValidateGraph(g, ValidateOptions{});
  if (auto s = CheckRules(g); !s.ok()) return s;
  if (auto s = CheckRuleGroups(g); !s.ok()) return s;
  Graph expanded = g;
  ExpandRules(expanded);
  return ValidateGraph(expanded, ValidateOptions{.membership_proven = true});
}

absl::Status ValidateGraphRules(const Graph& g) {
  if (!g.has_rules()) return ValidateGraph(g);
  if (auto s = CheckRules(g); !s.ok()) return s;
  if (auto s = ValidateCluster(g, RulesRankCount(g.rules())); !s.ok()) return s;
  if (g.programs_size() == 0) return Invalid("no programs");
  for (int i = 0; i < g.programs_size(); ++i)
    if (auto s = ValidateProgram(g.programs(i), i); !s.ok()) return s;
  return CheckRuleGroups(g);
}

absl::Status ValidateGraph(const Graph& g, ValidateOptions options) {
  if (g.has_rules()) return Invalid("the graph's rules are not expanded (graph_rules.h's ExpandRules)");
  auto topology = Topology::Of(g);
  if (!topology.ok()) return topology.status();
  const Topology& t = *topology;
  if (t.ranks() == 0) return Invalid("no ranks");
  if (auto s = ValidateCluster(g, t.ranks()); !s.ok()) return s;
  if (g.programs_size() == 0) return Invalid("no programs");
  if (auto s = check::ValidateCommunicators(g, t, options.membership_proven); !s.ok()) return s;
  if (auto s = check::ValidateProcessGroups(g, t, options.membership_proven); !s.ok()) return s;
  for (int i = 0; i < g.programs_size(); ++i)
    if (auto s = ValidateProgram(g.programs(i), i); !s.ok()) return s;
  if (!options.membership_proven) {  // else CheckRuleGroups checked them on the rules
    if (auto s = check::ValidateRanks(g, t); !s.ok()) return s;
    if (auto s = check::ValidateRankState(g, t); !s.ok()) return s;
    if (auto s = check::ValidateMembership(g, t); !s.ok()) return s;
  }
  return check::ValidatePointToPoint(g, t);
}

}  // namespace prism::graph
