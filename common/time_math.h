// Saturating time arithmetic on common/units.h types: the largest time the
// model represents, saturating sums and multiples, and the time to move a
// fraction of a buffer at a bandwidth. Shared by prismd's engine and the
// plugin (common/ring_step.h). Pure functions; safe from any thread.
#ifndef PRISM_COMMON_TIME_MATH_H_
#define PRISM_COMMON_TIME_MATH_H_

#include <cstdint>

#include "common/units.h"

namespace prism {

// Largest time the engine represents; every sum saturates here (~146 years).
inline constexpr int64_t kMaxTimeNs = int64_t{1} << 62;

// Saturating time arithmetic: hostile graphs must not overflow.
// The exact sum, capped at kMaxTimeNs from above; a sum below INT64_MIN
// wraps (as the exact sum cast to int64_t would). Without 128-bit
// arithmetic: the engine adds a time for most events.
inline Nanoseconds SatAdd(Nanoseconds a, Nanoseconds b) {
  int64_t s = 0;
  if (__builtin_add_overflow(a.count(), b.count(), &s)) return Nanoseconds(a.count() > 0 ? kMaxTimeNs : s);
  return Nanoseconds(s < kMaxTimeNs ? s : kMaxTimeNs);
}

// Time to move size * num / den bytes at bw (rounded up), saturating:
//   ceil(size * 8 * num * 1e9 / (den * bw)) ns, capped at kMaxTimeNs.
inline Nanoseconds FractionTransferTime(Bytes size, uint64_t num, uint64_t den, BitsPerSecond bw) {
  if (bw.count() == 0 || den == 0) return Nanoseconds(kMaxTimeNs);
  // size * 8 * 1e9 * num fits in 128 bits for size < 2^64 and num < 2^31.
  const unsigned __int128 bits = static_cast<unsigned __int128>(size.count()) * 8u * num;
  const unsigned __int128 denom = static_cast<unsigned __int128>(den) * bw.count();
  const unsigned __int128 limit = static_cast<unsigned __int128>(kMaxTimeNs) / 1000000000u;
  if (bits / denom >= limit) return Nanoseconds(kMaxTimeNs);
  const unsigned __int128 ns = (bits * 1000000000u + denom - 1) / denom;
  return Nanoseconds(ns >= static_cast<unsigned __int128>(kMaxTimeNs) ? kMaxTimeNs : static_cast<int64_t>(ns));
}

// k * t (t < 0 counts as 0), saturating.
inline Nanoseconds SatTimes(Nanoseconds t, uint64_t k) {
  const unsigned __int128 ns = static_cast<unsigned __int128>(t.count() > 0 ? t.count() : 0) * k;
  return Nanoseconds(ns >= static_cast<unsigned __int128>(kMaxTimeNs) ? kMaxTimeNs : static_cast<int64_t>(ns));
}

}  // namespace prism

#endif  // PRISM_COMMON_TIME_MATH_H_
