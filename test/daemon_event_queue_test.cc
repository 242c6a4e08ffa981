// The engine's event queue (events grouped by instant) pops in exactly the
// 4-ary heap's order: (time, actor, op), including instants whose events
// were pushed out of that order, equal times pushed while their instant is
// being handled and events earlier than the latest pop (a paced run's late
// reports).
#include <catch2/catch.hpp>

#include <cstdint>

#include "daemon/engine/event_queue.h"
#include "daemon/engine/instant_event_queue.h"

namespace {

using prism::Nanoseconds;
using prism::engine::Event;
using prism::engine::EventQueue;
using prism::engine::InstantEventQueue;

struct Rng {
  uint64_t x = 0x9e3779b97f4a7c15ull;
  uint64_t operator()() {
    x ^= x << 13, x ^= x >> 7, x ^= x << 17;
    return x;
  }
};

// Pushes the same events into both queues and checks every pop, the sizes
// and the tops. `past_every`: one follow-up in that many lies before the
// popped time (0: never).
void CheckSameOrder(uint64_t seed, uint32_t actors, uint64_t steps, uint64_t past_every) {
  EventQueue heap;
  InstantEventQueue instants;
  Rng rng{seed};
  uint32_t next_op = 0;  // keys stay unique
  auto push = [&](Nanoseconds t, uint32_t actor) {
    const Event e{t, actor, next_op++, t - Nanoseconds(1)};
    heap.Push(e);
    instants.Push(e);
  };
  for (uint32_t a = 0; a < actors; ++a) push(Nanoseconds(static_cast<int64_t>(rng() % 64)), a);
  for (uint64_t i = 0; i < steps && !heap.empty(); ++i) {
    REQUIRE(instants.size() == heap.size());
    REQUIRE(instants.top().time == heap.top().time);
    const Event want = heap.Pop();
    const Event got = instants.Pop();
    REQUIRE(got.time == want.time);
    REQUIRE(got.actor == want.actor);
    REQUIRE(got.op == want.op);
    REQUIRE(got.issued == want.issued);
    // Follow-ups: none, one, or a collective's members at one end time.
    const uint64_t r = rng();
    const uint32_t count = r % 4 == 0 ? 0 : r % 4 == 3 ? 1 + static_cast<uint32_t>(rng() % 8) : 1;
    const int64_t step = (r >> 8) % 3 == 0 ? 0 : static_cast<int64_t>(rng() % (uint64_t{1} << (rng() % 40)));
    Nanoseconds at = want.time + Nanoseconds(step);
    if (past_every != 0 && rng() % past_every == 0) at = want.time - Nanoseconds(1 + static_cast<int64_t>(rng() % 500));
    for (uint32_t m = 0; m < count; ++m) push(at, static_cast<uint32_t>(rng() % actors));
  }
  while (!heap.empty()) {
    const Event want = heap.Pop();
    const Event got = instants.Pop();
    REQUIRE(got.time == want.time);
    REQUIRE(got.actor == want.actor);
    REQUIRE(got.op == want.op);
  }
  REQUIRE(instants.empty());
}

}  // namespace

TEST_CASE("the instant event queue pops in the 4-ary heap's order", "[daemon][engine][queue]") {
  SECTION("times at or after the latest pop, many equal") { CheckSameOrder(1, 1024, 200'000, 0); }
  SECTION("a few actors, deep equal-time instants") { CheckSameOrder(7, 4, 50'000, 0); }
  SECTION("events before the latest pop (late reports) pop first, in order") {
    CheckSameOrder(3, 256, 100'000, 17);
  }
  SECTION("many instants pending at once") { CheckSameOrder(11, 4096, 100'000, 0); }
  SECTION("an instant pushed out of (actor, op) order, then one pushed in it") {
    InstantEventQueue instants;
    for (uint32_t a : {5u, 2u, 9u, 0u}) instants.Push(Event{Nanoseconds(10), a, 0, {}});
    for (uint32_t a : {1u, 3u, 4u}) instants.Push(Event{Nanoseconds(20), a, 0, {}});
    for (uint32_t a : {0u, 2u, 5u, 9u, 1u, 3u, 4u}) CHECK(instants.Pop().actor == a);
    CHECK(instants.empty());
  }
  SECTION("negative times and the largest time") {
    InstantEventQueue instants;
    instants.Push(Event{Nanoseconds::Max(), 1, 0, {}});
    instants.Push(Event{Nanoseconds(-5), 2, 0, {}});
    instants.Push(Event{Nanoseconds(0), 0, 3, {}});
    instants.Push(Event{Nanoseconds(0), 0, 1, {}});
    CHECK(instants.Pop().time == Nanoseconds(-5));
    CHECK(instants.Pop().op == 1);
    CHECK(instants.Pop().op == 3);
    CHECK(instants.Pop().time == Nanoseconds::Max());
    CHECK(instants.empty());
  }
}
