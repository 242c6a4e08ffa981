// NicCalendar: the engine's reservations of one NIC direction
// (daemon/engine/nic_calendar.h).
#include <catch2/catch.hpp>

#include <vector>

#include "daemon/engine/nic_calendar.h"

using prism::engine::EarliestCommonStart;
using prism::engine::NicCalendar;

TEST_CASE("nic calendar: a transfer takes the first gap that holds it", "[engine][nic]") {
  NicCalendar c;
  CHECK(c.NextFree(100, 50) == 100);
  c.Reserve(200, 300, 0);
  CHECK(c.NextFree(100, 100) == 100);  // [100, 200) fits before it
  CHECK(c.NextFree(100, 101) == 300);  // one more nanosecond does not
  CHECK(c.NextFree(250, 10) == 300);
  CHECK(c.NextFree(300, 10) == 300);
  c.Reserve(320, 400, 0);
  CHECK(c.NextFree(290, 20) == 300);   // [300, 320) holds 20
  CHECK(c.NextFree(290, 21) == 400);
  CHECK(c.LatestEnd() == 400);
}

TEST_CASE("nic calendar: touching reservations merge and ended ones are dropped", "[engine][nic]") {
  NicCalendar c;
  c.Reserve(100, 200, 0);
  c.Reserve(300, 400, 0);
  CHECK(c.size() == 2);
  c.Reserve(200, 300, 0);  // fills the gap exactly
  CHECK(c.size() == 1);
  CHECK(c.NextFree(100, 1) == 400);
  c.Reserve(150, 250, 0);  // inside: nothing changes
  CHECK(c.size() == 1);
  c.Reserve(500, 600, /*now=*/450);  // [100, 400) ended before now
  CHECK(c.size() == 1);
  CHECK(c.NextFree(0, 600) == 600);
  c.Reserve(700, 700, 0);  // empty
  CHECK(c.size() == 1);
  CHECK(c.LatestEnd() == 600);
}

TEST_CASE("nic calendar: a common start is free on every calendar", "[engine][nic]") {
  NicCalendar a, b;
  a.Reserve(100, 200, 0);
  b.Reserve(250, 300, 0);
  // [0, 100) is free on both.
  CHECK(EarliestCommonStart({&a, &b}, 0, 100) == 0);
  // 120 long: a pushes to 200, b's [250, 300) then pushes to 300.
  CHECK(EarliestCommonStart({&a, &b}, 0, 120) == 300);
  // 50 long: [200, 250) is free on both.
  CHECK(EarliestCommonStart({&a, &b}, 150, 50) == 200);
  std::vector<const NicCalendar*> none;
  CHECK(EarliestCommonStart(none, 42, 10) == 42);
  CHECK(EarliestCommonStart({&a}, 150, 0) == 150);
}

// NicScheduler (daemon/engine/nic_scheduler.h): the batch of one instant and
// the model switch, on a hand-built world of three actors on three nodes.
#include "daemon/engine/nic_scheduler.h"

namespace {

prism::engine::EngineWorld ThreeNodes() {
  prism::engine::EngineWorld w;
  w.programs.resize(1);
  w.actors.resize(3);
  prism::engine::EngineComm all;
  all.members = {0, 1, 2};
  all.shape = prism::engine::CommShape{3, 3, 1, 1};
  w.comms.push_back(all);
  return w;
}

}  // namespace

TEST_CASE("nic scheduler: requests of one instant go shortest first, whatever the order made", "[engine][nic]") {
  using prism::Nanoseconds;
  const prism::engine::EngineWorld w = ThreeNodes();
  const prism::engine::NetworkModel model(prism::engine::LinkFigures{});
  for (const auto nic : {prism::engine::NicModel::kQueues, prism::engine::NicModel::kCalendar}) {
    prism::engine::NicScheduler s(w, model, nic);
    s.RequestPointToPoint(7, 0, 1, Nanoseconds(0), Nanoseconds(500));  // long, made first
    s.RequestPointToPoint(8, 0, 2, Nanoseconds(0), Nanoseconds(100));  // short, same transmit side
    CHECK(s.HasRequests());
    std::vector<prism::engine::NicGrant> done;
    std::vector<Nanoseconds> checks;
    s.Grant(Nanoseconds(0), Nanoseconds(0), &done, &checks);
    CHECK_FALSE(s.HasRequests());
    REQUIRE(done.size() == 2);
    CHECK(done[0].ticket == 8);
    CHECK(done[0].start == Nanoseconds(0));
    CHECK(done[0].end == Nanoseconds(100));
    CHECK(done[1].ticket == 7);
    CHECK(done[1].start == Nanoseconds(100));  // behind the short one on actor 0's transmit side
    CHECK(done[1].end == Nanoseconds(600));
    CHECK(checks.empty());
  }
}

TEST_CASE("nic scheduler: shared NICs report ends only as time passes", "[engine][nic]") {
  using prism::Nanoseconds;
  const prism::engine::EngineWorld w = ThreeNodes();
  const prism::engine::NetworkModel model(prism::engine::LinkFigures{});
  prism::engine::NicScheduler s(w, model, prism::engine::NicModel::kShared);
  s.RequestPointToPoint(1, 0, 1, Nanoseconds(0), Nanoseconds(100));
  s.RequestPointToPoint(2, 0, 2, Nanoseconds(0), Nanoseconds(100));
  std::vector<prism::engine::NicGrant> done;
  std::vector<Nanoseconds> checks;
  s.Grant(Nanoseconds(0), Nanoseconds(0), &done, &checks);
  CHECK(done.empty());
  REQUIRE(checks.size() == 2);                    // one look per transfer started, the latest counts
  CHECK(checks.back() == Nanoseconds(200));       // two share actor 0's transmit side: both take twice as long
  CHECK(s.NextFinish() == Nanoseconds(200));
  s.FinishBy(Nanoseconds(200), &done);
  REQUIRE(done.size() == 2);
  CHECK(done[0].ticket == 1);
  CHECK(done[0].start == Nanoseconds(0));
  CHECK(done[0].end == Nanoseconds(200));
  CHECK(s.NextFinish() == Nanoseconds::Max());
}
