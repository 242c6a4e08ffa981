#include "daemon/hybrid/follow_program.h"

#include <algorithm>
#include <deque>
#include <map>
#include <set>
#include <tuple>

#include "daemon/hybrid/session_capture.h"

namespace prism::daemon {
namespace {

graph::CollectiveKind CollectiveOf(rpc::OpKind k) {
  switch (k) {
    case rpc::OP_ALL_REDUCE: return graph::ALLREDUCE;
    case rpc::OP_ALL_GATHER: return graph::ALLGATHER;
    case rpc::OP_REDUCE_SCATTER: return graph::REDUCESCATTER;
    case rpc::OP_BROADCAST: return graph::BROADCAST;
    case rpc::OP_REDUCE: return graph::REDUCE;
    case rpc::OP_ALL_TO_ALL: return graph::ALLTOALL;
    default: return graph::COLLECTIVE_KIND_UNSPECIFIED;
  }
}

graph::Op OpOf(const SeenOp& s) {
  graph::Op op;
  if (s.PointToPoint()) {
    auto* p = s.kind == rpc::OP_SEND ? op.mutable_send() : nullptr;
    auto* q = s.kind == rpc::OP_RECV ? op.mutable_recv() : nullptr;
    if (p != nullptr) p->set_comm_slot(s.comm), p->set_peer(static_cast<uint32_t>(s.peer)), p->set_bytes(s.bytes);
    if (q != nullptr) q->set_comm_slot(s.comm), q->set_peer(static_cast<uint32_t>(s.peer)), q->set_bytes(s.bytes);
    return op;
  }
  graph::CollectiveOp* c = op.mutable_collective();
  c->set_comm_slot(s.comm);
  c->set_kind(CollectiveOf(s.kind));
  c->set_bytes(s.bytes);
  if (s.root >= 0) c->set_root(static_cast<uint32_t>(s.root));
  if (s.call != nullptr) c->set_dtype(GraphDtypeOf(s.call->dtype));
  return op;
}

}  // namespace

std::vector<graph::Op> StartupOps(const std::vector<SeenOp>& ops, size_t first) {
  std::vector<graph::Op> out;
  for (size_t i = 0; i < first && i < ops.size(); ++i)
    if (!ops[i].PointToPoint()) out.push_back(OpOf(ops[i]));
  return out;
}

namespace {

// What one period position is, from the template iteration's calls.
struct Shape {
  std::vector<uint32_t> stream;                // per position
  std::vector<std::vector<size_t>> waits_for;  // stream-0 positions: async positions waited for just before
  std::vector<bool> batch_start, batch_member; // first of a batch of >= 2; a later member of one
  // Async positions waited for after the iteration's last stream-0 call and
  // before the next iteration's first: the next iteration's stream-0 work
  // follows them (an op at the iteration's end waits for them).
  std::vector<size_t> waits_at_end;
};

// `next_tmpl`: the same positions one iteration later, when the capture has
// it (empty: not); its first stream-0 call bounds the waits at the end.
Shape ShapeOf(const std::vector<const SeenOp*>& tmpl, const std::vector<const SeenOp*>& next_tmpl) {
  const size_t period = tmpl.size();
  Shape s{std::vector<uint32_t>(period, 0), std::vector<std::vector<size_t>>(period), std::vector<bool>(period),
          std::vector<bool>(period)};
  std::map<uint32_t, uint32_t> stream_of_group;
  for (size_t j = 0; j < period; ++j) {
    const TorchCall* c = tmpl[j]->call;
    if (c == nullptr) continue;
    bool overlaps = !c->Inline();
    for (size_t i = 0; i < j && !overlaps && c->async; ++i) {  // waited at once, but queued behind one that was not
      const TorchCall* o = tmpl[i]->call;
      overlaps = o != nullptr && o->group == c->group && s.stream[i] != 0 &&
                 (!o->waited_before || *o->waited_before > c->number);
    }
    if (overlaps)
      s.stream[j] = stream_of_group.emplace(c->group, static_cast<uint32_t>(stream_of_group.size() + 1)).first->second;
  }
  std::optional<uint64_t> next_first0;  // the next iteration's first stream-0 call
  for (size_t k = 0; k < next_tmpl.size() && !next_first0; ++k)
    if (s.stream[k] == 0 && next_tmpl[k]->call != nullptr) next_first0 = next_tmpl[k]->call->number;
  for (size_t j = 0; j < period; ++j) {
    const TorchCall* c = tmpl[j]->call;
    if (s.stream[j] == 0 || !c->waited_before) continue;
    bool found = false;
    for (size_t k = j + 1; k < period && !found; ++k)  // the first stream-0 op called after the wait
      if (s.stream[k] == 0 && tmpl[k]->call != nullptr && tmpl[k]->call->number >= *c->waited_before) {
        s.waits_for[k].push_back(j);
        found = true;
      }
    if (!found && next_first0 && *c->waited_before <= *next_first0) s.waits_at_end.push_back(j);
  }
  for (size_t j = 0; j < period; ++j) {
    const TorchCall* c = tmpl[j]->call;
    if (c == nullptr || c->batch < 0) continue;
    size_t k = j;
    while (k + 1 < period && tmpl[k + 1]->call != nullptr && tmpl[k + 1]->call->batch == c->batch) ++k;
    if (k > j) {
      s.batch_start[j] = true;
      for (size_t m = j + 1; m <= k; ++m) s.batch_member[m] = true;
    }
    j = k;
  }
  return s;
}

// An operation of another stream that started within this of the end of
// the previous one on its stream was held by its stream, not by compute.
constexpr uint64_t kQueuedNs = 50'000;

// A stream-0 operation that started within this of the end of a side-stream
// call's operation waited for it (measured on the GPU host, TorchTitan
// FSDP2+TP at 1024 ranks, 2026-12-02: the TP collective after an FSDP2
// all-gather started 44-100 us after its end, median over 8 iterations).
constexpr uint64_t kHeldNs = 150'000;

// A side-stream call's operation that started more than kQueuedNs after the
// end of the previous one on its stream, which ended after stream 0's
// previous operation, in most measured iterations: stream 0 waited for that
// one, computed, then made the call (FSDP2 alone: layer k's all-gather
// started 480 us after layer k-1's, whose parameters that compute needed).
// Without a stream-0 operation between them nothing else says where the
// compute stream was; counting the gap from the previous call's start would
// make the whole all-gather compute.
void SameStreamWaits(const std::vector<SeenOp>& ops, size_t first, size_t period, size_t from, size_t its,
                     const std::vector<const SeenOp*>& tmpl, Shape& shape) {
  const auto at = [&](size_t it, size_t j) -> const SeenOp& { return ops[first + it * period + j]; };
  for (size_t k = 0; k < period; ++k) {
    if (shape.stream[k] == 0 || tmpl[k]->call == nullptr || !tmpl[k]->call->side_stream) continue;
    size_t j = k, last0 = period;
    for (size_t i = k; i-- > 0;) {
      if (j == k && shape.stream[i] == shape.stream[k]) j = i;
      if (last0 == period && shape.stream[i] == 0) last0 = i;
    }
    if (j == k) continue;
    size_t held = 0, measured = 0;
    for (size_t it = from; it < its; ++it, ++measured) {
      const uint64_t end = at(it, j).end;
      held += end != 0 && at(it, k).GpuStart() > end + kQueuedNs && (last0 == period || at(it, last0).end <= end);
    }
    if (2 * held > measured) shape.waits_for[k].push_back(j);
  }
}

// A call made on a side stream (FSDP2's all-gather and reduce-scatter
// streams: async_op False waits on that stream) says nothing of when the
// compute stream waited for it (a CUDA event, invisible to the trace). The
// first stream-0 position after it that, in most measured iterations, was
// the first to start after its end and started within kHeldNs of it waited
// for it. A reduce-scatter's output (a gradient shard) is read only after
// the backward: only the iteration's last side-stream operation, if one,
// is waited for that way (FSDP2's reduce-scatters in a backward ended
// 135-150 us before the compute stream's next operation started, which had
// been computing since its previous one, not waiting).
void InferSideStreamWaits(const std::vector<SeenOp>& ops, size_t first, size_t period, size_t from, size_t its,
                          const std::vector<const SeenOp*>& tmpl, Shape& shape) {
  const auto at = [&](size_t it, size_t j) -> const SeenOp& { return ops[first + it * period + j]; };
  size_t last_side = period;
  for (size_t j = 0; j < period; ++j)
    if (shape.stream[j] != 0) last_side = j;
  for (size_t j = 0; j < period; ++j) {
    const TorchCall* c = tmpl[j]->call;
    if (c == nullptr || !c->side_stream || c->waited_before || shape.stream[j] == 0) continue;
    if (tmpl[j]->kind == rpc::OP_REDUCE_SCATTER && j != last_side) continue;
    std::map<size_t, size_t> held;  // stream-0 position -> iterations it waited for j
    size_t measured = 0;
    for (size_t it = from; it < its; ++it, ++measured) {
      const uint64_t end = at(it, j).end;
      if (end == 0) continue;
      for (size_t k = j + 1; k < period; ++k) {
        if (shape.stream[k] != 0 || shape.batch_member[k] || at(it, k).GpuStart() < end) continue;
        if (at(it, k).GpuStart() <= end + kHeldNs) ++held[k];
        break;
      }
    }
    const auto best = std::max_element(held.begin(), held.end(),
                                       [](const auto& a, const auto& b) { return a.second < b.second; });
    if (best != held.end() && 2 * best->second > measured) shape.waits_for[best->first].push_back(j);
  }
}

// NCCL runs a communicator's operations one after the other, in the order
// the rank issued them, whatever stream issued them; prismd's engine pairs a
// rank's n-th call on a communicator with its peers' n-th, and starts a real
// rank's operation once it reported it and its stream is free (a real rank's
// dependencies are not waited for: it enqueues ahead of its GPU). So two
// streams with operations of one communicator let the engine call them in
// another order for the real rank than for its virtual peers: TorchTitan
// FSDP2+TP at 1024 (GPU host, 2026-12-02) put the loss all-reduce on the
// FSDP communicator on stream 0 while that communicator's reduce-scatter
// still queued on stream 1; the real rank's all-reduce was paired with its
// peers' reduce-scatter, and the refine round stalled.
// Returns the stream each position is written on: a position whose
// communicator has operations on another stream goes on that stream (the
// first such stream), and the stream-0 work after a position moved off
// stream 0 waits for it, as it did (the next position's compute, or the
// next position itself; else the iteration's end). Called after the
// measurement, which keeps the streams the calls gave: the compute between
// operations is what it was (FSDP2 alone has every collective on one
// communicator; measured with them all on its side stream, no compute was
// left).
std::vector<uint32_t> OneStreamPerCommunicator(const std::vector<const SeenOp*>& tmpl, Shape& shape) {
  const size_t period = tmpl.size();
  std::vector<uint32_t> out = shape.stream;
  std::map<uint32_t, uint32_t> side_of_comm;
  for (size_t j = 0; j < period; ++j)
    if (shape.stream[j] != 0) side_of_comm.emplace(tmpl[j]->comm, shape.stream[j]);
  for (size_t j = 0; j < period; ++j) {
    const auto side = side_of_comm.find(tmpl[j]->comm);
    if (side == side_of_comm.end() || out[j] == side->second) continue;
    if (shape.batch_start[j] || shape.batch_member[j]) continue;  // a batch stays on one stream
    out[j] = side->second;
    if (shape.stream[j] != 0) continue;
    if (j + 1 < period) shape.waits_for[j + 1].push_back(j);
    else shape.waits_at_end.push_back(j);
  }
  return out;
}

// Per position: the mean measured gap before it (its compute), and how often
// it started before the previous op ended (in-flight p2p without calls).
struct Gaps {
  std::vector<uint64_t> sum, n, overlapped;
};

// Per position of another stream than 0: whether, in most measured
// iterations, it started within kQueuedNs of the end of the previous op on
// its stream (its stream held it, not compute). Decided per position: the
// plugin reports an operation's end when its last transfer completed, and
// the stream's next kernel starts 30 to 100 us later on the GPU host, so a
// per-iteration test calls a queued op free now and then and charges the
// whole queue as compute (seen on train_gpt.py's last reduce-scatter: 63 ms
// in one iteration of nine).
std::vector<bool> HeldByStream(const std::vector<SeenOp>& ops, size_t first, size_t period, size_t from, size_t its,
                               const Shape& shape) {
  std::vector<uint64_t> held(period), seen(period);
  std::map<uint32_t, uint64_t> stream_end;
  for (size_t it = from - 1; it < its; ++it)
    for (size_t j = 0; j < period; ++j) {
      if (shape.stream[j] == 0) continue;
      const SeenOp& s = ops[first + it * period + j];
      uint64_t& busy = stream_end[shape.stream[j]];
      if (it >= from && busy != 0) ++seen[j], held[j] += s.GpuStart() <= busy + kQueuedNs;
      busy = s.end;
    }
  std::vector<bool> out(period);
  for (size_t j = 0; j < period; ++j) out[j] = seen[j] > 0 && 2 * held[j] > seen[j];
  return out;
}

Gaps Measure(const std::vector<SeenOp>& ops, size_t first, size_t period, size_t from, size_t its,
             const Shape& shape) {
  Gaps g{std::vector<uint64_t>(period), std::vector<uint64_t>(period), std::vector<uint64_t>(period)};
  const auto at = [&](size_t it, size_t j) -> const SeenOp& { return ops[first + it * period + j]; };
  const std::vector<bool> held = HeldByStream(ops, first, period, from, its, shape);
  uint64_t t = 0;  // when stream 0 went on after its last op (0: not known)
  std::map<uint32_t, uint64_t> stream_end;  // other streams: when their last op ended
  for (size_t it = from - 1; it < its; ++it) {
    const bool record = it >= from;
    for (size_t j = 0; j < period; ++j) {
      const SeenOp& s = at(it, j);
      if (record) g.overlapped[j] += s.at < ops[first + it * period + j - 1].end;
      if (shape.stream[j] != 0) {  // the compute before it runs on stream 0 until it starts ...
        uint64_t& busy = stream_end[shape.stream[j]];
        const bool queued = busy != 0 && s.GpuStart() <= busy + kQueuedNs;  // ... unless its own stream held it
        uint64_t from = std::max(t, busy);  // only what ran once its stream and stream 0 were free is its compute
        busy = s.end;
        if (t == 0) continue;
        if (held[j]) {
          if (record) ++g.n[j];  // no compute seen before it: what ran goes to the next stream-0 op
          continue;
        }
        if (queued) {  // held this time only: when the compute before it ended is not known
          t = 0;
          continue;
        }
        uint64_t cap = s.GpuStart();
        for (size_t k = j + 1; k < period; ++k)
          if (shape.stream[k] == 0) {
            cap = std::min(cap, at(it, k).GpuStart());
            break;
          }
        for (size_t w : shape.waits_for[j]) from = std::max(from, at(it, w).end);  // stream 0 waited for them
        if (record) g.sum[j] += cap > from ? cap - from : 0, ++g.n[j];
        t = std::max(t, cap);
        continue;
      }
      if (shape.batch_member[j]) {  // no compute inside a batch; stream 0 goes on after all of it
        t = t == 0 || s.end == 0 ? 0 : std::max(t, s.end);
        continue;
      }
      uint64_t ref = t;
      bool known = t != 0;
      for (size_t w : shape.waits_for[j]) {
        known &= at(it, w).end != 0;
        ref = std::max(ref, at(it, w).end);
      }
      if (record && known) g.sum[j] += s.GpuStart() > ref ? s.GpuStart() - ref : 0, ++g.n[j];
      t = s.end;  // 0: no transfer through the plugin ended it (e.g. real peers over NVLink)
    }
    // The ops waited for at the iteration's end (the parameter all-gathers
    // before train_gpt.py's synchronize): the next iteration's stream-0 work
    // starts after them, as the op at the program's end has it. Measured from
    // the last stream-0 op instead, the next iteration's first compute took
    // in the all-gathers' time as well, which the graph then charged twice.
    for (size_t w : shape.waits_at_end) t = t == 0 || at(it, w).end == 0 ? 0 : std::max(t, at(it, w).end);
  }
  return g;
}

// Mean allocator bytes at each position's call over the measured iterations
// (nullopt when a call lacks them), and the highest peak seen.
std::optional<std::vector<int64_t>> Levels(const std::vector<SeenOp>& ops, size_t first, size_t period, size_t from,
                                           size_t its, uint64_t* peak) {
  std::vector<int64_t> sum(period, 0);
  int64_t n = 0;
  for (size_t it = from; it < its; ++it, ++n)
    for (size_t j = 0; j < period; ++j) {
      const TorchCall* c = ops[first + it * period + j].call;
      if (c == nullptr || !c->allocated) return std::nullopt;
      sum[j] += *c->allocated;
      if (c->peak) *peak = std::max<uint64_t>(*peak, static_cast<uint64_t>(std::max<int64_t>(*c->peak, 0)));
    }
  if (n == 0) return std::nullopt;
  for (int64_t& v : sum) v /= n;
  return sum;
}

}  // namespace

std::optional<std::pair<size_t, size_t>> RepeatingPeriod(const std::vector<SeenOp>& ops) {
  const size_t n = ops.size();
  for (size_t p = 1; 2 * p <= n; ++p) {
    size_t run = 0, best = 0, best_end = 0;
    for (size_t i = 0; i + p < n; ++i) {
      run = ops[i].SameOp(ops[i + p]) ? run + 1 : 0;
      if (run > best) best = run, best_end = i + 1;
    }
    if (best + p >= std::max(2 * p, (n + 1) / 2)) return std::make_pair(best_end - best, p);
  }
  return std::nullopt;
}

size_t MatchTorchCalls(std::vector<SeenOp>& ops, const TorchTrace& trace,
                       const std::vector<graph::Communicator>& comms) {
  const auto sorted = [](std::vector<uint32_t> v) {
    std::sort(v.begin(), v.end());
    return v;
  };
  std::map<std::vector<uint32_t>, std::vector<uint32_t>> comms_of;  // sorted members -> ids
  for (const graph::Communicator& c : comms)
    comms_of[sorted({c.members().begin(), c.members().end()})].push_back(c.id());
  std::map<uint32_t, std::vector<rpc::OpKind>> kinds_on_comm;      // the plugin's, in order
  for (const SeenOp& s : ops) kinds_on_comm[s.comm].push_back(s.kind);
  std::map<uint32_t, std::vector<rpc::OpKind>> kinds_on_group;     // the program's
  for (const TorchCall& c : trace.calls)
    if (auto k = NcclKindOf(c.fn); k && trace.groups[c.group].Nccl()) kinds_on_group[c.group].push_back(*k);
  // Each NCCL group to the communicator of its members whose operations agree best with its calls.
  std::map<uint32_t, uint32_t> comm_of_group;
  std::set<uint32_t> taken;
  for (const auto& [group, kinds] : kinds_on_group) {
    const auto it = comms_of.find(sorted(trace.groups[group].ranks));
    if (it == comms_of.end()) continue;
    int64_t best = -1;
    for (uint32_t id : it->second) {
      if (taken.count(id) != 0) continue;
      const auto& seen = kinds_on_comm[id];
      int64_t agree = 0;
      for (size_t i = 0; i < std::min<size_t>({seen.size(), kinds.size(), 64}); ++i) agree += seen[i] == kinds[i];
      if (agree > best) best = agree, comm_of_group[group] = id;
    }
    if (best >= 0) taken.insert(comm_of_group[group]);
  }
  using Key = std::tuple<uint32_t, rpc::OpKind, int32_t>;  // comm, kind, peer (sorted-member index)
  std::map<Key, std::deque<const TorchCall*>> queue;
  for (const TorchCall& c : trace.calls) {
    const auto kind = NcclKindOf(c.fn);
    const auto comm = comm_of_group.find(c.group);
    if (!kind || comm == comm_of_group.end()) continue;
    int32_t peer = -1;
    if (c.peer >= 0) {
      const auto members = sorted(trace.groups[c.group].ranks);
      peer = static_cast<int32_t>(std::lower_bound(members.begin(), members.end(), static_cast<uint32_t>(c.peer)) -
                                  members.begin());
    }
    queue[{comm->second, *kind, *kind == rpc::OP_SEND || *kind == rpc::OP_RECV ? peer : -1}].push_back(&c);
  }
  size_t matched = 0;
  for (SeenOp& s : ops) {
    auto it = queue.find({s.comm, s.kind, s.PointToPoint() ? s.peer : -1});
    if (it == queue.end() || it->second.empty()) continue;
    s.call = it->second.front();
    it->second.pop_front();
    ++matched;
  }
  return matched;
}

namespace {

// Writes one iteration's ops, keeping what the stream rules need: the
// latest stream-0 op, each stream's latest op, and which op each period
// position became.
class ProgramWriter {
 public:
  ProgramWriter(FollowProgram& out, size_t period) : out_(out), emitted_(period, -1) {}

