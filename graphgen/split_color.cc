#include "graphgen/split_color.h"

#include <algorithm>
#include <cstdint>

namespace prism::graphgen {
namespace {

// The xxHash-derived constants of CPython's tuplehash (Objects/tupleobject.c).
constexpr uint64_t kPrime1 = 11400714785074694791ull;
constexpr uint64_t kPrime2 = 14029467366897019727ull;
constexpr uint64_t kPrime5 = 2870177450012600261ull;

constexpr uint64_t RotateLeft31(uint64_t x) { return (x << 31) | (x >> 33); }

}  // namespace

void PythonTupleHasher::Add(uint32_t item) {  // hash(int) == int for these values
  acc_ += static_cast<uint64_t>(item) * kPrime2;
  acc_ = RotateLeft31(acc_);
  acc_ *= kPrime1;
  ++items_;
}

int64_t PythonTupleHasher::Value() const {
  const uint64_t acc = acc_ + (items_ ^ (kPrime5 ^ 3527539ull));
  if (acc == UINT64_MAX) return 1546275796;
  return static_cast<int64_t>(acc);
}

int64_t PythonTupleHash(const std::vector<uint32_t>& items) {
  PythonTupleHasher h;
  for (uint32_t item : items) h.Add(item);
  return h.Value();
}

int32_t PyTorchColorOfHash(int64_t h) {
  // Python's abs() is exact (2^63 for INT64_MIN): take the magnitude unsigned.
  const uint64_t magnitude = h < 0 ? 0ull - static_cast<uint64_t>(h) : static_cast<uint64_t>(h);
  return static_cast<int32_t>(magnitude % (1ull << 31));
}

int32_t PyTorchSplitColor(std::vector<uint32_t> ranks) {
  std::sort(ranks.begin(), ranks.end());
  return PyTorchColorOfHash(PythonTupleHash(ranks));
}

int32_t SplitGroupColor(const std::vector<uint32_t>& ranks) {
  return static_cast<int32_t>(*std::min_element(ranks.begin(), ranks.end()));
}

}  // namespace prism::graphgen
