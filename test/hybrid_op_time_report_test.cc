// A real rank's collectives against the model at a hybrid run's end
// (daemon/hybrid/op_time_report.h): groups of alike operations, their median
// from first send to end, the model's time, and what each added to an
// iteration, the most first.
#include <catch2/catch.hpp>

#include <cstdlib>
#include <string>
#include <vector>

#include "daemon/engine/network_model.h"
#include "daemon/hybrid/op_time_report.h"

namespace {

using prism::Bytes;
using prism::Nanoseconds;
using prism::daemon::RingOpTiming;
namespace engine = prism::engine;
namespace graph = prism::graph;

engine::NetworkModel Model() {
  engine::LinkFigures links;
  links.nic_bw = prism::BitsPerSecond(10'000'000'000ull);
  links.nic_latency = Nanoseconds(10'000);
  links.intra_bw = prism::BitsPerSecond(3'600'000'000'000ull);
  links.intra_latency = Nanoseconds(1'000);
  links.nic_count = 8;
  links.gpus_per_node = 8;
  return engine::NetworkModel(links);
}

RingOpTiming Op(graph::CollectiveKind kind, uint64_t bytes, engine::CommShape shape, int64_t start_us,
                int64_t duration_us) {
  RingOpTiming op;
  op.kind = kind;
  op.collective = true;
  op.algorithm = "RING";
  op.protocol = "SIMPLE";
  op.shape = shape;
  op.bytes = Bytes(bytes);
  const int64_t t0_us = 1'000'000;  // CLOCK_REALTIME in a run; 0 means "sent nothing"
  op.first_send = Nanoseconds((t0_us + start_us) * 1000);
  op.end = Nanoseconds((t0_us + start_us + duration_us) * 1000);
  return op;
}

}  // namespace

TEST_CASE("op times: alike ring collectives grouped, against the model, the group that added most first",
          "[op_time][hybrid]") {
  const engine::NetworkModel model = Model();
  const engine::CommShape tp{2, 1, 2, 2};       // a TP pair on one node
  const engine::CommShape dp{16, 16, 1, 1};     // a DP ring across nodes
  const uint64_t tp_bytes = 2 << 20, dp_bytes = 1 << 20;
  const Nanoseconds tp_model = model.CollectiveTime(graph::ALLREDUCE, graph::ALGORITHM_RING, Bytes(tp_bytes), tp);
  const Nanoseconds dp_model = model.CollectiveTime(graph::ALLGATHER, graph::ALGORITHM_RING, Bytes(dp_bytes), dp);
  REQUIRE(tp_model.count() > 0);
  REQUIRE(dp_model.count() > 0);

  std::vector<RingOpTiming> ops;
  // Two iterations: 4 TP all-reduces each, 60 us over the model at the median; one DP all-gather each, 10 us over.
  const int64_t tp_us = tp_model.count() / 1000 + 60, dp_us = dp_model.count() / 1000 + 10;
  for (int i = 0; i < 8; ++i) ops.push_back(Op(graph::ALLREDUCE, tp_bytes, tp, 1000 * i, tp_us + (i % 3) - 1));
  for (int i = 0; i < 2; ++i) ops.push_back(Op(graph::ALLGATHER, dp_bytes, dp, 20'000 * i, dp_us));
  RingOpTiming p2p = Op(graph::ALLREDUCE, tp_bytes, tp, 0, 5000);
  p2p.collective = false;  // a send or receive: no algorithm the model plays
  p2p.algorithm = "";
  ops.push_back(p2p);
  RingOpTiming nvls = Op(graph::ALLREDUCE, tp_bytes, tp, 0, 5000);
  nvls.collective = false;
  nvls.algorithm = "NVLS";  // an algorithm the model does not play
  ops.push_back(nvls);
  RingOpTiming unsent = Op(graph::ALLREDUCE, tp_bytes, tp, 0, 5000);
  unsent.first_send = Nanoseconds(0);  // sent nothing through the plugin
  ops.push_back(unsent);

  const auto groups = prism::daemon::GroupCollectiveOps(ops, model);
  REQUIRE(groups.size() == 2);
  CHECK(groups[0].kind == graph::ALLREDUCE);
  CHECK(groups[0].count == 8);
  CHECK(groups[0].model == tp_model);
  CHECK(groups[0].median.count() / 1000 == tp_us);  // the median of tp_us - 1, tp_us, tp_us + 1
  CHECK(groups[1].kind == graph::ALLGATHER);
  CHECK(groups[1].count == 2);
  // 8 all-reduces over 2 iterations, about 60 us over the model each: about +240 us an iteration.
  CHECK(groups[0].AddedPerIteration(2).count() == (groups[0].median - tp_model).count() * 4);
  CHECK(std::abs(groups[0].AddedPerIteration(2).count() - 240'000) <= 4'000);

  const std::string line = prism::daemon::DescribeOpTimes(groups, 5, 2);
  CHECK(line.find("collectives against the model, rank 5") == 0);
  CHECK(line.find("all-reduce 2.00 MiB on 2 ranks (1 node) x4.0: ") != std::string::npos);
  CHECK(line.find("all-gather 1.00 MiB on 16 ranks (16 nodes) x1.0: ") != std::string::npos);
  CHECK(line.find("all-reduce") < line.find("all-gather"));  // the group that added most first
  CHECK(prism::daemon::DescribeOpTimes(groups, 5, 2, 1).find("(1 more groups)") != std::string::npos);
  CHECK(prism::daemon::DescribeOpTimes({}, 5, 2).empty());
  // A run that completed no iteration of its graph (prismd --follow: the world graph alone) counts the
  // whole run and says so, instead of calling it one iteration.
  const std::string whole = prism::daemon::DescribeOpTimes(groups, 5, 0);
  CHECK(whole.find("no iteration of the graph completed") != std::string::npos);
  CHECK(whole.find("of 1)") == std::string::npos);
  CHECK(whole.find("x8.0: ") != std::string::npos);
}

TEST_CASE("op times: a PAT all-gather and a tree all-reduce against the model's PAT and tree", "[op_time][hybrid]") {
  const engine::NetworkModel model = Model();
  const engine::CommShape world{64, 64, 1, 1};  // one rank per node: PAT and the tree apply
  const uint64_t bytes = 4 << 20;
  const Nanoseconds pat = model.CollectiveTime(graph::ALLGATHER, graph::ALGORITHM_PAT, Bytes(bytes), world);
  const Nanoseconds ring = model.CollectiveTime(graph::ALLGATHER, graph::ALGORITHM_RING, Bytes(bytes), world);
  const Nanoseconds tree = model.CollectiveTime(graph::ALLREDUCE, graph::ALGORITHM_TREE, Bytes(bytes), world);
  REQUIRE(pat != ring);  // else the test could not tell which the group was held against

  RingOpTiming ag = Op(graph::ALLGATHER, bytes, world, 0, pat.count() / 1000 + 500);
  ag.collective = false;  // not a ring: the step-cost fit leaves it out
  ag.algorithm = "PAT";
  RingOpTiming ar = Op(graph::ALLREDUCE, bytes, world, 100'000, tree.count() / 1000 + 100);
  ar.collective = false;
  ar.algorithm = "TREE";
  const auto groups = prism::daemon::GroupCollectiveOps({ag, ar}, model);
  REQUIRE(groups.size() == 2);
  CHECK(groups[0].algorithm == graph::ALGORITHM_PAT);  // +500 us before +100 us
  CHECK(groups[0].model == pat);
  CHECK(groups[1].algorithm == graph::ALGORITHM_TREE);
  CHECK(groups[1].model == tree);
  const std::string line = prism::daemon::DescribeOpTimes(groups, 0, 1);
  CHECK(line.find("all-gather (PAT) 4.00 MiB on 64 ranks (64 nodes) x1.0: ") != std::string::npos);
  CHECK(line.find("all-reduce (tree) 4.00 MiB on 64 ranks (64 nodes) x1.0: ") != std::string::npos);
}
