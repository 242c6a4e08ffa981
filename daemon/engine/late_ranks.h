// Virtual ranks that start an iteration late (prismd --late): what one
// rank's hiccup in one iteration (a slow data loader, a garbage collection,
// the OS) costs the job, in --simulate and, around real ranks, in hybrid
// runs. The late rank's first compute op of that iteration lasts `extra`
// longer than the graph says (the bench's late rank is late the same way:
// bench/fidelity/driver.py --late-ms lengthens op 0 of the iteration).
//
// A late rank must be played alone (WorldOptions::alone_ranks keeps it out
// of the equivalence classes), and must be virtual: a real rank is late in
// its own program.
//
// Thread-compatible; LateComputes is immutable once built and the engine
// only reads it.
#ifndef PRISM_DAEMON_ENGINE_LATE_RANKS_H_
#define PRISM_DAEMON_ENGINE_LATE_RANKS_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "common/units.h"
#include "daemon/engine/engine_world.h"

namespace prism::engine {

struct LateRank {
  uint32_t rank = 0;
  uint64_t iteration = 0;  // 0-based, as the report's iteration times
  Nanoseconds extra{0};
};

// "RANK:ITERATION:MS[,RANK:ITERATION:MS...]" (MS may have a fraction, e.g.
// 0:10:20 or 5:3:0.5). InvalidArgument names the part that does not parse.
absl::StatusOr<std::vector<LateRank>> ParseLateRanks(std::string_view text);

// The ranks of `late`, for WorldOptions::alone_ranks.
std::vector<uint32_t> LateRankIds(absl::Span<const LateRank> late);

// "rank 0 starts iteration 10 late by 20 ms" (one line per rank, ", "-joined).
std::string DescribeLateRanks(absl::Span<const LateRank> late);

// The engine's lookup: which op of which actor takes how much longer in
// which iteration.
class LateComputes {
 public:
  LateComputes() = default;

  // Errors (InvalidArgument, naming the rank): outside the world, real, an
  // iteration at or past `iterations`, a program without a compute op, or
  // an actor that stands for other ranks too (the world did not keep it
  // alone).
  static absl::StatusOr<LateComputes> Build(const EngineWorld& world, absl::Span<const LateRank> late,
                                            uint64_t iterations);

  bool empty() const { return entries_.empty(); }
  // The extra time of op `k` of `actor` in `iteration`; zero for every op
  // but a late rank's first compute op of its late iteration. A linear scan
  // (a run has a few late ranks); the engine asks only when !empty().
  Nanoseconds Extra(uint32_t actor, uint64_t iteration, uint32_t k) const {
    Nanoseconds extra{0};
    for (const Entry& e : entries_)
      if (e.actor == actor && e.op == k && e.iteration == iteration) extra += e.extra;
    return extra;
  }

 private:
  struct Entry {
    uint32_t actor = 0;
    uint32_t op = 0;
    uint64_t iteration = 0;
    Nanoseconds extra{0};
  };
  std::vector<Entry> entries_;
};

}  // namespace prism::engine

#endif  // PRISM_DAEMON_ENGINE_LATE_RANKS_H_
