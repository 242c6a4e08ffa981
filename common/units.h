// Named integer types for time, sizes and bandwidth, with named conversions.
//
// Everything that models time inside Prism uses Nanoseconds (signed 64-bit
// integer nanoseconds: +-292 years). Doubles appear only when printing.
// Types are plain values: trivially copyable, thread-compatible.
#ifndef PRISM_COMMON_UNITS_H_
#define PRISM_COMMON_UNITS_H_

#include <compare>
#include <cstdint>

namespace prism {

// A duration or a point in time, in integer nanoseconds.
class Nanoseconds {
 public:
  constexpr Nanoseconds() = default;
  constexpr explicit Nanoseconds(int64_t ns) : ns_(ns) {}

  constexpr int64_t count() const { return ns_; }
  constexpr double seconds() const { return static_cast<double>(ns_) * 1e-9; }
  constexpr double microseconds() const { return static_cast<double>(ns_) * 1e-3; }

  constexpr auto operator<=>(const Nanoseconds&) const = default;
  constexpr Nanoseconds operator+(Nanoseconds o) const { return Nanoseconds(ns_ + o.ns_); }
  constexpr Nanoseconds operator-(Nanoseconds o) const { return Nanoseconds(ns_ - o.ns_); }
  constexpr Nanoseconds operator*(int64_t k) const { return Nanoseconds(ns_ * k); }
  constexpr Nanoseconds& operator+=(Nanoseconds o) { ns_ += o.ns_; return *this; }
  constexpr Nanoseconds& operator-=(Nanoseconds o) { ns_ -= o.ns_; return *this; }

  static constexpr Nanoseconds Max() { return Nanoseconds(INT64_MAX); }

 private:
  int64_t ns_ = 0;
};

constexpr Nanoseconds FromNanoseconds(int64_t v) { return Nanoseconds(v); }
constexpr Nanoseconds FromMicroseconds(int64_t v) { return Nanoseconds(v * 1000); }
constexpr Nanoseconds FromMilliseconds(int64_t v) { return Nanoseconds(v * 1000000); }
constexpr Nanoseconds FromSeconds(int64_t v) { return Nanoseconds(v * 1000000000); }

constexpr Nanoseconds Max(Nanoseconds a, Nanoseconds b) { return a < b ? b : a; }
constexpr Nanoseconds Min(Nanoseconds a, Nanoseconds b) { return a < b ? a : b; }

// A size in bytes.
class Bytes {
 public:
  constexpr Bytes() = default;
  constexpr explicit Bytes(uint64_t b) : b_(b) {}
  constexpr uint64_t count() const { return b_; }
  constexpr auto operator<=>(const Bytes&) const = default;
  constexpr Bytes operator+(Bytes o) const { return Bytes(b_ + o.b_); }
  constexpr Bytes& operator+=(Bytes o) { b_ += o.b_; return *this; }

 private:
  uint64_t b_ = 0;
};

constexpr Bytes KiB(uint64_t v) { return Bytes(v << 10); }
constexpr Bytes MiB(uint64_t v) { return Bytes(v << 20); }
constexpr Bytes GiB(uint64_t v) { return Bytes(v << 30); }

// A bandwidth in bits per second (the unit NICs are sold in).
class BitsPerSecond {
 public:
  constexpr BitsPerSecond() = default;
  constexpr explicit BitsPerSecond(uint64_t bps) : bps_(bps) {}
  constexpr uint64_t count() const { return bps_; }
  constexpr double gigabytes_per_second() const { return static_cast<double>(bps_) / 8e9; }
  constexpr auto operator<=>(const BitsPerSecond&) const = default;

 private:
  uint64_t bps_ = 0;
};

constexpr BitsPerSecond FromGbps(uint64_t gbps) { return BitsPerSecond(gbps * 1000000000ull); }
constexpr BitsPerSecond FromGBps(uint64_t gigabytes) { return BitsPerSecond(gigabytes * 8000000000ull); }

// Time to serialise `size` at `bw`, rounded up to a whole nanosecond.
// Contract: bw.count() > 0. Exact for sizes up to 2^64 bytes (128-bit math).
constexpr Nanoseconds TransferTime(Bytes size, BitsPerSecond bw) {
  const unsigned __int128 bits = static_cast<unsigned __int128>(size.count()) * 8u;
  const unsigned __int128 num = bits * 1000000000u;
  const unsigned __int128 ns = (num + bw.count() - 1) / bw.count();
  return Nanoseconds(static_cast<int64_t>(ns));
}

}  // namespace prism

#endif  // PRISM_COMMON_UNITS_H_
