// The PyTorch process groups of a `process_groups: megatron` graph
// (Graph.process_groups): Gloo groups in their place, per Megatron release,
// and the graph file's checks on the list. The full tables of Megatron-core's
// groups are checked by test/megatron_groups_fixture_test.py.
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "graphgen/job_spec.h"
#include "graphgen/split_color.h"
#include "proto/graph_file.h"
#include "test/graphgen_test_util.h"

namespace pg = prism::graph;
using prism::graphgen::testing::GraphOf;
using prism::graphgen::testing::SmallJobYaml;

namespace {

// "<name>/<backend>" of process groups [first, first + n).
std::vector<std::string> GroupsFrom(const pg::Graph& g, int first, int n) {
  std::vector<std::string> out;
  for (int k = first; k < first + n && k < g.process_groups_size(); ++k) {
    const auto& p = g.process_groups(k);
    out.push_back(p.backend() == pg::ProcessGroup::GLOO
                      ? p.name() + "/gloo"
                      : g.communicators(static_cast<int>(p.communicator())).name() + "/nccl");
  }
  return out;
}

}  // namespace

TEST_CASE("process groups: GTP singletons first, each Gloo group right after its NCCL twin", "[graphgen][groups]") {
  // tp2 pp2 dp2: 8 ranks. newest Megatron: gtp[0..7], then dp_cp[i] + dp_cp_gloo[i], dp[i] + dp_gloo[i].
  const auto g = GraphOf(SmallJobYaml("{tp: 2, pp: 2, dp: 2}"));
  REQUIRE(g.process_groups_size() > 0);
  CHECK(g.process_groups(0).communicator() == 0);
  CHECK(GroupsFrom(g, 1, 2) == std::vector<std::string>{"gtp[0]/nccl", "gtp[1]/nccl"});
  CHECK(GroupsFrom(g, 9, 6) == std::vector<std::string>{"dp_cp[0]/nccl", "dp_cp_gloo[0]/gloo", "dp_cp[1]/nccl",
                                                        "dp_cp_gloo[1]/gloo", "dp_cp[2]/nccl", "dp_cp_gloo[2]/gloo"});
  CHECK(GroupsFrom(g, 17, 2) == std::vector<std::string>{"dp[0]/nccl", "dp_gloo[0]/gloo"});
  CHECK(g.process_groups(10).desc() == "DATA_PARALLEL_GROUP_WITH_CP_GLOO");
  CHECK(std::vector<uint32_t>(g.process_groups(10).members().begin(), g.process_groups(10).members().end()) ==
        std::vector<uint32_t>{0, 2});
  // Every communicator once, in order; the Gloo groups are not communicators.
  int gloo = 0;
  for (const auto& p : g.process_groups()) gloo += p.backend() == pg::ProcessGroup::GLOO ? 1 : 0;
  CHECK(gloo == 4 + 4 + 4);  // dp_cp, dp, edp: 4 groups each
  CHECK(g.process_groups_size() == g.communicators_size() + gloo);
  CHECK(prism::graph::ValidateGraph(g).ok());
  CHECK(g.job().attributes().at("megatron_version") == "core_v0.19.0");
}

TEST_CASE("process groups: core_v0.18.2 has no GTP groups and gloo_groups: false drops the Gloo groups",
          "[graphgen][groups]") {
  const auto old = GraphOf(SmallJobYaml("{tp: 2, pp: 2, dp: 2, megatron_version: core_v0.18.2}"));
  CHECK(GroupsFrom(old, 1, 2) == std::vector<std::string>{"dp_cp[0]/nccl", "dp_cp_gloo[0]/gloo"});
  const auto no_gloo = GraphOf(SmallJobYaml("{tp: 2, pp: 2, dp: 2, gloo_groups: false}"));
  CHECK(no_gloo.process_groups_size() == no_gloo.communicators_size());
  CHECK(GroupsFrom(no_gloo, 9, 2) == std::vector<std::string>{"dp_cp[0]/nccl", "dp_cp[1]/nccl"});
  const auto minimal = GraphOf(SmallJobYaml("{tp: 2, pp: 2, dp: 2, process_groups: minimal}"));
  CHECK(minimal.process_groups_size() == minimal.communicators_size());
}

