// Equivalence classes give exactly the full replay's answer (report and
// every rank's timeline), on graphs where both are cheap.
#include <catch2/catch.hpp>

#include "daemon/engine/equivalence.h"
#include "daemon/engine/simulation.h"
#include "nlohmann/json.hpp"
#include "test/daemon_test_graphs.h"

namespace {

namespace g = prism::graph;

std::vector<uint32_t> AllRanks(const g::Graph& gr) {
  std::vector<uint32_t> v(gr.ranks_size());
  for (uint32_t r = 0; r < v.size(); ++r) v[r] = r;
  return v;
}

// Runs with and without classes; returns the two (report JSON minus replay
// bookkeeping, trace of every rank) and the number of actors with classes.
void CompareModes(const g::Graph& gr, uint64_t expect_actors_at_most) {
  std::string json[2], trace[2];
  uint64_t actors[2] = {0, 0};
  for (int classes = 0; classes < 2; ++classes) {
    prism::engine::SimulationOptions o;
    o.use_classes = classes == 1;
    o.iterations = 2;
    o.trace_ranks = AllRanks(gr);
    auto r = prism::engine::Simulate(gr, o);
    INFO((r.ok() ? "" : std::string(r.status().message())));
    REQUIRE(r.ok());
    auto j = nlohmann::json::parse(r->report.ToJson(false));
    j.erase("replay");
    j.erase("events");
    json[classes] = j.dump();
    trace[classes] = r->TraceJson(gr);
    actors[classes] = r->report.actors;
  }
  CHECK(json[0] == json[1]);
  CHECK(trace[0] == trace[1]);
  CHECK(actors[0] == static_cast<uint64_t>(gr.ranks_size()));
  CHECK(actors[1] <= expect_actors_at_most);
}

}  // namespace

TEST_CASE("classes equal full replay on a symmetric 1F1B training graph", "[daemon][classes]") {
  CompareModes(prism::testing::TrainingGraph(prism::testing::SmallTrainingSpec()), 4);  // one class per stage
}

TEST_CASE("classes equal full replay on world collectives", "[daemon][classes]") {
  CompareModes(prism::testing::CollectiveGraph(64, g::ALLREDUCE, 1 << 24, g::ALGORITHM_DEFAULT, 3, 1000), 1);
  CompareModes(prism::testing::CollectiveGraph(24, g::ALLGATHER, 1 << 20, g::ALGORITHM_RING, 2, 500), 1);
}

TEST_CASE("a straggler splits the classes and the answer still equals full replay", "[daemon][classes]") {
  g::Graph gr = prism::testing::TrainingGraph(prism::testing::SmallTrainingSpec());
  // Rank 9 (stage 1) gets its own, slower copy of its program.
  g::Program slow = gr.programs(1);
  slow.set_id(static_cast<uint32_t>(gr.programs_size()));
  slow.set_name("pp-stage-1-slow");
  for (auto& op : *slow.mutable_ops())
    if (op.has_compute()) op.mutable_compute()->set_duration_ns(op.compute().duration_ns() * 3 / 2);
  *gr.add_programs() = slow;
  gr.mutable_ranks(9)->set_program(slow.id());
  CompareModes(gr, 31);
  prism::engine::SimulationOptions o;
  auto straggler = prism::engine::Simulate(gr, o);
  auto base = prism::engine::Simulate(prism::testing::TrainingGraph(prism::testing::SmallTrainingSpec()), o);
  REQUIRE(straggler.ok());
  REQUIRE(base.ok());
  CHECK(straggler->report.mean_iteration > base->report.mean_iteration);
  CHECK(straggler->report.actors > base->report.actors);
}

TEST_CASE("refinement separates ranks whose communicators differ in placement", "[daemon][classes]") {
  // 12 ranks, 4 per node; comm A = ranks 0..3 (one node), comm B = 4..11 (two nodes).
  g::Graph gr = prism::testing::CollectiveGraph(12, g::ALLREDUCE, 1 << 20, g::ALGORITHM_RING, 1, 0,
                                                {4, 1, 100'000'000'000ull, 3000, 800'000'000'000ull, 500});
  gr.mutable_communicators(0)->clear_members();
  for (uint32_t r = 0; r < 4; ++r) gr.mutable_communicators(0)->add_members(r);
  auto* b = gr.add_communicators();
  b->set_id(1), b->set_name("b"), b->set_kind(g::COMM_KIND_DP);
  for (uint32_t r = 4; r < 12; ++r) b->add_members(r), gr.mutable_ranks(static_cast<int>(r))->set_comm_slots(0, 1);
  CompareModes(gr, 2);
}

TEST_CASE("classes equal full replay when a class exchanges with itself across nodes", "[daemon][classes]") {
  // Context-parallel-like pairs {0,1}, {2,3}, ... one rank per node: each rank
  // sends to +1 and receives from -1 (the same partner) in a group, 3 times.
  g::Graph gr = prism::testing::CollectiveGraph(8, g::ALLREDUCE, 1 << 20, g::ALGORITHM_RING, 1, 0,
                                                {1, 1, 100'000'000'000ull, 3000, 800'000'000'000ull, 500});
  g::Program* p = gr.mutable_programs(0);
  p->add_comm_slot_names("cp");
  for (int i = 0; i < 3; ++i) {
    p->add_ops()->mutable_compute()->set_duration_ns(1000 + i);
    p->add_ops()->mutable_group_start();
    auto* send = p->add_ops()->mutable_send();
    send->set_comm_slot(1), send->set_peer(1), send->set_peer_relative(true), send->set_bytes(8 << 20);
    auto* recv = p->add_ops()->mutable_recv();
    recv->set_comm_slot(1), recv->set_peer(1), recv->set_peer_relative(true), recv->set_bytes(8 << 20);
    p->add_ops()->mutable_group_end();
  }
  for (uint32_t pair = 0; pair < 4; ++pair) {
    auto* c = gr.add_communicators();
    c->set_id(static_cast<uint32_t>(gr.communicators_size() - 1)), c->set_kind(g::COMM_KIND_CP);
    c->add_members(2 * pair), c->add_members(2 * pair + 1);
    gr.mutable_ranks(static_cast<int>(2 * pair))->add_comm_slots(c->id());
    gr.mutable_ranks(static_cast<int>(2 * pair + 1))->add_comm_slots(c->id());
  }
  CompareModes(gr, 1);
}
