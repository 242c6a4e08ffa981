// Communicator membership against tables worked out by hand from
// Megatron-core's rank order tp-cp-ep-dp-pp (tp fastest, pp slowest), and
// against an independent coordinate-based reference in this file.
#include <algorithm>
#include <catch2/catch.hpp>

#include "graphgen/split_color.h"
#include <map>
#include <set>

#include "graphgen/megatron_layout.h"
#include "test/graphgen_test_util.h"

namespace pg = prism::graph;
using prism::graphgen::testing::GraphOf;
using prism::graphgen::testing::MembersOf;
using prism::graphgen::testing::SmallJobYaml;
using Groups = std::vector<std::vector<uint32_t>>;

TEST_CASE("tp2 pp2 dp2: hand-written Megatron groups", "[graphgen][layout]") {
  // rank = tp + 2*dp + 4*pp
  const auto g = GraphOf(SmallJobYaml("{tp: 2, pp: 2, dp: 2}"));
  CHECK(MembersOf(g, "tp") == Groups{{0, 1}, {2, 3}, {4, 5}, {6, 7}});
  CHECK(MembersOf(g, "dp") == Groups{{0, 2}, {1, 3}, {4, 6}, {5, 7}});
  CHECK(MembersOf(g, "dp_cp") == Groups{{0, 2}, {1, 3}, {4, 6}, {5, 7}});
  CHECK(MembersOf(g, "pp") == Groups{{0, 4}, {1, 5}, {2, 6}, {3, 7}});
  CHECK(MembersOf(g, "embd") == Groups{{0, 4}, {1, 5}, {2, 6}, {3, 7}});
  CHECK(MembersOf(g, "pos_embd") == Groups{{0}, {1}, {2}, {3}});
  CHECK(MembersOf(g, "mp") == Groups{{0, 1, 4, 5}, {2, 3, 6, 7}});
  CHECK(MembersOf(g, "tp_dp") == Groups{{0, 1, 2, 3}, {4, 5, 6, 7}});
  CHECK(MembersOf(g, "cp") == Groups{{0}, {1}, {2}, {3}, {4}, {5}, {6}, {7}});
}

TEST_CASE("tp2 cp2 dp2: hand-written Megatron groups", "[graphgen][layout]") {
  // rank = tp + 2*cp + 4*dp
  const auto g = GraphOf(SmallJobYaml("{tp: 2, cp: 2, dp: 2}"));
  CHECK(MembersOf(g, "tp") == Groups{{0, 1}, {2, 3}, {4, 5}, {6, 7}});
  CHECK(MembersOf(g, "cp") == Groups{{0, 2}, {1, 3}, {4, 6}, {5, 7}});
  CHECK(MembersOf(g, "dp") == Groups{{0, 4}, {1, 5}, {2, 6}, {3, 7}});
  CHECK(MembersOf(g, "dp_cp") == Groups{{0, 2, 4, 6}, {1, 3, 5, 7}});
  CHECK(MembersOf(g, "tp_cp") == Groups{{0, 1, 2, 3}, {4, 5, 6, 7}});
  CHECK(MembersOf(g, "tp_dp_cp") == Groups{{0, 1, 2, 3, 4, 5, 6, 7}});
  CHECK(MembersOf(g, "mp") == Groups{{0, 1}, {2, 3}, {4, 5}, {6, 7}});
  CHECK(MembersOf(g, "pp") == Groups{{0}, {1}, {2}, {3}, {4}, {5}, {6}, {7}});
}

TEST_CASE("tp4 pp2: hand-written Megatron groups", "[graphgen][layout]") {
  // rank = tp + 4*pp
  const auto g = GraphOf(SmallJobYaml("{tp: 4, pp: 2}"));
  CHECK(MembersOf(g, "tp") == Groups{{0, 1, 2, 3}, {4, 5, 6, 7}});
  CHECK(MembersOf(g, "pp") == Groups{{0, 4}, {1, 5}, {2, 6}, {3, 7}});
  CHECK(MembersOf(g, "dp") == Groups{{0}, {1}, {2}, {3}, {4}, {5}, {6}, {7}});
  CHECK(MembersOf(g, "mp") == Groups{{0, 1, 2, 3, 4, 5, 6, 7}});
}

