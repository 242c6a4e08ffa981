// What prism-graphgen needs to match a hand-written PyTorch program
// (examples/train_gpt.py): process_groups: minimal, the vocab-parallel
// cross-entropy's all-reduces, and `inspect --ops RANK`.
#include <catch2/catch.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "graphgen/cli.h"
#include "graphgen/inspect.h"
#include "graphgen/job_spec.h"
#include "proto/graph_file.h"
#include "test/graphgen_test_util.h"

namespace pg = prism::graph;
using nlohmann::json;
using prism::graphgen::testing::GraphOf;
using prism::graphgen::testing::LabelOf;
using prism::graphgen::testing::SlotOf;
using prism::graphgen::testing::SmallJobYaml;

namespace {

std::vector<std::string> CommNames(const pg::Graph& g) {
  std::vector<std::string> names;
  for (const auto& c : g.communicators()) names.push_back(c.name());
  return names;
}

const pg::Op* FindLabel(const pg::Program& p, const std::string& label) {
  for (const auto& op : p.ops())
    if (LabelOf(op) == label) return &op;
  return nullptr;
}

}  // namespace

TEST_CASE("process_groups: minimal keeps the used groups in Megatron's order", "[graphgen][groups]") {
  const auto g = GraphOf(SmallJobYaml("{tp: 2, pp: 2, dp: 2, process_groups: minimal}"));
  CHECK(CommNames(g) == std::vector<std::string>{"world", "dp_cp[0]", "dp_cp[1]", "dp_cp[2]", "dp_cp[3]", "tp[0]",
                                                 "tp[1]", "tp[2]", "tp[3]", "pp[0]", "embd[0]", "pp[1]", "embd[1]",
                                                 "pp[2]", "embd[2]", "pp[3]", "embd[3]"});
  CHECK(g.job().attributes().at("process_groups") == "minimal");
  for (const auto& p : g.programs()) {
    const pg::Op* norm = FindLabel(p, "grad-norm");
    REQUIRE(norm != nullptr);
    CHECK(SlotOf(p, *norm) == "world");  // no distributed-optimizer instance group
  }
  const auto megatron = GraphOf(SmallJobYaml("{tp: 2, pp: 2, dp: 2}"));
  CHECK(megatron.job().attributes().at("process_groups") == "megatron");
  CHECK(SlotOf(megatron.programs(0), *FindLabel(megatron.programs(0), "grad-norm")) == "dist_opt");
}

TEST_CASE("process_groups: minimal adds cp, mp, ep and edp only where used", "[graphgen][groups]") {
  auto has = [](const pg::Graph& g, const std::string& slot) {
    for (const auto& c : g.communicators())
      if (c.name().rfind(slot + "[", 0) == 0) return true;
    return false;
  };
  const auto ddp = GraphOf(SmallJobYaml("{tp: 2, pp: 1, dp: 4, distributed_optimizer: false, "
                                        "process_groups: minimal}"));
  CHECK(has(ddp, "mp"));
  CHECK_FALSE(has(ddp, "embd"));  // one stage: no tied-embedding exchange
  const auto cp = GraphOf(SmallJobYaml("{tp: 2, cp: 2, dp: 2, process_groups: minimal}"));
  CHECK(has(cp, "cp"));
  CHECK_FALSE(has(cp, "tp_cp"));
  const auto moe = GraphOf(SmallJobYaml("{tp: 2, pp: 2, dp: 4, ep: 2, sequence_parallel: true, "
                                        "process_groups: minimal}", "experts: 4, topk: 2"));
  CHECK(has(moe, "ep"));
  CHECK(has(moe, "edp"));
  CHECK_FALSE(has(moe, "etp"));
}

TEST_CASE("process_groups: a bad value names the key", "[graphgen][groups]") {
  auto spec = prism::graphgen::ParseJobSpec(SmallJobYaml("{tp: 2, process_groups: some}"));
  REQUIRE_FALSE(spec.ok());
  CHECK(std::string(spec.status().message()).find("parallel.process_groups: must be megatron, minimal or split_group") !=
        std::string::npos);
}

TEST_CASE("the last stage all-reduces the vocab-parallel loss three times per microbatch", "[graphgen][loss]") {
  const uint64_t microbatches = 4, tokens = 1024;  // micro 1 x seq 1024
  const auto g = GraphOf(SmallJobYaml("{tp: 2, pp: 2, dp: 2, global_batch: 8}"));
  auto loss = [](const pg::Op& op) {
    return op.has_collective() && op.collective().label().rfind("f.loss.tp-ar-", 0) == 0;
  };
  CHECK(prism::graphgen::testing::TallyOps(g.programs(0), loss).count == 0);
  const auto last = prism::graphgen::testing::TallyOps(g.programs(1), loss);
  CHECK(last.count == 3 * microbatches);
  CHECK(last.bytes == 3 * microbatches * tokens * 4);
  for (const auto& op : g.programs(1).ops())
    if (loss(op)) CHECK(op.collective().dtype() == pg::FP32);
  const auto no_tp = GraphOf(SmallJobYaml("{tp: 1, pp: 2, dp: 4, global_batch: 16}"));
  CHECK(prism::graphgen::testing::TallyOps(no_tp.programs(1), loss).count == 0);
}

TEST_CASE("inspect --ops resolves a rank's communicators and peers", "[graphgen][inspect]") {
  const auto g = GraphOf(SmallJobYaml("{tp: 2, pp: 2, dp: 2, global_batch: 4, process_groups: minimal}"));
  auto program = prism::graphgen::RankProgram(g, 3);  // tp 1, dp 1, stage 0
  REQUIRE(program.ok());
  const json& p = *program;
  CHECK(p.at("schema") == prism::graphgen::kRankProgramSchema);
  CHECK(p.at("name") == "pp-stage-0");
  CHECK(p.at("ops").size() == static_cast<size_t>(g.programs(0).ops_size()));
  bool saw_send = false, saw_tp = false;
  for (const json& op : p.at("ops")) {
    if (op.at("type") == "send") {
      saw_send = true;
      CHECK(op.at("comm_name") == "pp[3]");
      CHECK(op.at("peer") == 1);
      CHECK(op.at("peer_rank") == 7);
    }
    if (op.at("type") == "collective" && op.at("slot") == "tp") {
      saw_tp = true;
      CHECK(op.at("comm_name") == "tp[1]");
    }
  }
  CHECK(saw_send);
  CHECK(saw_tp);
  CHECK(p.at("slots").at(0).at("members").size() == 8);
  CHECK_FALSE(prism::graphgen::RankProgram(g, 8).ok());
}

TEST_CASE("inspect --ops CLI prints one JSON object, a bad rank exits 2", "[graphgen][inspect]") {
  const std::string path = prism::graphgen::testing::TempPath("ops.graph");
  REQUIRE(pg::WriteGraphFile(GraphOf(SmallJobYaml("{tp: 2, pp: 2, dp: 2}")), path).ok());
  std::ostringstream o, e;
  REQUIRE(prism::graphgen::RunGraphgenCli({"prism-graphgen", "inspect", path, "--ops", "5"}, o, e) == 0);
  CHECK(json::parse(o.str()).at("rank") == 5);
  std::ostringstream o2, e2;
  CHECK(prism::graphgen::RunGraphgenCli({"prism-graphgen", "inspect", path, "--ops", "99"}, o2, e2) ==
        prism::graphgen::kExitBadInput);
  CHECK(e2.str().find("the graph has ranks 0 to 7") != std::string::npos);
}
