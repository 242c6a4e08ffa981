// Format 3's rules (graph.proto: GraphRules, GroupFamily, RankBlock): a job
// written as rules reads back as the tables and records its other forms
// hold, the header says version 3, and rules that do not hold together are
// refused with a reason naming the family or block.
#include <catch2/catch.hpp>
#include <google/protobuf/util/message_differencer.h>

#include <string>
#include <vector>

#include "graphgen/job_graph.h"
#include "graphgen/job_spec.h"
#include "graphgen/split_color.h"
#include "proto/graph_file.h"
#include "proto/graph_rules.h"
#include "proto/graph_topology.h"

namespace pg = prism::graph;
using prism::graphgen::JobGraphForm;

namespace {

pg::Graph JobGraph(const std::string& example, JobGraphForm form) {
  auto spec = prism::graphgen::ParseJobSpecFile(std::string(PRISM_EXAMPLES_DIR) + "/" + example + ".yaml");
  REQUIRE(spec.ok());
  auto g = prism::graphgen::GenerateJobGraph(*spec, form);
  REQUIRE(g.ok());
  return std::move(*g);
}

// Eight ranks (tp 2 x pp 4): the world, two pp groups, their embedding
// groups (first and last stage) and Gloo twins of the pp groups, numbered
// as Megatron's loop creates them. Program 0 (stages 0 and 3) has slots
// world, pp, embd; program 1 (stages 1 and 2) world, pp.
pg::Graph RuleGraph() {
  pg::Graph g;
  g.mutable_cluster()->set_nodes(2);
  g.mutable_cluster()->set_gpus_per_node(4);
  for (int i = 0; i < 2; ++i) {
    auto* p = g.add_programs();
    p->set_id(static_cast<uint32_t>(i));
    p->set_streams(1);
    p->add_comm_slot_names("world");
    p->add_comm_slot_names("pp");
    if (i == 0) p->add_comm_slot_names("embd");
    auto* coll = p->add_ops()->mutable_collective();
    coll->set_kind(pg::ALLREDUCE);
    coll->set_comm_slot(1);
    coll->set_bytes(1 << 20);
  }
  auto& rules = *g.mutable_rules();
  auto family = [&](uint32_t member_dims, const char* name, pg::CommKind kind) -> pg::GroupFamily& {
    pg::GroupFamily& f = *rules.add_families();
    f.add_radix(2), f.add_radix(4);
    f.set_member_dims(member_dims);
    f.set_name(name);
    f.set_kind(kind);
    return f;
  };
  pg::GroupFamily& world = family(3, "world", pg::COMM_KIND_WORLD);
  world.set_plain_name(true);
  pg::GroupFamily& pp = family(2, "pp", pg::COMM_KIND_PP);  // creation order: pp[0] embd[0] gloo[0] pp[1] ...
  pp.set_first_communicator(1), pp.set_communicator_stride(2), pp.set_split_of_first(true);
  pp.set_first_process_group(1), pp.set_process_group_stride(3), pp.set_desc("PIPELINE");
  pg::GroupFamily& embd = family(2, "embd", pg::COMM_KIND_EMBEDDING);
  embd.set_select_dim(2), embd.add_select(0), embd.add_select(3);
  embd.set_first_communicator(2), embd.set_communicator_stride(2), embd.set_split_of_first(true);
  embd.set_first_process_group(2), embd.set_process_group_stride(3), embd.set_desc("EMBEDDING");
  pg::GroupFamily& gloo = family(2, "pp_gloo", pg::COMM_KIND_OTHER);
  gloo.set_gloo(true), gloo.set_first_process_group(3), gloo.set_process_group_stride(3);
  for (uint32_t program : {0u, 1u, 1u, 0u}) {
    pg::RankBlock& b = *rules.add_blocks();
    b.set_ranks(2);
    b.set_program(program);
    b.add_slot_family(0), b.add_slot_family(1);
    if (program == 0) b.add_slot_family(2);
  }
  return g;
}

std::vector<uint32_t> Members(const pg::Topology& t, uint32_t c) { return {t.members(c).begin(), t.members(c).end()}; }

std::string Refusal(const pg::Graph& g) {
  const absl::Status s = pg::ValidateGraph(g);
  CHECK(absl::IsInvalidArgument(s));
  return std::string(s.message());
}

}  // namespace