TEST_CASE("tp2 pp2 cp2 dp2: hand-written Megatron groups", "[graphgen][layout]") {
  // rank = tp + 2*cp + 4*dp + 8*pp
  const auto g = GraphOf(SmallJobYaml("{tp: 2, pp: 2, cp: 2, dp: 2}"));
  CHECK(MembersOf(g, "tp") == Groups{{0, 1}, {2, 3}, {4, 5}, {6, 7}, {8, 9}, {10, 11}, {12, 13}, {14, 15}});
  CHECK(MembersOf(g, "cp") == Groups{{0, 2}, {1, 3}, {4, 6}, {5, 7}, {8, 10}, {9, 11}, {12, 14}, {13, 15}});
  CHECK(MembersOf(g, "dp") == Groups{{0, 4}, {1, 5}, {2, 6}, {3, 7}, {8, 12}, {9, 13}, {10, 14}, {11, 15}});
  CHECK(MembersOf(g, "dp_cp") == Groups{{0, 2, 4, 6}, {1, 3, 5, 7}, {8, 10, 12, 14}, {9, 11, 13, 15}});
  CHECK(MembersOf(g, "pp") == Groups{{0, 8}, {1, 9}, {2, 10}, {3, 11}, {4, 12}, {5, 13}, {6, 14}, {7, 15}});
  CHECK(MembersOf(g, "mp") == Groups{{0, 1, 8, 9}, {2, 3, 10, 11}, {4, 5, 12, 13}, {6, 7, 14, 15}});
  CHECK(MembersOf(g, "tp_dp_cp") == Groups{{0, 1, 2, 3, 4, 5, 6, 7}, {8, 9, 10, 11, 12, 13, 14, 15}});
  CHECK(MembersOf(g, "tp_dp") == Groups{{0, 1, 4, 5}, {2, 3, 6, 7}, {8, 9, 12, 13}, {10, 11, 14, 15}});
  CHECK(MembersOf(g, "tp_cp") == Groups{{0, 1, 2, 3}, {4, 5, 6, 7}, {8, 9, 10, 11}, {12, 13, 14, 15}});
}

TEST_CASE("pp4 dp2: embedding groups are first and last stage", "[graphgen][layout]") {
  // rank = dp + 2*pp
  const auto g = GraphOf(SmallJobYaml("{pp: 4, dp: 2}"));
  CHECK(MembersOf(g, "pp") == Groups{{0, 2, 4, 6}, {1, 3, 5, 7}});
  CHECK(MembersOf(g, "embd") == Groups{{0, 6}, {1, 7}});
  CHECK(MembersOf(g, "pos_embd") == Groups{{0}, {1}});
  CHECK(MembersOf(g, "dp") == Groups{{0, 1}, {2, 3}, {4, 5}, {6, 7}});
}

TEST_CASE("tp2 pp2 dp4 ep2 (MoE): expert groups", "[graphgen][layout]") {
  // dense: rank = tp + 2*dp + 8*pp; expert: rank = etp + 2*ep + 4*edp + 8*pp (edp = 2)
  const auto g = GraphOf(SmallJobYaml("{tp: 2, pp: 2, dp: 4, ep: 2, sequence_parallel: true}", "experts: 4, topk: 2"));
  CHECK(MembersOf(g, "dp") == Groups{{0, 2, 4, 6}, {1, 3, 5, 7}, {8, 10, 12, 14}, {9, 11, 13, 15}});
  CHECK(MembersOf(g, "ep") == Groups{{0, 2}, {1, 3}, {4, 6}, {5, 7}, {8, 10}, {9, 11}, {12, 14}, {13, 15}});
  CHECK(MembersOf(g, "edp") == Groups{{0, 4}, {1, 5}, {2, 6}, {3, 7}, {8, 12}, {9, 13}, {10, 14}, {11, 15}});
  CHECK(MembersOf(g, "etp") == Groups{{0, 1}, {2, 3}, {4, 5}, {6, 7}, {8, 9}, {10, 11}, {12, 13}, {14, 15}});
  CHECK(MembersOf(g, "tp_ep") == Groups{{0, 1, 2, 3}, {4, 5, 6, 7}, {8, 9, 10, 11}, {12, 13, 14, 15}});
  CHECK(MembersOf(g, "tp_ep_pp") == Groups{{0, 1, 2, 3, 8, 9, 10, 11}, {4, 5, 6, 7, 12, 13, 14, 15}});
}

