// hybrid_lag_bench: prismd's hybrid engine in real time against stand-in real
// ranks, and the figures prismd's metrics give for it: the engine's lag
// (prism_engine_event_lag_seconds), how late its schedules were sent
// (prism_hybrid_schedule_lead_seconds) and the late receives those schedules
// cause (prism_hybrid_receive_late_seconds).
//
// Usage: hybrid_lag_bench [--iterations N] [--nccl-algo A] [--step-cost-us US]
//                         [--lookahead-ms MS] [--report-delay-us US] [--record FILE]
//                         [--message-events on|off] [--ring-answer-wait-us US] GRAPH RANKS [RANKS ...]
//   RANKS: the real ranks of one run, comma-separated (e.g. 0  5  0,1).
//   --nccl-algo: as prismd's (default Ring; "" for NCCL's own choice).
//   --step-cost-us: as prismd's (default its "auto").
//   --iterations: iterations played (default 3).
//   --record FILE: the scheduler records the sessions there, as prismd
//     --record-sessions does (the GPU host's runs record by default).
//   --message-events on|off: the per-message events (default on).
//   --ring-answer-wait-us US: HybridSchedulerOptions::ring_answer_wait
//     (default prismd's; 0: a ring the engine has not seen its members reach
//     is held at once, as before 2026-12-02).
//   --report-delay-us: how long after its stamp a report reaches prismd
//     (default 50: the plugin's PRISM_EVENT_FLUSH_US batching).
//   --enqueue-ahead-us: how far ahead of its GPU the rank's host enqueues
//     each operation (NCCL reports it then; default 0). A real training
//     loop's host runs ahead by whole layers.
//   --push-delay-us: how long a schedule takes to reach the plugin (gRPC;
//     default 0).
//   --forecast on|off: HybridSchedulerOptions::forecast (default on; off:
//     every ring waits for its members' schedule, as before 2026-12-02).
//   --spin-us US: as prismd's (how long before an event the engine polls).
//   --receive-late-ns NS: the Completed.late_ns every receive reports
//     (default 700: the GPU run of 2026-12-02 at 8192 ranks, two real ranks,
//     reported 1,035,612 late receives, 0.74 s together; prismd files each
//     by iteration, on the session threads and at each iteration's end on
//     the engine thread); 0: none.
//
// The stand-in real ranks run exactly as `prismd --simulate` plays them
// (ModelRecording): each operation's OpStarted and OpFinished reach the
// HybridScheduler at their own CLOCK_REALTIME, from a feeder thread, while
// the engine is paced to the wall clock as in prismd (ReplaySessionsPaced),
// so what the engine and scheduler do per report is what they do live.
// Beside the operations, the per-message events the plugin reports (Posted
// and Completed for each step's send and receive, batched every 50 us;
// --message-events off leaves them out) reach the scheduler as live.
//
// Late receives, as the plugin would count them (`Completed.late_ns`), from
// the schedules alone: an operation's receives from virtual peers are spread
// evenly over [max(start, ready), end] of the operation (a ring: one per
// step and channel; a stream: one per 512 KiB and channel), and a receive
// whose time comes before its schedule was sent completes when it comes
// (a held ring and a STREAM receive wait for the schedule; a forecast,
// OpSchedule.after, releases them as the schedule does). A schedule's gRPC
// trip is --push-delay-us; NCCL's polling of test() is not in it.
// "TP all-reduces ... wait per op": all-reduces over 2 ranks, their first
// receive's wait for prismd, per operation. "steady iterations": the same
// late receives without the start-up iteration (those timed before the
// engine's first iteration ended), split into held rings' and late
// schedules'; what prismd's exit line calls "waiting for prismd's
// schedule". NCCL's test() cadence (the exit line's other cause) is not
// played here.
//
// Output: one line per run, then its lag histogram; the steady iterations'
// lag line ends with the events late by over 50 us by what the engine
// thread did meanwhile (LagHistogram::LateSteps, as prismd's exit line).
#include <algorithm>
#include <cstdlib>
#include <chrono>
#include <iterator>
#include <cstdio>
#include <limits>
#include <map>
#include <set>
#include <memory>
#include <string>
#include <time.h>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "daemon/engine/nccl_algorithm.h"
#include "daemon/engine/nccl_tuning.h"
#include "daemon/hybrid/session_replay.h"
#include "proto/graph_file.h"

