// The engine's time arithmetic: the largest time it represents, saturating
// sums, and the time to move a fraction of a buffer at a bandwidth. Pure
// functions on common/units.h types; no state, safe from any thread.
#ifndef PRISM_DAEMON_ENGINE_ENGINE_TIME_H_
#define PRISM_DAEMON_ENGINE_ENGINE_TIME_H_

#include <cstdint>

#include "common/time_math.h"

namespace prism::engine {

// The engine's names for common/time_math.h.
using prism::FractionTransferTime;
using prism::kMaxTimeNs;
using prism::SatAdd;

}  // namespace prism::engine

#endif  // PRISM_DAEMON_ENGINE_ENGINE_TIME_H_
