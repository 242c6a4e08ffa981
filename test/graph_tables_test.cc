// Format 2's tables (graph.proto: RankTable, CommunicatorTable,
// ProcessGroupTable): graph::Topology reads them as it reads records,
// ExpandTables gives the records, the file's version follows the form, and
// a table whose columns do not fit together is refused with a reason.
#include <catch2/catch.hpp>
#include <google/protobuf/util/message_differencer.h>

#include <string>

#include "common/limits.h"
#include "graphgen/job_graph.h"
#include "graphgen/job_spec.h"
#include "proto/graph_file.h"
#include "proto/graph_topology.h"

namespace pg = prism::graph;

namespace {

pg::Graph JobGraph(const std::string& example, prism::graphgen::JobGraphForm form) {
  auto spec = prism::graphgen::ParseJobSpecFile(std::string(PRISM_EXAMPLES_DIR) + "/" + example + ".yaml");
  REQUIRE(spec.ok());
  auto g = prism::graphgen::GenerateJobGraph(*spec, form);
  REQUIRE(g.ok());
  return std::move(*g);
}

// Four ranks on two nodes of two GPUs as tables: the world (init), two
// "tp" pairs split from it, one program with both slots; process groups:
// the world, the two pairs and a Gloo twin of the first pair.
pg::Graph TableGraph() {
  pg::Graph g;
  g.mutable_cluster()->set_nodes(2);
  g.mutable_cluster()->set_gpus_per_node(2);
  auto* p = g.add_programs();
  p->set_streams(1);
  p->add_comm_slot_names("world");
  p->add_comm_slot_names("tp");
  auto* coll = p->add_ops()->mutable_collective();
  coll->set_kind(pg::ALLREDUCE);
  coll->set_comm_slot(1);
  coll->set_bytes(1 << 20);
  auto& c = *g.mutable_communicator_table();
  c.add_name_prefixes("world");
  c.add_name_prefixes("tp");
  const uint32_t members[][2] = {{0, 1}, {2, 3}};
  c.add_kind(pg::COMM_KIND_WORLD), c.add_size(4), c.add_name_prefix(0), c.add_name_index(0);
  c.add_split_parent(0), c.add_split_color(0), c.add_split_key(0);
  for (uint32_t m = 0; m < 4; ++m) c.add_members(m);
  for (uint32_t i = 0; i < 2; ++i) {
    c.add_kind(pg::COMM_KIND_TP), c.add_size(2), c.add_name_prefix(1), c.add_name_index(i + 1);
    c.add_split_parent(1), c.add_split_color(static_cast<int32_t>(7 + i)), c.add_split_key(0);
    c.add_members(members[i][0]), c.add_members(members[i][1]);
  }
  auto& r = *g.mutable_rank_table();
  for (uint32_t rank = 0; rank < 4; ++rank) {
    r.add_program(0);
    r.add_comm_slots(0);
    r.add_comm_slots(1 + rank / 2);
  }
  auto& t = *g.mutable_process_group_table();
  t.add_descs("");
  t.add_descs("TP");
  t.add_name_prefixes("");
  t.add_name_prefixes("tp_gloo");
  for (uint32_t desc : {0u, 1u, 1u}) t.add_gloo_size(0), t.add_desc(desc), t.add_name_prefix(0), t.add_name_index(0);
  t.add_gloo_size(2), t.add_desc(1), t.add_name_prefix(1), t.add_name_index(1);
  t.add_gloo_members(0), t.add_gloo_members(1);
  return g;
}

std::string Refusal(const pg::Graph& g) {
  const absl::Status s = pg::ValidateGraph(g);
  CHECK(absl::IsInvalidArgument(s));
  return std::string(s.message());
}

}  // namespace

