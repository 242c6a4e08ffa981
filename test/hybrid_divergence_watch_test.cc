// prismd --on-divergence: what the DivergenceWatch decides (the run-level
// behaviour is checked with prism run in test/prism_launcher_test.py).
#include <catch2/catch.hpp>

#include <string>

#include "daemon/hybrid/divergence_watch.h"

using prism::daemon::DivergenceSource;
using prism::daemon::DivergenceWatch;
using prism::daemon::OnDivergence;

TEST_CASE("on-divergence stop: the first divergence is the reason to stop and is given once", "[hybrid][divergence]") {
  DivergenceWatch watch(OnDivergence::kStop);
  CHECK_FALSE(watch.Tick().stop_reason);
  watch.Report(DivergenceSource::kStore, "rank 5 waits for NCCL id 'x': new_group call #999");
  watch.Report(DivergenceSource::kOperations, "real rank 5: an all-reduce the graph does not have");
  const auto d = watch.Tick();
  REQUIRE(d.stop_reason);
  CHECK(*d.stop_reason == "PyTorch's store: rank 5 waits for NCCL id 'x': new_group call #999");
  CHECK(d.notes.empty());
  CHECK_FALSE(watch.Tick().stop_reason);
  CHECK(watch.reported() == 2);
}

TEST_CASE("on-divergence follow: no stop and one note per kind saying what prismd does", "[hybrid][divergence]") {
  DivergenceWatch watch(OnDivergence::kFollow);
  watch.Report(DivergenceSource::kOperations, "real rank 0: op A");
  watch.Report(DivergenceSource::kOperations, "real rank 0: op B");
  watch.Report(DivergenceSource::kBootstrap, "split #5 produced 15 members");
  const auto d = watch.Tick();
  CHECK_FALSE(d.stop_reason);
  REQUIRE(d.notes.size() == 2);
  CHECK(d.notes[0].find("op A") != std::string::npos);
  CHECK(d.notes[0].find("timed as if it were on time") != std::string::npos);
  CHECK(d.notes[1].find("split #5") != std::string::npos);
  CHECK(d.notes[1].find("kept in place of the graph's") != std::string::npos);
  CHECK(watch.Tick().notes.empty());
}

TEST_CASE("a stall is a divergence: stop ends the run with it, follow says prismd keeps waiting",
          "[hybrid][divergence][stall]") {
  DivergenceWatch stop(OnDivergence::kStop);
  stop.Report(DivergenceSource::kStall, "real rank 0 is in RECV #4 ...");
  const auto d = stop.Tick();
  REQUIRE(d.stop_reason);
  CHECK(*d.stop_reason == "a stall: real rank 0 is in RECV #4 ...");
  DivergenceWatch follow(OnDivergence::kFollow);
  follow.Report(DivergenceSource::kStall, "real rank 0 is in RECV #4 ...");
  const auto f = follow.Tick();
  CHECK_FALSE(f.stop_reason);
  REQUIRE(f.notes.size() == 1);
  CHECK(f.notes[0].find("prismd keeps waiting") != std::string::npos);
}

TEST_CASE("on-divergence: a value other than stop or follow names the flag", "[hybrid][divergence]") {
  auto bad = prism::daemon::ParseOnDivergence("ignore");
  REQUIRE_FALSE(bad.ok());
  CHECK(std::string(bad.status().message()).find("--on-divergence must be stop or follow") != std::string::npos);
  CHECK(*prism::daemon::ParseOnDivergence("follow") == OnDivergence::kFollow);
}
