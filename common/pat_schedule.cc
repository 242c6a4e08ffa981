#include "common/pat_schedule.h"

#include <algorithm>
#include <queue>
#include <vector>

#include "common/time_math.h"

namespace prism {
namespace {

uint32_t CeilLog2(uint64_t v) {
  uint32_t r = 0;
  while ((uint64_t{1} << r) < v) ++r;
  return r;
}

// Lowest set bit of a non-zero offset; `dims` for 0 (a rank's own piece).
uint32_t LowBit(uint64_t s, uint32_t dims) { return s == 0 ? dims : static_cast<uint32_t>(__builtin_ctzll(s)); }

using Message = PatMessage;

// The messages one rank sends, per loop, with what each waits for.
class PatMessages {
 public:
  PatMessages(const PatShape& op, const PatCut& cut) : op_(op), cut_(cut) {
    blocks_ = (((uint64_t{1} << cut.dims) / cut.group_spacing) + cut.per_message - 1) / cut.per_message;
    slots_per_dim_ = cut.group_spacing * blocks_;
  }

  std::vector<Message> Build() {
    std::vector<Message> out;
    for (uint64_t loop = 0; loop < cut_.loops; ++loop) {
      const uint64_t bytes = std::min(cut_.chunk.count(), cut_.piece - loop * cut_.chunk.count());
      index_.assign(cut_.dims * slots_per_dim_, -1);
      const bool gather = op_.all_gather;
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
    if (op_.all_gather) return LowBit(s, cut_.dims) > dim && s + step < op_.ranks;
    return s != 0 && LowBit(s, cut_.dims) == dim;
  }

  // The messages (of this rank, by the mirror) piece s on dim waits for.
  std::vector<uint32_t> InputsOf(uint64_t s, uint32_t dim) const {
    std::vector<uint32_t> in;
    if (op_.all_gather) {
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
      const uint64_t dim_rank = op_.all_gather ? cut_.dims - 1 - dim : dim;
      const uint64_t order = op_.all_gather ? seq : 0xffffffffu - seq;
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
    ++out[m].inputs;
  }

  const PatShape& op_;
  const PatCut& cut_;
  uint64_t blocks_ = 1;
  uint64_t slots_per_dim_ = 1;
  std::vector<int32_t> index_;  // message id per (dim, group, block); -1: none yet
};

// One NIC, the earliest-ready message first (its priority among equals);
// each message's wire end into `sent` by dimension.
Nanoseconds SendAll(const std::vector<Message>& msgs, const PatShape& op, uint32_t dims,
                    std::vector<std::vector<Nanoseconds>>* sent) {
  using Entry = std::pair<int64_t, uint64_t>;  // (key, id)
  std::priority_queue<std::pair<Entry, uint32_t>, std::vector<std::pair<Entry, uint32_t>>, std::greater<>> waiting;
  std::priority_queue<std::pair<uint64_t, uint32_t>, std::vector<std::pair<uint64_t, uint32_t>>, std::greater<>> ready;
  std::vector<int64_t> ready_at(msgs.size(), 0);  // when its inputs have arrived
  std::vector<uint32_t> waiting_for(msgs.size(), 0);
  for (uint32_t i = 0; i < msgs.size(); ++i) {
    waiting_for[i] = msgs[i].inputs;
    if (msgs[i].inputs == 0) waiting.push({{0, msgs[i].priority}, i});
  }
  sent->assign(dims, {});
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
    (*sent)[m.dim].push_back(Nanoseconds(now));
    const int64_t arrives = SatAdd(Nanoseconds(now), Nanoseconds(latency)).count();
    for (uint32_t f : m.feeds) {
      ready_at[f] = std::max(ready_at[f], arrives);
      if (--waiting_for[f] == 0) waiting.push({{ready_at[f], msgs[f].priority}, f});
    }
  }
  return SatAdd(Nanoseconds(last_end), Nanoseconds(latency));
}

}  // namespace

Bytes PatChunk(bool all_gather, Bytes bytes, uint32_t channels) {
  const uint64_t factor = all_gather ? 32 : 16;
  uint64_t chunk = 512 * 1024;
  while (chunk * std::max<uint32_t>(channels, 1) * factor > bytes.count() && chunk > 64 * 1024) chunk /= 2;
  return Bytes(chunk);
}

PatCut CutPatShape(const PatShape& op) {
  PatCut c;
  const uint64_t n = std::max<uint32_t>(op.ranks, 1);
  const uint64_t channels = std::max<uint32_t>(op.channels, 1);
  c.chunk = PatChunk(op.all_gather, op.bytes, op.channels);
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

std::vector<PatMessage> PatRankMessages(const PatShape& op) {
  if (op.ranks <= 1) return {};
  const PatCut cut = CutPatShape(op);
  if (cut.loops * op.ranks > kMaxPlayedPatMessages) return {};
  return PatMessages(op, cut).Build();
}

std::vector<uint64_t> PatMessagesPerDim(const PatShape& op) {
  std::vector<uint64_t> per_dim(CutPatShape(op).dims, 0);
  for (const Message& m : PatRankMessages(op)) ++per_dim[m.dim];
  return per_dim;
}

std::vector<Nanoseconds> PatEarliestLeaves(const std::vector<PatMessage>& msgs, const PatShape& op) {
  std::vector<int64_t> ready_at(msgs.size(), 0);
  std::vector<uint32_t> waiting_for(msgs.size(), 0);
  std::vector<uint32_t> order;  // Kahn's order: a message after the messages it waits for
  order.reserve(msgs.size());
  for (uint32_t i = 0; i < msgs.size(); ++i) {
    waiting_for[i] = msgs[i].inputs;
    if (msgs[i].inputs == 0) order.push_back(i);
  }
  std::vector<Nanoseconds> left(msgs.size());
  for (size_t next = 0; next < order.size(); ++next) {
    const uint32_t id = order[next];
    const Nanoseconds wire = FractionTransferTime(Bytes(msgs[id].bytes), op.channels, 1, op.bandwidth);
    left[id] = SatAdd(Nanoseconds(ready_at[id]), wire);
    const int64_t arrives = SatAdd(left[id], op.step_latency).count();
    for (uint32_t f : msgs[id].feeds) {
      ready_at[f] = std::max(ready_at[f], arrives);
      if (--waiting_for[f] == 0) order.push_back(f);
    }
  }
  return left;
}

std::optional<PatPlay> PlayPatSchedule(const PatShape& op) {
  if (op.ranks <= 1) return PatPlay{};
  const std::vector<Message> msgs = PatRankMessages(op);
  if (msgs.empty()) return std::nullopt;
  PatPlay play;
  const uint32_t dims = CutPatShape(op).dims;
  play.end = SendAll(msgs, op, dims, &play.sent);
  const std::vector<Nanoseconds> left = PatEarliestLeaves(msgs, op);
  play.earliest.assign(dims, {});
  std::vector<Nanoseconds> shortest(dims, Nanoseconds(INT64_MAX));  // per dimension, its shortest wire time
  for (size_t i = 0; i < msgs.size(); ++i) {
    play.earliest[msgs[i].dim].push_back(left[i]);
    shortest[msgs[i].dim] =
        Min(shortest[msgs[i].dim], FractionTransferTime(Bytes(msgs[i].bytes), op.channels, 1, op.bandwidth));
  }
  for (uint32_t d = 0; d < dims; ++d) {  // one connection: its messages leave one after another
    std::vector<Nanoseconds>& e = play.earliest[d];
    std::sort(e.begin(), e.end());
    for (size_t k = 1; k < e.size(); ++k) e[k] = Max(e[k], SatAdd(e[k - 1], shortest[d]));
  }
  return play;
}

}  // namespace prism
