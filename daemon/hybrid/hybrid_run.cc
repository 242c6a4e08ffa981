#include "daemon/hybrid/hybrid_run.h"

#include <sys/resource.h>
#include <time.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "daemon/hybrid/hybrid_scheduler.h"
#include "daemon/hybrid/op_time_report.h"
#include "daemon/hybrid/step_cost_watch.h"
#include "daemon/hybrid/real_rank_programs.h"
#include "daemon/server/daemon_server.h"
#include "spdlog/sinks/stdout_color_sinks.h"
#include "spdlog/spdlog.h"

namespace prism::daemon {
namespace {

double CpuSeconds() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
         static_cast<double>(u.ru_utime.tv_usec + u.ru_stime.tv_usec) * 1e-6;
}

// Raises the soft open-file limit to the hard one: a hybrid prismd holds a
// descriptor per plugin session, bootstrap connection and store client, and
// the common soft default of 1024 is soon reached (then gRPC 1.51 stops
// accepting plugin sessions for good). Warns on stderr when it cannot.
void RaiseOpenFileLimit() {
  rlimit rl{};
  if (getrlimit(RLIMIT_NOFILE, &rl) != 0 || rl.rlim_cur >= rl.rlim_max) return;
  const rlim_t before = rl.rlim_cur;
  rl.rlim_cur = rl.rlim_max;
  if (setrlimit(RLIMIT_NOFILE, &rl) != 0) {
    std::fprintf(stderr, "prismd: warning: cannot raise the open-file limit from %llu to %llu: %s\n",
                 static_cast<unsigned long long>(before), static_cast<unsigned long long>(rl.rlim_max),
                 std::strerror(errno));
  }
}

// The bootstrap's, store's and rendezvous's log lines go to stderr with
// prismd's own warnings (spdlog's default logger writes to stdout).
void LogToStderr() {
  auto logger = std::make_shared<spdlog::logger>("prismd", std::make_shared<spdlog::sinks::stderr_color_sink_mt>());
  logger->set_level(spdlog::default_logger()->level());
  spdlog::set_default_logger(std::move(logger));
}

// The pacer's lag histogram, copied into Prometheus as it grows.
class LagExporter {
 public:
  LagExporter(const engine::WallClockPacer& pacer, server::Metrics* metrics) : pacer_(pacer) {
    if (metrics == nullptr) return;
    prometheus::Histogram::BucketBoundaries bounds;
    for (Nanoseconds b : engine::WallClockPacer::kLagBounds) bounds.push_back(b.seconds());
    histogram_ = &prometheus::BuildHistogram()
                      .Name("prism_engine_event_lag_seconds")
                      .Help("How late the real-time engine handled each event against the wall clock")
                      .Register(*metrics->registry())
                      .Add({}, bounds);
  }
  void Export() {
    if (histogram_ == nullptr) return;
    const engine::WallClockPacer::LagHistogram now = pacer_.Lags();
    std::vector<double> increments(now.counts.size());
    for (size_t i = 0; i < now.counts.size(); ++i)
      increments[i] = static_cast<double>(now.counts[i] - last_.counts[i]);
    histogram_->ObserveMultiple(increments, now.sum_s - last_.sum_s);
    last_ = now;
  }