TEST_CASE("tables expand to the records they stand for", "[graph][tables]") {
  pg::Graph g = TableGraph();
  REQUIRE(pg::ValidateGraph(g).ok());
  pg::ExpandTables(g);
  CHECK_FALSE(g.has_rank_table());
  CHECK_FALSE(g.has_communicator_table());
  CHECK_FALSE(g.has_process_group_table());
  REQUIRE(pg::ValidateGraph(g).ok());
  REQUIRE(g.ranks_size() == 4);
  CHECK(g.ranks(3).rank() == 3);
  CHECK(g.ranks(3).node() == 1);
  CHECK(g.ranks(3).local_gpu() == 1);
  CHECK(g.ranks(3).comm_slots(1) == 2);
  REQUIRE(g.communicators_size() == 3);
  CHECK(g.communicators(0).name() == "world");
  CHECK(g.communicators(0).has_init());
  CHECK(g.communicators(2).id() == 2);
  CHECK(g.communicators(2).name() == "tp[1]");
  CHECK(g.communicators(2).kind() == pg::COMM_KIND_TP);
  CHECK(g.communicators(2).split().parent() == 0);
  CHECK(g.communicators(2).split().color() == 8);
  CHECK(std::vector<uint32_t>(g.communicators(2).members().begin(), g.communicators(2).members().end()) ==
        std::vector<uint32_t>{2, 3});
  REQUIRE(g.process_groups_size() == 4);
  CHECK(g.process_groups(2).communicator() == 2);
  CHECK(g.process_groups(2).desc() == "TP");
  CHECK(g.process_groups(3).backend() == pg::ProcessGroup::GLOO);
  CHECK(g.process_groups(3).name() == "tp_gloo[0]");
  CHECK(g.process_groups(3).members_size() == 2);
}

TEST_CASE("Topology reads a job's tables as it reads its records", "[graph][tables]") {
  const pg::Graph tables = JobGraph("mixtral-8x7b-128", prism::graphgen::JobGraphForm::kTables);
  const pg::Graph records = JobGraph("mixtral-8x7b-128", prism::graphgen::JobGraphForm::kRecords);
  REQUIRE(tables.has_rank_table());
  REQUIRE(records.ranks_size() == 128);
  REQUIRE(pg::ValidateGraph(tables).ok());
  REQUIRE(pg::ValidateGraph(records).ok());
  auto a = pg::Topology::Of(tables), b = pg::Topology::Of(records);
  REQUIRE(a.ok());
  REQUIRE(b.ok());
  REQUIRE(a->ranks() == b->ranks());
  REQUIRE(a->communicators() == b->communicators());
  REQUIRE(a->process_groups() == b->process_groups());
  for (uint32_t r = 0; r < a->ranks(); ++r) {
    CHECK(a->program(r) == b->program(r));
    CHECK(a->node(r) == b->node(r));
    CHECK(a->local_gpu(r) == b->local_gpu(r));
    CHECK(std::vector<uint32_t>(a->slots(r).begin(), a->slots(r).end()) ==
          std::vector<uint32_t>(b->slots(r).begin(), b->slots(r).end()));
  }
  for (uint32_t c = 0; c < a->communicators(); ++c) {
    CHECK(a->name(c) == b->name(c));
    CHECK(a->kind(c) == b->kind(c));
    CHECK(a->is_split(c) == b->is_split(c));
    CHECK(std::vector<uint32_t>(a->members(c).begin(), a->members(c).end()) ==
          std::vector<uint32_t>(b->members(c).begin(), b->members(c).end()));
    if (a->is_split(c)) CHECK(a->split_color(c) == b->split_color(c));
  }
  for (uint32_t k = 0; k < a->process_groups(); ++k) {
    CHECK(a->process_group_is_gloo(k) == b->process_group_is_gloo(k));
    CHECK(a->process_group_desc(k) == b->process_group_desc(k));
    CHECK(a->process_group_name(k) == b->process_group_name(k));
    if (!a->process_group_is_gloo(k)) CHECK(a->process_group_communicator(k) == b->process_group_communicator(k));
  }
}

TEST_CASE("a job written as tables reads back as its records, or as tables when asked", "[graph][tables]") {
  const pg::Graph tables = JobGraph("llama3-70b-1024", prism::graphgen::JobGraphForm::kTables);
  const pg::Graph records = JobGraph("llama3-70b-1024", prism::graphgen::JobGraphForm::kRecords);
  const auto bytes = pg::EncodeGraph(tables);
  REQUIRE(bytes.ok());
  CHECK(static_cast<uint8_t>((*bytes)[8]) == pg::kGraphFormatVersionTables);
  CHECK(bytes->size() < pg::EncodeGraph(records)->size());
  auto expanded = pg::DecodeGraph(*bytes);
  REQUIRE(expanded.ok());
  CHECK(expanded->format_version() == pg::kGraphFormatVersionRecords);
  expanded->clear_format_version();
  CHECK(google::protobuf::util::MessageDifferencer::Equals(*expanded, records));
  auto kept = pg::DecodeGraph(*bytes, "<memory>", {.keep_tables = true});
  REQUIRE(kept.ok());
  CHECK(kept->has_rank_table());
  CHECK(kept->ranks_size() == 0);
  CHECK(pg::RankCount(*kept) == 1024);
}

