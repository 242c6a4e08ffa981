// hybrid_explain: replays a prismd --record-sessions recording against its
// graph (as CI's replay tests do) and prints, as tab-separated lines, what
// the engine played for the chosen ranks and what the real ranks reported.
// A developer's tool for finding where a hybrid run's time went.
//
// Usage: hybrid_explain GRAPH RECORDING RANKS
//        hybrid_explain --ops-only IN.rec OUT.rec   (a copy without per-message events)
//   Before GRAPH: --step-cost-us US (NCCL's cost per ring step, as prismd's;
//   default 0) and --ring-only (NCCL_ALGO=Ring), for the model:R,R recording
//   and for the engine's virtual ranks in every replay. For any source:
//   --iterations N (iterations the engine plays; default the recording's,
//   else the graph's, else 1: recordings made before 2026-12-02 do not say);
//   --nic-model queues|interleave|turns (prismd's; default queues);
//   --no-p2p-eager, --no-calibration, --collective-turnaround-us US, --step-turnaround-us US,
//   --launch-order graph|true|false, --late RANK:ITERATION:MS: as prismd's flags, with prismd's
//   defaults (eager sends, no turnaround, the graph's launch order). Until
//   2026-12-04 the replay played sends non-eager while prismd's default is
//   eager: a model:R replay of the fidelity bench's pp4 graph came out at
//   273.1 ms an iteration against --simulate's 264.3.
//   RECORDING: a file; paced:FILE (replayed in real time, reports arriving
//   as they did live: the live run's schedules; pacedMS:FILE with an engine
//   lookahead of MS milliseconds instead of the recording's); or model:R,R (what
//   real ranks R would record if they ran exactly like the model)
//   RANKS: comma-separated ranks to trace, e.g. 0,1,4
// Output lines (times in microseconds from the recording's start):
//   summary  schedules N  late N (sent after their time; paced replays)  matched N  divergences N
//            holds N  forecasts N (OpSchedule.hold and .after replies the replay sent)
//            send_forecasts N (receives timed before the engine played their virtual send)
//            forecast_misses N (forecasts the engine then played otherwise; docs/timing.md)
//   iteration  K  end_us
//   op   rank  op_index  kind  label  start_us  end_us
//   real session  op_id  kind  seq  peer  bytes  at_us  first_send_us  end_us  comm
//   sched session  sent_us  kind  seq  peer  mode(1 MIRROR, 2 STREAM)  ready_us  comm
//   fsched session  sent_us  kind  seq  peer  mode  ready_us  after_kind  after_seq  after_delay_us  comm
//     (comm: the communicator's NCCL commHash, hex: one session carries all the
//     real rank's communicators, so kind and seq alone do not name an operation)
//     (a forecast: ready at max(ready, the rank's end of op `after` + delay); docs/timing.md)
//   rsched (the same for the schedules the replay sent; sent_us 0 unless paced)
//   rfsched (the same for the forecasts the replay sent; fsched's columns)
//   rhold  session  sent_us  kind  seq  peer  comm   (a hold the replay sent; sent_us in paced replays)
//   conn session  conn_id  is_send  at_us
//   msg  session  posted|completed  conn_id  seq  bytes  at_us  op_id  channel  step  late_us  waited
//     (waited: 1 when the completed receive waited for prismd, Completed.waited_for_schedule; 0 else)
#include <cstdio>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "daemon/engine/launch_order.h"
#include "daemon/hybrid/session_recorder.h"
#include "daemon/hybrid/session_replay.h"
#include "proto/graph_file.h"

namespace {

std::string Describe(const prism::graph::Op& op, std::string* kind) {
  using prism::graph::Op;
  switch (op.kind_case()) {
    case Op::kCompute: *kind = "compute"; return op.compute().label();
    case Op::kCollective: *kind = "collective"; return op.collective().label();
    case Op::kSend: *kind = "send"; return op.send().label();
    case Op::kRecv: *kind = "recv"; return op.recv().label();
    case Op::kGroupStart: *kind = "group_start"; return "";
    case Op::kGroupEnd: *kind = "group_end"; return "";
    default: *kind = "?"; return "";
  }
}

double Us(int64_t ns, int64_t origin) { return static_cast<double>(ns - origin) / 1000.0; }

}  // namespace

