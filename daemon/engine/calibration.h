// Calibration (docs/timing.md): the measured durations of collectives real
// ranks took part in, keyed by (kind, algorithm, bytes, shape); all-virtual
// instances of the same key take the measured time instead of the model's.
// The replay engine records a measurement only when it is clean (see
// MixedCollectives, mixed_collectives.h). Engine thread only.
#ifndef PRISM_DAEMON_ENGINE_CALIBRATION_H_
#define PRISM_DAEMON_ENGINE_CALIBRATION_H_

#include <optional>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "common/units.h"
#include "daemon/engine/network_model.h"
#include "daemon/engine/world.h"

namespace prism::engine {

class Calibration {
 public:
  // The latest measurement of `op` on a communicator of `shape`, if any.
  std::optional<Nanoseconds> Find(const OpInfo& op, const CommShape& shape) const {
    if (measured_.empty()) return std::nullopt;
    const auto it = measured_.find(KeyOf(op, shape));
    if (it == measured_.end()) return std::nullopt;
    return it->second;
  }
  void Record(const OpInfo& op, const CommShape& shape, Nanoseconds took) { measured_[KeyOf(op, shape)] = took; }

 private:
  struct Key {
    int kind, algorithm;
    uint64_t bytes;
    CommShape shape;
    bool operator==(const Key&) const = default;
    template <typename H>
    friend H AbslHashValue(H h, const Key& k) {
      return H::combine(std::move(h), k.kind, k.algorithm, k.bytes, k.shape.ranks, k.shape.nodes,
                        k.shape.min_per_node, k.shape.max_per_node);
    }
  };
  static Key KeyOf(const OpInfo& op, const CommShape& shape) {
    return Key{op.collective, op.algorithm, op.bytes.count(), shape};
  }
  absl::flat_hash_map<Key, Nanoseconds> measured_;
};

}  // namespace prism::engine

#endif  // PRISM_DAEMON_ENGINE_CALIBRATION_H_
