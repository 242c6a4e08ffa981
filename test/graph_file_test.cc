#include "proto/graph_file.h"

#include <unistd.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>

namespace pg = prism::graph;

namespace {

// Two ranks on two nodes, one world communicator, one program that
// all-reduces 1 MiB after 1 ms of compute.
pg::Graph TinyGraph() {
  pg::Graph g;
  g.mutable_job()->set_name("tiny");
  auto* cl = g.mutable_cluster();
  cl->set_nodes(2);
  cl->set_gpus_per_node(1);
  cl->mutable_nic()->set_count(1);
  cl->mutable_nic()->set_bandwidth_bps(400'000'000'000ull);
  auto* c = g.add_communicators();
  c->set_id(0);
  c->set_kind(pg::COMM_KIND_WORLD);
  c->add_members(0);
  c->add_members(1);
  c->mutable_init();
  auto* p = g.add_programs();
  p->set_id(0);
  p->set_streams(1);
  p->add_comm_slot_names("world");
  p->add_ops()->mutable_compute()->set_duration_ns(1'000'000);
  auto* coll = p->add_ops()->mutable_collective();
  coll->set_kind(pg::ALLREDUCE);
  coll->set_bytes(1 << 20);
  for (uint32_t r = 0; r < 2; ++r) {
    auto* rk = g.add_ranks();
    rk->set_rank(r);
    rk->set_node(r);
    rk->add_comm_slots(0);
  }
  return g;
}

}  // namespace

TEST_CASE("graph round-trips through encode and decode", "[graph_file]") {
  auto bytes = pg::EncodeGraph(TinyGraph());
  REQUIRE(bytes.ok());
  auto g = pg::DecodeGraph(*bytes);
  REQUIRE(g.ok());
  CHECK(g->format_version() == pg::kGraphFormatVersion);
  CHECK(g->programs(0).ops_size() == 2);
}

TEST_CASE("bad headers and truncation are refused with a reason", "[graph_file]") {
  auto bytes = *pg::EncodeGraph(TinyGraph());
  SECTION("no magic") {
    auto g = pg::DecodeGraph("hello world, not a graph", "x.graph");
    REQUIRE_FALSE(g.ok());
    CHECK_THAT(std::string(g.status().message()), Catch::Contains("not a Prism graph file"));
  }
  SECTION("other version") {
    bytes[8] = 9;
    auto g = pg::DecodeGraph(bytes, "x.graph");
    REQUIRE_FALSE(g.ok());
    CHECK_THAT(std::string(g.status().message()), Catch::Contains("format version 9"));
  }
  SECTION("truncated") {
    auto g = pg::DecodeGraph(std::string_view(bytes).substr(0, bytes.size() - 3), "x.graph");
    REQUIRE_FALSE(g.ok());
  }
}

TEST_CASE("validation names the broken reference", "[graph_file]") {
  SECTION("member out of range") {
    auto g = TinyGraph();
    g.mutable_communicators(0)->add_members(7);
    CHECK_THAT(std::string(pg::ValidateGraph(g).message()), Catch::Contains("names rank 7"));
  }
  SECTION("slot names a communicator without the rank") {
    auto g = TinyGraph();
    auto* c = g.add_communicators();
    c->set_id(1);
    c->add_members(1);
    g.mutable_ranks(0)->set_comm_slots(0, 1);
    CHECK_THAT(std::string(pg::ValidateGraph(g).message()), Catch::Contains("does not contain it"));
  }
  SECTION("dependency on a later op") {
    auto g = TinyGraph();
    g.mutable_programs(0)->mutable_ops(0)->add_deps(1);
    CHECK_THAT(std::string(pg::ValidateGraph(g).message()), Catch::Contains("later op"));
  }
  SECTION("root outside the communicator") {
    auto g = TinyGraph();
    g.mutable_programs(0)->mutable_ops(1)->mutable_collective()->set_root(2);
    CHECK_THAT(std::string(pg::ValidateGraph(g).message()), Catch::Contains("peer/root 2"));
  }
}

TEST_CASE("files are written atomically and read back", "[graph_file]") {
  const auto dir = std::filesystem::temp_directory_path() / ("prism_gf_" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  const std::string path = (dir / "t.graph").string();
  REQUIRE(pg::WriteGraphFile(TinyGraph(), path).ok());
  auto g = pg::ReadGraphFile(path);
  REQUIRE(g.ok());
  CHECK(g->ranks_size() == 2);
  CHECK_FALSE(pg::WriteGraphFile(TinyGraph(), (dir / "missing" / "t.graph").string()).ok());
  CHECK_FALSE(std::filesystem::exists(dir / "missing"));
  CHECK_FALSE(pg::ReadGraphFile((dir / "nope.graph").string()).ok());
  std::filesystem::remove_all(dir);
}
