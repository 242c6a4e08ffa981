#include "daemon/hybrid/real_rank_programs.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "proto/graph_comm_streams.h"

namespace prism::daemon {
namespace {

// The global rank a send/recv of `rank` on communicator `comm` addresses.
uint32_t PeerOf(const graph::Graph& g, uint32_t rank, uint32_t comm, uint32_t peer, bool relative) {
  const auto& members = g.communicators(static_cast<int>(comm)).members();
  const uint32_t size = static_cast<uint32_t>(members.size());
  uint64_t target = peer % size;
  if (relative) {
    const auto it = std::find(members.begin(), members.end(), rank);
    const uint32_t mine = it == members.end() ? 0 : static_cast<uint32_t>(it - members.begin());
    target = (uint64_t{mine} + peer) % size;
  }
  return members[static_cast<int>(target)];
}

}  // namespace

rpc::OpKind RealRankPrograms::NcclKind(graph::CollectiveKind kind) {
  switch (kind) {
    case graph::ALLREDUCE: return rpc::OP_ALL_REDUCE;
    case graph::ALLGATHER: return rpc::OP_ALL_GATHER;
    case graph::REDUCESCATTER: return rpc::OP_REDUCE_SCATTER;
    case graph::BROADCAST: return rpc::OP_BROADCAST;
    case graph::REDUCE: return rpc::OP_REDUCE;
    case graph::ALLTOALL: return rpc::OP_ALL_TO_ALL;
    case graph::BARRIER: return rpc::OP_ALL_REDUCE;  // PyTorch's barrier is a one-element all-reduce
    default: return rpc::OP_OTHER_COLLECTIVE;
  }
}

absl::StatusOr<RealRankPrograms> RealRankPrograms::Build(const graph::Graph& graph,
                                                         const std::vector<uint32_t>& real_ranks) {
  RealRankPrograms out;
  for (uint32_t r : real_ranks) {
    if (r >= static_cast<uint32_t>(graph.ranks_size()))
      return absl::InvalidArgumentError(
          absl::StrCat("real rank ", r, " is outside the graph's ", graph.ranks_size(), " ranks"));
    RankIndex& ix = out.ranks_[r];
    ix.rank = &graph.ranks(static_cast<int>(r));
    ix.program = &graph.programs(static_cast<int>(ix.rank->program()));
    if (auto crossing = graph::CommunicatorStreamCrossing(*ix.program, ix.rank->program()))
      return absl::InvalidArgumentError(absl::StrCat("real rank ", r, ": ", *crossing));
    for (const graph::Op& op : ix.program->startup_ops()) {  // collectives (graph_validate)
      const uint32_t comm = ix.rank->comm_slots(static_cast<int>(op.collective().comm_slot()));
      ++ix.startup[{comm, NcclKind(op.collective().kind())}];
    }
    for (int k = 0; k < ix.program->ops_size(); ++k) {
      const graph::Op& op = ix.program->ops(k);
      const uint32_t index = static_cast<uint32_t>(k);
      if (op.has_collective()) {
        const uint32_t comm = ix.rank->comm_slots(static_cast<int>(op.collective().comm_slot()));
        CommCalls& calls = ix.comms[comm];
        calls.by_kind[NcclKind(op.collective().kind())].push_back(static_cast<uint32_t>(calls.ops.size()));
        calls.ops.push_back(index);
      } else if (op.has_send() || op.has_recv()) {
        const bool send = op.has_send();
        const uint32_t slot = send ? op.send().comm_slot() : op.recv().comm_slot();
        const uint32_t peer = send ? op.send().peer() : op.recv().peer();
        const bool relative = send ? op.send().peer_relative() : op.recv().peer_relative();
        const uint32_t comm = ix.rank->comm_slots(static_cast<int>(slot));
        ix.p2p[{comm, PeerOf(graph, r, comm, peer, relative), send}].push_back(index);
      }
    }
  }
  for (const graph::Communicator& c : graph.communicators()) {
    if (c.members_size() < 2) continue;
    bool all_real = true;
    for (uint32_t m : c.members()) all_real = all_real && out.IsReal(m);
    if (all_real)
      out.all_real_comms_[std::vector<uint32_t>(c.members().begin(), c.members().end())].push_back(
          NamedComm{c.id(), c.name()});
  }
  return out;
}

std::optional<RealRankPrograms::NamedComm> RealRankPrograms::AllRealCommunicator(
    const std::vector<uint32_t>& members, const std::set<uint32_t>& bound) const {
  const auto it = all_real_comms_.find(members);
  if (it == all_real_comms_.end()) return std::nullopt;
  for (const NamedComm& c : it->second)
    if (bound.count(c.id) == 0) return c;
  return std::nullopt;
}

uint64_t RealRankPrograms::StartupCount(const RankIndex& ix, uint32_t comm, rpc::OpKind kind) const {
  const auto it = ix.startup.find({comm, kind});
  return it == ix.startup.end() ? 0 : it->second;
}

std::optional<ProgramOp> RealRankPrograms::Collective(uint32_t rank, uint32_t comm, rpc::OpKind kind,
                                                      uint64_t seq) const {
  const auto r = ranks_.find(rank);
  if (r == ranks_.end()) return std::nullopt;
  const uint64_t startup = StartupCount(r->second, comm, kind);
  if (seq < startup) return ProgramOp{0, 0, 0, true};
  seq -= startup;
  const auto c = r->second.comms.find(comm);
  if (c == r->second.comms.end()) return std::nullopt;
  const auto k = c->second.by_kind.find(kind);
  if (k == c->second.by_kind.end() || k->second.empty()) return std::nullopt;
  const std::vector<uint32_t>& positions = k->second;
  const uint32_t position = positions[seq % positions.size()];
  const uint64_t iteration = seq / positions.size();
  return ProgramOp{c->second.ops[position], iteration, iteration * c->second.ops.size() + position};
}

std::optional<ProgramOp> RealRankPrograms::PointToPoint(uint32_t rank, uint32_t comm, uint32_t peer, bool send,
                                                        uint64_t seq) const {
  const auto r = ranks_.find(rank);
  if (r == ranks_.end()) return std::nullopt;
  const auto p = r->second.p2p.find({comm, peer, send});
  if (p == r->second.p2p.end() || p->second.empty()) return std::nullopt;
  return ProgramOp{p->second[seq % p->second.size()], seq / p->second.size(), seq};
}

std::optional<std::pair<rpc::OpKind, uint64_t>> RealRankPrograms::CallToNccl(uint32_t rank, uint32_t comm,
                                                                           uint64_t call) const {
  const auto r = ranks_.find(rank);
  if (r == ranks_.end()) return std::nullopt;
  const auto c = r->second.comms.find(comm);
  if (c == r->second.comms.end() || c->second.ops.empty()) return std::nullopt;
  const CommCalls& calls = c->second;
  const uint64_t iteration = call / calls.ops.size();
  const uint32_t position = static_cast<uint32_t>(call % calls.ops.size());
  const graph::Op& op = r->second.program->ops(static_cast<int>(calls.ops[position]));
  const rpc::OpKind kind = NcclKind(op.collective().kind());
  const std::vector<uint32_t>& same = calls.by_kind.at(kind);
  const uint64_t before = static_cast<uint64_t>(std::lower_bound(same.begin(), same.end(), position) - same.begin());
  return std::make_pair(kind, StartupCount(r->second, comm, kind) + iteration * same.size() + before);
}

std::vector<uint32_t> RealRankPrograms::GraphSlots(uint32_t rank) const {
  const auto r = ranks_.find(rank);
  if (r == ranks_.end()) return {};
  return {r->second.rank->comm_slots().begin(), r->second.rank->comm_slots().end()};
}

uint64_t RealRankPrograms::Bytes(uint32_t rank, uint32_t op) const {
  const auto r = ranks_.find(rank);
  if (r == ranks_.end() || op >= static_cast<uint32_t>(r->second.program->ops_size())) return 0;
  const graph::Op& o = r->second.program->ops(static_cast<int>(op));
  if (o.has_collective()) return o.collective().bytes();
  if (o.has_send()) return o.send().bytes();
  if (o.has_recv()) return o.recv().bytes();
  return 0;
}

std::string RealRankPrograms::OpName(uint32_t rank, uint32_t op) const {
  const auto r = ranks_.find(rank);
  if (r == ranks_.end() || op >= static_cast<uint32_t>(r->second.program->ops_size())) return "?";
  const graph::Op& o = r->second.program->ops(static_cast<int>(op));
  if (o.has_collective()) return o.collective().label().empty() ? absl::StrCat("op ", op) : o.collective().label();
  if (o.has_send()) return o.send().label().empty() ? absl::StrCat("send op ", op) : o.send().label();
  if (o.has_recv()) return o.recv().label().empty() ? absl::StrCat("recv op ", op) : o.recv().label();
  return absl::StrCat("op ", op);
}

}  // namespace prism::daemon
