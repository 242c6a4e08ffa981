#include "daemon/engine/pat_play.h"

#include <algorithm>
#include <queue>
#include <vector>

#include "daemon/engine/engine_time.h"

namespace prism::engine {
namespace {

uint32_t CeilLog2(uint64_t v) {
  uint32_t r = 0;
  while ((uint64_t{1} << r) < v) ++r;
  return r;
}

// Lowest set bit of a non-zero offset; `dims` for 0 (a rank's own piece).
uint32_t LowBit(uint64_t s, uint32_t dims) { return s == 0 ? dims : static_cast<uint32_t>(__builtin_ctzll(s)); }

struct Message {
  uint64_t bytes = 0;
  uint64_t priority = 0;            // lower first among the ready
  uint32_t dim = 0;
  int64_t ready = 0;                // when its inputs have arrived
  uint32_t waiting_for = 0;         // input messages not yet sent
  std::vector<uint32_t> feeds;      // messages waiting for this one
};

// The messages one rank sends, per loop, with what each waits for.
class PatMessages {
 public:
  PatMessages(const PatOperation& op, const PatCut& cut) : op_(op), cut_(cut) {
    blocks_ = (((uint64_t{1} << cut.dims) / cut.group_spacing) + cut.per_message - 1) / cut.per_message;
    slots_per_dim_ = cut.group_spacing * blocks_;
  }

  std::vector<Message> Build() {
    std::vector<Message> out;
    for (uint64_t loop = 0; loop < cut_.loops; ++loop) {
      const uint64_t bytes = std::min(cut_.chunk.count(), cut_.piece - loop * cut_.chunk.count());
      index_.assign(cut_.dims * slots_per_dim_, -1);
      const bool gather = op_.kind == graph::ALLGATHER;
      for (uint32_t i = 0; i < cut_.dims; ++i) {
        // Inputs come from higher dimensions (all-gather) or lower ones (reduce-scatter).
        const uint32_t dim = gather ? cut_.dims - 1 - i : i;
        uint32_t seq = 0;
        for (uint64_t s = 0; s < op_.ranks; ++s) {
          if (!Sends(s, dim)) continue;
          const uint32_t m = MessageOf(out, loop, dim, s, bytes, seq);
          for (uint32_t input : InputsOf(s, dim)) AddInput(out, input, m);
        }
      }
    }
    return out;
  }

 private:
  // Whether this rank sends piece s on dimension dim.
  bool Sends(uint64_t s, uint32_t dim) const {
    const uint64_t step = uint64_t{1} << dim;
    if (op_.kind == graph::ALLGATHER) return LowBit(s, cut_.dims) > dim && s + step < op_.ranks;
    return s != 0 && LowBit(s, cut_.dims) == dim;
  }

  // The messages (of this rank, by the mirror) piece s on dim waits for.
  std::vector<uint32_t> InputsOf(uint64_t s, uint32_t dim) const {
    std::vector<uint32_t> in;
    if (op_.kind == graph::ALLGATHER) {
      if (s == 0) return in;
      const uint32_t d = LowBit(s, cut_.dims);
      in.push_back(static_cast<uint32_t>(index_[Slot(d, s - (uint64_t{1} << d))]));
      return in;
    }
    for (uint32_t f = 0; f < dim; ++f) {
      const uint64_t from = s + (uint64_t{1} << f);
      if (from < op_.ranks) in.push_back(static_cast<uint32_t>(index_[Slot(f, from)]));
    }
    return in;
  }

  // The message of piece s on dim: its group (offset mod A), then P
  // consecutive pieces of that group on that dimension. The pieces of group
  // 0 on a dimension at or above log2(A) are the multiples of 2^(dim+1):
  // they are counted in those steps (NCCL's per-dimension message counts).
  uint64_t Slot(uint32_t dim, uint64_t s) const {
    const uint64_t group = s % cut_.group_spacing;
    const uint64_t stride = group == 0 ? std::max(cut_.group_spacing, uint64_t{2} << dim) : cut_.group_spacing;
    return dim * slots_per_dim_ + group * blocks_ + (s / stride) / cut_.per_message;
  }

  uint32_t MessageOf(std::vector<Message>& out, uint64_t loop, uint32_t dim, uint64_t s, uint64_t bytes,
                     uint32_t& seq) {
    int32_t& id = index_[Slot(dim, s)];
    if (id < 0) {
      id = static_cast<int32_t>(out.size());
      Message m;
      const uint64_t dim_rank = op_.kind == graph::ALLGATHER ? cut_.dims - 1 - dim : dim;
      const uint64_t order = op_.kind == graph::ALLGATHER ? seq : 0xffffffffu - seq;
      m.priority = (loop << 40) | (dim_rank << 32) | order;
      m.dim = dim;
      ++seq;
      out.push_back(std::move(m));
    }
    out[static_cast<size_t>(id)].bytes += bytes;
    return static_cast<uint32_t>(id);
  }