TEST_CASE("the header's version follows the form, and other versions are refused by name", "[graph][tables]") {
  pg::Graph records = TableGraph();
  pg::ExpandTables(records);
  CHECK(pg::FormatVersionFor(records) == pg::kGraphFormatVersionRecords);
  CHECK(pg::FormatVersionFor(TableGraph()) == pg::kGraphFormatVersionTables);
  std::string bytes = *pg::EncodeGraph(TableGraph());
  SECTION("a version-1 header over tables") {
    bytes[8] = 1;
    auto g = pg::DecodeGraph(bytes, "x.graph");
    REQUIRE_FALSE(g.ok());
    CHECK_THAT(std::string(g.status().message()), Catch::Contains("holds format 2's tables"));
  }
  SECTION("a version this build does not know") {
    bytes[8] = 4;
    auto g = pg::DecodeGraph(bytes, "x.graph");
    REQUIRE_FALSE(g.ok());
    CHECK_THAT(std::string(g.status().message()), Catch::Contains("reads versions 1 to 3"));
    CHECK_THAT(std::string(g.status().message()), Catch::Contains("regenerate it"));
  }
}

TEST_CASE("tables whose columns do not fit together are refused with a reason", "[graph][tables]") {
  SECTION("both forms") {
    pg::Graph g = TableGraph();
    g.add_ranks();
    CHECK_THAT(Refusal(g), Catch::Contains("both as records and as a rank table"));
  }
  SECTION("columns of different lengths") {
    pg::Graph g = TableGraph();
    g.mutable_communicator_table()->add_split_key(0);
    CHECK_THAT(Refusal(g), Catch::Contains("columns differ in length"));
  }
  SECTION("sizes that do not add up to the members") {
    pg::Graph g = TableGraph();
    g.mutable_communicator_table()->add_members(0);
    CHECK_THAT(Refusal(g), Catch::Contains("sizes do not add up"));
  }
  SECTION("a name prefix out of range") {
    pg::Graph g = TableGraph();
    g.mutable_communicator_table()->set_name_prefix(1, 9);
    CHECK_THAT(Refusal(g), Catch::Contains("names prefix 9"));
  }
  SECTION("a rank's program out of range") {
    pg::Graph g = TableGraph();
    g.mutable_rank_table()->set_program(2, 5);
    CHECK_THAT(Refusal(g), Catch::Contains("rank 2 uses program 5"));
  }
  SECTION("comm slots that do not match the programs") {
    pg::Graph g = TableGraph();
    g.mutable_rank_table()->add_comm_slots(0);
    CHECK_THAT(Refusal(g), Catch::Contains("comm slots in all"));
  }
  SECTION("a process group desc out of range") {
    pg::Graph g = TableGraph();
    g.mutable_process_group_table()->set_desc(0, 4);
    CHECK_THAT(Refusal(g), Catch::Contains("names desc 4"));
  }
  SECTION("a slot whose communicator does not contain the rank") {
    pg::Graph g = TableGraph();
    g.mutable_rank_table()->set_comm_slots(1, 2);  // rank 0's tp slot names tp[1] = {2, 3}
    CHECK_THAT(Refusal(g), Catch::Contains("does not contain it"));
  }
}

TEST_CASE("a rank table beyond the rank limit is refused before the parse", "[graph][tables]") {
  pg::Graph g = TableGraph();
  auto* programs = g.mutable_rank_table()->mutable_program();
  programs->Resize(static_cast<int>(prism::limits::kMaxRanks + 1), 0);
  const std::string bytes = *pg::EncodeGraph(g);  // encoding does not validate
  auto decoded = pg::DecodeGraph(bytes, "big.graph");
  REQUIRE_FALSE(decoded.ok());
  CHECK(absl::IsOutOfRange(decoded.status()));
  CHECK_THAT(std::string(decoded.status().message()), Catch::Contains("more than 4194304 ranks"));
}
