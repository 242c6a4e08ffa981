// Wall-clock time the plugin stamps and schedules with: CLOCK_REALTIME in
// integer nanoseconds (the session protocol's clock; on one host every
// process agrees on it).
#ifndef PRISM_PLUGIN_CLOCK_H_
#define PRISM_PLUGIN_CLOCK_H_

#include <time.h>

#include <cstdint>

namespace prism::plugin {

inline int64_t WallNowNs() {
  timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return int64_t{ts.tv_sec} * 1000000000 + ts.tv_nsec;
}

// For deadlines and timeouts only (never stamped on the wire).
inline int64_t MonoNowNs() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return int64_t{ts.tv_sec} * 1000000000 + ts.tv_nsec;
}

}  // namespace prism::plugin

#endif  // PRISM_PLUGIN_CLOCK_H_