int main(int argc, char** argv) {
  // hybrid_explain --ops-only IN.rec OUT.rec: keeps what the scheduler reads
  // (communicators, OpStarted/OpFinished, schedules): a small copy to keep.
  if (argc == 4 && std::string(argv[1]) == "--ops-only") {
    auto rec = prism::daemon::ReadRecording(argv[2]);
    if (!rec.ok()) { std::fprintf(stderr, "%s\n", rec.status().ToString().c_str()); return 1; }
    auto s = prism::daemon::WriteRecording(prism::daemon::KeepOperationEvents(*rec), argv[3]);
    if (!s.ok()) { std::fprintf(stderr, "%s\n", s.ToString().c_str()); return 1; }
    return 0;
  }
  prism::engine::NcclBehaviour nccl;
  nccl.p2p_eager = true;  // prismd's default (daemon/main.cc), not the struct's
  std::string launch_order = "graph";
  std::vector<prism::engine::LateRank> late;  // prismd's --late
  uint64_t iterations = 0;  // 0: the recording's, else the graph's
  prism::engine::NicModel nic_model = prism::engine::NicModel::kQueues;
  while (argc > 4 && std::string(argv[1]).rfind("--", 0) == 0) {
    const std::string flag = argv[1];
    double us = 0;
    if (flag == "--ring-only") {  // NCCL_ALGO=Ring, as prismd's --nccl-algo Ring: no tree, no PAT
      nccl.tree = false;
      nccl.pat = false;
      argv += 1, argc -= 1;
    } else if (flag == "--step-cost-us" && absl::SimpleAtod(argv[2], &us) && us >= 0) {
      nccl.step_cost = prism::Nanoseconds(static_cast<int64_t>(us * 1000.0 + 0.5));
      argv += 2, argc -= 2;
    } else if (flag == "--nic-model" && (std::string(argv[2]) == "queues" || std::string(argv[2]) == "interleave" ||
                                         std::string(argv[2]) == "turns")) {
      const std::string m = argv[2];
      nic_model = m == "queues"       ? prism::engine::NicModel::kQueues
                  : m == "interleave" ? prism::engine::NicModel::kInterleave
                                      : prism::engine::NicModel::kTurns;
      argv += 2, argc -= 2;
    } else if (flag == "--iterations" && absl::SimpleAtoi(argv[2], &iterations) && iterations >= 1) {
      argv += 2, argc -= 2;
    } else if (flag == "--no-p2p-eager") {
      nccl.p2p_eager = false;
      argv += 1, argc -= 1;
    } else if (flag == "--no-calibration") {
      nccl.calibrate = false;
      argv += 1, argc -= 1;
    } else if (flag == "--collective-turnaround-us" && absl::SimpleAtod(argv[2], &us) && us >= 0) {
      nccl.collective_turnaround = prism::Nanoseconds(static_cast<int64_t>(us * 1000.0 + 0.5));
      argv += 2, argc -= 2;
    } else if (flag == "--step-turnaround-us" && absl::SimpleAtod(argv[2], &us) && us >= 0) {
      nccl.step_turnaround = prism::Nanoseconds(static_cast<int64_t>(us * 1000.0 + 0.5));
      argv += 2, argc -= 2;
    } else if (flag == "--launch-order") {
      launch_order = argv[2];
      argv += 2, argc -= 2;
    } else if (flag == "--late") {
      auto parsed = prism::engine::ParseLateRanks(argv[2]);
      if (!parsed.ok()) { std::fprintf(stderr, "hybrid_explain: %s\n", std::string(parsed.status().message()).c_str()); return 2; }
      late = *std::move(parsed);
      argv += 2, argc -= 2;
    } else {
      std::fprintf(stderr, "hybrid_explain: unknown option, or a bad value after it: %s (--iterations takes a whole number >= 1)\n", flag.c_str());
      return 2;
    }
  }
  if (argc != 4) {
    std::fprintf(stderr,
                 "usage: hybrid_explain [--iterations N] [--step-cost-us US] [--ring-only] [--nic-model queues|interleave|turns] "
                 "[--no-p2p-eager] [--no-calibration] [--collective-turnaround-us US] [--step-turnaround-us US] "
                 "[--launch-order graph|true|false] [--late RANK:ITERATION:MS] GRAPH RECORDING RANKS (e.g. 0,1,4)\n");
    return 2;
  }
  auto graph = prism::graph::ReadGraphFile(argv[1]);
  if (!graph.ok()) { std::fprintf(stderr, "%s\n", graph.status().ToString().c_str()); return 1; }
  auto launch = prism::engine::ResolveLaunchOrder(launch_order, graph->job());
  if (!launch.ok()) { std::fprintf(stderr, "hybrid_explain: --launch-order: %s\n", launch.status().ToString().c_str()); return 2; }
  nccl.launch_in_order = launch->in_order;
  const uint32_t world = static_cast<uint32_t>(graph->ranks_size());
  // The graph's count is what model:R replays; a recording's own count wins in a replay.
  if (iterations > 0) (*graph->mutable_job()->mutable_attributes())["iterations"] = std::to_string(iterations);
  // "model:R,R..." stands for the recording those real ranks would make if
  // they ran exactly as the model plays them (the self-check's input).
  const std::string source = argv[2];
  absl::StatusOr<prism::daemon::Recording> rec;
  bool paced = false;
  std::optional<prism::Nanoseconds> lookahead;
  if (source.rfind("paced", 0) == 0 && source.find(':') != std::string::npos) {
    // paced:FILE replays as the live run met it (takes as long as the run);
    // pacedMS:FILE with another engine lookahead (ms, may be negative).
    paced = true;
    const std::string ms = source.substr(5, source.find(':') - 5);
    int64_t v = 0;
    if (!ms.empty() && absl::SimpleAtoi(ms, &v)) lookahead = prism::Nanoseconds(v * 1'000'000);
    rec = prism::daemon::ReadRecording(source.substr(source.find(':') + 1));
  } else if (source.rfind("model:", 0) == 0) {
    std::vector<uint32_t> reals;
    for (absl::string_view s : absl::StrSplit(source.substr(6), ',')) {
      uint32_t r = 0;
      if (!absl::SimpleAtoi(s, &r) || r >= world) {
        std::fprintf(stderr, "hybrid_explain: model:%s: rank %s is not one of the graph's %u ranks\n",
                     source.substr(6).c_str(), std::string(s).c_str(), world);
        return 2;
      }
      reals.push_back(r);
    }
    rec = prism::daemon::ModelRecording(*graph, reals, 1'000'000'000, nccl, nic_model, late);
  } else {
    rec = prism::daemon::ReadRecording(source);
  }
  if (!rec.ok()) { std::fprintf(stderr, "%s\n", rec.status().ToString().c_str()); return 1; }
  if (iterations > 0) rec->iterations = iterations;
  std::vector<uint32_t> ranks;
  for (absl::string_view s : absl::StrSplit(argv[3], ',')) {
    uint32_t r = 0;
    if (!absl::SimpleAtoi(s, &r) || r >= world) {
      std::fprintf(stderr, "hybrid_explain: rank %s to trace is not one of the graph's %u ranks\n",
                   std::string(s).c_str(), world);
      return 2;
    }
    ranks.push_back(r);
  }
  // The engine plays the virtual ranks with the same NCCL behaviour as the
  // model:R recording (and as prismd's --step-cost-us and --nccl-algo Ring
  // would): without it a model:R replay times its all-virtual rings at step
  // cost 0 with NCCL's tree and PAT, and is no self-check.
  prism::daemon::PacedReplayOptions po;
  po.trace_ranks = ranks;
  po.lookahead = lookahead;
  po.nccl = nccl;
  po.nic_model = nic_model;
  po.late = late;
  auto replay = paced ? prism::daemon::ReplaySessionsPaced(*graph, *rec, po)
                      : prism::daemon::ReplaySessions(*graph, *rec, ranks, nccl, nic_model, late);
  if (!replay.ok()) { std::fprintf(stderr, "%s\n", replay.status().ToString().c_str()); return 1; }
  std::printf("summary\tschedules\t%zu\tlate\t%llu\tmatched\t%llu\tdivergences\t%llu\tholds\t%zu\tforecasts\t%zu"
              "\tsend_forecasts\t%llu\tforecast_misses\t%llu\n",
              replay->schedules.size(), (unsigned long long)replay->schedules_late,
              (unsigned long long)replay->ops_matched, (unsigned long long)replay->divergences, replay->holds.size(),
              replay->forecasts.size(), (unsigned long long)replay->send_forecasts,
              (unsigned long long)replay->forecast_misses);
  const int64_t origin = rec->start_realtime_ns;
  int64_t t = 0;
  for (size_t k = 0; k < replay->iteration_times.size(); ++k) {
    t += replay->iteration_times[k].count();
    std::printf("iteration\t%zu\t%.1f\n", k, t / 1000.0);
  }
  std::map<uint32_t, uint32_t> rank_of_actor;
  for (uint32_t r : ranks)
    if (r < replay->actor_of_rank.size()) rank_of_actor[replay->actor_of_rank[r]] = r;
  for (const auto& o : replay->trace) {
    const uint32_t rank = rank_of_actor.count(o.actor) ? rank_of_actor[o.actor] : o.actor;
    const auto& program = graph->programs(graph->ranks(rank).program());
    std::string kind;
    const std::string label = o.op < static_cast<uint32_t>(program.ops_size()) ? Describe(program.ops(o.op), &kind) : "";
    std::printf("op\t%u\t%u\t%s\t%s\t%.1f\t%.1f\n", rank, o.op, kind.c_str(), label.c_str(),
                o.start.count() / 1000.0, o.end.count() / 1000.0);
  }
  for (const auto& r : replay->schedules) {
    const auto& s = r.schedule;
    std::printf("rsched\t%llu\t%.1f\t%d\t%llu\t%d\t%d\t%.1f\t%llx\n", (unsigned long long)r.session,
                r.sent_ns == 0 ? 0.0 : Us(r.sent_ns, origin), s.key().kind(), (unsigned long long)s.key().seq(),
                s.key().peer(), static_cast<int>(s.mode()), Us(static_cast<int64_t>(s.ready_ns()), origin),
                (unsigned long long)s.key().comm_hash());
  }
  for (const auto& r : replay->forecasts) {
    const auto& s = r.schedule;
    std::printf("rfsched\t%llu\t%.1f\t%d\t%llu\t%d\t%d\t%.1f\t%d\t%llu\t%.1f\t%llx\n", (unsigned long long)r.session,
                r.sent_ns == 0 ? 0.0 : Us(r.sent_ns, origin), s.key().kind(), (unsigned long long)s.key().seq(),
                s.key().peer(), static_cast<int>(s.mode()), Us(static_cast<int64_t>(s.ready_ns()), origin),
                s.after().kind(), (unsigned long long)s.after().seq(), s.after_delay_ns() / 1000.0,
                (unsigned long long)s.key().comm_hash());
  }
  for (const auto& r : replay->holds)
    std::printf("rhold\t%llu\t%.1f\t%d\t%llu\t%d\t%llx\n", (unsigned long long)r.session, Us(r.sent_ns, origin),
                r.schedule.key().kind(), (unsigned long long)r.schedule.key().seq(), r.schedule.key().peer(),
                (unsigned long long)r.schedule.key().comm_hash());
  std::map<uint64_t, prism::rpc::OpStarted> started;
  for (const auto& line : rec->lines) {
    if (line.kind == prism::daemon::RecordedLine::kSchedule) {
      const auto& s = line.schedule;
      std::printf("%s\t%llu\t%.1f\t%d\t%llu\t%d\t%d\t%.1f", s.has_after() ? "fsched" : "sched",
                  (unsigned long long)line.session, Us(line.at, origin), s.key().kind(),
                  (unsigned long long)s.key().seq(), s.key().peer(), static_cast<int>(s.mode()),
                  Us(static_cast<int64_t>(s.ready_ns()), origin));
      if (s.has_after())
        std::printf("\t%d\t%llu\t%.1f", s.after().kind(), (unsigned long long)s.after().seq(), s.after_delay_ns() / 1000.0);
      std::printf("\t%llx\n", (unsigned long long)s.key().comm_hash());
    }
    if (line.kind != prism::daemon::RecordedLine::kEvents) continue;
    for (const auto& e : line.events.events()) {
      if (e.has_conn_opened())
        std::printf("conn\t%llu\t%llu\t%d\t%.1f\n", (unsigned long long)line.session,
                    (unsigned long long)e.conn_opened().conn_id(), e.conn_opened().is_send() ? 1 : 0,
                    Us(e.conn_opened().at_ns(), origin));
      if (e.has_posted()) {
        const auto& m = e.posted();
        std::printf("msg\t%llu\tposted\t%llu\t%llu\t%llu\t%.1f\t%llu\t%u\t%u\t0\t0\n", (unsigned long long)line.session,
                    (unsigned long long)m.conn_id(), (unsigned long long)m.seq(), (unsigned long long)m.bytes(),
                    Us(m.at_ns(), origin), (unsigned long long)m.op_id(), m.channel(), m.step());
      }
      if (e.has_completed()) {
        const auto& m = e.completed();
        std::printf("msg\t%llu\tcompleted\t%llu\t%llu\t%llu\t%.1f\t%llu\t%u\t%u\t%.1f\t%d\n",
                    (unsigned long long)line.session, (unsigned long long)m.conn_id(), (unsigned long long)m.seq(),
                    (unsigned long long)m.bytes(), Us(m.at_ns(), origin), (unsigned long long)m.op_id(), m.channel(),
                    m.step(), m.late_ns() / 1000.0, m.waited_for_schedule() ? 1 : 0);
      }
      if (e.has_op_started()) started[line.session * 1000000007ull + e.op_started().op_id()] = e.op_started();
      if (!e.has_op_finished()) continue;
      const auto& f = e.op_finished();
      const auto it = started.find(line.session * 1000000007ull + f.op_id());
      if (it == started.end()) continue;
      const auto& s = it->second;
      std::printf("real\t%llu\t%llu\t%d\t%llu\t%d\t%llu\t%.1f\t%.1f\t%.1f\t%llx\n", (unsigned long long)line.session,
                  (unsigned long long)f.op_id(), s.key().kind(), (unsigned long long)s.key().seq(), s.key().peer(),
                  (unsigned long long)s.bytes(), Us(s.at_ns(), origin),
                  f.first_send_ns() ? Us(f.first_send_ns(), origin) : 0.0, Us(f.end_ns(), origin),
                  (unsigned long long)s.key().comm_hash());
    }
  }
  return 0;
}
