// daemon/engine/tree_pipeline.h: NCCL's double binary tree and its chunk
// pipeline, against the trees NCCL builds and hand-worked timings.
#include <catch2/catch.hpp>

#include "daemon/engine/tree_pipeline.h"
#include "plugin/arrival.h"

namespace {

using prism::BitsPerSecond;
using prism::Bytes;
using prism::Nanoseconds;
using prism::engine::BinaryTreeNode;
using prism::engine::DoubleTreeSecondNode;
using prism::engine::PlayTreeAllReduce;
using prism::engine::TreeAllReduce;

std::vector<int> Kids(const prism::engine::TreeNode& t) { return t.children; }

}  // namespace

TEST_CASE("tree pipeline: NCCL's two trees over 8 and 7 nodes", "[hybrid][tree]") {
  // Tree 0 over 8: 0 -> 4 -> {2, 6}, 2 -> {1, 3}, 6 -> {5, 7}.
  CHECK(BinaryTreeNode(8, 0).parent == -1);
  CHECK(Kids(BinaryTreeNode(8, 0)) == std::vector<int>{4});
  CHECK(BinaryTreeNode(8, 4).parent == 0);
  CHECK(Kids(BinaryTreeNode(8, 4)) == std::vector<int>{2, 6});
  CHECK(Kids(BinaryTreeNode(8, 6)) == std::vector<int>{5, 7});
  CHECK(BinaryTreeNode(8, 7).parent == 6);
  CHECK(Kids(BinaryTreeNode(8, 7)).empty());
  // Tree 1 over an even count mirrors tree 0: 7 is its root, 0 a leaf under 1.
  CHECK(DoubleTreeSecondNode(8, 7).parent == -1);
  CHECK(Kids(DoubleTreeSecondNode(8, 7)) == std::vector<int>{3});
  CHECK(DoubleTreeSecondNode(8, 0).parent == 1);
  CHECK(Kids(DoubleTreeSecondNode(8, 0)).empty());
  // Over 7: node 6's right child would be 7 (outside): it takes 5 only;
  // tree 1 shifts by one, so node 1 is its root.
  CHECK(Kids(BinaryTreeNode(7, 6)) == std::vector<int>{5});
  CHECK(Kids(BinaryTreeNode(7, 4)) == std::vector<int>{2, 6});
  CHECK(DoubleTreeSecondNode(7, 1).parent == -1);
  CHECK(Kids(DoubleTreeSecondNode(7, 1)) == std::vector<int>{5});
  // Every node but the roots has exactly one parent that lists it.
  for (int n : {2, 3, 5, 8, 12, 16, 31}) {
    for (int tree = 0; tree < 2; ++tree) {
      int roots = 0;
      for (int r = 0; r < n; ++r) {
        const auto node = tree == 0 ? BinaryTreeNode(n, r) : DoubleTreeSecondNode(n, r);
        if (node.parent < 0) {
          ++roots;
          continue;
        }
        const auto p = tree == 0 ? BinaryTreeNode(n, node.parent) : DoubleTreeSecondNode(n, node.parent);
        INFO("n " << n << " tree " << tree << " rank " << r);
        CHECK(std::count(p.children.begin(), p.children.end(), r) == 1);
      }
      CHECK(roots == 1);
    }
  }
}

TEST_CASE("tree pipeline: two nodes, one chunk, worked by hand", "[hybrid][tree]") {
  // 2 nodes, 1 channel, 1 chunk of 1 MB at 8 Gbit/s (1 ms), 10 us hops.
  // Node 1 (leaf) sends up: 0..1 ms, arrives 1.01; the root sends it down:
  // 1.01..2.01, arrives 2.02.
  TreeAllReduce op{2, 1, Bytes(1'000'000), Bytes(1'000'000), BitsPerSecond(8'000'000'000), Nanoseconds(10'000)};
  const auto root = PlayTreeAllReduce(op, 0);
  REQUIRE(root.has_value());
  CHECK(root->first.count() == 1'010'000);
  CHECK(root->last.count() == 1'010'000);
  CHECK(root->received.count() == 1'000'000);
  CHECK(root->end.count() == 2'010'000);  // its own send down ends then
  const auto leaf = PlayTreeAllReduce(op, 1);
  REQUIRE(leaf.has_value());
  CHECK(leaf->first.count() == 2'020'000);
  CHECK(leaf->end.count() == 2'020'000);
}

