// Real ranks' reports (realtime.h: RankReachedOp, RankCompletedOp) as the
// replay engine's events, checked against the world: the rank must be real,
// the op within its program, and a completion must name a communication op.
// A pure translation: it holds no state. Engine thread.
#ifndef PRISM_DAEMON_ENGINE_INJECTED_EVENTS_H_
#define PRISM_DAEMON_ENGINE_INJECTED_EVENTS_H_

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "daemon/engine/event_queue.h"
#include "daemon/engine/realtime.h"
#include "daemon/engine/world.h"

namespace prism::engine {

struct InjectedEvents {
  std::vector<Event> events;  // kReachFlag / kCompleteFlag events, in the order posted
  bool stop = false;          // a StopRequest came
  bool ended = false;         // an EndOfInput came
  uint64_t reports = 0;       // reached/completed reports among them
};

// Drains `inbox` into `out` (cleared first). InvalidArgument names the first
// report that does not fit the world; the reports before it are in `out`.
absl::Status DrainInjected(const EngineWorld& world, EngineInbox& inbox, InjectedEvents* out);

}  // namespace prism::engine

#endif  // PRISM_DAEMON_ENGINE_INJECTED_EVENTS_H_
