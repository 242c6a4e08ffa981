// Raw figures a replay produces (SimulationReport formats them).
// Sums are weighted by the ranks an actor stands for; 128-bit so that hostile
// graphs cannot overflow them.
#ifndef PRISM_DAEMON_ENGINE_REPLAY_STATS_H_
#define PRISM_DAEMON_ENGINE_REPLAY_STATS_H_

#include <array>
#include <cstdint>
#include <vector>

#include "common/units.h"

namespace prism::engine {

// Index 0..7 collective kinds (graph::CollectiveKind), then send and recv.
inline constexpr int kOpKindSend = 8;
inline constexpr int kOpKindRecv = 9;
inline constexpr int kOpKinds = 10;
inline constexpr int kCommKinds = 17;

struct KindTotals {
  __int128 time_ns = 0;      // sum over rank-op instances of (completion - issue)
  __int128 ops = 0;          // rank-op instances
  __int128 bytes = 0;
};

struct ReplayStats {
  uint64_t events = 0;
  uint64_t pending_sum = 0;                     // sum over events handled of the events still queued
  double run_wall_s = 0;                        // wall time of the event loop alone (a measurement)
  Nanoseconds end;
  std::vector<Nanoseconds> iteration_end;       // per iteration: when its last op completed
  std::array<KindTotals, kCommKinds> by_comm{};
  std::array<KindTotals, kOpKinds> by_op{};
  __int128 compute_ns = 0;                      // weighted
  std::vector<Nanoseconds> actor_exposed;       // per actor, whole run
  std::vector<Nanoseconds> actor_pipeline_wait; // per actor, whole run: the part of exposed with only pp send/recv
  std::vector<int64_t> actor_peak_memory;       // per actor: max running sum of deltas
  // Hybrid runs.
  uint64_t real_reports = 0;                    // reached/completed reports from real ranks
  uint64_t calibrated_instances = 0;            // all-virtual collectives timed by a measurement
  uint64_t late_virtual_members = 0;            // mixed collectives whose real members finished first
};

}  // namespace prism::engine

#endif  // PRISM_DAEMON_ENGINE_REPLAY_STATS_H_