TEST_CASE("tree pipeline: eight nodes take the busiest NIC's 2 S / B plus a fill", "[hybrid][tree]") {
  // 16 MiB over 2 channels of 512 KiB chunks at 10 Gbit/s, 10 us hops:
  // interior nodes send every chunk three times in their tree and once in
  // the other, so 2 S / B = 26.84 ms bounds it; rank 0 (root of tree 0 with
  // one child, a leaf in tree 1) receives S in all.
  TreeAllReduce op{8, 2, Bytes(16 << 20), Bytes(512 << 10), BitsPerSecond(10'000'000'000), Nanoseconds(10'000)};
  const auto r0 = PlayTreeAllReduce(op, 0);
  REQUIRE(r0.has_value());
  CHECK(r0->received.count() == 16u << 20);
  const int64_t two_s_over_b = 26'843'546;
  CHECK(r0->end.count() > two_s_over_b);
  // Each connection holds NCCL_STEPS (8) chunks, so a node's leaf sends in
  // one tree share its NIC with what it forwards in the other: 27702.4 us,
  // from the same play written in Python while reading NCCL's trees (GPU
  // host truths at 10 Gbit/s: 27471-28051 us). With the window unbounded,
  // a leaf queues all its chunks first and the fill is 3 chunk times
  // (419.4 us each) and 3 hops: 28131.8 us.
  CHECK(r0->end.count() == Approx(27'702'400).margin(1'000));
  TreeAllReduce unbounded = op;
  unbounded.send_window = 0;
  CHECK(PlayTreeAllReduce(unbounded, 0)->end.count() == Approx(28'131'800).margin(1'000));
  // Too large to play: no answer rather than a long stall.
  CHECK_FALSE(PlayTreeAllReduce(op, 0, /*max_messages=*/100).has_value());
  CHECK_FALSE(PlayTreeAllReduce(op, 8).has_value());
}

TEST_CASE("tree pipeline: the play holds the GPU host's tree truths within 2%", "[hybrid][tree]") {
  // NCCL_ALGO=Tree ground truths (bench/fidelity sweep-n8-tree-2g5 and
  // sweep-n16-tree-2g5: every rank its own host, 2.5 Gbit/s + 10 us links,
  // 2 channels; rank 0's median, 2026-12-01). An unbounded send window puts
  // the play 2.9% over the 8-node 16 MiB truth.
  struct Truth {
    int nodes;
    uint64_t bytes;
    double us;
  };
  for (const Truth t : {Truth{8, 16u << 20, 109289.2}, Truth{8, 64u << 20, 431450.6}, Truth{16, 16u << 20, 114806.3},
                        Truth{16, 64u << 20, 434819.3}}) {
    TreeAllReduce op{t.nodes, 2, Bytes(t.bytes), Bytes(512 << 10), BitsPerSecond(2'500'000'000), Nanoseconds(10'000)};
    const auto a = PlayTreeAllReduce(op, 0);
    REQUIRE(a.has_value());
    INFO(t.nodes << " nodes, " << (t.bytes >> 20) << " MiB: played " << a->end.count() / 1e3 << " us");
    CHECK(a->end.count() / 1e3 == Approx(t.us).epsilon(0.02));
  }
}

TEST_CASE("tree pipeline: the plugin's STREAM rule, fed the derived stream, lands the first and last messages "
          "where the tree does", "[hybrid][tree]") {
  for (int rank : {0, 3, 4, 7}) {
    TreeAllReduce op{8, 2, Bytes(16 << 20), Bytes(512 << 10), BitsPerSecond(10'000'000'000), Nanoseconds(10'000)};
    const auto a = PlayTreeAllReduce(op, rank);
    REQUIRE(a.has_value());
    const auto s = prism::engine::StreamOf(*a, op.latency);
    REQUIRE(s.has_value());
    INFO("rank " << rank << " rate " << s->rate.count() << " offset " << s->ready_offset.count());
    // The virtual side is ready at 1 s; the real rank posts every receive early.
    const Nanoseconds ready(1'000'000'000);
    prism::plugin::ArrivalInput in;
    in.form = prism::plugin::ArrivalForm::kStream;
    in.ready = ready + s->ready_offset;
    in.link = prism::plugin::VirtualLink{s->rate, op.latency};
    Nanoseconds wire_end(0), first(0), last(0);
    for (uint64_t got = 0; got < a->received.count(); got += op.chunk.count()) {
      in.bytes = Bytes(std::min<uint64_t>(op.chunk.count(), a->received.count() - got));
      const auto r = prism::plugin::ResolveArrival(in, wire_end);
      wire_end = r.wire_end;
      if (got == 0) first = r.done;
      last = r.done;
    }
    CHECK((first - ready).count() == Approx(a->first.count()).margin(2));
    CHECK((last - ready).count() == Approx(a->last.count()).margin(a->last.count() * 1e-6 + 2));
  }
  // A single arrival time gives no rate.
  prism::engine::TreeArrivals one;
  one.first = one.last = Nanoseconds(5);
  one.received = one.first_bytes = Bytes(10);
  CHECK_FALSE(prism::engine::StreamOf(one, Nanoseconds(1)).has_value());
}