 private:
  const engine::WallClockPacer& pacer_;
  prometheus::Histogram* histogram_ = nullptr;
  engine::WallClockPacer::LagHistogram last_;
};

// The whole run's lag, then the steady iterations' (after the first ended).
std::string LagSummary(const engine::WallClockPacer& pacer, const HybridScheduler& scheduler) {
  const auto h = pacer.Lags();
  auto us = [](Nanoseconds t) {
    return t == Nanoseconds::Max() ? std::string(">1 s") : absl::StrCat("<=", t.count() / 1000, " us");
  };
  std::string out = absl::StrCat("engine lag over ", h.total, " events: p50 ", us(h.QuantileUpper(0.5)), ", p99 ",
                                 us(h.QuantileUpper(0.99)), ", max ", pacer.max_lag().count() / 1000, " us, ",
                                 h.LateSteps());
  if (const auto steady = scheduler.SteadyLags())
    absl::StrAppend(&out, " (steady iterations: ", steady->total, " events, p50 ", us(steady->QuantileUpper(0.5)),
                    ", p99 ", us(steady->QuantileUpper(0.99)), ", ", steady->LateSteps(), ")");
  return out;
}

// Receives that wait on the engine for long, as /status alerts and log lines.
void PublishStuck(const HybridScheduler& scheduler, server::StatusBoard* status, size_t* shown) {
  const std::vector<std::string> stuck = scheduler.StuckReceives(FromSeconds(3));
  if (stuck.empty()) {
    if (*shown > 0 && status != nullptr) status->ClearAlert("hybrid");
    *shown = 0;
    return;
  }
  if (status != nullptr) status->SetAlert("hybrid", absl::StrCat(stuck.front(), stuck.size() > 1 ? " (and more)" : ""));
  if (stuck.size() != *shown) std::fprintf(stderr, "prismd: %s\n", stuck.front().c_str());
  *shown = stuck.size();
}

// A stall (the real ranks and the replay waiting for each other) lasting
// `after`: said once on stderr and /status, and reported as a divergence
// (under --on-divergence stop it ends the run with this reason).
void PublishStall(const HybridScheduler& scheduler, Nanoseconds after, server::StatusBoard* status,
                  DivergenceWatch* divergences, bool* said) {
  if (after <= Nanoseconds(0)) return;
  const std::optional<std::string> stall = scheduler.StallReport(after);
  if (!stall) {
    if (*said && status != nullptr) status->ClearAlert("stall");
    *said = false;
    return;
  }
  if (*said) return;
  *said = true;
  std::fprintf(stderr, "prismd: stall: %s\n", stall->c_str());
  if (status != nullptr) status->SetAlert("stall", *stall);
  divergences->Report(DivergenceSource::kStall, *stall);
}

// Real ranks that have not connected after kConnectGrace: an alert on
// /status (and the page) and a line on stderr, repeated every
// kConnectRepeat while the wait lasts; cleared when every rank came.
constexpr double kConnectGraceS = 5, kConnectRepeatS = 60;

std::string UtcClock(double seconds_ago) {
  const time_t at = time(nullptr) - static_cast<time_t>(seconds_ago);
  tm utc{};
  gmtime_r(&at, &utc);
  char text[32];
  strftime(text, sizeof text, "%H:%M:%S UTC", &utc);
  return text;
}

void PublishNeverConnected(server::StatusBoard* status, const std::string& listen, double* last_said_s) {
  if (status == nullptr) return;
  std::vector<std::pair<uint32_t, double>> waiting = status->RealRanksNeverConnected();
  std::erase_if(waiting, [](const auto& w) { return w.second < kConnectGraceS; });
  if (waiting.empty()) {
    status->ClearAlert("real-ranks");
    *last_said_s = -1;
    return;
  }
  std::string ranks;
  for (const auto& [rank, s] : waiting) absl::StrAppend(&ranks, ranks.empty() ? "" : ", ", rank);
  const double waited = waiting.front().second;
  const std::string text = absl::StrCat(
      "waiting for real rank", waiting.size() > 1 ? "s " : " ", ranks, " to connect (since ", UtcClock(waited), ", ",
      static_cast<int64_t>(waited), " s): start ", waiting.size() > 1 ? "them" : "it",
      " with NCCL_NET_PLUGIN=<libnccl-net-prism.so> NCCL_NET=Prism PRISM_DAEMON=", listen,
      " and RANK set (prism run does this)");
  status->SetAlert("real-ranks", text);
  if (*last_said_s < 0 || waited - *last_said_s >= kConnectRepeatS) {
    std::fprintf(stderr, "prismd: %s\n", text.c_str());
    *last_said_s = waited;
  }
}

}  // namespace

uint64_t HybridIterations(const graph::Graph& graph, uint64_t requested) {
  if (requested != 0) return requested;
  uint64_t from_graph = 0;
  const auto it = graph.job().attributes().find("iterations");
  if (it != graph.job().attributes().end() && !absl::SimpleAtoi(it->second, &from_graph)) from_graph = 0;
  return std::max(from_graph, kHybridIterations);
}

