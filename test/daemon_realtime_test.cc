// Real-time pacing (best-effort, hard-limit) and the engine inbox.
#include <catch2/catch.hpp>

#include <chrono>
#include <thread>

#include "daemon/engine/network_model.h"
#include "daemon/engine/simulation.h"
#include "test/daemon_test_graphs.h"

namespace g = prism::graph;

TEST_CASE("best-effort real-time replay runs no faster than the wall clock", "[daemon][realtime]") {
  // 5 x 20 ms of compute between small allreduces: >= 100 ms of emulated time.
  const g::Graph gr = prism::testing::CollectiveGraph(8, g::ALLREDUCE, 1024, g::ALGORITHM_RING, 5, 20'000'000);
  prism::engine::SimulationOptions o;
  o.realtime = prism::engine::RealtimeOptions{prism::engine::RealtimeMode::kBestEffort};
  const auto t0 = std::chrono::steady_clock::now();
  auto r = prism::engine::Simulate(gr, o);
  const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  REQUIRE(r.ok());
  CHECK(wall >= r->report.emulated_end.seconds());
  CHECK(r->report.emulated_end.seconds() >= 0.1);
}

TEST_CASE("hard-limit real-time replay fails clearly once it lags past the limit", "[daemon][realtime]") {
  const g::Graph gr = prism::testing::CollectiveGraph(8, g::ALLREDUCE, 1024, g::ALGORITHM_RING, 5, 1000);
  prism::engine::SimulationOptions o;
  prism::engine::RealtimeOptions rt{prism::engine::RealtimeMode::kHardLimit};
  rt.lag_limit = prism::Nanoseconds(0);
  rt.lookahead = prism::Nanoseconds(-50'000'000);  // run 50 ms behind on purpose
  o.realtime = rt;
  auto r = prism::engine::Simulate(gr, o);
  REQUIRE_FALSE(r.ok());
  CHECK(absl::IsDeadlineExceeded(r.status()));
  CHECK(std::string(r.status().message()).find("behind the wall clock") != std::string::npos);
  rt.mode = prism::engine::RealtimeMode::kBestEffort;  // the same lag is tolerated
  o.realtime = rt;
  CHECK(prism::engine::Simulate(gr, o).ok());
}

namespace {

class CompletionLog : public prism::engine::EngineObserver {
 public:
  void OnRealRankOpComplete(uint32_t rank, uint32_t op, prism::Nanoseconds at) override {
    completions.push_back({rank, op, at.count()});
  }
  std::vector<std::tuple<uint32_t, uint32_t, int64_t>> completions;
};

}  // namespace

TEST_CASE("a real rank's progress arrives through the inbox and drives its collectives", "[daemon][realtime]") {
  // Two ranks on one node: compute 1 ms, allreduce 1 MiB. Rank 0 is real and
  // reaches the allreduce at 5 ms: both complete at 5 ms + the network time.
  const g::Graph gr = prism::testing::CollectiveGraph(2, g::ALLREDUCE, 1 << 20, g::ALGORITHM_RING, 1, 1'000'000);
  prism::engine::EngineInbox inbox;
  CompletionLog log;
  prism::engine::SimulationOptions o;
  o.real_ranks = {0};
  o.inbox = &inbox;
  o.observer = &log;
  std::thread injector([&] {
    inbox.Post(prism::engine::RankReachedOp{0, 0, prism::Nanoseconds(0)});
    std::this_thread::sleep_for(std::chrono::milliseconds(20));  // the engine must wait for it
    inbox.Post(prism::engine::RankReachedOp{0, 1, prism::FromMilliseconds(5)});
  });
  auto r = prism::engine::Simulate(gr, o);
  injector.join();
  REQUIRE(r.ok());
  const prism::engine::NetworkModel model(prism::engine::NetworkModel::LinkFiguresFromCluster(gr.cluster()));
  const int64_t net = model.CollectiveTime(g::ALLREDUCE, g::ALGORITHM_RING, prism::Bytes(1 << 20), {2, 1, 2, 2}).count();
  CHECK(r->report.mean_iteration.count() == 5'000'000 + net);
  REQUIRE(log.completions.size() == 1);
  CHECK(log.completions[0] == std::make_tuple(0u, 1u, 5'000'000 + net));
}

TEST_CASE("inbox rejects events for virtual ranks and a stop request ends the run", "[daemon][realtime]") {
  const g::Graph gr = prism::testing::CollectiveGraph(2, g::ALLREDUCE, 1 << 20, g::ALGORITHM_RING, 1, 1'000'000);
  prism::engine::EngineInbox inbox;
  prism::engine::SimulationOptions o;
  o.real_ranks = {0};
  o.inbox = &inbox;
  inbox.Post(prism::engine::RankReachedOp{1, 0, prism::Nanoseconds(0)});
  auto bad = prism::engine::Simulate(gr, o);
  REQUIRE_FALSE(bad.ok());
  CHECK(std::string(bad.status().message()).find("not real") != std::string::npos);
  inbox.Post(prism::engine::StopRequest{});
  auto stopped = prism::engine::Simulate(gr, o);
  REQUIRE_FALSE(stopped.ok());
  CHECK(absl::IsCancelled(stopped.status()));
}
