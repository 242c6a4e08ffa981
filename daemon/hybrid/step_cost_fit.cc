#include "daemon/hybrid/step_cost_fit.h"

#include <algorithm>
#include <set>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "daemon/engine/nccl_tuning.h"
#include "daemon/engine/network_model.h"

namespace prism::daemon {
namespace {

std::optional<graph::CollectiveKind> RingKind(rpc::OpKind kind) {
  switch (kind) {
    case rpc::OP_ALL_REDUCE: return graph::ALLREDUCE;
    case rpc::OP_ALL_GATHER: return graph::ALLGATHER;
    case rpc::OP_REDUCE_SCATTER: return graph::REDUCESCATTER;
    default: return std::nullopt;
  }
}

engine::CommShape ShapeOf(const std::vector<uint32_t>& members, const graph::Graph& placement) {
  const uint32_t gpn = std::max<uint32_t>(placement.cluster().gpus_per_node(), 1);
  std::map<uint32_t, uint32_t> per_node;
  for (uint32_t r : members)
    ++per_node[r < static_cast<uint32_t>(placement.ranks_size()) ? placement.ranks(static_cast<int>(r)).node() : r / gpn];
  engine::CommShape s;
  s.ranks = static_cast<uint32_t>(members.size());
  s.nodes = static_cast<uint32_t>(per_node.size());
  s.min_per_node = UINT32_MAX;
  s.max_per_node = 0;
  for (const auto& [node, count] : per_node) {
    s.min_per_node = std::min(s.min_per_node, count);
    s.max_per_node = std::max(s.max_per_node, count);
  }
  if (per_node.empty()) s.min_per_node = s.max_per_node = 1;
  return s;
}

double Us(Nanoseconds t) { return t.microseconds(); }

Nanoseconds Quantile(std::vector<Nanoseconds> v, double q) {
  std::sort(v.begin(), v.end());
  return v[static_cast<size_t>(q * static_cast<double>(v.size() - 1) + 0.5)];
}

// Which operations overlapped another with network traffic (by index).
std::vector<bool> Overlapped(const std::vector<RingOpTiming>& ops) {
  std::vector<size_t> order(ops.size());
  for (size_t i = 0; i < ops.size(); ++i) order[i] = i;
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return ops[a].first_send < ops[b].first_send; });
  std::vector<bool> out(ops.size(), false);
  Nanoseconds reach(INT64_MIN);  // the latest end of the operations started so far
  size_t reach_of = 0;
  for (size_t i : order) {
    if (ops[i].first_send < reach) out[i] = out[reach_of] = true;
    if (ops[i].end > reach) reach = ops[i].end, reach_of = i;
  }
  return out;
}

}  // namespace

std::map<uint32_t, std::vector<RingOpTiming>> RingOpTimings(const Recording& recording,
                                                            const graph::Graph& placement) {
  std::map<uint64_t, const CommDescription*> by_hash;
  for (const RecordedLine& l : recording.lines)
    if (l.kind == RecordedLine::kCommunicator) by_hash[l.comm.comm_hash] = &l.comm;
  std::map<std::pair<uint64_t, uint64_t>, std::pair<uint32_t, RingOpTiming>> open;  // (session, op id)
  std::map<uint32_t, std::vector<RingOpTiming>> out;
  for (const RecordedLine& l : recording.lines) {
    if (l.kind != RecordedLine::kEvents) continue;
    for (const rpc::Event& e : l.events.events()) {
      if (e.has_op_started()) {
        const rpc::OpStarted& s = e.op_started();
        const auto c = by_hash.find(s.key().comm_hash());
        if (c == by_hash.end() || s.comm_rank() < 0 ||
            static_cast<size_t>(s.comm_rank()) >= c->second->members.size())
          continue;
        RingOpTiming t;
        const std::optional<graph::CollectiveKind> kind = RingKind(s.key().kind());
        t.collective = kind.has_value() && absl::AsciiStrToUpper(s.algo_name()) == "RING";
        if (kind) t.kind = *kind;
        if (kind) t.algorithm = absl::AsciiStrToUpper(s.algo_name());
        t.protocol = absl::AsciiStrToUpper(s.proto_name());
        t.shape = ShapeOf(c->second->members, placement);
        const bool full = s.key().kind() == rpc::OP_ALL_GATHER || s.key().kind() == rpc::OP_REDUCE_SCATTER;
        t.bytes = Bytes(full ? s.bytes() * static_cast<uint64_t>(std::max(s.comm_size(), 1)) : s.bytes());
        open[{l.session, s.op_id()}] = {c->second->members[static_cast<size_t>(s.comm_rank())], t};
      } else if (e.has_op_finished()) {
        const rpc::OpFinished& f = e.op_finished();
        const auto it = open.find({l.session, f.op_id()});
        if (it == open.end()) continue;
        RingOpTiming t = it->second.second;
        t.first_send = Nanoseconds(static_cast<int64_t>(f.first_send_ns()));
        t.end = Nanoseconds(static_cast<int64_t>(f.end_ns()));
        if (f.first_send_ns() > 0 && t.end > t.first_send) out[it->second.first].push_back(std::move(t));
        open.erase(it);
      }
    }
  }
  return out;
}

