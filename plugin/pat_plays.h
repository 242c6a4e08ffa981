// NCCL's PAT schedule played for the plugin's PAT floor (plugin/arrival.h,
// PatFloor): in NCCL's own order (common/pat_kernel.h) where the model
// charges NCCL's step cost, else the links' bound in any order
// (common/pat_schedule.h); kept per operation shape:
// a play at 8192 ranks takes about a millisecond, so each shape is played
// once per process, the first time a receive of it asks.
//
// Thread-safety: every method is thread-safe (one mutex of its own; the
// play runs outside it, so two threads may play a new shape once each).
#ifndef PRISM_PLUGIN_PAT_PLAYS_H_
#define PRISM_PLUGIN_PAT_PLAYS_H_

#include <cstddef>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <tuple>

#include "common/pat_kernel.h"
#include "common/pat_schedule.h"

namespace prism::plugin {

class PatPlays {
 public:
  // The play of `shape`: with `nccl_order`, NCCL's kernel walked in its
  // order with no GPU cost per round (PlayPatKernelSends at 0: the GPU's
  // own pace is this rank's, which its virtual peers mirror); without, the
  // links' own bound in any order (PlayPatSchedule). Null when the play
  // would be too long (kMaxPlayedPatMessages, kMaxPlayedPatSteps) or for a
  // single rank.
  std::shared_ptr<const PatPlay> Of(const PatShape& shape, bool nccl_order);

 private:
  using Key = std::tuple<bool, uint32_t, uint64_t, uint32_t, uint64_t, int64_t, bool>;
  static constexpr size_t kKept = 64;  // shapes kept (an iteration has a few)
  std::mutex mu_;
  std::map<Key, std::shared_ptr<const PatPlay>> plays_;
  std::deque<Key> order_;  // oldest first
};

}  // namespace prism::plugin

#endif  // PRISM_PLUGIN_PAT_PLAYS_H_
