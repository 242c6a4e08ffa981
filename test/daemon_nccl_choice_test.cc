// NCCL's own algorithm choice (nccl_algorithm.h) and the PAT play
// (pat_play.h): NCCL 2.28.9's predicted times worked by hand for the
// FSDP-like all-gather at 8192 ranks, the choices it implies, NCCL_ALGO and
// NCCL_PROTO, and PAT times in closed form.
#include <catch2/catch.hpp>

#include "daemon/engine/nccl_algorithm.h"
#include "daemon/engine/network_model.h"
#include "daemon/engine/pat_play.h"
#include "daemon/engine/simulation.h"
#include "test/daemon_test_graphs.h"

namespace {

using prism::BitsPerSecond;
using prism::Bytes;
using prism::Nanoseconds;
using prism::engine::ChooseNcclAlgorithm;
using prism::engine::CommShape;
using prism::engine::LinkFigures;
using prism::engine::NcclAllowed;
using prism::engine::NcclBehaviour;
using prism::engine::NcclProtocol;
using prism::engine::NcclTopologyOf;
using prism::engine::NetworkModel;
using prism::engine::PatOperation;
using prism::engine::PlayPat;
namespace graph = prism::graph;

// Nodes of one GPU and one NIC: the FSDP-like job's cluster (100 Gbit/s, 5 us).
LinkFigures OneGpuNodes(uint64_t nic_bps, int64_t latency_ns) {
  LinkFigures l;
  l.intra_bw = BitsPerSecond(900'000'000'000ull * 8);
  l.intra_latency = Nanoseconds(1000);
  l.nic_bw = BitsPerSecond(nic_bps);
  l.nic_count = 1;
  l.gpus_per_node = 1;
  l.nic_latency = Nanoseconds(latency_ns);
  return l;
}

// Nodes of 8 GPUs (NVLink) and 8 NICs of 400 Gbit/s.
LinkFigures EightGpuNodes() {
  LinkFigures l;
  l.intra_bw = BitsPerSecond(450ull * 8'000'000'000);
  l.intra_latency = Nanoseconds(1000);
  l.nic_bw = BitsPerSecond(400'000'000'000);
  l.nic_count = 8;
  l.gpus_per_node = 8;
  l.nic_latency = Nanoseconds(5000);
  return l;
}

CommShape Spread(uint32_t ranks) { return CommShape{ranks, ranks, 1, 1}; }

}  // namespace

TEST_CASE("NCCL's tuning, worked by hand: the 8192-rank all-gather picks PAT", "[daemon][nccl_choice]") {
  // 100 Gbit/s = 12,500 MB/s per NIC: NCCL's search settles on 12 GB/s, one
  // channel. 64 MiB all-gather, n = N = 8192 (one GPU per node), D = 13.
  const prism::engine::NcclTopology t = NcclTopologyOf(OneGpuNodes(100'000'000'000, 5000), Spread(8192));
  CHECK(t.channels == 1);
  CHECK(t.speed_mbps == 12'000);
  CHECK(t.comm_channels == 2);
  const Bytes s(64ull << 20);
  // PAT: lat = 8 us + 13 * 14 us / 3.5 + 8192 * 2.8 us = 22,997,600 ns;
  // bw = 12 GB/s * 0.75 = 9 GB/s: 67,108,864 B / 9000 B/us = 7,456,540 ns.
  CHECK(prism::engine::NcclPredictedTime(graph::ALLGATHER, graph::ALGORITHM_PAT, NcclProtocol::kSimple, s, t) ==
        Nanoseconds(22'997'600 + 7'456'540));
  // Ring Simple: 8.4 us + 8191 steps * 14 us (the tree's network latency,
  // one GPU per node) = 114,682,400 ns; bw = 12 GB/s * 8192 / 8191.
  CHECK(prism::engine::NcclPredictedTime(graph::ALLGATHER, graph::ALGORITHM_RING, NcclProtocol::kSimple, s, t) ==
        Nanoseconds(114'682'400 + 5'591'722));
  // PAT is Simple only and has no all-reduce; the tree no all-gather.
  CHECK(!prism::engine::NcclPredictedTime(graph::ALLGATHER, graph::ALGORITHM_PAT, NcclProtocol::kLL, s, t));
  CHECK(!prism::engine::NcclPredictedTime(graph::ALLREDUCE, graph::ALGORITHM_PAT, NcclProtocol::kSimple, s, t));
  CHECK(!prism::engine::NcclPredictedTime(graph::ALLGATHER, graph::ALGORITHM_TREE, NcclProtocol::kSimple, s, t));
  const prism::engine::NcclChoice c = ChooseNcclAlgorithm(graph::ALLGATHER, s, t, NcclAllowed());
  CHECK(c.algorithm == graph::ALGORITHM_PAT);
  CHECK(c.protocol == NcclProtocol::kSimple);
  CHECK(c.predicted == Nanoseconds(30'454'140));
  CHECK(ChooseNcclAlgorithm(graph::REDUCESCATTER, s, t, NcclAllowed()).algorithm == graph::ALGORITHM_PAT);
  // NCCL_ALGO=Ring (or ^PAT) leaves the ring; its cheapest protocol is LL here.
  NcclAllowed ring;
  ring.tree = ring.pat = false;
  const prism::engine::NcclChoice r = ChooseNcclAlgorithm(graph::ALLGATHER, s, t, ring);
  CHECK(r.algorithm == graph::ALGORITHM_RING);
  CHECK(r.protocol == NcclProtocol::kLL);
  auto simple = prism::engine::ParseNcclProto("Simple", ring);
  REQUIRE(simple.ok());
  CHECK(ChooseNcclAlgorithm(graph::ALLGATHER, s, t, *simple).protocol == NcclProtocol::kSimple);
}

TEST_CASE("NCCL's choice: PAT only with one GPU per node, trees for small all-reduces across nodes",
          "[daemon][nccl_choice]") {
  const LinkFigures eight = EightGpuNodes();
  // 1024 ranks on 128 nodes of 8: PAT is off (NCCL's ncclPatEnable), the ring stays.
  const CommShape dense{1024, 128, 8, 8};
  const prism::engine::NcclTopology t = NcclTopologyOf(eight, dense);
  CHECK(t.channels == 8);
  CHECK(t.speed_mbps == 48'000);
  CHECK(ChooseNcclAlgorithm(graph::ALLGATHER, Bytes(64ull << 20), t, NcclAllowed()).algorithm ==
        graph::ALGORITHM_RING);
  // A 4-byte all-reduce over them: the tree (latency 2 log2(N) hops, not 2(N-1)).
  CHECK(ChooseNcclAlgorithm(graph::ALLREDUCE, Bytes(4), t, NcclAllowed()).algorithm == graph::ALGORITHM_TREE);
  // 1 GiB over 2 nodes of 8: the ring's bandwidth wins.
  const CommShape two{16, 2, 8, 8};
  CHECK(ChooseNcclAlgorithm(graph::ALLREDUCE, Bytes(1ull << 30), NcclTopologyOf(eight, two), NcclAllowed())
            .algorithm == graph::ALGORITHM_RING);
  // Broadcast has the ring only; NCCL_ALGO=Tree leaves it nothing: the ring, Simple.
  NcclAllowed tree_only;
  tree_only.ring = tree_only.pat = false;
  const prism::engine::NcclChoice b = ChooseNcclAlgorithm(graph::BROADCAST, Bytes(1 << 20), t, tree_only);
  CHECK(b.algorithm == graph::ALGORITHM_RING);
  CHECK(b.protocol == NcclProtocol::kSimple);
}

TEST_CASE("NCCL_PROTO is parsed as NCCL reads it", "[daemon][nccl_choice]") {
  auto p = prism::engine::ParseNcclProto("");
  REQUIRE(p.ok());
  CHECK((p->ll && p->ll128 && p->simple));
  p = prism::engine::ParseNcclProto("^LL128");
  REQUIRE(p.ok());
  CHECK((p->ll && !p->ll128 && p->simple));
  p = prism::engine::ParseNcclProto("simple");
  REQUIRE(p.ok());
  CHECK((!p->ll && !p->ll128 && p->simple));
  auto bad = prism::engine::ParseNcclProto("LL256");
  REQUIRE(!bad.ok());
  CHECK(bad.status().message().find("unknown protocol \"LL256\"") != std::string::npos);
  CHECK(!prism::engine::ParseNcclProto("^LL,LL128,Simple").ok());
}

TEST_CASE("the PAT play in closed form", "[daemon][pat]") {
  // 64 KiB pieces (NCCL's smallest chunk, one message each) at 8 Gbit/s:
  // w = 65,536 ns per piece, one channel.
  const int64_t w = 65'536;
  PatOperation op;
  op.channels = 1;
  op.bandwidth = BitsPerSecond(8'000'000'000);
  for (graph::CollectiveKind kind : {graph::ALLGATHER, graph::REDUCESCATTER}) {
    op.kind = kind;
    // Two ranks: one message, w + l.
    op.ranks = 2;
    op.bytes = Bytes(2 * 65'536);
    op.step_latency = Nanoseconds(10'000);
    CHECK(PlayPat(op) == Nanoseconds(w + 10'000));
    // Four ranks, three messages, the third waiting for the first's twin:
    // max(3w, 2w + l) + l, bandwidth-bound (l = 10 us) and latency-bound (100 us).
    op.ranks = 4;
    op.bytes = Bytes(4 * 65'536);
    CHECK(PlayPat(op) == Nanoseconds(3 * w + 10'000));
    op.step_latency = Nanoseconds(100'000);
    CHECK(PlayPat(op) == Nanoseconds(2 * w + 2 * 100'000));
  }
}

TEST_CASE("the PAT play: pieces aggregated per dimension, loops back to back", "[daemon][pat]") {
  PatOperation op;
  op.channels = 1;
  op.bandwidth = BitsPerSecond(8'000'000'000);
  op.step_latency = Nanoseconds(20'000);
  for (graph::CollectiveKind kind : {graph::ALLGATHER, graph::REDUCESCATTER}) {
    op.kind = kind;
    // 8 ranks, 1 KiB pieces: NCCL packs 4 per message, so each dimension
    // sends one message (4, 2 and 1 pieces), each waiting for the one before:
    // W + D * l = 7 * 1024 ns + 3 * 20 us.
    op.ranks = 8;
    op.bytes = Bytes(8 * 1024);
    const prism::engine::PatCut cut = prism::engine::CutPat(op);
    CHECK(cut.per_message == 4);
    CHECK(cut.group_spacing == 2);
    CHECK(PlayPat(op) == Nanoseconds(7 * 1024 + 3 * 20'000));
    // 2 ranks, 8 MiB: all-gather 256 KiB chunks (512 KiB * 32 > 8 MiB), 16
    // loops; reduce-scatter 512 KiB chunks (* 16), 8 loops; one message each,
    // back to back: W + l.
    op.ranks = 2;
    op.bytes = Bytes(8ull << 20);
    CHECK(prism::engine::CutPat(op).loops == (kind == graph::ALLGATHER ? 16u : 8u));
    CHECK(PlayPat(op) == Nanoseconds((4ll << 20) + 20'000));
  }
}

TEST_CASE("the model plays PAT where NCCL picks it, the ring where it may not", "[daemon][pat][nccl_choice]") {
  const LinkFigures links = OneGpuNodes(100'000'000'000, 5000);
  NcclBehaviour nccl;
  nccl.step_cost = Nanoseconds(12'500);
  const NetworkModel model(links, nccl);
  const Bytes s(64ull << 20);
  CHECK(model.Choose(graph::ALLGATHER, s, Spread(8192)) == graph::ALGORITHM_PAT);
  const Nanoseconds pat = model.CollectiveTime(graph::ALLGATHER, graph::ALGORITHM_DEFAULT, s, Spread(8192));
  const Nanoseconds ring = model.CollectiveTime(graph::ALLGATHER, graph::ALGORITHM_RING, s, Spread(8192));
  // The wire time is the ring's; PAT pays its step latency ~log2(n) times, the ring 8191 times.
  const Nanoseconds wire = model.RingWireTime(graph::ALLGATHER, s, Spread(8192));
  CHECK(pat > wire);
  CHECK(pat < wire + Nanoseconds(2'000'000));
  CHECK(ring > Nanoseconds(100'000'000));
  // Two ranks per node: NCCL has no PAT; a graph forcing it gets the ring.
  const CommShape paired{16, 8, 2, 2};
  CHECK(model.CollectiveTime(graph::ALLGATHER, graph::ALGORITHM_PAT, s, paired) ==
        model.CollectiveTime(graph::ALLGATHER, graph::ALGORITHM_RING, s, paired));
  // NCCL_ALGO=^PAT, or the model's own choice: the ring.
  NcclBehaviour no_pat = nccl;
  no_pat.pat = false;
  CHECK(NetworkModel(links, no_pat).Choose(graph::ALLGATHER, s, Spread(8192)) == graph::ALGORITHM_RING);
  NcclBehaviour own = nccl;
  own.nccl_choice = false;
  CHECK(NetworkModel(links, own).Choose(graph::ALLGATHER, s, Spread(8192)) == graph::ALGORITHM_RING);
}

// Where the model charges NCCL's step cost it plays NCCL's PAT kernel in
// its own order (common/pat_kernel.h), each hop at L + c + D * 2.5 us;
// where it does not, the links' own bound with L alone. 16 one-GPU nodes,
// 1 MiB at 2.5 Gbit/s + 10 us (the sweep-n16-pat-2g5 point where the
// truth took 3334.0 us; the links' play with L + c gave 3213.2).
TEST_CASE("the model plays NCCL's PAT kernel where it charges NCCL's step cost", "[daemon][pat]") {
  const LinkFigures links = OneGpuNodes(2'500'000'000, 10'000);
  const Bytes s(1ull << 20);
  PatOperation op;
  op.kind = graph::ALLGATHER;
  op.ranks = 16;
  op.bytes = s;
  op.channels = 2;
  op.bandwidth = BitsPerSecond(2'500'000'000);
  NcclBehaviour nccl;
  nccl.step_cost = Nanoseconds(12'500);
  op.step_latency = Nanoseconds(10'000 + 12'500 + 4 * 2'500);
  const Nanoseconds with_cost = NetworkModel(links, nccl).CollectiveTime(graph::ALLGATHER, graph::ALGORITHM_PAT, s,
                                                                         Spread(16));
  CHECK(with_cost == prism::engine::PlayPatKernelOf(op));
  CHECK(with_cost.count() == 3'275'233);  // the truth's 3334.0 us: -1.8%
  nccl.step_cost = Nanoseconds(0);
  op.step_latency = Nanoseconds(10'000);
  CHECK(NetworkModel(links, nccl).CollectiveTime(graph::ALLGATHER, graph::ALGORITHM_PAT, s, Spread(16)) == PlayPat(op));
}

TEST_CASE("a simulation plays what NCCL picks and the report says so", "[daemon][nccl_choice][pat]") {
  // The FSDP-like world all-gather: 64 MiB over 8192 one-GPU nodes, 100 Gbit/s + 5 us.
  prism::testing::ClusterSpec cluster;
  cluster.gpus_per_node = 1;
  cluster.nics_per_node = 1;
  cluster.nic_bps = 100'000'000'000;
  const graph::Graph g =
      prism::testing::CollectiveGraph(8192, graph::ALLGATHER, 64ull << 20, graph::ALGORITHM_DEFAULT, 1, 0, cluster);
  prism::engine::SimulationOptions o;
  o.nccl.step_cost = Nanoseconds(12'500);
  auto pat = prism::engine::Simulate(g, o);
  REQUIRE(pat.ok());
  REQUIRE(pat->report.algorithms.size() == 1);
  const prism::engine::AlgorithmRow& row = pat->report.algorithms[0];
  CHECK(row.kind == "allgather");
  CHECK(row.algorithm == "PAT");
  CHECK(row.protocol == "Simple");
  CHECK(!row.forced);
  CHECK(row.calls == 8192);
  CHECK(pat->report.algorithm_choice == "NCCL 2.28.9's tuning");
  CHECK(pat->report.ToText().find("allgather      PAT      Simple") != std::string::npos);
  // NCCL_ALGO=Ring: the ring, 8191 steps of L + c.
  o.nccl.tree = o.nccl.pat = false;
  auto ring = prism::engine::Simulate(g, o);
  REQUIRE(ring.ok());
  CHECK(ring->report.algorithms[0].algorithm == "Ring");
  // PAT as NCCL's kernel runs it: 7.03 ms (docs/network-model.md, "PAT's kernel").
  CHECK(pat->report.mean_iteration > Nanoseconds(6'900'000));
  CHECK(pat->report.mean_iteration < Nanoseconds(7'200'000));
  CHECK(ring->report.mean_iteration > Nanoseconds(100'000'000));
}

TEST_CASE("NCCL's choice matches what NCCL 2.28.9 ran on the GPU host", "[daemon][nccl_choice]") {
  // bench/fidelity sweep-n4-nccl, -nccl-small, -nccl-2g5 with NCCL_CHOOSES=1
  // (docs/timing.md, "Measured"): 4 ranks, each its own host, the plugin's
  // NIC at the link's speed with no PCI path (so NCCL left LL128 off).
  // At 10 Gbit/s NCCL ran RING/LL for the 64 KiB all-reduce and RING/SIMPLE
  // for everything else, 64 KiB to 1 GiB; at 2.5 Gbit/s RING/SIMPLE at every
  // size: never the tree, never PAT.
  for (uint64_t gbps : {10, 2}) {
    const uint64_t bps = gbps == 10 ? 10'000'000'000ull : 2'500'000'000ull;
    prism::engine::NcclTopology t = NcclTopologyOf(OneGpuNodes(bps, 10'000), Spread(4));
    t.ll128 = false;
    for (uint64_t size = 64 << 10; size <= (1ull << 30); size *= 4)
      for (graph::CollectiveKind kind : {graph::ALLREDUCE, graph::ALLGATHER, graph::REDUCESCATTER}) {
        INFO(gbps << " Gbit/s, kind " << kind << ", " << size << " bytes");
        const prism::engine::NcclChoice c = ChooseNcclAlgorithm(kind, Bytes(size), t, NcclAllowed());
        CHECK(c.algorithm == graph::ALGORITHM_RING);
        const bool ll = gbps == 10 && kind == graph::ALLREDUCE && size == (64 << 10);
        CHECK(c.protocol == (ll ? NcclProtocol::kLL : NcclProtocol::kSimple));
      }
  }
}

TEST_CASE("the PAT play sends as many messages per dimension as NCCL's proxy counts", "[daemon][pat]") {
  // NCCL v2.28.9-1's proxy runs PAT's schedule to count each dimension's
  // steps (src/proxy.cc); these are the counts it gives (per channel).
  struct Case {
    graph::CollectiveKind kind;
    uint32_t ranks;
    uint64_t bytes;   // the operation's, over 2 channels
    std::vector<uint64_t> per_dim;
  };
  const std::vector<Case> cases = {
      // 8192 ranks, 64 MiB: 4 KiB pieces, 512 KiB chunks, 128 pieces a message.
      {graph::ALLGATHER, 8192, 64ull << 20, {32, 16, 8, 4, 2, 1, 1, 1, 1, 1, 1, 1, 1}},
      {graph::REDUCESCATTER, 8192, 64ull << 20, {32, 16, 8, 4, 2, 1, 1, 1, 1, 1, 1, 1, 1}},
      // 1024 ranks, 8 MiB: 4 KiB pieces, 128 KiB chunks (all-gather), 32 a message.
      {graph::ALLGATHER, 1024, 8ull << 20, {16, 8, 4, 2, 1, 1, 1, 1, 1, 1}},
      // 8 ranks, 64 MiB: 4 MiB pieces in 8 loops of 512 KiB.
      {graph::ALLGATHER, 8, 64ull << 20, {32, 16, 8}},
      // 16 ranks, 2 MiB: 64 KiB pieces, 64 KiB chunks (reduce-scatter), one a message.
      {graph::REDUCESCATTER, 16, 2ull << 20, {8, 4, 2, 1}},
  };
  for (const Case& c : cases) {
    PatOperation op;
    op.kind = c.kind;
    op.ranks = c.ranks;
    op.bytes = Bytes(c.bytes);
    op.channels = 2;
    op.bandwidth = BitsPerSecond(100'000'000'000);
    INFO(c.ranks << " ranks, " << c.bytes << " bytes, kind " << c.kind);
    CHECK(prism::engine::PatMessagesPerDimension(op) == c.per_dim);
  }
}
