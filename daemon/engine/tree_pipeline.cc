#include "daemon/engine/tree_pipeline.h"

#include <algorithm>
#include <queue>
#include <tuple>
#include <vector>

namespace prism::engine {

TreeNode BinaryTreeNode(int nodes, int rank) {
  TreeNode t;
  // The lowest set bit of the rank; for rank 0 the first power of two >= nodes.
  int bit = 1;
  while (bit < nodes && (bit & rank) == 0) bit <<= 1;
  if (rank == 0) {
    if (nodes > 1) t.children.push_back(bit >> 1);
    return t;
  }
  t.parent = (rank ^ bit) | (bit << 1);
  if (t.parent >= nodes) t.parent = rank ^ bit;
  int half = bit >> 1;
  if (half == 0) return t;  // a leaf
  t.children.push_back(rank - half);
  int right = rank + half;
  while (right >= nodes && half > 0) {
    half >>= 1;
    right = half > 0 ? rank + half : -1;
  }
  if (right >= 0) t.children.push_back(right);
  return t;
}

TreeNode DoubleTreeSecondNode(int nodes, int rank) {
  // Even node counts mirror tree 0 (r -> n-1-r); odd ones shift it by one.
  const bool mirror = nodes % 2 == 0;
  auto to_first = [&](int r) { return mirror ? nodes - 1 - r : (r - 1 + nodes) % nodes; };
  auto from_first = [&](int r) { return mirror ? nodes - 1 - r : (r + 1) % nodes; };
  const TreeNode first = BinaryTreeNode(nodes, to_first(rank));
  TreeNode t;
  t.parent = first.parent < 0 ? -1 : from_first(first.parent);
  for (int c : first.children) t.children.push_back(from_first(c));
  return t;
}

namespace {

struct Send {
  int64_t ready_ns;
  uint64_t seq;    // ties: the order in which they became ready
  int from, to, channel;
  int64_t chunk;   // index within the channel
  bool down;
  size_t conn;     // the connection's index (ConnectionIndex)
  bool operator>(const Send& o) const { return std::tie(ready_ns, seq) > std::tie(o.ready_ns, o.seq); }
};

// A node's connections per channel: slot 0 to its parent, 1 and 2 to its children.
constexpr int kSlotsPerNode = 3;

size_t ConnectionIndex(int nodes, int channel, int from, int slot) {
  return (static_cast<size_t>(channel) * nodes + from) * kSlotsPerNode + slot;
}

}  // namespace

std::optional<StreamShape> StreamOf(const TreeArrivals& a, Nanoseconds latency) {
  if (a.received <= a.first_bytes || a.last <= a.first) return std::nullopt;
  const uint64_t rest_bits = (a.received.count() - a.first_bytes.count()) * 8;
  const int64_t span = (a.last - a.first).count();
  StreamShape s;
  s.rate = BitsPerSecond(static_cast<uint64_t>(static_cast<double>(rest_bits) * 1e9 / static_cast<double>(span)));
  if (s.rate.count() == 0) return std::nullopt;
  s.ready_offset = a.first - latency - TransferTime(a.first_bytes, s.rate);
  return s;
}

std::optional<TreeArrivals> PlayTreeAllReduce(const TreeAllReduce& op, int rank, int64_t max_messages) {
  const int n = op.nodes;
  if (n < 2 || rank < 0 || rank >= n || op.channels < 1 || op.chunk.count() == 0 || op.link.count() == 0 ||
      op.bytes.count() == 0)
    return std::nullopt;
  const uint64_t per_channel = (op.bytes.count() + op.channels - 1) / op.channels;
  const int64_t chunks = static_cast<int64_t>((per_channel + op.chunk.count() - 1) / op.chunk.count());
  // Each chunk crosses every tree edge twice (up and down): 2 (n - 1) messages.
  if (chunks * op.channels * 2 * (n - 1) > max_messages) return std::nullopt;
  auto chunk_bytes = [&](int64_t k) {
    const uint64_t start = static_cast<uint64_t>(k) * op.chunk.count();
    return Bytes(std::min<uint64_t>(op.chunk.count(), per_channel - start));
  };
  // The first half of the channels runs tree 0, the rest tree 1.
  const int tree0_channels = std::max(1, op.channels / 2);
  std::vector<TreeNode> trees[2];
  for (int r = 0; r < n; ++r) {
    trees[0].push_back(BinaryTreeNode(n, r));
    trees[1].push_back(DoubleTreeSecondNode(n, r));
  }
  auto tree_of = [&](int channel) -> const std::vector<TreeNode>& { return trees[channel < tree0_channels ? 0 : 1]; };

  std::priority_queue<Send, std::vector<Send>, std::greater<Send>> ready;
  uint64_t seq = 0;
  // Per connection and chunk: when its send left the NIC, and (held back by
  // the connection's window) when its data was ready; -1: not yet.
  const size_t conns = ConnectionIndex(n, op.channels, 0, 0);
  const int64_t window = op.send_window;
  std::vector<int64_t> sent(window > 0 ? conns * chunks : 0, -1), held(sent.size(), -1);
  auto post = [&](int64_t at, int from, int to, int channel, int64_t k, bool down) {
    const std::vector<int>& kids = tree_of(channel)[from].children;
    const int slot = down ? 1 + static_cast<int>(std::find(kids.begin(), kids.end(), to) - kids.begin()) : 0;
    const size_t conn = ConnectionIndex(n, channel, from, slot);
    if (window > 0 && k >= window) {
      const int64_t slot_free = sent[conn * chunks + k - window];
      if (slot_free < 0) {
        held[conn * chunks + k] = at;  // posted when send k - window leaves
        return;
      }
      at = std::max(at, slot_free);
    }
    ready.push(Send{at, seq++, from, to, channel, k, down, conn});
  };
  for (int c = 0; c < op.channels; ++c)
    for (int r = 0; r < n; ++r)
      if (tree_of(c)[r].children.empty())
        for (int64_t k = 0; k < chunks; ++k) post(0, r, tree_of(c)[r].parent, c, k, false);

  std::vector<int64_t> nic_free(n, 0);
  std::vector<uint8_t> ups(static_cast<size_t>(op.channels) * n * chunks, 0);  // children's chunks arrived
  TreeArrivals out;
  int64_t first = -1, last = 0, last_send = 0, last_anywhere = 0;
  while (!ready.empty()) {
    const Send s = ready.top();
    ready.pop();
    const Bytes size = chunk_bytes(s.chunk);
    const int64_t start = std::max(s.ready_ns, nic_free[s.from]);
    const int64_t done = start + TransferTime(size, op.link).count();
    nic_free[s.from] = done;
    if (window > 0) {
      sent[s.conn * chunks + s.chunk] = done;
      const int64_t next = s.chunk + window;
      if (next < chunks && held[s.conn * chunks + next] >= 0)
        ready.push(Send{std::max(held[s.conn * chunks + next], done), seq++, s.from, s.to, s.channel, next, s.down,
                        s.conn});
    }
    const int64_t arrive = done + op.latency.count();
    last_anywhere = std::max(last_anywhere, arrive);
    if (s.from == rank) last_send = std::max(last_send, done);
    if (s.to == rank) {
      if (first < 0 || arrive < first) {
        first = arrive;
        out.first_bytes = size;
      }
      last = std::max(last, arrive);
      out.received += size;
    }
    const TreeNode& at = tree_of(s.channel)[s.to];
    if (s.down) {
      for (int child : at.children) post(arrive, s.to, child, s.channel, s.chunk, true);
      continue;
    }
    uint8_t& got = ups[(static_cast<size_t>(s.channel) * n + s.to) * chunks + s.chunk];
    if (++got < at.children.size()) continue;
    if (at.parent >= 0) {
      post(arrive, s.to, at.parent, s.channel, s.chunk, false);
    } else {
      for (int child : at.children) post(arrive, s.to, child, s.channel, s.chunk, true);
    }
  }
  out.first = Nanoseconds(std::max<int64_t>(first, 0));
  out.last = Nanoseconds(last);
  out.end = Nanoseconds(std::max(last, last_send));
  out.operation_end = Nanoseconds(last_anywhere);
  return out;
}

}  // namespace prism::engine
