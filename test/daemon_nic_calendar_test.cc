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