TEST_CASE("rules expand to the communicators, process groups and slots they describe", "[graph][rules]") {
  pg::Graph g = RuleGraph();
  REQUIRE(pg::CheckRules(g).ok());
  REQUIRE(pg::ValidateGraph(g).ok());
  pg::ExpandRules(g);
  CHECK_FALSE(g.has_rules());
  auto t = pg::Topology::Of(g);
  REQUIRE(t.ok());
  REQUIRE(t->ranks() == 8);
  REQUIRE(t->communicators() == 5);
  REQUIRE(t->process_groups() == 7);
  CHECK(t->name(0) == "world");
  CHECK(Members(*t, 0) == std::vector<uint32_t>{0, 1, 2, 3, 4, 5, 6, 7});
  CHECK_FALSE(t->is_split(0));
  CHECK(t->name(1) == "pp[0]");
  CHECK(Members(*t, 1) == std::vector<uint32_t>{0, 2, 4, 6});
  CHECK(t->name(2) == "embd[0]");
  CHECK(Members(*t, 2) == std::vector<uint32_t>{0, 6});
  CHECK(t->name(3) == "pp[1]");
  CHECK(Members(*t, 3) == std::vector<uint32_t>{1, 3, 5, 7});
  CHECK(Members(*t, 4) == std::vector<uint32_t>{1, 7});
  CHECK(t->is_split(4));
  CHECK(t->split_parent(4) == 0);
  CHECK(t->split_color(4) == prism::graphgen::PyTorchSplitColor({1, 7}));
  CHECK(t->process_group_is_gloo(3));
  CHECK(t->process_group_name(3) == "pp_gloo[0]");
  CHECK(std::vector<uint32_t>(t->process_group_members(6).begin(), t->process_group_members(6).end()) ==
        std::vector<uint32_t>{1, 3, 5, 7});
  CHECK(t->process_group_desc(4) == "PIPELINE");
  CHECK(t->process_group_communicator(4) == 3);
  CHECK(std::vector<uint32_t>(t->slots(6).begin(), t->slots(6).end()) == std::vector<uint32_t>{0, 1, 2});
  CHECK(std::vector<uint32_t>(t->slots(3).begin(), t->slots(3).end()) == std::vector<uint32_t>{0, 3});
  CHECK(t->program(3) == 1);
}

TEST_CASE("a job written as rules reads back as its tables and its records", "[graph][rules]") {
  for (const char* example : {"mixtral-8x7b-128", "llama3-70b-1024"}) {
    CAPTURE(example);
    const pg::Graph rules = JobGraph(example, JobGraphForm::kRules);
    const pg::Graph tables = JobGraph(example, JobGraphForm::kTables);
    const pg::Graph records = JobGraph(example, JobGraphForm::kRecords);
    REQUIRE(rules.has_rules());
    REQUIRE(pg::ValidateGraph(rules).ok());
    const auto bytes = pg::EncodeGraph(rules);
    REQUIRE(bytes.ok());
    CHECK(static_cast<uint8_t>((*bytes)[8]) == pg::kGraphFormatVersion);
    CHECK(bytes->size() < pg::EncodeGraph(tables)->size());
    auto kept = pg::DecodeGraph(*bytes, "<memory>", {.keep_tables = true});
    REQUIRE(kept.ok());
    CHECK(kept->format_version() == pg::kGraphFormatVersionTables);
    kept->clear_format_version();
    CHECK(google::protobuf::util::MessageDifferencer::Equals(*kept, tables));
    auto expanded = pg::DecodeGraph(*bytes);
    REQUIRE(expanded.ok());
    CHECK(expanded->format_version() == pg::kGraphFormatVersionRecords);
    expanded->clear_format_version();
    CHECK(google::protobuf::util::MessageDifferencer::Equals(*expanded, records));
  }
}

TEST_CASE("a header older than the rules it holds is refused", "[graph][rules]") {
  std::string bytes = *pg::EncodeGraph(RuleGraph());
  REQUIRE(static_cast<uint8_t>(bytes[8]) == 3);
  bytes[8] = 2;
  auto g = pg::DecodeGraph(bytes, "x.graph");
  REQUIRE_FALSE(g.ok());
  CHECK_THAT(std::string(g.status().message()), Catch::Contains("holds format 3's rules"));
  CHECK_THAT(std::string(g.status().message()), Catch::Contains("regenerate it"));
}

