// prism-graphgen collective: nccl-tests-like graphs have the requested shape.
#include <catch2/catch.hpp>
#include <filesystem>
#include <sstream>

#include "graphgen/cli.h"
#include "graphgen/collective_graph.h"
#include "graphgen/split_color.h"
#include "proto/graph_file.h"
#include "test/graphgen_test_util.h"

namespace pg = prism::graph;
using prism::graphgen::CollectiveJob;
using prism::graphgen::GenerateCollectiveGraph;
using prism::graphgen::ParseByteSize;

TEST_CASE("sizes accept K/M/G as binary multiples", "[graphgen][collective]") {
  CHECK(*ParseByteSize("4096") == 4096);
  CHECK(*ParseByteSize("64K") == 64u << 10);
  CHECK(*ParseByteSize("3M") == 3u << 20);
  CHECK(*ParseByteSize("1G") == 1ull << 30);
  CHECK(*ParseByteSize("2GiB") == 2ull << 30);
  CHECK_FALSE(ParseByteSize("").ok());
  CHECK_FALSE(ParseByteSize("1T").ok());
  CHECK_FALSE(ParseByteSize("G").ok());
  CHECK_FALSE(ParseByteSize("99999999999999999999").ok());
}

TEST_CASE("a collective graph: one program, world communicator, one op per iteration", "[graphgen][collective]") {
  struct Case {
    std::string op;
    pg::CollectiveKind kind;
  };
  for (const Case& c : {Case{"allreduce", pg::ALLREDUCE}, Case{"allgather", pg::ALLGATHER},
                        Case{"reducescatter", pg::REDUCESCATTER}, Case{"alltoall", pg::ALLTOALL},
                        Case{"broadcast", pg::BROADCAST}}) {
    CollectiveJob job;
    job.op = c.op;
    job.bytes = 1ull << 30;
    job.ranks = 64;
    job.gpus_per_node = 4;
    job.nic_gbps = 200;
    job.nic_latency_us = 3;
    job.algo = "ring";
    job.iterations = 7;
    auto g = GenerateCollectiveGraph(job);
    REQUIRE(g.ok());
    INFO(c.op);
    CHECK(pg::ValidateGraph(*g).ok());
    CHECK(g->ranks_size() == 64);
    CHECK(g->cluster().nodes() == 16);
    CHECK(g->cluster().gpus_per_node() == 4);
    CHECK(g->cluster().nic().bandwidth_bps() == 200'000'000'000ull);
    CHECK(g->cluster().nic().latency_ns() == 3000);
    REQUIRE(g->communicators_size() == 1);
    CHECK(g->communicators(0).kind() == pg::COMM_KIND_WORLD);
    CHECK(g->communicators(0).members_size() == 64);
    REQUIRE(g->programs_size() == 1);
    const auto& p = g->programs(0);
    REQUIRE(p.ops_size() == 1);  // one iteration; the simulator repeats it
    for (const auto& op : p.ops()) {
      REQUIRE(op.has_collective());
      CHECK(op.collective().kind() == c.kind);
      CHECK(op.collective().bytes() == 1ull << 30);
      CHECK(op.collective().algorithm() == pg::ALGORITHM_RING);
      CHECK(op.collective().comm_slot() == 0);
    }
    CHECK(g->job().attributes().at("iterations") == "7");
    for (const auto& r : g->ranks()) CHECK(r.program() == 0);
  }
}

TEST_CASE("sendrecv: each rank sends to rank+1 and receives from rank-1 in a group", "[graphgen][collective]") {
  CollectiveJob job;
  job.op = "sendrecv";
  job.bytes = 1 << 20;
  job.ranks = 8;
  job.iterations = 3;
  auto g = GenerateCollectiveGraph(job);
  REQUIRE(g.ok());
  CHECK(pg::ValidateGraph(*g).ok());
  CHECK(g->job().attributes().at("iterations") == "3");
  const auto& p = g->programs(0);
  REQUIRE(p.ops_size() == 4);
  for (int i = 0; i < 4; i += 4) {
    CHECK(p.ops(i).has_group_start());
    REQUIRE(p.ops(i + 1).has_send());
    CHECK(p.ops(i + 1).send().peer_relative());
    CHECK(p.ops(i + 1).send().peer() == 1);
    REQUIRE(p.ops(i + 2).has_recv());
    CHECK(p.ops(i + 2).recv().peer() == 7);
    CHECK(p.ops(i + 2).recv().bytes() == 1u << 20);
    CHECK(p.ops(i + 3).has_group_end());
  }
}

TEST_CASE("bad collective flags are refused with the flag named", "[graphgen][collective]") {
  CollectiveJob job;
  job.bytes = 1000;
  job.ranks = 64;
  job.op = "allgather";
  auto g = GenerateCollectiveGraph(job);
  REQUIRE_FALSE(g.ok());
  CHECK(std::string(g.status().message()).find("--bytes") != std::string::npos);
  job.op = "allreduce";
  job.ranks = 0;
  CHECK(std::string(GenerateCollectiveGraph(job).status().message()).find("--ranks") != std::string::npos);
  job.ranks = 4;
  job.op = "gossip";
  CHECK(std::string(GenerateCollectiveGraph(job).status().message()).find("--op") != std::string::npos);

  const std::string out = prism::graphgen::testing::TempPath("coll.graph");
  std::ostringstream o, e;
  CHECK(prism::graphgen::RunGraphgenCli({"prism-graphgen", "collective", "--op", "allreduce", "--bytes", "1Q",
                                         "--ranks", "8", "-o", out}, o, e) == prism::graphgen::kExitBadInput);
  CHECK_FALSE(std::filesystem::exists(out));
  CHECK(prism::graphgen::RunGraphgenCli({"prism-graphgen", "collective", "--op", "allreduce", "--bytes", "1G",
                                         "--ranks", "64", "--gpus-per-node", "1", "--nic-gbps", "400",
                                         "--nic-latency-us", "5", "--algo", "tree", "--iterations", "20", "-o", out},
                                        o, e) == 0);
  auto g2 = pg::ReadGraphFile(out);
  REQUIRE(g2.ok());
  CHECK(g2->programs(0).ops_size() == 1);
  CHECK(g2->job().attributes().at("iterations") == "20");
  CHECK(g2->programs(0).ops(0).collective().algorithm() == pg::ALGORITHM_TREE);
}

TEST_CASE("collective --subgroups adds TP-like then DP-like splits of the world", "[graphgen][collective]") {
  prism::graphgen::CollectiveJob j;
  j.op = "allreduce";
  j.bytes = 1 << 20;
  j.ranks = 16;
  j.subgroup_size = 4;
  auto g = prism::graphgen::GenerateCollectiveGraph(j);
  REQUIRE(g.ok());
  REQUIRE(g->communicators_size() == 1 + 4 + 4);
  const auto& tp1 = g->communicators(2);  // second TP-like group: ranks 4..7
  CHECK(tp1.kind() == prism::graph::COMM_KIND_TP);
  CHECK(std::vector<uint32_t>(tp1.members().begin(), tp1.members().end()) == std::vector<uint32_t>{4, 5, 6, 7});
  CHECK(tp1.split().parent() == 0);
  CHECK(tp1.split().color() == prism::graphgen::PyTorchSplitColor({4, 5, 6, 7}));
  CHECK(tp1.split().key() == 0);
  const auto& dp3 = g->communicators(8);  // last DP-like group: index 3 of every TP group
  CHECK(dp3.kind() == prism::graph::COMM_KIND_DP);
  CHECK(std::vector<uint32_t>(dp3.members().begin(), dp3.members().end()) == std::vector<uint32_t>{3, 7, 11, 15});
  CHECK(prism::graph::ValidateGraph(*g).ok());
  j.max_subgroups = 1;
  CHECK(prism::graphgen::GenerateCollectiveGraph(j)->communicators_size() == 3);
  j.subgroup_size = 5;
  auto bad = prism::graphgen::GenerateCollectiveGraph(j);
  REQUIRE_FALSE(bad.ok());
  CHECK_THAT(std::string(bad.status().message()), Catch::Contains("--subgroups"));
}

TEST_CASE("split colors are PyTorch's: abs(hash(tuple(sorted(ranks)))) % 2**31", "[graphgen][split_color]") {
  // Values PyTorch 2.11 / CPython 3.12 computed on the GPU host (and NCCL logged).
  CHECK(prism::graphgen::PyTorchSplitColor({0}) == 59908776);
  CHECK(prism::graphgen::PyTorchSplitColor({1}) == 440515407);
  CHECK(prism::graphgen::PyTorchSplitColor({1, 0}) == 2130503744);
  CHECK(prism::graphgen::PyTorchSplitColor({0, 1, 2, 3}) == 2003953581);
  CHECK(prism::graphgen::PyTorchSplitColor({0, 1, 2, 3, 4, 5, 6, 7}) == 1266629538);
}

TEST_CASE("split_group colors are the group's lowest rank, as PyTorch 2.11 passes them", "[graphgen][split_color]") {
  // ProcessGroupNCCL::split in torch 2.11: the lowest parent rank of the group (on the GPU host,
  // 2026-12-03, DeviceMesh's first split on rank 0 passed color 0, key 0).
  CHECK(prism::graphgen::SplitGroupColor({0}) == 0);
  CHECK(prism::graphgen::SplitGroupColor({1}) == 1);
  CHECK(prism::graphgen::SplitGroupColor({3, 1, 2, 0}) == 0);
  CHECK(prism::graphgen::SplitGroupColor({8, 9, 10, 11, 12, 13, 14, 15}) == 8);
  std::vector<uint32_t> strided;
  for (int r = 1027; r >= 0; r -= 8) strided.push_back(static_cast<uint32_t>(r));  // descending: still the lowest
  CHECK(prism::graphgen::SplitGroupColor(strided) == 3);
}
