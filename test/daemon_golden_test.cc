// Replays whose every figure was recorded before the engine's restructuring
// (issue 26: the NIC policy in its own class, the state laid out for the
// cache, the graph loaded in time that follows its classes). Classes off
// (--no-classes) and on, every NIC model: the report's figures and every
// rank's timeline must stay exactly what commit 0c7fccd printed. A change
// that moves them on purpose re-records the fingerprints (the failing check
// prints the new one) and says why in its commit.
#include <catch2/catch.hpp>

#include <cstdio>
#include <string>

#include "daemon/engine/simulation.h"
#include "test/daemon_test_graphs.h"

namespace {

namespace g = prism::graph;
using prism::engine::NicModel;

uint64_t Fnv(const std::string& s) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : s) h = (h ^ c) * 1099511628211ull;
  return h;
}

std::string Fixed(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.17g", v);
  return buf;
}

// A trace's events as the trace writer wrote them at 0c7fccd: without the
// metadata object added since (the model's step cost), which is no timeline.
std::string TraceEvents(std::string json) {
  const size_t meta = json.rfind("],\"metadata\":");
  return meta == std::string::npos ? json : json.substr(0, meta) + "]}\n";
}

// The report's figures (not its wall times) and, when traced, every rank's
// timeline, as one hexadecimal hash.
std::string Fingerprint(const g::Graph& graph, bool classes, NicModel nic, bool trace, uint64_t iterations,
                        bool nccl_choice = true,
                        prism::Bytes p2p_buffer = prism::engine::NcclBehaviour::kNcclP2pBuffer,
                        bool launch_in_order = false) {
  prism::engine::SimulationOptions o;
  o.nccl.launch_in_order = launch_in_order;
  o.nccl.nccl_choice = nccl_choice;
  o.nccl.p2p_buffer = p2p_buffer;
  o.use_classes = classes;
  o.iterations = iterations;
  o.nic_model = nic;
  if (trace) {
    std::vector<uint32_t> all(graph.ranks_size());
    for (uint32_t r = 0; r < all.size(); ++r) all[r] = r;
    o.trace_ranks = all;
  }
  auto r = prism::engine::Simulate(graph, o);
  INFO((r.ok() ? "" : std::string(r.status().message())));
  REQUIRE(r.ok());
  const auto& rep = r->report;
  std::string s = std::to_string(rep.events) + "/" + std::to_string(rep.emulated_end.count());
  for (auto t : rep.iteration_times) s += "/" + std::to_string(t.count());
  s += "/" + Fixed(rep.exposed_comm_s_mean) + "/" + Fixed(rep.exposed_comm_s_max) + "/" +
       Fixed(rep.compute_s_per_rank);
  for (const auto* rows : {&rep.by_op, &rep.by_comm})
    for (const auto& k : *rows)
      s += "/" + k.name + ":" + Fixed(k.time_s_per_rank) + ":" + Fixed(k.ops_per_rank) + ":" + Fixed(k.bytes_per_rank);
  for (const auto& m : rep.memory) s += "/" + m.program + ":" + std::to_string(m.peak_bytes);
  if (trace) s += "/" + std::to_string(Fnv(TraceEvents(r->TraceJson(graph))));
  char hex[32];
  std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(Fnv(s)));
  UNSCOPED_INFO("fingerprint of " << s);
  return hex;
}

}  // namespace

// Launch order (--launch-order true, 2026-12-02, docs/network-model.md
// "Launch order"): off by default, the fingerprints before it; on, new ones.
// Re-recorded on 2026-12-02 for the send completion at the connection's
// buffers (docs/network-model.md, "Send completion"): the 50 MiB pipeline
// sends end 48 MiB of wire time after they start, not with their receives.
// With the buffer off (0) the figures recorded at 0c7fccd come back: nothing
// else moved. The shared NIC model grants at a transfer's end, so its
// sends larger than the buffer still end there (its figure did not move).
// Re-recorded on 2026-12-04 for the queues' point-to-point transfers, which
// go between the ring steps of a DP share on their NIC instead of after all
// of it (docs/network-model.md, "NIC serialisation"): the queues' figures
// without launch order moved; with it the sends wait for the DP collectives
// anyway, and calendar and shared did not move.
TEST_CASE("golden: a 1F1B training graph, classes off, every NIC model, every rank's timeline",
          "[daemon][golden]") {
  const g::Graph graph = prism::testing::TrainingGraph(prism::testing::SmallTrainingSpec());
  const prism::Bytes buffer = prism::engine::NcclBehaviour::kNcclP2pBuffer;
  CHECK(Fingerprint(graph, false, NicModel::kQueues, true, 2) == "90a52b5427921677");
  CHECK(Fingerprint(graph, false, NicModel::kCalendar, true, 2) == "7e3b826a5218e4d9");
  CHECK(Fingerprint(graph, false, NicModel::kShared, true, 2) == "c5b8bba269891327");
  CHECK(Fingerprint(graph, false, NicModel::kQueues, true, 2, true, prism::Bytes(0)) == "c9456adf9783065a");
  CHECK(Fingerprint(graph, false, NicModel::kCalendar, true, 2, true, prism::Bytes(0)) == "312ba73ce8578533");
  // With --launch-order true: the same iterations; ops held back start in
  // the report and trace when their stream reached them, the pipeline sends
  // wait for the DP collectives issued before them, so the per-op figures
  // and timelines move, and queues and calendar agree.
  CHECK(Fingerprint(graph, false, NicModel::kQueues, true, 2, true, buffer, true) == "7e4dcbe0c0577786");
  CHECK(Fingerprint(graph, false, NicModel::kCalendar, true, 2, true, buffer, true) == "7e4dcbe0c0577786");
  CHECK(Fingerprint(graph, false, NicModel::kShared, true, 2, true, buffer, true) == "0ab68fcf1f490ef4");
  CHECK(Fingerprint(graph, false, NicModel::kQueues, true, 2, true, prism::Bytes(0), true) == "d40ea9e20e745f7b");
  CHECK(Fingerprint(graph, false, NicModel::kCalendar, true, 2, true, prism::Bytes(0), true) == "d40ea9e20e745f7b");
}

