// Calibration (docs/timing.md): the measured durations of collectives real
// ranks took part in, keyed by (kind, algorithm, bytes, shape); all-virtual
// instances of the same key take the measured time instead of the model's
// (in proportion, where the model times the key's instances differently).
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
  // An all-virtual instance of `op` on a communicator of `shape`, which the
  // model times `model`: that time scaled by the latest measurement of the
  // key against the model's time of the instance measured (so the
  // measurement itself where the model times every instance of the key
  // alike; a captured graph's own per-operation pace keeps its
  // proportions), if there is one.
  std::optional<Nanoseconds> Find(const OpInfo& op, const CommShape& shape, Nanoseconds model) const {
    if (measured_.empty()) return std::nullopt;
    const auto it = measured_.find(KeyOf(op, shape));
    if (it == measured_.end()) return std::nullopt;
    const Measurement& m = it->second;
    if (m.model == model) return m.took;
    return Nanoseconds(static_cast<int64_t>(static_cast<__int128>(model.count()) * m.took.count() / m.model.count()));
  }
  // A clean measurement `took` of an instance the model timed `model` (> 0).
  void Record(const OpInfo& op, const CommShape& shape, Nanoseconds took, Nanoseconds model) {
    if (model > Nanoseconds(0)) measured_[KeyOf(op, shape)] = Measurement{took, model};
  }

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
  struct Measurement {
    Nanoseconds took, model;
  };
  absl::flat_hash_map<Key, Measurement> measured_;
};

}  // namespace prism::engine

#endif  // PRISM_DAEMON_ENGINE_CALIBRATION_H_
