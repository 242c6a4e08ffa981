// PAT's floor in NCCL's own order (plugin/arrival.h, PatFloor;
// plugin/pat_plays.h): where the model charges NCCL's step cost the floor
// is the kernel's walk (common/pat_kernel.h) with no GPU cost per round,
// else the links' bound in any order.
#include <catch2/catch.hpp>

#include <memory>

#include "common/pat_kernel.h"
#include "common/pat_schedule.h"
#include "plugin/arrival.h"
#include "plugin/pat_plays.h"

namespace {

using prism::BitsPerSecond;
using prism::Bytes;
using prism::Nanoseconds;
using prism::PatShape;

// The FSDP-like reduce-scatter over 8192 one-GPU nodes: 64 MiB, 100 Gbit/s,
// a hop of L + c + 13 * 2.5 us = 50 us.
PatShape ReduceScatter8192() {
  return PatShape{false, 8192, Bytes(64ull << 20), 2, BitsPerSecond(100'000'000'000), Nanoseconds(50'000)};
}

}  // namespace

TEST_CASE("PAT's floor walks NCCL's own order where the model charges a step cost", "[plugin][unit][arrival][pat]") {
  prism::plugin::PatPlays plays;
  const PatShape shape = ReduceScatter8192();
  const std::shared_ptr<const prism::PatPlay> nccl = plays.Of(shape, true);
  const std::shared_ptr<const prism::PatPlay> links = plays.Of(shape, false);
  REQUIRE(nccl != nullptr);
  REQUIRE(links != nullptr);
  const std::optional<prism::PatPlay> walk = prism::PlayPatKernelSends(shape, Nanoseconds(0));
  const std::optional<prism::PatPlay> any_order = prism::PlayPatSchedule(shape);
  REQUIRE(walk);
  REQUIRE(any_order);
  CHECK(nccl->earliest == walk->sent);
  CHECK(links->earliest == any_order->earliest);
  // NCCL's kernel sends dimension 0's messages in windows of NCCL_STEPS (8),
  // each behind the receives the window before it fed: its 9th message on
  // dimension 0 leaves 1476.1 us in, where any order would let it go at
  // 755.0 us (all of dimension 0 first).
  REQUIRE(nccl->earliest[0].size() == 32);
  CHECK(nccl->earliest[0][8].count() == 1'476'079);
  CHECK(links->earliest[0][8].count() == 754'983);
  // The first window is the same either way.
  CHECK(nccl->earliest[0][7] == links->earliest[0][7]);
  // A receive of that message is not done before start + its time + L.
  const Nanoseconds start(1'000'000), latency(5'000);
  CHECK(prism::plugin::PatFloor(*nccl, start, 0, 8, latency) == Nanoseconds(1'000'000 + 1'476'079 + 5'000));
  // The same shape asked again is the same play (played once per process).
  CHECK(plays.Of(shape, true) == nccl);
}
