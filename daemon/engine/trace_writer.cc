#include "daemon/engine/trace_writer.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <tuple>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/output_file.h"
#include "daemon/engine/comm_rank_index.h"
#include "fmt/format.h"
#include "nlohmann/json.hpp"
#include "proto/graph_topology.h"

namespace prism::engine {
namespace {

// Microseconds with three decimals from integer ns, without floating point.
std::string Micros(Nanoseconds t) {
  const int64_t ns = t.count();
  return fmt::format("{}.{:03d}", ns / 1000, static_cast<int>(ns % 1000));
}

std::string Quote(const std::string& s) { return nlohmann::json(s).dump(); }

std::string OpName(const graph::Topology& t, uint32_t rank, const graph::Op& op) {
  auto comm = [&](uint32_t slot) { return t.name(t.slots(rank)[slot]); };
  switch (op.kind_case()) {
    case graph::Op::kCompute: return op.compute().label().empty() ? "compute" : op.compute().label();
    case graph::Op::kCollective: {
      const auto& c = op.collective();
      std::string kind = graph::CollectiveKind_Name(c.kind());
      std::transform(kind.begin(), kind.end(), kind.begin(), ::tolower);
      return c.label().empty() ? absl::StrCat(kind, " ", comm(c.comm_slot())) : c.label();
    }
    case graph::Op::kSend: return op.send().label().empty() ? absl::StrCat("send ", comm(op.send().comm_slot())) : op.send().label();
    case graph::Op::kRecv: return op.recv().label().empty() ? absl::StrCat("recv ", comm(op.recv().comm_slot())) : op.recv().label();
    case graph::Op::kGroupStart: return "group_start";
    default: return "group_end";
  }
}

const char* Category(const graph::Op& op) {
  if (op.has_compute()) return "compute";
  if (op.has_collective()) return "collective";
  return "p2p";
}

}  // namespace

absl::StatusOr<std::vector<uint32_t>> ParseRankList(const std::string& spec, uint32_t world) {
  std::vector<uint32_t> ranks;
  for (absl::string_view part : absl::StrSplit(spec, ',', absl::SkipWhitespace())) {
    std::vector<absl::string_view> ends = absl::StrSplit(part, '-');
    uint32_t lo = 0, hi = 0;
    if (ends.size() > 2 || !absl::SimpleAtoi(ends[0], &lo) || !absl::SimpleAtoi(ends.back(), &hi) || hi < lo)
      return absl::InvalidArgumentError(absl::StrCat("rank list \"", spec, "\" is not like 0-15,1024"));
    if (hi >= world)
      return absl::InvalidArgumentError(absl::StrCat("rank ", hi, " in \"", spec, "\" is outside the ", world,
                                                     "-rank world"));
    for (uint64_t r = lo; r <= hi; ++r) ranks.push_back(static_cast<uint32_t>(r));
  }
  std::sort(ranks.begin(), ranks.end());
  ranks.erase(std::unique(ranks.begin(), ranks.end()), ranks.end());
  if (ranks.empty()) return absl::InvalidArgumentError("empty rank list");
  return ranks;
}

TraceRecorder::TraceRecorder(std::vector<uint32_t> ranks, const EngineWorld& world)
    : ranks_(std::move(ranks)), world_(world), traced_(world.actors.size(), 0),
      selected_(world.actor_of_rank.size(), 0) {
  for (uint32_t r : ranks_) {
    if (r >= world.actor_of_rank.size()) continue;
    selected_[r] = 1;
    traced_[world.actor_of_rank[r]] = 1;
  }
}

void TraceRecorder::WriteFlows(const graph::Graph& g, std::ostream& out, bool* first) const {
  // Expanded to rank pairs, then sorted: the order (and the ids) depend only
  // on the timelines, not on whether ranks were replayed per class.
  struct Flow { Nanoseconds send_start, end; uint32_t src, dst, send_stream, recv_stream; Nanoseconds f_ts; };
  std::vector<Flow> flows;
  const CommRankIndex index(g);
  std::vector<std::vector<uint32_t>> selected_of_actor(world_.actors.size());
  for (uint32_t r : ranks_) selected_of_actor[world_.actor_of_rank[r]].push_back(r);
  for (const FlowRecord& f : flows_) {
    const ProgramInfo& sp = world_.programs[world_.actors[f.send_actor].program];
    const OpInfo& send = sp.ops[f.send_op];
    const uint32_t recv_stream = world_.programs[world_.actors[f.recv_actor].program].ops[f.recv_op].stream;
    const Nanoseconds f_ts = std::max(f.recv_start, f.end - Nanoseconds(1));
    for (uint32_t r : selected_of_actor[f.send_actor]) {
      const uint32_t peer = index.PeerRank(r, sp.p2p[send.p2p_desc]);
      if (selected_[peer])
        flows.push_back({f.send_start, f.end, r, peer, send.stream, recv_stream, f_ts});
    }
  }
  std::sort(flows.begin(), flows.end(), [](const Flow& a, const Flow& b) {
    return std::tie(a.send_start, a.src, a.end, a.dst, a.send_stream, a.recv_stream) <
           std::tie(b.send_start, b.src, b.end, b.dst, b.send_stream, b.recv_stream);
  });
  uint64_t id = 0;
  for (const Flow& f : flows) {
    out << (*first ? "" : ",\n");
    *first = false;
    out << fmt::format(R"({{"ph":"s","name":"p2p","cat":"p2p","id":{},"pid":{},"tid":{},"ts":{}}},)", id, f.src,
                       f.send_stream, Micros(f.send_start))
        << "\n"
        << fmt::format(R"({{"ph":"f","bp":"e","name":"p2p","cat":"p2p","id":{},"pid":{},"tid":{},"ts":{}}})", id,
                       f.dst, f.recv_stream, Micros(f.f_ts));
    ++id;
  }
}

void TraceRecorder::WriteJson(const graph::Graph& g, std::ostream& out) const {
  out << "{\"displayTimeUnit\":\"ns\",\"traceEvents\":[\n";
  bool first = true;
  auto sep = [&] {
    out << (first ? "" : ",\n");
    first = false;
  };
  for (uint32_t r : ranks_) {
    const uint32_t actor = world_.actor_of_rank[r];
    const ProgramInfo& p = world_.programs[world_.actors[actor].program];
    sep();
    out << fmt::format(R"({{"ph":"M","name":"process_name","pid":{},"args":{{"name":{}}}}})", r,
                       Quote(absl::StrCat("rank ", r, " (", p.name, ")")));
    for (uint32_t s = 0; s < p.streams; ++s) {
      sep();
      out << fmt::format(R"({{"ph":"M","name":"thread_name","pid":{},"tid":{},"args":{{"name":"stream {}"}}}})", r, s, s);
    }
  }
  std::vector<std::vector<uint32_t>> by_actor(world_.actors.size());
  for (size_t i = 0; i < ops_.size(); ++i) by_actor[ops_[i].actor].push_back(static_cast<uint32_t>(i));
  const graph::Topology topology = *graph::Topology::Of(g);  // the replayed graph passed ValidateGraph
  for (uint32_t r : ranks_) {
    const uint32_t actor = world_.actor_of_rank[r];
    const graph::Program& prog = g.programs(world_.actors[actor].program);
    for (uint32_t i : by_actor[actor]) {
      const OpRecord& rec = ops_[i];
      const graph::Op& op = prog.ops(static_cast<int>(rec.op));
      sep();
      out << fmt::format(R"({{"ph":"X","name":{},"cat":"{}","pid":{},"tid":{},"ts":{},"dur":{},"args":{{"op":{}}}}})",
                         Quote(OpName(topology, r, op)), Category(op), r, op.stream(), Micros(rec.start),
                         Micros(rec.end - rec.start), rec.op);
    }
  }
  WriteFlows(g, out, &first);
  out << fmt::format("\n],\"metadata\":{{\"nccl_step_cost_us\":{},\"nccl_step_cost_source\":{}}}}}\n",
                     Micros(step_cost_), Quote(step_cost_source_));
}

absl::Status TraceRecorder::WriteFile(const graph::Graph& graph, const std::string& path) const {
  auto file = OutputFile::Create(path, "trace file");
  if (!file.ok()) return file.status();
  WriteJson(graph, (*file)->stream());
  return (*file)->Commit();
}

}  // namespace prism::engine
