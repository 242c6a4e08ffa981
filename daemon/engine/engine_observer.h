// What the replay engine tells the rest of prismd while it runs: its
// progress, iterations, collectives and point-to-point transfers, and in
// hybrid runs what it knows of the real ranks (EngineObserver), plus a fan-out
// to several observers (ObserverList).
//
// Thread-safety: every callback runs on the engine thread, in the order the
// engine handles its events; an observer must be quick and must not call back
// into the engine. Observers are not owned: each must outlive the run it
// watches.
#ifndef PRISM_DAEMON_ENGINE_ENGINE_OBSERVER_H_
#define PRISM_DAEMON_ENGINE_ENGINE_OBSERVER_H_

#include <chrono>
#include <cstdint>
#include <vector>

#include "common/units.h"
#include "daemon/engine/engine_world.h"
#include "proto/graph.pb.h"

namespace prism::engine {

struct EngineProgress {
  Nanoseconds emulated;
  uint64_t events = 0;
  uint64_t iterations_done = 0;
  Nanoseconds lag;            // real-time mode: how far behind the wall clock
  uint64_t ops_done = 0;      // op instances completed by the replayed actors
  uint64_t ops_total = 0;     // ... of this many (every actor's ops times the iterations)
};

// Hybrid: where a real rank's program stands on one stream while the engine
// has played everything it can and waits for the real ranks: the op it waits
// at and that op's iteration; `reached`: the real rank started it (it waits
// for its peers or its end), else the engine waits for the real rank to start
// it (the next communication op on that stream).
struct RealRankPosition {
  uint32_t rank = 0;
  uint32_t stream = 0;
  uint32_t op = 0;
  uint64_t iteration = 0;
  bool reached = false;
};

// Callbacks on the engine thread; implementations must be quick and must not
// call back into the engine.
class EngineObserver {
 public:
  virtual ~EngineObserver() = default;
  // The world about to be replayed (first, before any other callback).
  virtual void OnWorld(const EngineWorld& world) {}
  virtual void OnProgress(const EngineProgress& progress) {}
  virtual void OnIteration(uint64_t index, Nanoseconds duration) {}
  // One engine-level collective instance (in class mode it stands for the
  // instances of all ranks of the classes involved): network time from the
  // last arrival to completion, bytes per rank.
  virtual void OnCollective(graph::CollectiveKind kind, graph::CommKind comm, Nanoseconds latency, Bytes bytes) {}
  virtual void OnPointToPoint(Nanoseconds latency, Bytes bytes) {}
  // An op of a real rank completed (at the time the inbox said).
  virtual void OnRealRankOpComplete(uint32_t rank, uint32_t op, Nanoseconds at) {}
  // Hybrid: every virtual member of collective instance `call` (0-based, all
  // kinds counted) of engine communicator `comm` has arrived; the last at
  // `arrived`. Only for communicators with real members.
  virtual void OnVirtualMembersArrived(uint32_t comm, uint64_t call, Nanoseconds arrived) {}
  // Hybrid, ahead of OnVirtualMembersArrived for the same instance: the
  // virtual members of instance `call` of `comm` will all have arrived at
  // max(floor, E + after_end), E being the end that the one real member of
  // instance `after_call` of `after_comm` (all of whose members arrived, but
  // whose real member has not reported yet) will report. Nothing but the
  // virtual members' modelled compute lies between (arrival_forecast.cc).
  virtual void OnVirtualMembersForecast(uint32_t comm, uint64_t call, uint32_t after_comm, uint64_t after_call,
                                        Nanoseconds floor, Nanoseconds after_end) {}
  // Hybrid: virtual rank `send_rank` starts sending message `index` (0-based,
  // per (comm, send_rank, recv_rank)) of `bytes` to real rank `recv_rank` on
  // engine communicator `comm`; its first byte leaves at `ready`.
  virtual void OnVirtualSendToReal(uint32_t comm, uint32_t send_rank, uint32_t recv_rank, uint64_t index,
                                   Nanoseconds ready, Bytes bytes) {}
  // Hybrid, ahead of OnVirtualSendToReal for the same message: its first
  // byte will leave at `ready`. Only modelled compute, a group's start and
  // the group's receives lie between now and that send, and no other
  // transfer can take the sender's NIC before it (send_forecast.cc).
  virtual void OnVirtualSendToRealForecast(uint32_t comm, uint32_t send_rank, uint32_t recv_rank, uint64_t index,
                                           Nanoseconds ready, Bytes bytes) {}
  // Hybrid: a collective with real members finished. `virtual_last`: its
  // virtual members arrived after the real ones had finished, so they, not
  // the real transfer, set its end (a late virtual rank, or real ranks the
  // engine thinks are early).
  virtual void OnMixedCollective(bool virtual_last) {}
  // Hybrid: an all-virtual collective took a real measurement's duration
  // instead of the model's (calibration, docs/timing.md).
  virtual void OnCalibratedCollective() {}
  // Hybrid: the engine has nothing left to play and has waited
  // kAwaitReportAfter for the real ranks' reports; `positions` says where
  // each real rank's program stands (a stall report's engine side). Repeated
  // every kAwaitReportAfter while the wait lasts.
  virtual void OnAwaitingRealRanks(const std::vector<RealRankPosition>& positions) {}
};

inline constexpr std::chrono::milliseconds kAwaitReportAfter{1000};

// Fans callbacks out to several observers (metrics, the hybrid bridge, ...).
// Observers are not owned and must outlive the engine run.
class ObserverList final : public EngineObserver {
 public:
  void Add(EngineObserver* o) {
    if (o != nullptr) observers_.push_back(o);
  }
  void OnWorld(const EngineWorld& w) override {
    for (auto* o : observers_) o->OnWorld(w);
  }
  void OnProgress(const EngineProgress& p) override {
    for (auto* o : observers_) o->OnProgress(p);
  }
  void OnIteration(uint64_t index, Nanoseconds d) override {
    for (auto* o : observers_) o->OnIteration(index, d);
  }
  void OnCollective(graph::CollectiveKind kind, graph::CommKind comm, Nanoseconds latency, Bytes bytes) override {
    for (auto* o : observers_) o->OnCollective(kind, comm, latency, bytes);
  }
  void OnPointToPoint(Nanoseconds latency, Bytes bytes) override {
    for (auto* o : observers_) o->OnPointToPoint(latency, bytes);
  }
  void OnRealRankOpComplete(uint32_t rank, uint32_t op, Nanoseconds at) override {
    for (auto* o : observers_) o->OnRealRankOpComplete(rank, op, at);
  }
  void OnVirtualMembersArrived(uint32_t comm, uint64_t call, Nanoseconds arrived) override {
    for (auto* o : observers_) o->OnVirtualMembersArrived(comm, call, arrived);
  }
  void OnVirtualMembersForecast(uint32_t comm, uint64_t call, uint32_t after_comm, uint64_t after_call,
                                Nanoseconds floor, Nanoseconds after_end) override {
    for (auto* o : observers_) o->OnVirtualMembersForecast(comm, call, after_comm, after_call, floor, after_end);
  }
  void OnVirtualSendToReal(uint32_t comm, uint32_t send_rank, uint32_t recv_rank, uint64_t index,
                           Nanoseconds ready, Bytes bytes) override {
    for (auto* o : observers_) o->OnVirtualSendToReal(comm, send_rank, recv_rank, index, ready, bytes);
  }
  void OnVirtualSendToRealForecast(uint32_t comm, uint32_t send_rank, uint32_t recv_rank, uint64_t index,
                                   Nanoseconds ready, Bytes bytes) override {
    for (auto* o : observers_) o->OnVirtualSendToRealForecast(comm, send_rank, recv_rank, index, ready, bytes);
  }
  void OnMixedCollective(bool virtual_last) override {
    for (auto* o : observers_) o->OnMixedCollective(virtual_last);
  }
  void OnCalibratedCollective() override {
    for (auto* o : observers_) o->OnCalibratedCollective();
  }
  void OnAwaitingRealRanks(const std::vector<RealRankPosition>& positions) override {
    for (auto* o : observers_) o->OnAwaitingRealRanks(positions);
  }

 private:
  std::vector<EngineObserver*> observers_;
};

}  // namespace prism::engine

#endif  // PRISM_DAEMON_ENGINE_ENGINE_OBSERVER_H_
