#include "daemon/server/metrics.h"

#include <algorithm>
#include <cctype>

#include "prometheus/text_serializer.h"

namespace prism::server {
namespace {

std::string KindLabel(int k) {
  if (k == 8) return "p2p";
  std::string s = graph::CollectiveKind_Name(static_cast<graph::CollectiveKind>(k));
  if (k == 0) s = "unspecified";
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return std::tolower(c); });
  return s;
}

prometheus::Histogram::BucketBoundaries LatencyBuckets() {
  prometheus::Histogram::BucketBoundaries b;
  for (double v = 1e-6; v < 200; v *= 4) b.push_back(v);  // 1 us .. ~67 s
  return b;
}

// "TP", "DP_CP", ...: the CommKind's name without its prefix.
std::string CommKindName(int k) {
  std::string s = graph::CommKind_Name(static_cast<graph::CommKind>(k));
  const std::string prefix = "COMM_KIND_";
  return s.rfind(prefix, 0) == 0 ? s.substr(prefix.size()) : s;
}

}  // namespace

Metrics::Metrics(StatusBoard* status) : status_(status), registry_(std::make_shared<prometheus::Registry>()) {
  using prometheus::BuildCounter;
  using prometheus::BuildGauge;
  using prometheus::BuildHistogram;
  emulated_time_ = &BuildGauge().Name("prism_emulated_time_seconds")
                        .Help("Emulated time the replay engine has reached").Register(*registry_).Add({});
  iterations_ = &BuildCounter().Name("prism_iterations_total")
                     .Help("Training iterations completed by every rank").Register(*registry_).Add({});
  iteration_time_ = &BuildGauge().Name("prism_iteration_time_seconds")
                         .Help("Emulated duration of the last completed iteration").Register(*registry_).Add({});
  events_ = &BuildCounter().Name("prism_engine_events_total")
                 .Help("Discrete events processed by the replay engine").Register(*registry_).Add({});
  lag_ = &BuildGauge().Name("prism_engine_lag_seconds")
              .Help("How far the real-time engine runs behind the wall clock").Register(*registry_).Add({});
  sessions_ = &BuildGauge().Name("prism_plugin_sessions")
                   .Help("Connected plugin sessions").Register(*registry_).Add({});
  auto& mixed = BuildCounter()
                    .Name("prism_hybrid_mixed_collectives_total")
                    .Help("Hybrid: collectives with real members, by what set their end: the real ranks' transfer, "
                          "or virtual members that arrived after it")
                    .Register(*registry_);
  mixed_ended_by_real_ = &mixed.Add({{"ended_by", "real"}});
  mixed_ended_by_virtual_ = &mixed.Add({{"ended_by", "virtual"}});
  calibrated_ = &BuildCounter()
                     .Name("prism_hybrid_calibrated_collectives_total")
                     .Help("Hybrid: all-virtual collectives timed by a real rank's clean measurement, not the model")
                     .Register(*registry_)
                     .Add({});
  auto& latency = BuildHistogram().Name("prism_collective_latency_seconds")
                      .Help("Network time of a collective from the last member's arrival to completion")
                      .Register(*registry_);
  auto& bytes = BuildCounter().Name("prism_communication_bytes_total")
                    .Help("Bytes per rank of replayed collectives and send/recv, by kind").Register(*registry_);
  for (int k = 0; k < kKinds; ++k) {
    latency_[k] = &latency.Add({{"kind", KindLabel(k)}}, LatencyBuckets());
    bytes_[k] = &bytes.Add({{"kind", KindLabel(k)}});
  }
}

std::string Metrics::Exposition() const {
  return prometheus::TextSerializer().Serialize(registry_->Collect());
}

void Metrics::SetPluginSessions(int64_t sessions) {
  sessions_->Set(static_cast<double>(sessions));
  if (status_) status_->SetPluginSessions(sessions);
}

void Metrics::OnProgress(const engine::EngineProgress& p) {
  emulated_time_->Set(p.emulated.seconds());
  if (p.events > events_seen_) events_->Increment(static_cast<double>(p.events - events_seen_));
  events_seen_ = p.events;
  lag_->Set(p.lag.seconds());
  if (status_) {
    status_->SetProgress(p.emulated, p.events, p.iterations_done, p.lag);
    if (p.ops_total > 0) status_->SetFractionDone(static_cast<double>(p.ops_done) / static_cast<double>(p.ops_total));
  }
  PushCommunicatorRows();
}

void Metrics::PushCommunicatorRows() {
  if (!status_) return;
  for (int k = 0; k < kCommKinds; ++k) {
    if (by_comm_kind_[k].ops == 0) continue;
    CommunicatorRow row;
    row.kind = k + 1 == kCommKinds ? "P2P" : CommKindName(k);
    row.name = "all " + row.kind;
    row.ops_done = by_comm_kind_[k].ops;
    row.bytes = by_comm_kind_[k].bytes;
    row.state = "replayed by the engine";
    status_->SetCommunicator(row);
  }
}

void Metrics::OnIteration(uint64_t index, Nanoseconds duration) {
  iterations_->Increment();
  iteration_time_->Set(duration.seconds());
  if (status_) status_->AddIteration(index, duration);
  PushCommunicatorRows();
}

void Metrics::OnCollective(graph::CollectiveKind kind, graph::CommKind comm, Nanoseconds latency, Bytes bytes) {
  const int k = std::clamp<int>(kind, 0, 7);
  latency_[k]->Observe(latency.seconds());
  bytes_[k]->Increment(static_cast<double>(bytes.count()));
  KindTally& t = by_comm_kind_[std::clamp<int>(comm, 0, kCommKinds - 2)];
  ++t.ops;
  t.bytes += static_cast<uint64_t>(bytes.count());
}

void Metrics::OnPointToPoint(Nanoseconds latency, Bytes bytes) {
  latency_[8]->Observe(latency.seconds());
  bytes_[8]->Increment(static_cast<double>(bytes.count()));
  ++by_comm_kind_[kCommKinds - 1].ops;
  by_comm_kind_[kCommKinds - 1].bytes += static_cast<uint64_t>(bytes.count());
}

void Metrics::OnMixedCollective(bool virtual_last) {
  (virtual_last ? mixed_ended_by_virtual_ : mixed_ended_by_real_)->Increment();
}

void Metrics::OnCalibratedCollective() { calibrated_->Increment(); }

}  // namespace prism::server
