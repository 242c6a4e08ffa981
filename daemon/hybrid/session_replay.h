// Replays a recording of plugin sessions (prismd --record-sessions, format in
// session_recorder.h) against the engine, without sockets, GPUs or the wall
// clock: the recorded real ranks' events drive a HybridScheduler and an
// unpaced engine on the recorded time axis, and the schedules it answers are
// collected. Used by CI (test/hybrid_replay_test.cc, test/fixtures/hybrid/)
// to check that the same events still give the same schedules.
//
// Why an unpaced replay gives the live run's schedules: every report carries
// its own CLOCK_REALTIME stamp and the engine applies it at that emulated
// time (realtime.h), so a virtual rank's time depends on the reports' stamps,
// not on when prismd received them. A live run whose engine handled an event
// before a report that should have delayed it (lag beyond the lookahead)
// would differ; the comparison names each difference.
//
// Thread-safety: the functions are self-contained (each builds and joins its
// own engine and scheduler).
#ifndef PRISM_DAEMON_HYBRID_SESSION_REPLAY_H_
#define PRISM_DAEMON_HYBRID_SESSION_REPLAY_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/units.h"
#include "daemon/engine/late_ranks.h"
#include "daemon/engine/network_model.h"
#include "daemon/engine/nic_scheduler.h"
#include "daemon/engine/realtime.h"
#include "daemon/engine/trace_writer.h"
#include "daemon/hybrid/session_recorder.h"
#include "proto/graph.pb.h"
#include "proto/prism_service.pb.h"

