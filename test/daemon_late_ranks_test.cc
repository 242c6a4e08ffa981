// prismd --late: a virtual rank that starts one iteration late, in
// --simulate (late_ranks.h): the iteration it delays, by how much, in a
// world replayed with equivalence classes and without, and the errors.
#include <catch2/catch.hpp>

#include "daemon/engine/late_ranks.h"
#include "daemon/engine/simulation.h"
#include "nlohmann/json.hpp"
#include "test/daemon_test_graphs.h"

namespace {

using prism::FromMicroseconds;
using prism::FromMilliseconds;
using prism::Nanoseconds;
using prism::engine::LateRank;
using prism::engine::ParseLateRanks;
using prism::engine::Simulate;
using prism::engine::SimulationOptions;
using prism::engine::SimulationResult;

// 16 ranks, 1 ms of compute then a 1 MiB ring all-reduce over all of them,
// every iteration: every rank is on the critical path.
prism::graph::Graph AllReduceEveryIteration() {
  return prism::testing::CollectiveGraph(16, prism::graph::ALLREDUCE, 1 << 20, prism::graph::ALGORITHM_RING,
                                         /*count=*/1, /*compute_ns=*/1'000'000);
}

SimulationResult Run(const prism::graph::Graph& g, std::vector<LateRank> late, bool classes = true,
                     uint64_t iterations = 6) {
  SimulationOptions o;
  o.iterations = iterations;
  o.use_classes = classes;
  o.late = std::move(late);
  auto r = Simulate(g, o);
  REQUIRE(r.ok());
  return *std::move(r);
}

}  // namespace

TEST_CASE("late: a rank on the critical path delays its iteration by exactly its lateness, and no other",
          "[daemon][engine][late]") {
  const auto g = AllReduceEveryIteration();
  const SimulationResult base = Run(g, {});
  CHECK(base.world->actors.size() == 1);  // every rank alike: one class
  const SimulationResult late = Run(g, {{5, 3, FromMicroseconds(4'500)}});
  CHECK(late.world->actors.size() > 1);   // rank 5 alone, the others still in classes
  REQUIRE(late.report.iteration_times.size() == base.report.iteration_times.size());
  for (size_t i = 0; i < base.report.iteration_times.size(); ++i) {
    INFO("iteration " << i);
    const Nanoseconds want = base.report.iteration_times[i] + (i == 3 ? FromMicroseconds(4'500) : Nanoseconds(0));
    CHECK(late.report.iteration_times[i] == want);
  }
  CHECK(late.report.OverOtherIterations(3) == FromMicroseconds(4'500));
  // The same world rank by rank gives the same times.
  const SimulationResult every = Run(g, {{5, 3, FromMicroseconds(4'500)}}, /*classes=*/false);
  CHECK(every.report.iteration_times == late.report.iteration_times);
  // Two late ranks in one iteration: the later one decides.
  const SimulationResult two = Run(g, {{5, 3, FromMilliseconds(2)}, {9, 3, FromMilliseconds(3)}});
  CHECK(two.report.OverOtherIterations(3) == FromMilliseconds(3));
}

TEST_CASE("late: in a pipeline, with classes or rank by rank alike, the late iteration moves and the next does not",
          "[daemon][engine][late]") {
  // TP2 PP4 DP4, 1F1B (32 ranks): how much of a delay passes on depends on
  // where the rank waits anyway; the classes must not change it.
  const auto g = prism::testing::TrainingGraph(prism::testing::SmallTrainingSpec());
  const SimulationResult base = Run(g, {}, true, 4);
  for (uint32_t rank : {0u, 31u}) {
    INFO("late rank " << rank);
    const std::vector<LateRank> late = {{rank, 2, FromMilliseconds(10)}};
    const SimulationResult classes = Run(g, late, true, 4);
    const SimulationResult every = Run(g, late, false, 4);
    CHECK(classes.world->actors.size() < every.world->actors.size());
    CHECK(classes.report.iteration_times == every.report.iteration_times);
    CHECK(classes.report.iteration_times[2] > base.report.iteration_times[2] + FromMilliseconds(3));
    CHECK(classes.report.iteration_times[1] == base.report.iteration_times[1]);
    CHECK(classes.report.iteration_times[3] == base.report.iteration_times[3]);
  }
}

TEST_CASE("late: the report says who was late and what the iteration took beyond the others",
          "[daemon][engine][late]") {
  const SimulationResult r = Run(AllReduceEveryIteration(), {{2, 4, FromMilliseconds(20)}});
  const std::string text = r.report.ToText();
  CHECK(text.find("late (--late): rank 2 starts iteration 4 late by 20 ms") != std::string::npos);
  CHECK(text.find("  iteration 4: +20.000 ms against the median of the other iterations after the first") !=
        std::string::npos);
  const auto j = nlohmann::json::parse(r.report.ToJson(false));
  REQUIRE(j["late"].size() == 1);
  CHECK(j["late"][0]["rank"] == 2);
  CHECK(j["late"][0]["iteration"] == 4);
  CHECK(j["late"][0]["ms"] == 20.0);
  CHECK(j["late"][0]["iteration_over_others_ms"] == 20.0);
  CHECK(Run(AllReduceEveryIteration(), {}).report.ToJson(false).find("\"late\"") == std::string::npos);
}

TEST_CASE("late: what cannot be late is named", "[daemon][engine][late]") {
  const auto g = AllReduceEveryIteration();
  SimulationOptions o;
  o.iterations = 4;
  o.late = {{3, 4, FromMilliseconds(1)}};
  auto r = Simulate(g, o);
  REQUIRE_FALSE(r.ok());
  CHECK(std::string(r.status().message()) == "--late: rank 3: iteration 4 is not replayed (4 iterations, 0 to 3)");
  o.late = {{16, 1, FromMilliseconds(1)}};
  r = Simulate(g, o);
  REQUIRE_FALSE(r.ok());
  CHECK(std::string(r.status().message()).find("rank 16 is outside") != std::string::npos);
  o.late = {{3, 1, FromMilliseconds(1)}};
  o.real_ranks = {3};
  r = Simulate(g, o);
  REQUIRE_FALSE(r.ok());
  CHECK(std::string(r.status().message()) ==
        "--late: rank 3 is a real rank: make it late in its own program (--late is for virtual ranks)");
}

TEST_CASE("late: RANK:ITERATION:MS lists parse, and anything else is refused with the form", "[daemon][late]") {
  auto l = ParseLateRanks("0:10:20, 5:3:0.5");
  REQUIRE(l.ok());
  REQUIRE(l->size() == 2);
  CHECK((*l)[0].rank == 0);
  CHECK((*l)[0].iteration == 10);
  CHECK((*l)[0].extra == FromMilliseconds(20));
  CHECK((*l)[1].rank == 5);
  CHECK((*l)[1].extra == FromMicroseconds(500));
  for (const char* bad : {"", "0:10", "0:10:0", "0:10:-3", "a:1:2", "0:1:2:3", "0:1:nan", "0:1:9e9"}) {
    INFO(bad);
    auto b = ParseLateRanks(bad);
    REQUIRE_FALSE(b.ok());
    CHECK(std::string(b.status().message()).rfind("--late", 0) == 0);
  }
}