  // A compute op on stream 0 that waits for the ops of `waits` (period positions).
  void Compute(uint64_t ns, int64_t memory_delta, const std::vector<size_t>& waits) {
    graph::Op& op = out_.ops.emplace_back();
    graph::ComputeOp* c = op.mutable_compute();
    c->set_duration_ns(ns);
    c->set_label("captured compute");
    c->set_memory_delta_bytes(memory_delta);
    AddDeps(op, waits);
    last0_ = static_cast<int64_t>(out_.ops.size() - 1);
    if (first_compute_ < 0) first_compute_ = last0_;
    out_.compute_ns += ns;
  }
  void Bracket(bool start, uint32_t stream) {
    graph::Op& op = out_.ops.emplace_back();
    if (start) op.mutable_group_start(); else op.mutable_group_end();
    op.set_stream(stream);
  }
  // Operation of position `j` on `stream`: on stream 0 it waits for `waits`;
  // on another it waits for the latest stream-0 op, unless its stream's
  // previous op already comes after that one, and for those of `waits` on
  // other streams.
  void Operation(size_t j, graph::Op op, uint32_t stream, const std::vector<size_t>& waits) {
    op.set_stream(stream);
    const auto here = static_cast<int64_t>(out_.ops.size());
    if (stream == 0) {
      AddDeps(op, waits);
      last0_ = here;
    } else {
      const auto prev = last_on_stream_.find(stream);
      if (last0_ >= 0 && (prev == last_on_stream_.end() || prev->second < last0_)) AddDep(op, last0_);
      for (size_t w : waits)  // an op moved off stream 0 (OneStreamPerCommunicator) after another stream's
        if (out_.ops[static_cast<size_t>(emitted_[w])].stream() != stream) AddDep(op, emitted_[w]);
      last_on_stream_[stream] = here;
      out_.streams = std::max(out_.streams, stream + 1);
    }
    emitted_[j] = here;
    out_.ops.push_back(std::move(op));
  }
  // The first compute op (nullptr: none), which takes what no other carried.
  graph::ComputeOp* FirstCompute() {
    return first_compute_ < 0 ? nullptr : out_.ops[static_cast<size_t>(first_compute_)].mutable_compute();
  }