namespace prism::daemon {

// One schedule sent to a session (a reply or a push).
struct SessionSchedule {
  uint64_t session = 0;
  rpc::OpSchedule schedule;
  // CLOCK_REALTIME when the scheduler handed it over (a reply: when the batch
  // it answers was handled), on the recording's clock; 0 in unpaced replays.
  int64_t sent_ns = 0;
};

struct SessionReplayResult {
  std::vector<SessionSchedule> schedules;  // in the order the scheduler sent them
  std::vector<SessionSchedule> holds;      // OpSchedule.hold replies, apart (not in `schedules`)
  // Forecasts (OpSchedule.after), apart: the plain schedule of the same
  // operation follows each at its members' arrival, in `schedules`.
  std::vector<SessionSchedule> forecasts;
  uint64_t forecast_misses = 0;  // HybridScheduler::Counters
  uint64_t send_forecasts = 0;   // HybridScheduler::Counters: receives timed ahead of their virtual send
  std::vector<Nanoseconds> iteration_times;  // the engine's, every iteration it completed
  uint64_t ops_matched = 0, ops_unmatched = 0, divergences = 0;
  uint64_t schedules_late = 0;  // sent after the time they give (meaningful in a paced replay)
  bool engine_finished = false;            // every rank finished (else the recording ended first)
  // With trace_ranks: what the engine played for those ranks (their actors'
  // ops; actor_of_rank maps ranks to actors).
  std::vector<engine::TraceRecorder::OpRecord> trace;
  std::vector<uint32_t> actor_of_rank;
  // A paced replay's engine lag (prism_engine_event_lag_seconds); empty unpaced.
  engine::WallClockPacer::LagHistogram lags;
  std::optional<engine::WallClockPacer::LagHistogram> steady_lags;  // after the first iteration ended
  Nanoseconds max_lag;
};

// Replays `recording` against `graph` (the graph prismd ran). Errors: the
// graph's, or an engine error (e.g. a report the graph cannot take).
// `trace_ranks`: ranks whose ops the result keeps (SessionReplayResult::trace).
// `nccl`: what the model follows of the job's NCCL, as for the live run
// (a recording made before 2026-12-02 replays with `p2p_buffer` 0: its
// virtual sends ended with their receives). `nic_model`: prismd's --nic-model.
// `late`: prismd's --late (virtual ranks late in one iteration).
absl::StatusOr<SessionReplayResult> ReplaySessions(const graph::Graph& graph, const Recording& recording,
                                                   const std::vector<uint32_t>& trace_ranks = {},
                                                   const engine::NcclBehaviour& nccl = engine::NcclBehaviour(),
                                                   engine::NicModel nic_model = engine::NicModel::kQueues,
                                                   const std::vector<engine::LateRank>& late = {});

// How ReplaySessionsPaced plays.
struct PacedReplayOptions {
  std::vector<uint32_t> trace_ranks;       // as for ReplaySessions
  std::optional<Nanoseconds> lookahead;    // the engine's (default: the recording's), to try another
  engine::NcclBehaviour nccl;              // as for ReplaySessions
  engine::NicModel nic_model = engine::NicModel::kQueues;  // as for ReplaySessions
  std::vector<engine::LateRank> late;      // as for ReplaySessions
  SessionRecorder* recorder = nullptr;     // records the replay as prismd --record-sessions would (its cost included)
  // HybridSchedulerOptions::ring_answer_wait (default: prismd's); 0 holds a
  // ring the engine has not yet seen its members reach at once, as prismd
  // did before 2026-12-02.
  std::optional<Nanoseconds> ring_answer_wait;
  bool forecast = true;  // HybridSchedulerOptions::forecast
  std::optional<Nanoseconds> spin;  // engine::RealtimeOptions::spin (default: prismd's, --spin-us)
};

// Replays `recording` as the live run met it: the engine paced to the wall
// clock with the recording's lookahead, each recorded line handed to the
// scheduler when as much time has passed since the start as had passed in
// the recording (so reports arrive behind the engine as they did live). All
// CLOCK_REALTIME stamps are moved to now; the returned schedules are moved
// back, so they compare with RecordedSchedules. Takes as long as the
// recording. For finding where a live run and the unpaced replay part, and
// for measuring the engine's lag (the result carries it).
absl::StatusOr<SessionReplayResult> ReplaySessionsPaced(const graph::Graph& graph, const Recording& recording,
                                                        const PacedReplayOptions& options = PacedReplayOptions());

// The recorded schedules of `recording`, in order.
std::vector<SessionSchedule> RecordedSchedules(const Recording& recording);

// Differences between two schedule lists, matched by (session, operation
// key): a schedule missing on either side, or a different mode, unmatched
// flag or link, or ready times more than `tolerance_ns` apart. One line each,
// at most `max_lines` (then a count). Empty: the same schedules.
std::vector<std::string> CompareSchedules(const std::vector<SessionSchedule>& expected,
                                          const std::vector<SessionSchedule>& actual, int64_t tolerance_ns,
                                          size_t max_lines = 20);

// `recording` with only what the scheduler reads: communicators, the
// operation events (OpStarted, OpFinished) and schedules; per-message events
// are dropped (a small CI fixture from a large recording).
Recording KeepOperationEvents(const Recording& recording);

// The recording `real_ranks` would make if they ran exactly as prismd
// --simulate plays them on `graph` (every operation started when the model
// issues it and finished when the model completes it; one session per rank,
// session = rank + 1; communicator hashes made up). Replaying it must give
// the simulation's own iteration times: the hybrid path's self-check (a
// difference is time the hybrid mode adds or loses by itself). `nccl`: what
// the model follows of the job's NCCL (prismd's --step-cost-us, --nccl-algo);
// `nic_model`: prismd's --nic-model. `late`: prismd's --late (the real
// ranks then report what a late virtual rank made of their operations).
absl::StatusOr<Recording> ModelRecording(const graph::Graph& graph, const std::vector<uint32_t>& real_ranks,
                                         int64_t start_realtime_ns,
                                         const engine::NcclBehaviour& nccl = engine::NcclBehaviour(),
                                         engine::NicModel nic_model = engine::NicModel::kQueues,
                                         const std::vector<engine::LateRank>& late = {});

// Writes `recording` in the recorder's format (times and order kept).
absl::Status WriteRecording(const Recording& recording, const std::string& path);

}  // namespace prism::daemon

#endif  // PRISM_DAEMON_HYBRID_SESSION_REPLAY_H_