namespace {

using prism::Nanoseconds;
using prism::daemon::Recording;
using prism::daemon::RecordedLine;
using prism::daemon::SessionReplayResult;

constexpr uint64_t kStreamChunk = 512 * 1024;  // NCCL 2.28's Simple step (NCCL_BUFFSIZE / NCCL_STEPS)

std::string KeyOf(uint64_t session, const prism::rpc::OpKey& k) {
  return absl::StrCat(session, "/", k.kind(), "/", k.seq(), "/", k.comm_hash(), "/", k.peer());
}

struct RecordedOp {
  prism::rpc::OpStarted started;
  int64_t end_ns = 0;
};

std::map<std::string, RecordedOp> OpsOf(const Recording& rec) {
  std::map<std::string, RecordedOp> by_key;
  std::map<std::pair<uint64_t, uint64_t>, std::string> key_of_id;
  for (const RecordedLine& line : rec.lines) {
    if (line.kind != RecordedLine::kEvents) continue;
    for (const auto& e : line.events.events()) {
      if (e.has_op_started()) {
        const std::string k = KeyOf(line.session, e.op_started().key());
        by_key[k].started = e.op_started();
        key_of_id[{line.session, e.op_started().op_id()}] = k;
      } else if (e.has_op_finished()) {
        const auto it = key_of_id.find({line.session, e.op_finished().op_id()});
        if (it != key_of_id.end()) by_key[it->second].end_ns = static_cast<int64_t>(e.op_finished().end_ns());
      }
    }
  }
  return by_key;
}

// Receives of `op` from virtual peers, per channel, as NCCL would post them.
uint64_t ReceivesPerChannel(const prism::rpc::OpSchedule& s, const prism::rpc::OpStarted& op) {
  const uint64_t n = static_cast<uint64_t>(std::max(op.comm_size(), 1));
  const uint64_t channels = static_cast<uint64_t>(std::max<uint32_t>(op.channels(), 1));
  if (s.mode() == prism::rpc::OpSchedule::MIRROR)
    return op.key().kind() == prism::rpc::OP_ALL_REDUCE ? 2 * (n - 1) : n - 1;
  const uint64_t per_channel = (op.bytes() + channels - 1) / channels;
  return std::max<uint64_t>(1, (per_channel + kStreamChunk - 1) / kStreamChunk);
}

struct LateReceives {
  uint64_t receives = 0, late = 0;
  uint64_t held = 0;  // ring collectives held (OpSchedule.hold)
  double late_s = 0;
  // All-reduces over 2 ranks (TP2): how many, and how long their first
  // receive waited in all (the operation's own wait for prismd).
  uint64_t tp_ops = 0;
  double tp_wait_s = 0;
  std::map<std::string, double> late_s_by_kind;  // OpKind name (ALL_REDUCE over 2 ranks: "TP")
  // Apart: the start-up iteration (receives before the engine's first
  // iteration ended); the steady ones by cause: a held ring's receives, and
  // receives whose schedule came after their time (STREAM, or a ring whose
  // hold came before its schedule was sent).
  double startup_s = 0, steady_held_s = 0, steady_late_schedule_s = 0;
  uint64_t steady_held = 0, steady_late_schedule = 0;
};

// When a hold (OpSchedule.hold) for each operation was sent, by KeyOf.
std::map<std::string, int64_t> HoldsOf(const SessionReplayResult& r) {
  std::map<std::string, int64_t> out;
  for (const auto& h : r.holds) out.emplace(KeyOf(h.session, h.schedule.key()), h.sent_ns);
  return out;
}

// When the first forecast (OpSchedule.after) for each operation was sent.
std::map<std::string, int64_t> ForecastsOf(const SessionReplayResult& r) {
  std::map<std::string, int64_t> out;
  for (const auto& f : r.forecasts) out.emplace(KeyOf(f.session, f.schedule.key()), f.sent_ns);
  return out;
}

// A STREAM receive waits for its schedule; a MIRROR receive only under a
// hold (from when the hold came; before it, and without one, the virtual
// members count as on time).
// A schedule reaches the plugin `push_ns` after it was sent (gRPC); a
// forecast (OpSchedule.after) releases the receives as the plain schedule
// does, whichever comes first. `gpu_start`: when each operation's transfers
// began (its OpStarted stamp may be earlier: --enqueue-ahead-us).
LateReceives LateFromSchedules(const SessionReplayResult& r, const std::map<std::string, RecordedOp>& ops,
                               const std::map<std::string, int64_t>& gpu_start, int64_t push_ns, int64_t startup_end) {
  LateReceives out;
  const std::map<std::string, int64_t> holds = HoldsOf(r);
  const std::map<std::string, int64_t> forecasts = ForecastsOf(r);
  std::set<std::string> seen;
  for (const auto& sched : r.schedules) {
    const std::string key = KeyOf(sched.session, sched.schedule.key());
    const auto it = ops.find(key);
    if (it == ops.end() || it->second.end_ns == 0 || !seen.insert(key).second) continue;
    const RecordedOp& op = it->second;
    int64_t release = sched.sent_ns;
    if (const auto f = forecasts.find(key); f != forecasts.end()) release = std::min(release, f->second);
    release += push_ns;
    int64_t waits_from = std::numeric_limits<int64_t>::min();
    if (sched.schedule.mode() == prism::rpc::OpSchedule::MIRROR) {
      const auto hold = holds.find(key);
      waits_from = hold == holds.end() || hold->second >= release - push_ns ? std::numeric_limits<int64_t>::max()
                                                                            : hold->second + push_ns;
      if (waits_from != std::numeric_limits<int64_t>::max()) ++out.held;
    }
    const auto g = gpu_start.find(key);
    const int64_t start = g != gpu_start.end() ? g->second : static_cast<int64_t>(op.started.at_ns());
    const int64_t from = std::max<int64_t>(start, static_cast<int64_t>(sched.schedule.ready_ns()));
    const bool tp = op.started.key().kind() == prism::rpc::OP_ALL_REDUCE && op.started.comm_size() == 2;
    bool first = true;
    const int64_t span = std::max<int64_t>(0, op.end_ns - from);
    const uint64_t m = ReceivesPerChannel(sched.schedule, op.started);
    const uint64_t channels = static_cast<uint64_t>(std::max<uint32_t>(op.started.channels(), 1));
    for (uint64_t k = 0; k < m; ++k) {
      const int64_t done = from + static_cast<int64_t>(static_cast<double>(span) * static_cast<double>(k + 1) /
                                                       static_cast<double>(m));
      const int64_t late = release - done;
      out.receives += channels;
      if (late > 0 && done >= waits_from) {
        out.late += channels;
        out.late_s += static_cast<double>(late) * 1e-9 * static_cast<double>(channels);
        if (tp && first) out.tp_wait_s += static_cast<double>(late) * 1e-9;
        const double seconds = static_cast<double>(late) * 1e-9 * static_cast<double>(channels);
        out.late_s_by_kind[tp ? std::string("TP") : prism::rpc::OpKind_Name(op.started.key().kind()).substr(3)] +=
            seconds;
        const bool held = waits_from != std::numeric_limits<int64_t>::min();
        if (done < startup_end) out.startup_s += seconds;
        else if (held) out.steady_held_s += seconds, out.steady_held += channels;
        else out.steady_late_schedule_s += seconds, out.steady_late_schedule += channels;
      }
      first = false;
    }
    out.tp_ops += tp ? 1 : 0;
  }
  return out;
}

// The host runs ahead of its GPU (NCCL reports an operation when it is
// enqueued): each OpStarted is stamped and reported up to `ahead_ns` before
// the operation's transfers begin, in the rank's order. Returns when each
// operation's transfers began (by KeyOf).
std::map<std::string, int64_t> EnqueueAhead(Recording* rec, int64_t ahead_ns) {
  std::map<std::string, int64_t> gpu_start;
  std::map<uint64_t, int64_t> last;  // per session, the previous enqueue
  for (RecordedLine& line : rec->lines) {
    if (line.kind != RecordedLine::kEvents) continue;
    for (auto& e : *line.events.mutable_events()) {
      if (!e.has_op_started()) continue;
      prism::rpc::OpStarted* st = e.mutable_op_started();
      const int64_t at = static_cast<int64_t>(st->at_ns());
      gpu_start[KeyOf(line.session, st->key())] = at;
      int64_t& prev = last[line.session];
      // Not before the run's start (the communicators are announced then).
      const int64_t enqueued = std::min(at, std::max({prev, at - ahead_ns, rec->start_realtime_ns}));
      prev = enqueued;
      st->set_at_ns(static_cast<uint64_t>(enqueued));
      line.at -= at - enqueued;
    }
  }
  std::stable_sort(rec->lines.begin(), rec->lines.end(),
                   [](const RecordedLine& a, const RecordedLine& b) { return a.at < b.at; });
  return gpu_start;
}

// The plugin's per-message events for every operation of `rec` (what NCCL's
// proxy drives through it: per step and channel a send, Posted and
// Completed, and a receive, Posted at the previous step and Completed at its
// own), batched per session every `flush_ns` as the plugin's I/O thread
// sends them. Returns how many events were added.
uint64_t AddMessageTraffic(Recording* rec, int64_t flush_ns, int64_t receive_late_ns) {
  const std::map<std::string, RecordedOp> ops = OpsOf(*rec);
  std::map<std::pair<uint64_t, int64_t>, prism::rpc::EventBatch> batches;  // (session, window) -> events
  std::map<std::pair<uint64_t, uint64_t>, uint64_t> seq;                 // (session, conn) -> next
  uint64_t added = 0;
  for (const auto& [key, op] : ops) {
    if (op.end_ns == 0 || op.started.comm_size() < 2) continue;
    const uint64_t session = std::stoull(key.substr(0, key.find('/')));
    const uint64_t n = static_cast<uint64_t>(op.started.comm_size());
    const uint32_t channels = std::max<uint32_t>(op.started.channels(), 1);
    const bool ring = op.started.key().kind() == prism::rpc::OP_ALL_REDUCE ||
                      op.started.key().kind() == prism::rpc::OP_ALL_GATHER ||
                      op.started.key().kind() == prism::rpc::OP_REDUCE_SCATTER;
    const uint64_t per_channel = (op.started.bytes() + channels - 1) / channels;
    const uint64_t steps = ring ? (op.started.key().kind() == prism::rpc::OP_ALL_REDUCE ? 2 * (n - 1) : n - 1)
                                : std::max<uint64_t>(1, (per_channel + kStreamChunk - 1) / kStreamChunk);
    const uint64_t bytes = std::max<uint64_t>(1, per_channel / steps);
    const int64_t start = static_cast<int64_t>(op.started.at_ns());
    const int64_t span = std::max<int64_t>(0, op.end_ns - start);
    for (uint64_t k = 0; k < steps; ++k) {
      const int64_t done = start + static_cast<int64_t>(static_cast<double>(span) * static_cast<double>(k + 1) /
                                                        static_cast<double>(steps));
      const int64_t posted = start + static_cast<int64_t>(static_cast<double>(span) * static_cast<double>(k) /
                                                          static_cast<double>(steps));
      for (uint32_t c = 0; c < channels; ++c) {
        for (int recv = 0; recv < 2; ++recv) {
          const uint64_t conn = 2 * c + 1 + static_cast<uint64_t>(recv);
          const uint64_t sq = seq[{session, conn}]++;
          prism::rpc::EventBatch& b = batches[{session, (recv ? posted : done) / flush_ns}];
          prism::rpc::Posted* p = b.add_events()->mutable_posted();
          p->set_conn_id(conn), p->set_seq(sq), p->set_bytes(bytes), p->set_at_ns(recv ? posted : done);
          p->set_op_id(op.started.op_id()), p->set_channel(c), p->set_step(static_cast<uint32_t>(k));
          prism::rpc::Completed* d = batches[{session, done / flush_ns}].add_events()->mutable_completed();
          d->set_conn_id(conn), d->set_seq(sq), d->set_bytes(bytes), d->set_at_ns(done);
          d->set_op_id(op.started.op_id()), d->set_channel(c), d->set_step(static_cast<uint32_t>(k));
          if (recv) d->set_late_ns(static_cast<uint64_t>(receive_late_ns));
          added += 2;
        }
      }
    }
  }
  std::vector<RecordedLine> lines;
  for (auto& [where, batch] : batches) {
    RecordedLine line;
    line.kind = RecordedLine::kEvents;
    line.session = where.first;
    line.at = (where.second + 1) * flush_ns;  // the flush after the window
    line.events = std::move(batch);
    lines.push_back(std::move(line));
  }
  std::vector<RecordedLine> merged;
  std::merge(std::make_move_iterator(rec->lines.begin()), std::make_move_iterator(rec->lines.end()),
             std::make_move_iterator(lines.begin()), std::make_move_iterator(lines.end()), std::back_inserter(merged),
             [](const RecordedLine& a, const RecordedLine& b) { return a.at < b.at; });
  rec->lines = std::move(merged);
  return added;
}

double Us(Nanoseconds t) { return t == Nanoseconds::Max() ? 1e9 : static_cast<double>(t.count()) / 1000.0; }

int64_t WallRealtimeNs() {
  timespec ts{};
  clock_gettime(CLOCK_REALTIME, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

int Usage() {
  std::fprintf(stderr,
               "usage: hybrid_lag_bench [--iterations N] [--nccl-algo A] [--step-cost-us US] [--lookahead-ms MS] "
               "[--report-delay-us US] [--enqueue-ahead-us US] [--push-delay-us US] [--forecast on|off] [--record FILE] "
               "[--message-events on|off] [--ring-answer-wait-us US] [--receive-late-ns NS] [--spin-us US] "
               "GRAPH RANKS [RANKS ...]   (RANKS e.g. 0 or 0,1)\n");
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  uint64_t iterations = 3;
  int64_t lookahead_ms = 0;
  double report_delay_us = 50;  // the plugin's PRISM_EVENT_FLUSH_US
  bool message_events = true;
  std::string record_path;  // --record: prismd --record-sessions's file
  int64_t ring_answer_wait_us = -1;  // -1: prismd's
  int64_t spin_us = -1;              // -1: prismd's --spin-us default
  double enqueue_ahead_us = 0;       // the host's run-ahead (0: OpStarted at the transfers' start)
  double push_delay_us = 0;          // a schedule's trip to the plugin
  int64_t receive_late_ns = 700;     // Completed.late_ns of every receive
  bool forecast = true;              // --forecast off: as before 2026-12-02
  const int64_t flush_ns = 50'000;
  std::string algo = "Ring";
  prism::engine::NcclBehaviour nccl;
  nccl.step_cost = prism::engine::DefaultNcclStepCost().cost;
  int i = 1;
  for (; i + 1 < argc && std::string(argv[i]).rfind("--", 0) == 0; i += 2) {
    const std::string flag = argv[i], value = argv[i + 1];
    double us = 0;
    if (flag == "--iterations" && absl::SimpleAtoi(value, &iterations) && iterations >= 1) continue;
    if (flag == "--lookahead-ms" && absl::SimpleAtoi(value, &lookahead_ms)) continue;
    if (flag == "--nccl-algo") { algo = value; continue; }
    if (flag == "--record") { record_path = value; continue; }
    if (flag == "--ring-answer-wait-us" && absl::SimpleAtoi(value, &ring_answer_wait_us) && ring_answer_wait_us >= 0)
      continue;
    if (flag == "--message-events" && (value == "on" || value == "off")) { message_events = value == "on"; continue; }
    if (flag == "--forecast" && (value == "on" || value == "off")) { forecast = value == "on"; continue; }
    if (flag == "--report-delay-us" && absl::SimpleAtod(value, &report_delay_us) && report_delay_us >= 0) continue;
    if (flag == "--enqueue-ahead-us" && absl::SimpleAtod(value, &enqueue_ahead_us) && enqueue_ahead_us >= 0) continue;
    if (flag == "--push-delay-us" && absl::SimpleAtod(value, &push_delay_us) && push_delay_us >= 0) continue;
    if (flag == "--spin-us" && absl::SimpleAtoi(value, &spin_us) && spin_us >= 0 && spin_us <= 10000) continue;
    if (flag == "--receive-late-ns" && absl::SimpleAtoi(value, &receive_late_ns) && receive_late_ns >= 0) continue;
    if (flag == "--step-cost-us" && absl::SimpleAtod(value, &us) && us >= 0) {
      nccl.step_cost = Nanoseconds(static_cast<int64_t>(us * 1000.0 + 0.5));
      continue;
    }
    std::fprintf(stderr, "hybrid_lag_bench: unknown option or bad value: %s %s\n", flag.c_str(), value.c_str());
    return Usage();
  }
  if (argc - i < 2) return Usage();
  auto algorithms = prism::engine::ParseNcclAlgo(algo);
  if (!algorithms.ok()) { std::fprintf(stderr, "--nccl-algo: %s\n", algorithms.status().ToString().c_str()); return 2; }
  nccl.ring = algorithms->ring, nccl.tree = algorithms->tree, nccl.pat = algorithms->pat;
  auto graph = prism::graph::ReadGraphFile(argv[i]);
  if (!graph.ok()) { std::fprintf(stderr, "%s\n", graph.status().ToString().c_str()); return 1; }
  (*graph->mutable_job()->mutable_attributes())["iterations"] = std::to_string(iterations);
  std::printf("graph %s: %d ranks, %llu iterations, NCCL_ALGO=%s, step cost %.1f us, lookahead %lld ms\n",
              graph->job().name().c_str(), graph->ranks_size(), static_cast<unsigned long long>(iterations),
              algo.empty() ? "(NCCL's choice)" : algo.c_str(), static_cast<double>(nccl.step_cost.count()) / 1000.0,
              static_cast<long long>(lookahead_ms));
  for (++i; i < argc; ++i) {
    std::vector<uint32_t> reals;
    for (absl::string_view s : absl::StrSplit(argv[i], ',')) {
      uint32_t r = 0;
      if (!absl::SimpleAtoi(s, &r) || r >= static_cast<uint32_t>(graph->ranks_size())) {
        std::fprintf(stderr, "hybrid_lag_bench: bad rank %s (the graph has %d)\n", std::string(s).c_str(),
                     graph->ranks_size());
        return 2;
      }
      reals.push_back(r);
    }
    auto rec = prism::daemon::ModelRecording(*graph, reals, WallRealtimeNs(), nccl);
    if (!rec.ok()) { std::fprintf(stderr, "%s\n", rec.status().ToString().c_str()); return 1; }
    rec->iterations = iterations;
    const uint64_t messages = message_events ? AddMessageTraffic(&*rec, flush_ns, receive_late_ns) : 0;
    const std::map<std::string, RecordedOp> ops = OpsOf(*rec);  // stamped where the transfers begin
    const std::map<std::string, int64_t> gpu_start =
        EnqueueAhead(&*rec, static_cast<int64_t>(enqueue_ahead_us * 1000.0));
    for (RecordedLine& line : rec->lines)  // reports reach prismd one flush after their stamps
      if (line.kind == RecordedLine::kEvents) line.at += static_cast<int64_t>(report_delay_us * 1000.0);
    const auto wall0 = std::chrono::steady_clock::now();
    std::unique_ptr<prism::daemon::SessionRecorder> recorder;
    if (!record_path.empty()) {
      auto opened = prism::daemon::SessionRecorder::Open(record_path, rec->start_realtime_ns, lookahead_ms * 1'000'000,
                                                         reals, graph->job().name(), iterations);
      if (!opened.ok()) { std::fprintf(stderr, "%s\n", opened.status().ToString().c_str()); return 1; }
      recorder = std::move(*opened);
    }
    prism::daemon::PacedReplayOptions po;
    po.lookahead = Nanoseconds(lookahead_ms * 1'000'000);
    po.nccl = nccl;
    po.recorder = recorder.get();
    po.forecast = forecast;
    if (ring_answer_wait_us >= 0) po.ring_answer_wait = Nanoseconds(ring_answer_wait_us * 1000);
    if (spin_us >= 0) po.spin = Nanoseconds(spin_us * 1000);
    auto r = prism::daemon::ReplaySessionsPaced(*graph, *rec, po);
    if (!r.ok()) { std::fprintf(stderr, "%s\n", r.status().ToString().c_str()); return 1; }
    const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - wall0).count();
    Nanoseconds played(0);
    for (Nanoseconds t : r->iteration_times) played += t;
    const int64_t startup_end =
        rec->start_realtime_ns + (r->iteration_times.empty() ? 0 : r->iteration_times.front().count());
    const LateReceives late =
        LateFromSchedules(*r, ops, gpu_start, static_cast<int64_t>(push_delay_us * 1000.0), startup_end);
    const double per_iteration_s = r->iteration_times.empty() ? 0 : late.late_s / r->iteration_times.size();
    const double iteration_s = r->iteration_times.empty() ? 0 : played.count() * 1e-9 / r->iteration_times.size();
    std::printf(
        "real %-5s %llu msg events | lag p50 <=%.0f us p99 <=%.0f us max %.0f us over %llu events | schedules %zu, %llu late | "
        "%llu held | late receives %llu of %llu, %.3f ms per iteration (%.2f%% of %.1f ms) | wall %.1f s\n",
        argv[i], static_cast<unsigned long long>(messages), Us(r->lags.QuantileUpper(0.5)), Us(r->lags.QuantileUpper(0.99)), Us(r->max_lag),
        static_cast<unsigned long long>(r->lags.total), r->schedules.size(),
        static_cast<unsigned long long>(r->schedules_late), static_cast<unsigned long long>(late.held),
        static_cast<unsigned long long>(late.late),
        static_cast<unsigned long long>(late.receives), per_iteration_s * 1e3,
        iteration_s > 0 ? 100.0 * per_iteration_s / iteration_s : 0.0, iteration_s * 1e3, wall);
    std::printf("  forecasts %zu (%llu missed) | TP all-reduces (2 ranks) %llu, wait per op %.1f us\n",
                r->forecasts.size(), static_cast<unsigned long long>(r->forecast_misses),
                static_cast<unsigned long long>(late.tp_ops),
                late.tp_ops > 0 ? late.tp_wait_s * 1e6 / static_cast<double>(late.tp_ops) : 0.0);
    if (r->iteration_times.size() > 1) {
      const double steady_n = static_cast<double>(r->iteration_times.size() - 1);
      const double steady_ms = (played - r->iteration_times.front()).count() * 1e-6 / steady_n;
      const double steady_late_ms = (late.steady_held_s + late.steady_late_schedule_s) * 1e3 / steady_n;
      if (r->steady_lags)
        std::printf("  steady iterations: lag p50 <=%.0f us p99 <=%.0f us over %llu events; %s\n",
                    Us(r->steady_lags->QuantileUpper(0.5)), Us(r->steady_lags->QuantileUpper(0.99)),
                    static_cast<unsigned long long>(r->steady_lags->total), r->steady_lags->LateSteps().c_str());
      std::printf("  steady iterations (%zu of %.1f ms): late receives %.3f ms per iteration (%.3f%%): held rings "
                  "%.3f ms (%llu receives), late schedules %.3f ms (%llu); start-up iteration %.3f ms\n",
                  r->iteration_times.size() - 1, steady_ms, steady_late_ms,
                  steady_ms > 0 ? 100.0 * steady_late_ms / steady_ms : 0.0, late.steady_held_s * 1e3 / steady_n,
                  static_cast<unsigned long long>(late.steady_held), late.steady_late_schedule_s * 1e3 / steady_n,
                  static_cast<unsigned long long>(late.steady_late_schedule), late.startup_s * 1e3);
    }
    std::printf("  late receives per iteration by kind (ms):");
    for (const auto& [kind, seconds] : late.late_s_by_kind)
      std::printf(" %s %.3f", kind.c_str(), r->iteration_times.empty() ? 0.0 : seconds * 1e3 / r->iteration_times.size());
    std::printf("\n  lag histogram (upper bound us: events):");
    for (size_t b = 0; b < prism::engine::WallClockPacer::kLagBuckets; ++b) {
      if (r->lags.counts[b] == 0) continue;
      if (b + 1 < prism::engine::WallClockPacer::kLagBuckets)
        std::printf(" %.0f:%llu", Us(prism::engine::WallClockPacer::kLagBounds[b]),
                    static_cast<unsigned long long>(r->lags.counts[b]));
      else
        std::printf(" inf:%llu", static_cast<unsigned long long>(r->lags.counts[b]));
    }
    std::printf("\n");
    std::fflush(stdout);
  }
  return 0;
}