std::vector<StepCostFit> FitStepCost(const std::vector<RingOpTiming>& ops, const graph::Cluster& cluster,
                                     Nanoseconds run_step_cost) {
  const engine::NetworkModel model(engine::NetworkModel::LinkFiguresFromCluster(cluster));
  const Nanoseconds standing = engine::DefaultNcclStepCost().cost;
  const std::vector<bool> overlapped = Overlapped(ops);
  struct Group {
    uint32_t ring = 0, short_ring = 0, bandwidth_bound = 0, overlapped = 0, empty = 0, held = 0;
    std::vector<Nanoseconds> c;
    std::set<std::string> kinds;
  };
  std::map<std::string, Group> groups;
  for (size_t i = 0; i < ops.size(); ++i) {
    const RingOpTiming& op = ops[i];
    if (!op.collective || op.shape.ranks < 2) continue;
    Group& g = groups[op.protocol];
    ++g.ring;
    const uint64_t n = op.shape.ranks;
    const uint64_t h = op.kind == graph::ALLREDUCE ? 2 * (n - 1) : n - 1;
    if (h < kMinFitSteps) {
      ++g.short_ring;
      continue;
    }
    if (!model.CheckShape(op.shape).ok()) continue;
    const Nanoseconds latency = model.HopLatency(op.shape);
    const Nanoseconds wire = model.RingWireTime(op.kind, op.bytes, op.shape);
    const int64_t step = wire.count() / static_cast<int64_t>(h);
    if (Nanoseconds(step) > latency + standing) {
      ++g.bandwidth_bound;
      continue;
    }
    if (op.bytes.count() / n < kMinFitChunkBytes) {
      ++g.empty;
      continue;
    }
    if (overlapped[i]) {
      ++g.overlapped;
      continue;
    }
    // The model's formula whatever the protocol: the figure is the model's c.
    const int64_t slice = step / static_cast<int64_t>(engine::kNcclRingSlicesPerStep);
    const int64_t trail = step - slice;
    const int64_t duration = (op.end - op.first_send).count();
    const Nanoseconds c((duration - trail) / static_cast<int64_t>(h) - slice - latency.count());
    if (c < run_step_cost + kFloorHeldMargin) {  // the run's lockstep floor may have paced it: c is only bounded
      ++g.held;
      continue;
    }
    g.c.push_back(c);
    g.kinds.insert(op.kind == graph::ALLREDUCE ? "all-reduces" : op.kind == graph::ALLGATHER ? "all-gathers"
                                                                                            : "reduce-scatters");
  }
  std::vector<StepCostFit> fits;
  for (auto& [protocol, g] : groups) {
    StepCostFit f;
    f.protocol = protocol;
    f.ring_ops = g.ring;
    f.used_ops = static_cast<uint32_t>(g.c.size());
    const std::string left_out = absl::StrCat(
        "left out: ", g.short_ring, " on rings of under ", kMinFitSteps + 1, " members, ", g.bandwidth_bound,
        " bandwidth-bound, ", g.empty, " with under ", kMinFitChunkBytes, " bytes per step, ", g.overlapped,
        " overlapping another operation, ", g.held,
        absl::StrFormat(" below the run's own %.2f us + %.2f (its lockstep floor may have paced them)",
                        Us(run_step_cost), Us(kFloorHeldMargin)));
    if (g.held > 0 && 3 * g.held > g.c.size()) {
      f.detail = absl::StrFormat(
          "none: %u of %u latency-bound ring operations came out below the %.2f us per step the run played "
          "(+ %.2f; over a quarter): the plugin's lockstep floor (the link latency plus that figure per step) may have "
          "paced them, so NCCL's own cost is about that figure or lower and this run cannot say how much; "
          "capture with prismd's --step-cost-us 0 to measure it (%s)",
          g.held, g.held + static_cast<uint32_t>(g.c.size()), Us(run_step_cost), Us(kFloorHeldMargin), left_out);
      fits.push_back(std::move(f));
      continue;
    }
    if (g.c.size() < kMinFitOps) {
      f.detail = absl::StrCat("none: ", g.c.size(), " latency-bound ring operations of ", g.ring,
                              ", fewer than the ", kMinFitOps, " a fit needs (", left_out, ")");
      fits.push_back(std::move(f));
      continue;
    }
    f.cost = Quantile(g.c, 0.5);  // every used c is at least run_step_cost, so not negative
    f.p10 = Quantile(g.c, 0.1);
    f.p90 = Quantile(g.c, 0.9);
    const std::string spread = absl::StrFormat("p10 %.2f us, p90 %.2f us", Us(f.p10), Us(f.p90));
    f.detail = absl::StrCat("median of ", f.used_ops, " latency-bound ring ", absl::StrJoin(g.kinds, " and "),
                            " of ", g.ring, ", ", spread, "; ", left_out);
    fits.push_back(std::move(f));
  }
  return fits;
}

