// Test harness for prismd's hybrid scheduling without sockets or GPUs: a
// graph, the HybridScheduler and the replay engine (paced to the wall
// clock) on its own thread, and a capturing ScheduleSink. Tests act as the
// real ranks' plugins by calling Feed() with the events a plugin would send.
#ifndef PRISM_TEST_HYBRID_HARNESS_H_
#define PRISM_TEST_HYBRID_HARNESS_H_

#include <chrono>
#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "daemon/engine/simulation.h"
#include "daemon/hybrid/divergence_watch.h"
#include "daemon/hybrid/hybrid_scheduler.h"
#include "daemon/hybrid/session_recorder.h"
#include "proto/graph.pb.h"

namespace prism::testing {

class HybridHarness : public daemon::ScheduleSink {
 public:
  // Starts the engine (real ranks `real`, lookahead `lookahead`).
  // `step_cost`: NCCL's cost per ring step, in the engine's model and in
  // MIRROR schedules (prismd --step-cost-us).
  // `follow`: prismd --follow (unmatched operations are no divergence).
  // `ring_answer_wait`: HybridSchedulerOptions::ring_answer_wait (prismd's by
  // default; a test that must not see a hold for want of time gives seconds).
  // `recorder` (nullable, outlives the harness): prismd --record-sessions.
  HybridHarness(graph::Graph graph, std::vector<uint32_t> real, Nanoseconds lookahead = FromMilliseconds(20),
                Nanoseconds step_cost = Nanoseconds(0), bool follow = false,
                Nanoseconds ring_answer_wait = daemon::HybridSchedulerOptions().ring_answer_wait,
                daemon::SessionRecorder* recorder = nullptr);
  ~HybridHarness() override;

  daemon::HybridScheduler& scheduler() { return *scheduler_; }
  // Told every divergence (as prismd's --on-divergence watch is); nothing
  // stops the harness on it.
  daemon::DivergenceWatch& divergences() { return divergences_; }
  const engine::WallClockPacer& pacer() const { return pacer_; }

  // A plugin session of global rank `rank` (Hello.rank; -1: RANK unset).
  // Plugin session 1 is open from the start, as rank 0.
  void OpenSession(daemon::SessionId session, int32_t rank);
  // The bootstrap announced a communicator.
  void Communicator(uint64_t hash, int64_t graph_comm, std::vector<uint32_t> members);
  // One batch from session `session`; replies are captured like pushes.
  void Feed(daemon::SessionId session, const rpc::EventBatch& batch);

  // The newest schedule for `key` (from a reply or a push), waiting up to
  // `timeout`; holds (OpSchedule.hold) only with `holds`.
  std::optional<rpc::OpSchedule> WaitSchedule(const rpc::OpKey& key, std::chrono::milliseconds timeout,
                                              bool holds = false);
  std::vector<rpc::OpSchedule> AllSchedules();  // holds included

  // ScheduleSink
  bool PushSchedules(daemon::SessionId id, rpc::ScheduleBatch batch) override;

  // Stops the engine; returns its result (report) or error.
  absl::StatusOr<engine::SimulationResult> Stop();

 private:
  void Record(const rpc::ScheduleBatch& b);

  graph::Graph graph_;
  daemon::DivergenceWatch divergences_{daemon::OnDivergence::kStop};
  engine::EngineInbox inbox_;
  engine::WallClockPacer pacer_;
  std::unique_ptr<daemon::HybridScheduler> scheduler_;
  std::thread engine_;
  absl::StatusOr<engine::SimulationResult> result_ = absl::UnknownError("running");
  bool stopped_ = false;
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<rpc::OpSchedule> schedules_;
};

// Keys and events as a plugin would build them.
rpc::OpKey Key(uint64_t hash, rpc::OpKind kind, uint64_t seq, int32_t peer = -1);
void AddStarted(rpc::EventBatch* b, uint64_t op_id, const rpc::OpKey& key, int32_t comm_rank, int32_t comm_size,
                uint64_t bytes, int64_t at_ns, bool ring = true);
void AddFinished(rpc::EventBatch* b, uint64_t op_id, int64_t first_send_ns, int64_t end_ns);
// A communicator line of a prismd --record-sessions recording, as prismd writes one.
void RecordCommunicator(daemon::Recording* rec, uint64_t hash, int64_t graph_comm, std::string name,
                        std::vector<uint32_t> members);
int64_t RealtimeNow();

// prismd --simulate --iterations 4 --nccl-algo Ring of `graph`, with the
// graph's step cost (else the table's): the mean of iterations 1..3, in
// seconds.
absl::StatusOr<double> SimulatedRingSeconds(const graph::Graph& graph);

}  // namespace prism::testing

#endif  // PRISM_TEST_HYBRID_HARNESS_H_