TEST_CASE("golden: the same graph with classes gives the same figures as before", "[daemon][golden]") {
  const g::Graph graph = prism::testing::TrainingGraph(prism::testing::SmallTrainingSpec());
  const prism::Bytes buffer = prism::engine::NcclBehaviour::kNcclP2pBuffer;
  CHECK(Fingerprint(graph, true, NicModel::kQueues, true, 2) == "358e361f8f691388");
  CHECK(Fingerprint(graph, true, NicModel::kCalendar, true, 2) == "e0b5f4c356db788e");
  CHECK(Fingerprint(graph, true, NicModel::kQueues, true, 2, true, prism::Bytes(0)) == "d878256981890d15");
  CHECK(Fingerprint(graph, true, NicModel::kQueues, true, 2, true, buffer, true) == "969672bb4202b34b");
  CHECK(Fingerprint(graph, true, NicModel::kCalendar, true, 2, true, buffer, true) == "969672bb4202b34b");
  CHECK(Fingerprint(graph, true, NicModel::kQueues, true, 2, true, prism::Bytes(0), true) == "f7e3c5ce168eca60");
}

TEST_CASE("golden: world collectives across nodes, classes off", "[daemon][golden]") {
  prism::testing::ClusterSpec cluster;
  cluster.gpus_per_node = 4;
  cluster.nics_per_node = 2;
  // The model's own choice (--algorithm-choice model) as recorded: the tree.
  // NCCL 2.28.9's tuning (the default since 2026-12-02) picks the ring
  // (Simple) for this 64 MiB all-reduce over 8 nodes of 4 GPUs: its tree's
  // bandwidth is capped per channel and halved. The all-reduce alone takes
  // 1.610 ms as a ring against 1.527 ms as the model's tree (prismd --simulate
  // --step-cost-us 0 of `prism-graphgen collective --op allreduce --bytes 64M
  // --ranks 32 --gpus-per-node 4 --nics-per-node 2`, 2026-12-02).
  const g::Graph world32 =
      prism::testing::CollectiveGraph(32, g::ALLREDUCE, 64ull << 20, g::ALGORITHM_DEFAULT, 3, 100'000, cluster);
  CHECK(Fingerprint(world32, false, NicModel::kQueues, true, 1, false) == "db933ad2106c6f1f");
  CHECK(Fingerprint(world32, false, NicModel::kQueues, true, 1) == "9cb169e6dd14028e");
  CHECK(Fingerprint(prism::testing::CollectiveGraph(16, g::ALLGATHER, 8ull << 20, g::ALGORITHM_RING, 2, 0, cluster),
                    false, NicModel::kCalendar, true, 1) == "474f7552d0b2846a");
  CHECK(Fingerprint(prism::testing::CollectiveGraph(16, g::ALLREDUCE, 1ull << 20, g::ALGORITHM_TREE, 2, 0, cluster),
                    false, NicModel::kQueues, true, 1) == "5f2589696cdac3cc");
}

TEST_CASE("golden: the 1024-rank training graph of bench/engine_rate_bench, classes off", "[daemon][golden]") {
  prism::testing::TrainingSpec spec;
  spec.dp = 8;
  CHECK(Fingerprint(prism::testing::TrainingGraph(spec), false, NicModel::kQueues, false, 1) == "e4952eef9ecd0899");
  CHECK(Fingerprint(prism::testing::TrainingGraph(spec), false, NicModel::kQueues, false, 1, true, prism::Bytes(0)) ==
        "8f67077ac06a42b4");
}