TEST_CASE("rules that do not hold together are refused with a reason", "[graph][rules]") {
  pg::Graph g = RuleGraph();
  SECTION("rules beside tables") {
    g.mutable_rank_table()->add_program(0);
    CHECK_THAT(Refusal(g), Catch::Contains("holds rules and also records or tables"));
  }
  SECTION("radices that do not multiply to the world") {
    g.mutable_rules()->mutable_families(1)->set_radix(1, 3);
    CHECK_THAT(Refusal(g), Catch::Contains("multiply to 6, not the world's 8 ranks"));
  }
  SECTION("two groups numbered alike") {
    g.mutable_rules()->mutable_families(2)->set_first_communicator(1);
    CHECK_THAT(Refusal(g), Catch::Contains("which another group has"));
  }
  SECTION("numbers beyond the groups") {
    g.mutable_rules()->mutable_families(3)->set_process_group_stride(4);
    CHECK_THAT(Refusal(g), Catch::Contains("beyond the 7 the rules hold"));
  }
  SECTION("selected values out of order") {
    auto* f = g.mutable_rules()->mutable_families(2);
    f->set_select(0, 3), f->set_select(1, 0);
    CHECK_THAT(Refusal(g), Catch::Contains("not ascending below its radix"));
  }
  SECTION("a select dim that is not a member dim") {
    g.mutable_rules()->mutable_families(2)->set_select_dim(1);
    CHECK_THAT(Refusal(g), Catch::Contains("not one of its member dims"));
  }
  SECTION("a block whose ranks no group of a slot's family holds") {
    g.mutable_rules()->mutable_blocks(1)->set_program(0);  // stage 1 with the embedding slot
    g.mutable_rules()->mutable_blocks(1)->add_slot_family(2);
    CHECK_THAT(Refusal(g), Catch::Contains("rule block 1 holds rank 2, which no embd group holds"));
  }
  SECTION("a slot naming a Gloo family") {
    g.mutable_rules()->mutable_blocks(0)->set_slot_family(1, 3);
    CHECK_THAT(Refusal(g), Catch::Contains("not NCCL"));
  }
  SECTION("a block whose slots do not match its program") {
    g.mutable_rules()->mutable_blocks(1)->add_slot_family(0);
    CHECK_THAT(Refusal(g), Catch::Contains("rule block 1 maps 3 comm slots, its program has 2"));
  }
}

TEST_CASE("the checks from the rules alone refuse what the full checks refuse, but send/recv pairs", "[graph][rules]") {
  pg::Graph g = RuleGraph();
  REQUIRE(pg::ValidateGraphRules(g).ok());
  SECTION("a root beyond the smallest group its slot names") {
    g.mutable_programs(1)->mutable_ops(0)->mutable_collective()->set_root(4);  // pp groups hold 4 ranks
    for (const absl::Status& s : {pg::ValidateGraphRules(g), pg::ValidateGraph(g)}) {
      CHECK(absl::IsInvalidArgument(s));
      CHECK_THAT(std::string(s.message()), Catch::Contains("names peer/root 4 in a communicator of 4 ranks"));
    }
  }
  SECTION("NCCL process groups out of the communicators' order") {
    auto* pp = g.mutable_rules()->mutable_families(1);
    auto* embd = g.mutable_rules()->mutable_families(2);
    pp->set_first_communicator(2), embd->set_first_communicator(1);  // pg 1 (pp[0]) names communicator 2
    for (const absl::Status& s : {pg::ValidateGraphRules(g), pg::ValidateGraph(g)})
      CHECK_THAT(std::string(s.message()), Catch::Contains("process group 1 names communicator 2, expected 1"));
  }
  SECTION("a Gloo default group") {
    auto* world = g.mutable_rules()->mutable_families(0);
    auto* gloo = g.mutable_rules()->mutable_families(3);
    world->set_first_process_group(6), gloo->set_first_process_group(0);  // Gloo groups 0 and 3
    CHECK_THAT(std::string(pg::ValidateGraphRules(g).message()), Catch::Contains("process group 0"));
    CHECK_THAT(std::string(pg::ValidateGraph(g).message()), Catch::Contains("process group 0"));
  }
}
