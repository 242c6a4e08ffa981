// Prometheus metrics of prismd (names in docs/metrics.md). No per-rank labels.
//
// Metrics is an EngineObserver: attach it to the engine and it keeps the
// gauges, counters and histograms current (and the StatusBoard, if given:
// progress, iteration times, and one "all <KIND>" communicator row per kind of
// communicator with the collectives replayed on it).
// Thread-safe: prometheus-cpp metrics are; SetPluginSessions may be called
// from any thread (the session service owns that number).
#ifndef PRISM_DAEMON_SERVER_METRICS_H_
#define PRISM_DAEMON_SERVER_METRICS_H_

#include <array>
#include <cstdint>
#include <memory>
#include <string>

#include "daemon/engine/replay_engine.h"
#include "daemon/server/status.h"
#include "prometheus/counter.h"
#include "prometheus/gauge.h"
#include "prometheus/histogram.h"
#include "prometheus/registry.h"

namespace prism::server {

class Metrics : public engine::EngineObserver {
 public:
  // `status` (nullable) must outlive this object.
  explicit Metrics(StatusBoard* status = nullptr);
  Metrics(const Metrics&) = delete;
  Metrics& operator=(const Metrics&) = delete;

  std::shared_ptr<prometheus::Registry> registry() const { return registry_; }
  // The Prometheus text exposition (format 0.0.4) of every metric.
  std::string Exposition() const;

  void SetPluginSessions(int64_t sessions);

  // EngineObserver (engine thread).
  void OnProgress(const engine::EngineProgress& progress) override;
  void OnIteration(uint64_t index, Nanoseconds duration) override;
  void OnCollective(graph::CollectiveKind kind, graph::CommKind comm, Nanoseconds latency, Bytes bytes) override;
  void OnPointToPoint(Nanoseconds latency, Bytes bytes) override;
  void OnMixedCollective(bool virtual_last) override;
  void OnCalibratedCollective() override;

 private:
  static constexpr int kKinds = 9;  // collective kinds 0..7, then send/recv as "p2p"
  StatusBoard* status_;
  std::shared_ptr<prometheus::Registry> registry_;
  prometheus::Gauge* emulated_time_;
  prometheus::Counter* iterations_;
  prometheus::Gauge* iteration_time_;
  prometheus::Counter* events_;
  prometheus::Gauge* lag_;
  prometheus::Gauge* sessions_;
  prometheus::Counter* mixed_ended_by_real_;
  prometheus::Counter* mixed_ended_by_virtual_;
  prometheus::Counter* calibrated_;
  std::array<prometheus::Histogram*, kKinds> latency_{};
  std::array<prometheus::Counter*, kKinds> bytes_{};
  uint64_t events_seen_ = 0;  // engine thread only
  // Collectives and send/recv completed per communicator kind (engine thread
  // only), pushed to the StatusBoard as "all <KIND>" rows with the progress.
  static constexpr int kCommKinds = 18;  // CommKind 0..16, then point-to-point
  struct KindTally {
    uint64_t ops = 0, bytes = 0;
  };
  std::array<KindTally, kCommKinds> by_comm_kind_{};
  void PushCommunicatorRows();
};

}  // namespace prism::server

#endif  // PRISM_DAEMON_SERVER_METRICS_H_