std::vector<graph::NcclStepCost> StepCostEntries(const std::vector<StepCostFit>& fits, uint32_t rank) {
  std::vector<graph::NcclStepCost> out;
  for (const StepCostFit& f : fits) {
    if (!f.cost) continue;
    graph::NcclStepCost e;
    e.set_protocol(f.protocol);
    e.set_algorithm(graph::ALGORITHM_RING);
    e.set_cost_ns(static_cast<uint64_t>(f.cost->count()));
    e.set_ops(f.used_ops);
    e.set_source(absl::StrCat("measured by prism capture on rank ", rank, ", ", f.used_ops, " ops (NCCL ",
                              f.protocol, " ring, ", f.detail, ")"));
    out.push_back(std::move(e));
  }
  return out;
}

std::vector<graph::NcclStepCost> RoundStepCosts(const std::vector<StepCostFit>& fits, uint32_t rank,
                                                const graph::Cluster& run_cluster, bool graph_round, bool* kept) {
  std::vector<graph::NcclStepCost> out;
  if (!graph_round || run_cluster.nccl_step_costs_size() == 0) out = StepCostEntries(fits, rank);
  *kept = out.empty() && run_cluster.nccl_step_costs_size() > 0;
  if (!*kept) return out;
  for (const graph::NcclStepCost& e : run_cluster.nccl_step_costs()) {
    graph::NcclStepCost& k = out.emplace_back(e);
    if (e.source().rfind("kept: ", 0) != 0) k.set_source("kept: " + e.source());
  }
  return out;
}

std::string DescribeFits(const std::vector<StepCostFit>& fits, uint32_t rank) {
  if (fits.empty()) return absl::StrCat("step cost, rank ", rank, ": none (no ring collective went through the plugin)");
  std::vector<std::string> parts;
  for (const StepCostFit& f : fits)
    parts.push_back(f.cost ? absl::StrFormat("%s ring %.2f us per step (%s)", f.protocol, Us(*f.cost), f.detail)
                           : absl::StrCat(f.protocol, " ring ", f.detail));
  return absl::StrCat("step cost, rank ", rank, ": ", absl::StrJoin(parts, "; "));
}

}  // namespace prism::daemon
