#include "proto/graph_file.h"

#include <unistd.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>

#include "common/limits.h"

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
  CHECK(g->format_version() == pg::kGraphFormatVersionRecords);  // records only: format 1
  CHECK(g->programs(0).ops_size() == 2);
}

TEST_CASE("a graph without its format version encodes as the same graph with it set, byte for byte",
          "[graph_file]") {
  const pg::Graph unset = TinyGraph();
  REQUIRE(unset.format_version() == 0);
  pg::Graph set = unset;
  set.set_format_version(pg::kGraphFormatVersionRecords);
  pg::Graph other = unset;
  other.set_format_version(pg::kGraphFormatVersionRecords + 7);
  const auto a = pg::EncodeGraph(unset), b = pg::EncodeGraph(set), c = pg::EncodeGraph(other);
  REQUIRE(a.ok());
  REQUIRE(b.ok());
  REQUIRE(c.ok());
  CHECK(*a == *b);
  CHECK(*c == *b);
  std::string expected(b->data(), pg::kGraphHeaderBytes);
  REQUIRE(set.AppendToString(&expected));
  CHECK(*a == expected);
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
  SECTION("a rank listed twice in one communicator") {
    auto g = TinyGraph();
    g.mutable_communicators(0)->set_members(1, 0);  // members {0, 0}
    CHECK_THAT(std::string(pg::ValidateGraph(g).message()), Catch::Contains("lists rank 0 twice"));
  }
  SECTION("root outside the communicator") {
    auto g = TinyGraph();
    g.mutable_programs(0)->mutable_ops(1)->mutable_collective()->set_root(2);
    CHECK_THAT(std::string(pg::ValidateGraph(g).message()), Catch::Contains("peer/root 2"));
  }
  SECTION("start-up ops are collectives on the program's slots") {
    auto g = TinyGraph();
    *g.mutable_programs(0)->add_startup_ops() = g.programs(0).ops(1);  // a collective: valid
    CHECK(pg::ValidateGraph(g).ok());
    g.mutable_programs(0)->mutable_startup_ops(0)->mutable_collective()->set_comm_slot(5);
    CHECK_THAT(std::string(pg::ValidateGraph(g).message()), Catch::Contains("start-up op 0 uses comm slot 5"));
    g.mutable_programs(0)->mutable_startup_ops(0)->mutable_compute()->set_duration_ns(5);
    CHECK_THAT(std::string(pg::ValidateGraph(g).message()), Catch::Contains("start-up op 0 is not a collective"));
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
  google::protobuf::Arena arena;  // prismd's way: the same graph, its messages on an arena
  auto* on_arena = google::protobuf::Arena::CreateMessage<pg::Graph>(&arena);
  on_arena->set_format_version(99);  // cleared first
  REQUIRE(pg::ReadGraphFileInto(path, on_arena).ok());
  CHECK(on_arena->SerializeAsString() == g->SerializeAsString());
  CHECK_FALSE(pg::ReadGraphFileInto((dir / "nope.graph").string(), on_arena).ok());
  CHECK_FALSE(pg::WriteGraphFile(TinyGraph(), (dir / "missing" / "t.graph").string()).ok());
  CHECK_FALSE(std::filesystem::exists(dir / "missing"));
  CHECK_FALSE(pg::ReadGraphFile((dir / "nope.graph").string()).ok());
  std::filesystem::remove_all(dir);
}

TEST_CASE("graph file: a symlink planted at the temporary name is not written through", "[graph_file]") {
  const auto dir = std::filesystem::temp_directory_path() / ("prism_gf_link_" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  const std::string path = (dir / "t.graph").string();
  const std::string victim = (dir / "victim.txt").string();
  std::ofstream(victim) << "precious";
  // Another user (or an old run) left "<out>.tmp.<pid>" -> the victim.
  std::filesystem::create_symlink(victim, pg::TemporaryPathFor(path));
  REQUIRE(pg::WriteGraphFile(TinyGraph(), path).ok());
  std::ifstream in(victim);
  std::string text;
  std::getline(in, text);
  CHECK(text == "precious");
  CHECK_FALSE(std::filesystem::is_symlink(path));
  CHECK(pg::ReadGraphFile(path).ok());
  CHECK_FALSE(std::filesystem::exists(std::filesystem::symlink_status(pg::TemporaryPathFor(path))));
  std::filesystem::remove_all(dir);
}

// ---- Crafted graphs whose replay would be silently wrong (issue 12, item 8) ----

namespace {

std::string ValidationMessage(const pg::Graph& g) {
  const absl::Status s = pg::ValidateGraph(g);
  return s.ok() ? "<accepted>" : std::string(s.message());
}

// The graph of TinyGraph with ops {group_start, send +1, recv -1, group_end}
// of `send_bytes` and `recv_bytes` instead of its collective.
pg::Graph SendRecvGraph(uint64_t send_bytes, uint64_t recv_bytes) {
  auto g = TinyGraph();
  auto* p = g.mutable_programs(0);
  p->clear_ops();
  p->add_ops()->mutable_group_start();
  auto* s = p->add_ops()->mutable_send();
  s->set_peer(1), s->set_peer_relative(true), s->set_bytes(send_bytes);
  auto* r = p->add_ops()->mutable_recv();
  r->set_peer(1), r->set_peer_relative(true), r->set_bytes(recv_bytes);
  p->add_ops()->mutable_group_end();
  return g;
}

}  // namespace

TEST_CASE("graph file: clusters no one has are refused with the bound in the message", "[graph_file][limits]") {
  auto g = TinyGraph();
  g.mutable_cluster()->set_gpus_per_node(4294967295u);  // predicted 117 days before
  CHECK_THAT(ValidationMessage(g), Catch::Contains("4294967295 GPUs") && Catch::Contains("the limit is 4096 GPUs"));
  g = TinyGraph();
  g.mutable_cluster()->mutable_nic()->set_bandwidth_bps(1000);  // predicted 939,524 s before
  CHECK_THAT(ValidationMessage(g),
             Catch::Contains("NIC bandwidth is 1000 bit/s") && Catch::Contains("minimum of 1000000000 bit/s"));
  g = TinyGraph();
  g.mutable_cluster()->mutable_intra_node()->set_bandwidth_bps(999'999'999);
  CHECK_THAT(ValidationMessage(g), Catch::Contains("intra-node link bandwidth"));
  g = TinyGraph();
  g.mutable_cluster()->mutable_nic()->set_count(100000);
  CHECK_THAT(ValidationMessage(g), Catch::Contains("100000 NICs") && Catch::Contains("the limit is 256 NICs"));
  g = TinyGraph();
  g.mutable_cluster()->set_nodes(4294967295u);
  CHECK_THAT(ValidationMessage(g), Catch::Contains("4294967295 nodes"));
  g = TinyGraph();  // the bounds themselves are accepted
  g.mutable_cluster()->set_gpus_per_node(prism::limits::kMaxGpusPerNode);
  g.mutable_cluster()->mutable_nic()->set_bandwidth_bps(prism::limits::kMinBandwidthBps);
  g.mutable_cluster()->mutable_nic()->set_count(prism::limits::kMaxNicsPerNode);
  CHECK(ValidationMessage(g) == "<accepted>");
}

TEST_CASE("graph file: absurd durations, sizes and memory are refused at load", "[graph_file][limits]") {
  auto g = TinyGraph();
  g.mutable_programs(0)->mutable_ops(0)->mutable_compute()->set_duration_ns(UINT64_MAX);
  CHECK_THAT(ValidationMessage(g), Catch::Contains("duration") && Catch::Contains("limit"));
  g = TinyGraph();
  g.mutable_programs(0)->mutable_ops(1)->mutable_collective()->set_bytes(UINT64_MAX);
  CHECK_THAT(ValidationMessage(g), Catch::Contains("bytes") && Catch::Contains("limit"));
  g = SendRecvGraph(UINT64_MAX, UINT64_MAX);
  CHECK_THAT(ValidationMessage(g), Catch::Contains("bytes") && Catch::Contains("limit"));
  g = TinyGraph();
  g.mutable_programs(0)->mutable_ops(0)->mutable_compute()->set_memory_delta_bytes(INT64_MIN);
  CHECK_THAT(ValidationMessage(g), Catch::Contains("memory"));
  g = TinyGraph();
  g.mutable_cluster()->mutable_nic()->set_latency_ns(UINT64_MAX);
  CHECK_THAT(ValidationMessage(g), Catch::Contains("latency"));
  g = TinyGraph();  // the largest values are accepted
  g.mutable_programs(0)->mutable_ops(0)->mutable_compute()->set_duration_ns(prism::limits::kMaxOpDurationNs);
  g.mutable_programs(0)->mutable_ops(1)->mutable_collective()->set_bytes(prism::limits::kMaxOpBytes);
  CHECK(pg::ValidateGraph(g).ok());
}

TEST_CASE("graph file: unknown collective kinds and enum values are refused", "[graph_file][limits]") {
  auto g = TinyGraph();
  g.mutable_programs(0)->mutable_ops(1)->mutable_collective()->set_kind(static_cast<pg::CollectiveKind>(99));
  CHECK_THAT(ValidationMessage(g), Catch::Contains("kind 99"));
  g = TinyGraph();
  g.mutable_programs(0)->mutable_ops(1)->mutable_collective()->set_kind(pg::COLLECTIVE_KIND_UNSPECIFIED);
  CHECK_THAT(ValidationMessage(g), Catch::Contains("kind 0"));
  g = TinyGraph();
  g.mutable_programs(0)->mutable_ops(1)->mutable_collective()->set_algorithm(static_cast<pg::Algorithm>(42));
  CHECK_THAT(ValidationMessage(g), Catch::Contains("algorithm 42"));
  g = TinyGraph();
  g.mutable_communicators(0)->set_kind(static_cast<pg::CommKind>(1000));
  CHECK_THAT(ValidationMessage(g), Catch::Contains("kind 1000"));
}

TEST_CASE("graph file: unbalanced group start/end is refused", "[graph_file][limits]") {
  auto g = SendRecvGraph(64, 64);
  REQUIRE(pg::ValidateGraph(g).ok());
  g.mutable_programs(0)->mutable_ops()->RemoveLast();  // no group_end
  CHECK_THAT(ValidationMessage(g), Catch::Contains("group"));
  g = SendRecvGraph(64, 64);
  g.mutable_programs(0)->mutable_ops(0)->mutable_group_end();  // end before any start
  CHECK_THAT(ValidationMessage(g), Catch::Contains("group"));
  g = SendRecvGraph(64, 64);
  g.mutable_programs(0)->mutable_ops(1)->mutable_group_start();  // nested start
  CHECK_THAT(ValidationMessage(g), Catch::Contains("group"));
}

TEST_CASE("graph file: a send whose receive expects another size is refused", "[graph_file][limits]") {
  CHECK(pg::ValidateGraph(SendRecvGraph(4096, 4096)).ok());
  CHECK_THAT(ValidationMessage(SendRecvGraph(4096, 1024)), Catch::Contains("4096") && Catch::Contains("1024"));
}

TEST_CASE("graph file: more ranks than prismd replays are refused before parsing them", "[graph_file][limits]") {
  // Header + kMaxRanks + 1 empty Rank entries (field 7, length 0) and nothing else.
  std::string bytes = *pg::EncodeGraph(pg::Graph());
  for (uint64_t r = 0; r <= prism::limits::kMaxRanks; ++r) bytes += std::string("\x3a\x00", 2);
  auto g = pg::DecodeGraph(bytes, "big.graph");
  REQUIRE_FALSE(g.ok());
  CHECK_THAT(std::string(g.status().message()), Catch::Contains("4194304"));
}

TEST_CASE("graph file: a directory or a device is reported as what it is", "[graph_file][limits]") {
  const auto dir = std::filesystem::temp_directory_path();
  auto g = pg::ReadGraphFile(dir.string());
  REQUIRE_FALSE(g.ok());
  CHECK_THAT(std::string(g.status().message()), Catch::Contains("is a directory"));
  g = pg::ReadGraphFile("/dev/zero");
  REQUIRE_FALSE(g.ok());
  CHECK_THAT(std::string(g.status().message()), Catch::Contains("not a regular file"));
}