 private:
  void AddDep(graph::Op& op, int64_t index) {
    op.add_deps(static_cast<uint32_t>(index));
    ++out_.dependencies;
  }
  void AddDeps(graph::Op& op, const std::vector<size_t>& waits) {
    for (size_t w : waits) AddDep(op, emitted_[w]);
  }

  FollowProgram& out_;
  std::vector<int64_t> emitted_;
  std::map<uint32_t, int64_t> last_on_stream_;
  int64_t last0_ = -1, first_compute_ = -1;
};

// Without calls: whether position j's send/recv and the next were in flight
// together in most measured iterations.
bool InFlightWithNext(const std::vector<SeenOp>& ops, size_t first, size_t period, size_t from, size_t its, size_t j) {
  if (!ops[first + j].PointToPoint() || j + 1 >= period || !ops[first + j + 1].PointToPoint()) return false;
  uint64_t over = 0, m = 0;
  for (size_t it = from; it < its; ++it, ++m)
    over += ops[first + it * period + j + 1].at < ops[first + it * period + j].end;
  return m > 0 && 2 * over > m;
}

// Whether ops[i]'s transfers overlapped those of the operation before or
// after it (two operations share the NIC and NCCL's proxy thread: neither
// time is its own).
bool OverlapsNeighbour(const std::vector<SeenOp>& ops, size_t i) {
  const SeenOp& s = ops[i];
  for (size_t k = i > 0 ? i - 1 : i; k <= i + 1 && k < ops.size(); ++k)
    if (k != i && ops[k].first_send != 0 && ops[k].first_send < s.end && s.first_send < ops[k].end) return true;
  return false;
}

// Position j's own pace: the mean over the measured iterations of its
// first send to its end, where it overlapped no neighbour (0 when no
// iteration qualifies). The mean, not the median: a hybrid run takes the
// larger of the model's time and the real rank's, so its expected time is
// the mean's where the real rank's is the larger.
uint64_t OwnPace(const std::vector<SeenOp>& ops, size_t first, size_t period, size_t from, size_t its, size_t j) {
  uint64_t sum = 0, n = 0;
  for (size_t it = from; it < its; ++it) {
    const size_t i = first + it * period + j;
    if (const SeenOp& s = ops[i]; !s.shared && s.first_send != 0 && s.end > s.first_send && !OverlapsNeighbour(ops, i))
      sum += s.end - s.first_send, ++n;
  }
  return n == 0 ? 0 : sum / n;
}

}  // namespace

FollowProgram BuildFollowProgram(const std::vector<SeenOp>& ops, size_t first, size_t period, uint64_t skip) {
  FollowProgram out;
  const size_t its = (ops.size() - first) / period;
  out.iterations = its;
  const size_t from = std::max<uint64_t>(skip, 1);
  std::vector<const SeenOp*> tmpl(period);
  for (size_t j = 0; j < period; ++j) tmpl[j] = &ops[first + std::min(from, its - 1) * period + j];
  std::vector<const SeenOp*> next_tmpl;  // the iteration after the template, if captured
  if (const size_t next = std::min(from, its - 1) + 1; next < its)
    for (size_t j = 0; j < period; ++j) next_tmpl.push_back(&ops[first + next * period + j]);
  Shape shape = ShapeOf(tmpl, next_tmpl);
  SameStreamWaits(ops, first, period, from, its, tmpl, shape);
  InferSideStreamWaits(ops, first, period, from, its, tmpl, shape);
  std::map<uint64_t, uint64_t> starts;
  for (size_t it = 0; it < its; ++it) starts[it] = ops[first + it * period].at;
  out.steady_iteration_ns = SteadyIteration(starts, from);
  const Gaps gaps = Measure(ops, first, period, from, its, shape);
  const std::vector<uint32_t> stream = OneStreamPerCommunicator(tmpl, shape);
  uint64_t peak = 0;
  const auto levels = Levels(ops, first, period, from, its, &peak);

  ProgramWriter w(out, period);
  int64_t pending_memory = 0;
  bool in_group = false;
  uint32_t group_stream = 0;
  for (size_t j = 0; j < period; ++j) {
    const SeenOp& s = ops[first + j];
    const bool by_calls = tmpl[j]->call != nullptr;
    const uint64_t gap = gaps.n[j] == 0 ? 0 : gaps.sum[j] / gaps.n[j];
    if (levels) pending_memory += (*levels)[j] - (*levels)[j == 0 ? period - 1 : j - 1];
    const bool joins = by_calls ? bool(shape.batch_member[j])
                                : in_group && s.PointToPoint() && 2 * gaps.overlapped[j] > gaps.n[j] && gap == 0;
    if (in_group && !joins) w.Bracket(false, group_stream), in_group = false;
    const bool computes = gap > 0 && !joins;
    if (computes) w.Compute(gap, pending_memory, shape.waits_for[j]), pending_memory = 0;
    const bool starts_group =
        by_calls ? bool(shape.batch_start[j]) : InFlightWithNext(ops, first, period, from, its, j);
    if (!in_group && starts_group) w.Bracket(true, group_stream = shape.stream[j]), in_group = true;
    graph::Op op = OpOf(s);
    if (op.has_collective()) op.mutable_collective()->set_measured_ns(OwnPace(ops, first, period, from, its, j));
    w.Operation(j, std::move(op), stream[j], computes ? std::vector<size_t>{} : shape.waits_for[j]);
  }
  if (in_group) w.Bracket(false, group_stream);
  if (!shape.waits_at_end.empty()) w.Compute(0, 0, shape.waits_at_end);  // the next iteration waits for them
  if (graph::ComputeOp* c = w.FirstCompute(); levels && c != nullptr) {  // the iteration wraps around
    c->set_memory_delta_bytes(c->memory_delta_bytes() + pending_memory);
    out.static_memory_bytes = static_cast<uint64_t>(std::max<int64_t>((*levels)[period - 1], 0));
    out.peak_memory_bytes = std::max<uint64_t>(peak, *out.static_memory_bytes);
  }
  return out;
}

}  // namespace prism::daemon