absl::Status RunHybrid(const graph::Graph& graph, HybridOptions options, server::StatusBoard* status,
                       server::Metrics* metrics, const sigset_t& stop_signals) {
  RaiseOpenFileLimit();
  LogToStderr();
  auto programs = RealRankPrograms::Build(graph, options.engine.real_ranks);
  if (!programs.ok()) return programs.status();
  options.engine.iterations = HybridIterations(graph, options.engine.iterations);
  engine::EngineInbox inbox;
  engine::RealtimeOptions rt = options.engine.realtime.value_or(engine::RealtimeOptions{});
  rt.lookahead = options.lookahead;
  // The pacer outlives the engine: the scheduler converts CLOCK_REALTIME
  // stamps with it from the session threads.
  engine::WallClockPacer pacer(rt);
  pacer.Start();
  HybridSchedulerOptions so = HybridSchedulerOptions::ForGraph(graph);
  so.step_cost = options.engine.nccl.step_cost;
  so.unmatched_ops_diverge = !options.control.follow_real_ranks;
  so.hold_early_rings = options.ring_hold && !options.control.follow_real_ranks;
  so.forecast = options.ring_forecast;
  so.iterations = options.engine.iterations;
  std::unique_ptr<SessionRecorder> recorder;
  if (!options.record_sessions_path.empty()) {
    auto opened = SessionRecorder::Open(options.record_sessions_path,
                                        static_cast<int64_t>(pacer.RealtimeFromEmulated(Nanoseconds(0))),
                                        options.lookahead.count(), options.engine.real_ranks, graph.job().name(),
                                        options.engine.iterations);
    if (!opened.ok()) return opened.status();
    recorder = std::move(*opened);
    so.recorder = recorder.get();
  }
  DivergenceWatch divergences(options.on_divergence);
  so.divergences = &divergences;
  options.control.divergences = &divergences;
  HybridScheduler scheduler(std::move(*programs), &inbox, &pacer, status, metrics, so);
  ControlPlaneOptions control_options = options.control;
  control_options.ring_step_cost = options.engine.nccl.step_cost;
  control_options.same_node = so.same_node;  // the handles' link is the one the schedules carry
  StepCostWatch step_costs(&scheduler);  // the real ranks' NCCL step cost, fitted at the end
  auto control = ControlPlane::Create(graph, std::move(control_options), metrics, &step_costs);
  if (!control.ok()) return control.status();
  server::DaemonServer server(status);
  if (auto s = server.RegisterService((*control)->session_service()); !s.ok()) return s;
  const std::string listen = options.listen.empty() ? server::DefaultListenAddress() : options.listen;
  // The bootstrap first: a plugin's Announce, answered once the gRPC server
  // is up, may choose its wire profile at once.
  if (auto s = (*control)->Start(); !s.ok()) return s;
  if (auto s = server.Start(listen); !s.ok()) return s;
  std::fprintf(stderr, "prismd: serving gRPC on %s; engine lookahead %lld ms; Ctrl-C to stop\n", listen.c_str(),
               static_cast<long long>(options.lookahead.count() / 1000000));

  engine::ObserverList observers;
  observers.Add(metrics);
  observers.Add(&scheduler);
  options.engine.inbox = &inbox;
  options.engine.pacer = &pacer;
  options.engine.observer = &observers;
  options.engine.report_when_stopped = true;
  if (status != nullptr) status->SetState("running");
  const double cpu0 = CpuSeconds();
  const auto wall0 = std::chrono::steady_clock::now();
  absl::StatusOr<engine::SimulationResult> result = absl::UnknownError("not run");
  std::thread engine_thread([&] {
    result = engine::Simulate(graph, options.engine);
    if (!result.ok()) {
      std::fprintf(stderr, "prismd: replay stopped: %s\n", std::string(result.status().message()).c_str());
      if (status != nullptr) status->SetState(absl::StrCat("stopped: ", result.status().message()));
    } else {
      if (!result->report.stopped)
        std::fprintf(stderr, "prismd: the replay played its %llu iterations; a real rank's operation after them is a "
                     "divergence (prismd --iterations)\n", static_cast<unsigned long long>(options.engine.iterations));
      if (status != nullptr) status->SetState(result->report.stopped ? "stopped" : "finished");
    }
  });
  LagExporter lags(pacer, metrics);
  size_t stuck_shown = 0;
  bool stall_said = false;
  double connect_said_s = -1;
  const timespec tick{0, 250'000'000};
  int sig = 0;
  std::optional<std::string> diverged;
  while (sig <= 0 && !diverged) {
    sig = sigtimedwait(&stop_signals, nullptr, &tick);
    lags.Export();
    PublishStuck(scheduler, status, &stuck_shown);
    PublishStall(scheduler, options.stall_after, status, &divergences, &stall_said);
    PublishNeverConnected(status, listen, &connect_said_s);
    DivergenceWatch::Decision d = divergences.Tick();
    for (const std::string& note : d.notes) std::fprintf(stderr, "prismd: %s\n", note.c_str());
    diverged = std::move(d.stop_reason);
  }
  if (diverged) {
    std::fprintf(stderr, "prismd: the run diverged from the graph: %s; stopping the run (prismd --on-divergence "
                 "follow keeps it going)\n", diverged->c_str());
    if (status != nullptr) status->SetState(absl::StrCat("failed: diverged: ", *diverged));
    (*control)->FailSessions(absl::StrCat("prismd stopped the run: the run diverged from the graph: ", *diverged));
  } else {
    std::fprintf(stderr, "prismd: %s received, shutting down\n", sig == SIGINT ? "SIGINT" : "SIGTERM");
  }
  inbox.Post(engine::StopRequest{});
  engine_thread.join();
  scheduler.StopPushing();  // its pusher writes to the session service, which goes before the scheduler
  const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - wall0).count();
  const double cpu = CpuSeconds() - cpu0;
  (*control)->Stop();
  server.Shutdown();
  const HybridScheduler::Counters c = scheduler.counters();
  std::fprintf(stderr,
               "prismd: hybrid: %llu real-rank operations matched, %llu unmatched, %llu finished; %llu schedules "
               "sent (%llu after the time they give); %llu divergences; %llu forecasts (%llu missed), %llu rings "
               "held%s\n",
               static_cast<unsigned long long>(c.ops_matched), static_cast<unsigned long long>(c.ops_unmatched),
               static_cast<unsigned long long>(c.ops_finished), static_cast<unsigned long long>(c.schedules_pushed),
               static_cast<unsigned long long>(c.schedules_late), static_cast<unsigned long long>(c.divergences),
               static_cast<unsigned long long>(c.forecasts), static_cast<unsigned long long>(c.forecast_misses),
               static_cast<unsigned long long>(c.holds),
               c.ops_startup == 0 ? ""
                                  : absl::StrCat("; ", c.ops_startup, " start-up collectives let through on time")
                                        .c_str());
  std::fprintf(stderr, "prismd: %s\n", LateReceives::Line(scheduler.late_receives()).c_str());
  const std::map<uint32_t, std::vector<RingOpTiming>> timings = step_costs.Timings(graph);
  for (const std::string& line : StepCostReport(timings, graph.cluster(), options.engine.nccl.step_cost))
    std::fprintf(stderr, "prismd: %s\n", line.c_str());
  if (result.ok()) {
    const engine::NetworkModel model(engine::NetworkModel::LinkFiguresFromCluster(graph.cluster()),
                                     options.engine.nccl);
    for (const auto& [rank, ops] : timings) {
      const std::string line = DescribeOpTimes(GroupCollectiveOps(ops, model), rank, result->report.iterations);
      if (!line.empty()) std::fprintf(stderr, "prismd: %s\n", line.c_str());
    }
  }
  std::fprintf(stderr, "prismd: %s; cpu %.2f s over %.2f s (%.0f%% of a core)\n", LagSummary(pacer, scheduler).c_str(), cpu,
               wall, wall > 0 ? 100.0 * cpu / wall : 0.0);
  if (result.ok()) {
    engine::MarkHybridRun(graph, result->report);
    std::fprintf(stderr, "%s", result->report.ToText().c_str());
    if (!options.trace_path.empty()) {
      if (auto s = result->WriteTrace(graph, options.trace_path); !s.ok()) return s;
      std::fprintf(stderr, "prismd: trace written to %s\n", options.trace_path.c_str());
    }
  }
  if (diverged) return absl::AbortedError(absl::StrCat("the run diverged from the graph: ", *diverged));
  return absl::OkStatus();
}

}  // namespace prism::daemon