TEST_CASE("process groups: a bad megatron_version names the key and the choices", "[graphgen][groups]") {
  auto spec = prism::graphgen::ParseJobSpec(SmallJobYaml("{tp: 2, megatron_version: core_v0.17}"));
  REQUIRE_FALSE(spec.ok());
  CHECK(std::string(spec.status().message()).find("parallel.megatron_version: must be newest, d98e8a64dd, "
                                                  "core_v0.19.0 or core_v0.18.2") != std::string::npos);
}

TEST_CASE("process groups: the graph file refuses a list that does not follow the communicators",
          "[graphgen][groups]") {
  auto g = GraphOf(SmallJobYaml("{tp: 2, pp: 2, dp: 2}"));
  REQUIRE(prism::graph::ValidateGraph(g).ok());
  auto skipped = g;
  skipped.mutable_process_groups(1)->set_communicator(2);
  CHECK(std::string(prism::graph::ValidateGraph(skipped).message()).find("names communicator 2, expected 1") !=
        std::string::npos);
  auto unsorted = g;
  auto* gloo = unsorted.mutable_process_groups(10);
  REQUIRE(gloo->backend() == pg::ProcessGroup::GLOO);
  gloo->set_members(0, 7);
  CHECK(std::string(prism::graph::ValidateGraph(unsorted).message()).find("out of order") != std::string::npos);
  auto short_list = g;
  short_list.mutable_process_groups()->RemoveLast();
  CHECK_FALSE(prism::graph::ValidateGraph(short_list).ok());
}

// process_groups: split_group: each kind's groups are one split_group call
// (DeviceMesh on an eager default group): consecutive communicators, c10d's
// colors, same_call on every group of the kind after its first.
TEST_CASE("process groups: split_group makes each kind one split call with c10d's colors", "[graphgen][groups]") {
  const auto rules = GraphOf(SmallJobYaml("{tp: 2, pp: 2, dp: 4, process_groups: split_group}"));
  CHECK(rules.job().attributes().at("process_groups") == "split_group");
  auto bytes = pg::EncodeGraph(rules);
  REQUIRE(bytes.ok());
  auto g = pg::DecodeGraph(*bytes);
  REQUIRE(g.ok());
  int calls = 0;
  std::string previous_kind;
  for (int c = 1; c < g->communicators_size(); ++c) {
    const auto& comm = g->communicators(c);
    INFO(comm.name());
    REQUIRE(comm.has_split());
    const std::string kind = comm.name().substr(0, comm.name().find('['));
    CHECK(comm.split().same_call() == (kind == previous_kind));  // a kind's groups follow each other
    calls += kind != previous_kind;
    previous_kind = kind;
    CHECK(comm.split().color() ==
          prism::graphgen::SplitGroupColor({comm.members().begin(), comm.members().end()}));
  }
  CHECK(calls == 4);  // dp_cp, tp, pp, embd (tied embeddings); mp only without the distributed optimizer
  // minimal: new_group's colors, one call per group.
  auto plain = pg::DecodeGraph(*pg::EncodeGraph(GraphOf(SmallJobYaml("{tp: 2, pp: 2, dp: 4, process_groups: minimal}"))));
  REQUIRE(plain.ok());
  for (int c = 1; c < plain->communicators_size(); ++c) {
    const auto& comm = plain->communicators(c);
    CHECK_FALSE(comm.split().same_call());
    CHECK(comm.split().color() == prism::graphgen::PyTorchSplitColor({comm.members().begin(), comm.members().end()}));
  }
}
