// NCCL's PAT kernel walked in its order (common/pat_kernel.h): its list
// against NCCL's proxy counts and the links' play, the walk in closed form,
// and the model's figures against what the GPU host measured.
#include <catch2/catch.hpp>

#include <cstdint>
#include <vector>

#include "common/pat_kernel.h"
#include "common/pat_schedule.h"

namespace {

using prism::BitsPerSecond;
using prism::Bytes;
using prism::Nanoseconds;
using prism::PatKernelProgram;
using prism::PatKernelStep;
using prism::PatShape;

PatShape Shape(bool all_gather, uint32_t ranks, uint64_t bytes, uint32_t channels = 2) {
  PatShape s;
  s.all_gather = all_gather;
  s.ranks = ranks;
  s.bytes = Bytes(bytes);
  s.channels = channels;
  s.bandwidth = BitsPerSecond(100'000'000'000);
  s.step_latency = Nanoseconds(5'000);
  return s;
}

// Messages the list posts (sends) and frees (receives) per dimension.
struct Posts {
  std::vector<uint64_t> sent, freed;
};
Posts PostsOf(const PatKernelProgram& p, uint32_t dims) {
  Posts out{std::vector<uint64_t>(dims, 0), std::vector<uint64_t>(dims, 0)};
  for (const PatKernelStep& s : p.steps) {
    if (s.skipped) continue;
    if (s.post_send && s.send_dim >= 0) ++out.sent[static_cast<size_t>(s.send_dim)];
    if (s.post_recv && s.recv_dim >= 0) ++out.freed[static_cast<size_t>(s.recv_dim)];
  }
  return out;
}

}  // namespace

TEST_CASE("NCCL's PAT list posts each dimension's messages as NCCL's proxy counts them", "[daemon][pat]") {
  // NCCL v2.28.9-1's proxy counts (src/proxy.cc), per channel; the same
  // cases as "the PAT play sends as many messages per dimension ...".
  struct Case {
    bool all_gather;
    uint32_t ranks;
    uint64_t bytes;
    std::vector<uint64_t> per_dim;
    uint32_t parallel;
  };
  const std::vector<Case> cases = {
      {true, 8192, 64ull << 20, {32, 16, 8, 4, 2, 1, 1, 1, 1, 1, 1, 1, 1}, 16},
      {false, 8192, 64ull << 20, {32, 16, 8, 4, 2, 1, 1, 1, 1, 1, 1, 1, 1}, 16},
      {true, 1024, 8ull << 20, {16, 8, 4, 2, 1, 1, 1, 1, 1, 1}, 16},
      {true, 8, 64ull << 20, {32, 16, 8}, 1},
      {false, 16, 2ull << 20, {8, 4, 2, 1}, 1},
  };
  for (const Case& c : cases) {
    INFO(c.ranks << " ranks, " << c.bytes << " bytes, all-gather " << c.all_gather);
    const PatKernelProgram p = prism::PatKernelSteps(Shape(c.all_gather, c.ranks, c.bytes));
    CHECK(p.parallel == c.parallel);
    const Posts posts = PostsOf(p, static_cast<uint32_t>(c.per_dim.size()));
    CHECK(posts.sent == c.per_dim);
    CHECK(posts.freed == c.per_dim);  // every message sent is received and freed once (the mirror)
  }
}

TEST_CASE("NCCL's PAT list and the links' play agree on every dimension's messages", "[daemon][pat]") {
  // Two derivations of NCCL's schedule: the kernel's step list and the
  // play's message table (common/pat_schedule.h); odd worlds, aggregation,
  // several loops. All-gathers at any size of world, reduce-scatters at
  // powers of two.
  for (bool all_gather : {true, false})
    for (uint32_t ranks : {2u, 3u, 5u, 6u, 7u, 12u, 32u, 33u, 100u, 1000u, 2048u})
      for (uint64_t bytes : {64ull << 10, 1ull << 20, 17ull << 20, 256ull << 20}) {
        if (!all_gather && (ranks & (ranks - 1)) != 0) continue;
        const PatShape shape = Shape(all_gather, ranks, bytes);
        INFO(ranks << " ranks, " << bytes << " bytes, all-gather " << all_gather);
        const std::vector<uint64_t> expected = prism::PatMessagesPerDim(shape);
        const Posts posts = PostsOf(prism::PatKernelSteps(shape), static_cast<uint32_t>(expected.size()));
        CHECK(posts.sent == expected);
        CHECK(posts.freed == expected);
      }
  // A reduce-scatter over a world that is no power of two posts as many
  // messages per dimension as over the next power of two, some of them
  // short: NCCL's list (which its proxy runs to count the steps) has 8 on
  // dimension 0 for 100 ranks and 1 MiB where the play's table has 7.
  const PatShape odd = Shape(false, 100, 1ull << 20);
  CHECK(PostsOf(prism::PatKernelSteps(odd), 7).sent == std::vector<uint64_t>{8, 4, 2, 1, 1, 1, 1});
  CHECK(prism::PatMessagesPerDim(odd) == std::vector<uint64_t>{7, 4, 2, 1, 1, 1, 1});
}

TEST_CASE("NCCL's PAT kernel walk in closed form", "[daemon][pat]") {
  // Two ranks, one 64 KiB piece on one channel at 8 Gbit/s (w = 65,536 ns):
  // one round sends, the message crosses (w + l), one round receives.
  PatShape s = Shape(true, 2, 2 * 65'536, 1);
  s.bandwidth = BitsPerSecond(8'000'000'000);
  s.step_latency = Nanoseconds(10'000);
  const Nanoseconds r(3'000);
  for (bool all_gather : {true, false}) {
    s.all_gather = all_gather;
    CHECK(prism::PlayPatKernel(s, r) == Nanoseconds(3'000 + 65'536 + 10'000 + 3'000));
  }
  // Two loops (the all-gather's 64 KiB chunks over 128 KiB pieces): NCCL's
  // kernel receives loop 1 before it sends loop 2, so the loops do not overlap.
  s.all_gather = true;
  s.bytes = Bytes(4 * 65'536);
  CHECK(prism::PlayPatKernel(s, r) == Nanoseconds(2 * (3'000 + 65'536 + 10'000 + 3'000)));
  // One rank: nothing to do.
  s.ranks = 1;
  CHECK(prism::PlayPatKernel(s, r) == Nanoseconds(0));
}

TEST_CASE("NCCL's PAT kernel walk: never faster than the links' play, and each round costs", "[daemon][pat]") {
  for (bool all_gather : {true, false})
    for (uint32_t ranks : {8u, 16u, 1024u})
      for (uint64_t bytes : {1ull << 20, 64ull << 20}) {
        PatShape s = Shape(all_gather, ranks, bytes);
        INFO(ranks << " ranks, " << bytes << " bytes, all-gather " << all_gather);
        const auto links = prism::PlayPatSchedule(s);
        const auto free_rounds = prism::PlayPatKernel(s, Nanoseconds(0));
        const auto costly = prism::PlayPatKernel(s, Nanoseconds(10'000));
        REQUIRE(links);
        REQUIRE(free_rounds);
        REQUIRE(costly);
        CHECK(*free_rounds >= links->end - Nanoseconds(1));
        CHECK(*costly > *free_rounds);
      }
}

TEST_CASE("the PAT kernel model against what the GPU host measured", "[daemon][pat]") {
  // NCCL 2.28.9 on one H200 (docs/network-model.md, "PAT's kernel"): the
  // model's step latency L + c + D * 2.5 us (c = 12.5 us, NCCL's ring step
  // cost in the model's table) and its rounds at 8.0 / 11.6 us.
  auto model = [](bool all_gather, uint32_t ranks, uint64_t bytes, uint64_t bps, int64_t latency_ns) {
    PatShape s = Shape(all_gather, ranks, bytes);
    s.bandwidth = BitsPerSecond(bps);
    s.step_latency = Nanoseconds(latency_ns) + prism::PatStepCost(Nanoseconds(12'500), prism::PatDimensions(ranks));
    return prism::PlayPatKernel(s, prism::PatRoundCost(all_gather)).value_or(Nanoseconds(0));
  };
  auto within = [](Nanoseconds got, double measured_us, double pct) {
    const double us = static_cast<double>(got.count()) / 1e3;
    INFO("model " << us << " us against " << measured_us << " us");
    CHECK(us > measured_us * (1 - pct / 100));
    CHECK(us < measured_us * (1 + pct / 100));
  };
  // A real rank's FSDP-like all-gather / reduce-scatter over 8192 ranks
  // (64 MiB, 100 Gbit/s + 5 us; 2026-12-03, medians of two runs): 7.11 /
  // 9.48 ms, where the links' play with L + c + 27.5 us gave 5.77 ms.
  within(model(true, 8192, 64ull << 20, 100'000'000'000, 5'000), 7'112, 2);
  within(model(false, 8192, 64ull << 20, 100'000'000'000, 5'000), 9'476, 2);
  // The ground truths at 16 ranks, 1 MiB, 2.5 Gbit/s + 10 us (2026-12-02).
  within(model(true, 16, 1ull << 20, 2'500'000'000, 10'000), 3'334.0, 2);
  within(model(false, 16, 1ull << 20, 2'500'000'000, 10'000), 3'293.1, 2);
}

TEST_CASE("NCCL's PAT kernel walk never waits for a message no earlier round sent", "[daemon][pat]") {
  // The walk returns nullopt when a step waits for a receive whose twin
  // (this rank's own send of that dimension and index) was not sent in an
  // earlier round, or for a slot no earlier send frees: NCCL's list never
  // does, so neither may the walk, for any world and size (slot offsets,
  // aggregation, parallel rounds, several loops).
  for (bool all_gather : {true, false})
    for (uint32_t ranks = 2; ranks <= 130; ++ranks)
      for (uint64_t bytes : {4096ull, 1ull << 20, 3'000'000ull, 64ull << 20, 256ull << 20}) {
        INFO(ranks << " ranks, " << bytes << " bytes, all-gather " << all_gather);
        CHECK(prism::PlayPatKernel(Shape(all_gather, ranks, bytes), Nanoseconds(8'000)).has_value());
      }
  for (bool all_gather : {true, false})
    for (uint32_t ranks : {1000u, 4096u, 5000u, 8192u, 131072u}) {
      INFO(ranks << " ranks, all-gather " << all_gather);
      CHECK(prism::PlayPatKernel(Shape(all_gather, ranks, 1ull << 30), Nanoseconds(8'000)).has_value());
    }
}
