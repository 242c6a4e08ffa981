// Which steps of a ring the lockstep floor holds (PRISM_RING_FLOOR,
// plugin/arrival.h): model holds every step, end only the ring's last. A
// real rank whose own steps alternate slower and faster than the model's
// ends the ring late under model (the floor keeps it from gaining back its
// slow steps) and on the model's time under end.
#include <catch2/catch.hpp>

#include <cstdint>
#include <cstdlib>
#include <string>

#include "plugin/arrival.h"
#include "plugin/settings.h"

namespace {

using prism::BitsPerSecond;
using prism::Nanoseconds;
using prism::plugin::ArrivalForm;
using prism::plugin::ArrivalInput;
using prism::plugin::ResolveArrival;
using prism::plugin::RingLastStep;

constexpr int64_t kStart = 1'000'000;
constexpr int64_t kL = 10'000;
constexpr int64_t kC = 12'000;
constexpr int64_t kWire = 8'000;           // W/h; a slice is 4 us
constexpr int64_t kStep = kWire / 2 + kL + kC;  // the model's step, 26 us
constexpr uint64_t kMembers = 9;           // an all-gather: 8 steps

// The ring's end as this rank sees it: its receive of each step, the own
// send of step s leaving `own(s)` - L after its receive of step s-1 (the
// ring's start for s = 0), so without a floor a step costs it own(s).
template <typename Own>
int64_t RingEnd(uint32_t floor_from, Own own) {
  ArrivalInput in;
  in.form = ArrivalForm::kMirror;
  in.link = {BitsPerSecond(0), Nanoseconds(kL)};
  in.ring_start = Nanoseconds(kStart);
  in.step_cost = Nanoseconds(kC);
  in.step_wire = Nanoseconds(kWire);
  in.ring_floor_from = floor_from;
  int64_t recv = kStart;
  Nanoseconds wire_end(0);
  for (uint32_t s = 0; s <= RingLastStep(false, kMembers); ++s) {
    in.ring_step = s;
    in.own_send_done = Nanoseconds(recv + own(s) - kL);
    const prism::plugin::Arrival a = ResolveArrival(in, wire_end);
    recv = a.done.count();
    wire_end = a.wire_end;
  }
  return recv;
}

// The model's end of that ring: the floor of its last step.
int64_t ModelEnd() {
  ArrivalInput in;
  in.link = {BitsPerSecond(0), Nanoseconds(kL)};
  in.ring_start = Nanoseconds(kStart);
  in.ring_step = RingLastStep(false, kMembers);
  in.step_cost = Nanoseconds(kC);
  in.step_wire = Nanoseconds(kWire);
  return prism::plugin::RingFloor(in).count();
}

}  // namespace

TEST_CASE("arrival: the ring's last step", "[plugin][unit][arrival][ring-floor]") {
  CHECK(RingLastStep(false, 2048) == 2046);
  CHECK(RingLastStep(true, 2048) == 4093);
  CHECK(RingLastStep(false, 2) == 0);
  CHECK(RingLastStep(true, 2) == 1);
  CHECK(RingLastStep(false, 1) == 0);
}

TEST_CASE("arrival: PRISM_RING_FLOOR=end lets a rank's faster steps pay back its slower ones",
          "[plugin][unit][arrival][ring-floor]") {
  const uint32_t last = RingLastStep(false, kMembers);
  const int64_t model_end = ModelEnd();  // start + 8 (W/2h + L + c) + W/2h - c: 200 us
  REQUIRE(model_end == kStart + 8 * kStep + kWire / 2 - kC);
  // Own steps alternating 15 us and 35 us, fast first: without a floor the
  // rank ends on the model's time (8 steps of 25 us on average).
  auto alternating = [](uint32_t s) { return s % 2 == 0 ? int64_t{15'000} : int64_t{35'000}; };
  // model: the floor holds each fast step (the rank cannot gain on the
  // model), each slow step then starts from the floor, and the ring ends 9 us
  // late (step 7 leaves from step 6's floor, 174 us, plus 35 us).
  CHECK(RingEnd(0, alternating) == model_end + 9'000);
  // end: the fast steps pay the slow ones back; on the model's time.
  CHECK(RingEnd(last, alternating) == model_end);
  // Both hold a rank whose own steps are far faster than the model's
  // (an LL ring's empty steps) to the model's end.
  auto fast = [](uint32_t) { return int64_t{2'000}; };
  CHECK(RingEnd(0, fast) == model_end);
  CHECK(RingEnd(last, fast) == model_end);
  // And neither holds back a rank slower than the model at every step.
  auto slow = [](uint32_t) { return int64_t{31'000}; };
  CHECK(RingEnd(0, slow) == kStart + 8 * 31'000);
  CHECK(RingEnd(last, slow) == kStart + 8 * 31'000);
}

TEST_CASE("settings: PRISM_RING_FLOOR", "[plugin][unit][ring-floor]") {
  std::string warnings;
  unsetenv("PRISM_RING_FLOOR");
  CHECK_FALSE(prism::plugin::LoadSettings(&warnings).ring_floor_end);
  setenv("PRISM_RING_FLOOR", "end", 1);
  CHECK(prism::plugin::LoadSettings(&warnings).ring_floor_end);
  CHECK(warnings.empty());
  setenv("PRISM_RING_FLOOR", "sometimes", 1);
  CHECK_FALSE(prism::plugin::LoadSettings(&warnings).ring_floor_end);
  CHECK(warnings.find("PRISM_RING_FLOOR") != std::string::npos);
  unsetenv("PRISM_RING_FLOOR");
}
