#include "daemon/hybrid/session_capture.h"

#include <algorithm>
#include <map>
#include <set>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "daemon/hybrid/real_rank_programs.h"

namespace prism::daemon {
namespace {

struct Timing {
  uint64_t first_send = 0;  // 0: the operation sent nothing
  uint64_t end = 0;
  bool real_peer = false;   // a send or receive whose peer is a real rank of the run
};
using OpTimes = std::map<std::pair<uint64_t, uint32_t>, Timing>;  // (iteration, op) -> timing

bool IsCommunication(const graph::Op& op) { return op.has_collective() || op.has_send() || op.has_recv(); }

// Communication ops of one stream in runs, each with the compute ops before it.
struct Block {
  std::vector<uint32_t> comms;
  std::vector<uint32_t> computes;  // issued before this block (after the previous one)
  size_t trailing = 0;             // block 0: how many of `computes` end the previous iteration
};

std::vector<Block> BlocksOf(const graph::Program& p, uint32_t stream) {
  std::vector<Block> blocks;
  std::vector<uint32_t> pending;
  for (int i = 0; i < p.ops_size(); ++i) {
    const graph::Op& op = p.ops(i);
    if (op.stream() != stream) continue;
    if (op.has_compute()) pending.push_back(static_cast<uint32_t>(i));
    if (!IsCommunication(op)) continue;
    if (blocks.empty() || !pending.empty()) blocks.push_back(Block{{}, std::move(pending), 0}), pending.clear();
    blocks.back().comms.push_back(static_cast<uint32_t>(i));
  }
  if (!blocks.empty() && !pending.empty()) {  // the iteration's tail runs up to the next iteration's first block
    Block& first = blocks.front();
    first.trailing = pending.size();
    first.computes.insert(first.computes.begin(), pending.begin(), pending.end());
  }
  return blocks;
}

// When the stream goes on after the block: its last operation completed. A
// send's completion alone does not say when the stream went on (seen on the
// GPU host: before it, by up to the modelled transfer, when the peer is
// virtual), so a block with a send and no receive gives no end and the
// compute after it keeps the graph's durations. A block that receives as
// well (a pipeline's grouped send and receive) ends with its receives and
// collectives, and with its sends to real peers: with a virtual peer the
// send's modelled completion can come after the stream went on (bench/
// fidelity's step, whose backward is 3 ms a layer on the GPU: 2.72 ms
// measured up to it), while between two real pipeline peers the stream
// followed the later of the two (Megatron-core at 1024 ranks, GPU host,
// 2026-12-03: the next block started 0.84-1.89 ms after it on rank 0,
// 1.13-2.61 ms after the receive alone, 0.84-27.9 ms after the send).
std::optional<uint64_t> BlockEnd(const graph::Program& p, const OpTimes& t, const Block& b, uint64_t it) {
  std::optional<uint64_t> end;
  bool sends = false, receives = false;
  for (uint32_t op : b.comms) {
    const bool send = p.ops(static_cast<int>(op)).has_send();
    sends = sends || send;
    receives = receives || p.ops(static_cast<int>(op)).has_recv();
    if (auto f = t.find({it, op}); f != t.end() && (!send || f->second.real_peer))
      end = std::max(end.value_or(0), f->second.end);
  }
  if (sends && !receives) return std::nullopt;
  return end;
}

std::optional<uint64_t> BlockStart(const OpTimes& t, const Block& b, uint64_t it) {
  std::optional<uint64_t> start;
  for (uint32_t op : b.comms)
    if (auto f = t.find({it, op}); f != t.end() && f->second.first_send != 0)
      start = std::min(start.value_or(UINT64_MAX), f->second.first_send);
  return start;
}

// The compute ops of block `b`'s run that a gap measures: from the last one
// that waits for another stream's communication (it starts when that ends),
// or all of them.
size_t MeasuredFrom(const graph::Program& p, const Block& block) {
  size_t from = 0;
  for (size_t k = 0; k < block.computes.size(); ++k)
    for (uint32_t d : p.ops(static_cast<int>(block.computes[k])).deps())
      if (IsCommunication(p.ops(static_cast<int>(d)))) from = k;
  return from;
}

// The time the measured compute ops of block `b` took in iteration `it`:
// from when they could start (the previous block's end, or the
// communication the first of them waits for, whichever is later) to the
// block's start on the GPU; nullopt when not measurable.
std::optional<uint64_t> Gap(const graph::Program& p, const OpTimes& t, const std::vector<Block>& blocks, size_t b,
                            size_t from, uint64_t it) {
  if (b == 0 && it == 0) return std::nullopt;
  const Block& before = b == 0 ? blocks.back() : blocks[b - 1];
  std::optional<uint64_t> ready = BlockEnd(p, t, before, b == 0 ? it - 1 : it);
  const std::optional<uint64_t> start = BlockStart(t, blocks[b], it);
  if (!ready || !start) return std::nullopt;
  const uint64_t dep_it = from < blocks[b].trailing ? it - 1 : it;
  for (uint32_t d : p.ops(static_cast<int>(blocks[b].computes[from])).deps())
    if (auto f = t.find({dep_it, d}); f != t.end()) ready = std::max(*ready, f->second.end);
  if (*start < *ready) return std::nullopt;
  return *start - *ready;
}

// Shares the mean gap of each block among its compute ops, by their graph durations.
void Distribute(const graph::Program& p, const Block& block, size_t from, uint64_t mean, MeasuredRank& out) {
  const std::vector<uint32_t> measured(block.computes.begin() + static_cast<long>(from), block.computes.end());
  unsigned __int128 total = 0;
  for (uint32_t c : measured) total += p.ops(static_cast<int>(c)).compute().duration_ns();
  for (uint32_t c : measured) {
    const uint64_t g = p.ops(static_cast<int>(c)).compute().duration_ns();
    out.compute_ns[c] = total == 0 ? mean / measured.size()
                                   : static_cast<uint64_t>(static_cast<unsigned __int128>(mean) * g / total);
  }
}

void MeasureRank(const graph::Program& p, const OpTimes& t, uint64_t skip, MeasuredRank& out) {
  out.compute_ns.assign(static_cast<size_t>(p.ops_size()), std::nullopt);
  for (uint32_t s = 0; s < std::max<uint32_t>(p.streams(), 1); ++s) {
    const std::vector<Block> blocks = BlocksOf(p, s);
    for (size_t b = 0; b < blocks.size(); ++b) {
      if (blocks[b].computes.empty()) continue;
      const size_t from = MeasuredFrom(p, blocks[b]);
      unsigned __int128 sum = 0;
      uint64_t n = 0;
      for (uint64_t it = skip; it < out.iterations; ++it)
        if (auto gap = Gap(p, t, blocks, b, from, it)) sum += *gap, ++n;
      // measured in most iterations, or not at all (a gap that is sometimes
      // negative measures something else)
      if (n > 0 && 2 * n >= out.iterations - std::min(skip, out.iterations))
        Distribute(p, blocks[b], from, static_cast<uint64_t>(sum / n), out);
    }
  }
}

// Whether prismd's name for a communicator (its bootstrap's: "tp[0]", or
// "tp[0] (PyTorch group 2321)" when the ids come from PyTorch's store) is
// the graph's communicator `graph_name`.
bool SameCommunicator(const std::string& graph_name, const std::string& recorded) {
  return recorded == graph_name || absl::StartsWith(recorded, absl::StrCat(graph_name, " (PyTorch group "));
}

}  // namespace

uint64_t SteadyIteration(const std::map<uint64_t, uint64_t>& starts, uint64_t skip_iterations) {
  uint64_t sum = 0, n = 0;
  for (auto it = starts.lower_bound(skip_iterations); it != starts.end(); ++it) {
    const auto next = starts.find(it->first + 1);
    if (next == starts.end() || next->second < it->second) continue;
    sum += next->second - it->second;
    ++n;
  }
  return n == 0 ? 0 : sum / n;
}

absl::StatusOr<std::vector<MeasuredRank>> MeasureCompute(const graph::Graph& graph, const Recording& recording,
                                                         uint64_t skip_iterations) {
  if (recording.graph != graph.job().name())
    return absl::InvalidArgumentError(absl::StrCat("the recording is of graph '", recording.graph.substr(0, 64),
                                                   "', not '", graph.job().name().substr(0, 64),
                                                   "': give the graph the run used"));
  auto programs = RealRankPrograms::Build(graph, recording.real_ranks);
  if (!programs.ok()) return programs.status();
  std::map<uint64_t, uint32_t> comm_of_hash;
  for (const RecordedLine& line : recording.lines) {
    if (line.kind != RecordedLine::kCommunicator || line.comm.graph_comm < 0) continue;
    const int64_t id = line.comm.graph_comm;
    if (id >= graph.communicators_size() || !SameCommunicator(graph.communicators(static_cast<int>(id)).name(),
                                                              line.comm.name))
      return absl::InvalidArgumentError(absl::StrCat("the recording's communicator '", line.comm.name.substr(0, 64),
                                                     "' is not communicator ", id, " of the graph: give the graph "
                                                     "the run used"));
    comm_of_hash[line.comm.comm_hash] = static_cast<uint32_t>(id);
  }

  std::map<uint32_t, MeasuredRank> ranks;
  std::map<uint32_t, OpTimes> times;
  struct Started {
    uint32_t rank;
    ProgramOp op;
    bool real_peer;
  };
  std::map<std::pair<uint64_t, uint64_t>, Started> started;  // (session, op_id)
  std::map<uint32_t, std::map<uint64_t, uint64_t>> iteration_start;                 // rank -> iteration -> at
  for (const RecordedLine& line : recording.lines) {
    if (line.kind != RecordedLine::kEvents) continue;
    for (const rpc::Event& e : line.events.events()) {
      if (e.has_op_started()) {
        const rpc::OpStarted& s = e.op_started();
        auto comm = comm_of_hash.find(s.key().comm_hash());
        const auto& members = comm == comm_of_hash.end()
                                  ? graph.communicators(0).members()
                                  : graph.communicators(static_cast<int>(comm->second)).members();
        if (comm == comm_of_hash.end() || s.comm_rank() < 0 || s.comm_rank() >= members.size())
          continue;  // a communicator prismd's bootstrap never saw: its rank is unknown
        const uint32_t rank = members[s.comm_rank()];
        MeasuredRank& m = ranks[rank];
        m.rank = rank;
        const bool p2p = s.key().kind() == rpc::OP_SEND || s.key().kind() == rpc::OP_RECV;
        std::optional<ProgramOp> op;
        bool real_peer = false;
        if (p2p && s.key().peer() >= 0 && s.key().peer() < members.size()) {
          const uint32_t peer = members[s.key().peer()];
          real_peer = std::find(recording.real_ranks.begin(), recording.real_ranks.end(), peer) !=
                      recording.real_ranks.end();
          op = programs->PointToPoint(rank, comm->second, peer, s.key().kind() == rpc::OP_SEND, s.key().seq());
        } else if (!p2p) {
          op = programs->Collective(rank, comm->second, s.key().kind(), s.key().seq());
        }
        if (op && op->startup) continue;  // the program's start-up, before its first iteration
        if (!op) {
          ++m.unmatched_ops;
          continue;
        }
        ++m.matched_ops;
        m.iterations = std::max(m.iterations, op->iteration + 1);
        auto [first, fresh] = iteration_start[rank].emplace(op->iteration, s.at_ns());
        if (!fresh) first->second = std::min(first->second, s.at_ns());
        started[{line.session, s.op_id()}] = {rank, *op, real_peer};
      } else if (e.has_op_finished()) {
        auto it = started.find({line.session, e.op_finished().op_id()});
        if (it == started.end()) continue;
        const auto& [rank, op, real_peer] = it->second;
        times[rank][{op.iteration, op.op}] =
            Timing{e.op_finished().first_send_ns(), e.op_finished().end_ns(), real_peer};
        started.erase(it);
      }
    }
  }
  std::vector<MeasuredRank> out;
  for (auto& [rank, m] : ranks) {
    const graph::Program& p = graph.programs(static_cast<int>(graph.ranks(static_cast<int>(rank)).program()));
    MeasureRank(p, times[rank], skip_iterations, m);
    m.steady_iteration_ns = SteadyIteration(iteration_start[rank], skip_iterations);
    out.push_back(std::move(m));
  }
  return out;
}

}  // namespace prism::daemon
