// tree_pipeline_bench: how long prismd's chunk-by-chunk play of NCCL's
// double binary tree (daemon/engine/tree_pipeline.h) takes, by ranks and
// size, at 400 Gbit/s and 5 us with 2 channels; and what it gives rank 0
// beside the busiest NIC's 2 S / B. The scheduler plays a size once per rank
// (cached) under its lock, so these times bound its cap
// (kMaxPlayedTreeTransfers). Prints figures only.
#include <chrono>
#include <cstdio>

#include "daemon/engine/tree_pipeline.h"

int main() {
  using prism::BitsPerSecond;
  using prism::Bytes;
  using prism::Nanoseconds;
  using prism::engine::PlayTreeAllReduce;
  using prism::engine::TreeAllReduce;
  std::printf("%6s %8s %12s %10s %14s %14s\n", "ranks", "MiB", "transfers", "play ms", "rank 0 end us", "2S/B us");
  for (int n : {8, 64, 1024, 8192}) {
    for (uint64_t mib : {16, 64, 256}) {
      const TreeAllReduce op{n, 2, Bytes(mib << 20), prism::engine::kNcclSimpleStepBytes,
                             BitsPerSecond(400'000'000'000ull), Nanoseconds(5'000)};
      const int64_t transfers = static_cast<int64_t>(mib) * 2 * 2 * (n - 1);  // 1 MiB = 2 chunks, 2 channels: up and down
      const auto t0 = std::chrono::steady_clock::now();
      const auto a = PlayTreeAllReduce(op, 0, 1'000'000'000);
      const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
      const double two_s_over_b = 2.0 * static_cast<double>(mib << 20) * 8 / 400e9 * 1e6;
      std::printf("%6d %8lu %12lld %10.1f %14.1f %14.1f%s\n", n, static_cast<unsigned long>(mib),
                  static_cast<long long>(transfers), ms, a ? a->end.microseconds() : 0.0, two_s_over_b,
                  transfers > prism::engine::kMaxPlayedTreeTransfers ? "  (above the scheduler's cap)" : "");
    }
  }
}