  static void AddInput(std::vector<Message>& out, uint32_t input, uint32_t m) {
    std::vector<uint32_t>& feeds = out[input].feeds;
    if (!feeds.empty() && feeds.back() == m) return;  // the message's earlier pieces came the same way
    feeds.push_back(m);
    ++out[m].waiting_for;
  }

  const PatOperation& op_;
  const PatCut& cut_;
  uint64_t blocks_ = 1;
  uint64_t slots_per_dim_ = 1;
  std::vector<int32_t> index_;  // message id per (dim, group, block); -1: none yet
};

// One NIC, the earliest-ready message first (its priority among equals).
int64_t SendAll(std::vector<Message>& msgs, const PatOperation& op) {
  using Entry = std::pair<int64_t, uint64_t>;  // (key, id)
  std::priority_queue<std::pair<Entry, uint32_t>, std::vector<std::pair<Entry, uint32_t>>, std::greater<>> waiting;
  std::priority_queue<std::pair<uint64_t, uint32_t>, std::vector<std::pair<uint64_t, uint32_t>>, std::greater<>> ready;
  for (uint32_t i = 0; i < msgs.size(); ++i)
    if (msgs[i].waiting_for == 0) waiting.push({{0, msgs[i].priority}, i});
  const int64_t latency = op.step_latency.count();
  int64_t now = 0, last_end = 0;
  while (!waiting.empty() || !ready.empty()) {
    while (!waiting.empty() && waiting.top().first.first <= now) {
      const uint32_t id = waiting.top().second;
      waiting.pop();
      ready.push({msgs[id].priority, id});
    }
    if (ready.empty()) {
      now = waiting.top().first.first;
      continue;
    }
    const uint32_t id = ready.top().second;
    ready.pop();
    const Message& m = msgs[id];
    now = SatAdd(Nanoseconds(now), FractionTransferTime(Bytes(m.bytes), op.channels, 1, op.bandwidth)).count();
    last_end = now;
    const int64_t arrives = SatAdd(Nanoseconds(now), Nanoseconds(latency)).count();
    for (uint32_t f : m.feeds) {
      Message& next = msgs[f];
      next.ready = std::max(next.ready, arrives);
      if (--next.waiting_for == 0) waiting.push({{next.ready, next.priority}, f});
    }
  }
  return SatAdd(Nanoseconds(last_end), Nanoseconds(latency)).count();
}

}  // namespace

Bytes PatChunkBytes(graph::CollectiveKind kind, Bytes bytes, uint32_t channels) {
  const uint64_t factor = kind == graph::ALLGATHER ? 32 : 16;
  uint64_t chunk = 512 * 1024;
  while (chunk * std::max<uint32_t>(channels, 1) * factor > bytes.count() && chunk > 64 * 1024) chunk /= 2;
  return Bytes(chunk);
}

PatCut CutPat(const PatOperation& op) {
  PatCut c;
  const uint64_t n = std::max<uint32_t>(op.ranks, 1);
  const uint64_t channels = std::max<uint32_t>(op.channels, 1);
  c.chunk = PatChunkBytes(op.kind, op.bytes, op.channels);
  c.dims = CeilLog2(n);
  c.piece = (op.bytes.count() + n * channels - 1) / (n * channels);
  c.loops = std::max<uint64_t>((c.piece + c.chunk.count() - 1) / c.chunk.count(), 1);
  const uint64_t piece = std::max<uint64_t>(c.piece, 1);
  while (c.chunk.count() / (piece * c.per_message) >= 2 && c.per_message < n / 2) c.per_message *= 2;
  uint64_t spread = c.per_message;  // F: NCCL_STEPS' depth spreads the groups further
  for (int depth = 8; depth > 1 && spread < n / 2; depth /= 2) spread *= 2;
  c.group_spacing = std::max<uint64_t>((uint64_t{1} << c.dims) / spread, 1);
  return c;
}

std::vector<uint64_t> PatMessagesPerDimension(const PatOperation& op) {
  const PatCut cut = CutPat(op);
  std::vector<uint64_t> per_dim(cut.dims, 0);
  if (op.ranks <= 1 || cut.loops * op.ranks > kMaxPlayedPatMessages) return per_dim;
  for (const Message& m : PatMessages(op, cut).Build()) ++per_dim[m.dim];
  return per_dim;
}

std::optional<Nanoseconds> PlayPat(const PatOperation& op) {
  if (op.ranks <= 1) return Nanoseconds(0);
  const PatCut cut = CutPat(op);
  if (cut.loops * op.ranks > kMaxPlayedPatMessages) return std::nullopt;
  std::vector<Message> msgs = PatMessages(op, cut).Build();
  return Nanoseconds(SendAll(msgs, op));
}

}  // namespace prism::engine