TEST_CASE("communicators are created in Megatron's order, as splits of the world", "[graphgen][layout]") {
  const auto g = GraphOf(SmallJobYaml("{tp: 2, pp: 2, dp: 2}"));
  REQUIRE(g.communicators_size() > 1);
  CHECK(g.communicators(0).kind() == pg::COMM_KIND_WORLD);
  CHECK(g.communicators(0).has_init());
  std::vector<std::string> kind_order;
  for (int i = 1; i < g.communicators_size(); ++i) {
    const auto& c = g.communicators(i);
    REQUIRE(c.has_split());
    CHECK(c.split().parent() == 0);
    CHECK(c.split().key() == 0);
    const std::string slot = c.name().substr(0, c.name().find('['));
    CHECK(c.split().color() ==
          prism::graphgen::PyTorchSplitColor(std::vector<uint32_t>(c.members().begin(), c.members().end())));
    if (kind_order.empty() || kind_order.back() != slot) kind_order.push_back(slot);
  }
  // Pipeline, embedding and position-embedding groups alternate (one loop in Megatron).
  const std::vector<std::string> expected_prefix = {"gtp", "dp_cp", "dp",       "cp", "mp",
                                                    "tp",  "pp",    "embd", "pos_embd", "pp"};
  REQUIRE(kind_order.size() > expected_prefix.size());
  CHECK(std::vector<std::string>(kind_order.begin(), kind_order.begin() + expected_prefix.size()) == expected_prefix);
  CHECK(kind_order.back() == "dist_opt");
}

// Reference: a group of token T contains the ranks that agree with its first
// member on every dimension outside T; groups are numbered by the outside
// dimensions, fastest first. Coordinates by plain division.
namespace {
Groups ReferenceGroups(const std::array<uint32_t, 5>& size, const std::set<int>& token) {
  uint64_t world = 1;
  for (uint32_t s : size) world *= s;
  auto coords = [&](uint32_t r) {
    std::array<uint32_t, 5> c{};
    for (int i = 0; i < 5; ++i) {
      c[i] = r % size[i];
      r /= size[i];
    }
    return c;
  };
  std::map<uint64_t, std::vector<uint32_t>> by_index;
  for (uint32_t r = 0; r < world; ++r) {
    const auto c = coords(r);
    uint64_t index = 0, scale = 1;
    for (int i = 0; i < 5; ++i) {
      if (token.count(i)) continue;
      index += c[i] * scale;
      scale *= size[i];
    }
    by_index[index].push_back(r);
  }
  Groups out;
  for (auto& [i, members] : by_index) out.push_back(members);
  return out;
}
}  // namespace

TEST_CASE("GroupsOf matches the coordinate reference on many shapes", "[graphgen][layout]") {
  const std::vector<std::array<uint32_t, 5>> shapes = {
      {2, 1, 1, 2, 2}, {2, 2, 1, 2, 1}, {4, 1, 1, 1, 2}, {2, 2, 1, 2, 2}, {1, 1, 1, 2, 4}, {8, 2, 1, 3, 4},
      {2, 1, 4, 2, 2}, {1, 4, 1, 1, 3}};
  const std::vector<std::pair<std::string, std::set<int>>> tokens = {
      {"tp", {0}}, {"cp", {1}}, {"ep", {2}}, {"dp", {3}}, {"pp", {4}}, {"dp-cp", {1, 3}}, {"tp-pp", {0, 4}},
      {"tp-dp-cp", {0, 1, 3}}, {"tp-dp", {0, 3}}, {"tp-cp", {0, 1}}, {"tp-ep", {0, 2}}, {"tp-ep-pp", {0, 2, 4}}};
  for (const auto& shape : shapes) {
    prism::graphgen::OrderedDims dims{shape};
    for (const auto& [token, set] : tokens) {
      INFO(token << " on " << shape[0] << "," << shape[1] << "," << shape[2] << "," << shape[3] << "," << shape[4]);
      CHECK(prism::graphgen::GroupsOf(dims, token) == ReferenceGroups(shape, set));
    }
  }
}
