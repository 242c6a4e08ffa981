// prismd: the Prism replay daemon.
//
//   prismd --graph G --simulate [--iterations N] [--json] [--trace out.json]
//       replays every rank virtually and prints the predicted iteration time;
//       SIGINT/SIGTERM stop it with the report so far (exit 128 + signal).
//   prismd --graph G [--listen unix://$XDG_RUNTIME_DIR/prismd.sock] [--real-ranks 0,1]
//       hybrid mode: serves gRPC (Daemon + registered services) and metrics,
//       replays the graph paced to the wall clock, until SIGINT/SIGTERM.
#include <pthread.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <iostream>
#include <optional>
#include <string>
#include <thread>

#include <google/protobuf/arena.h>
#include <google/protobuf/stubs/logging.h>

#include "CLI/CLI.hpp"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "daemon/hybrid/control_plane.h"
#include "daemon/hybrid/hybrid_run.h"
#include "daemon/engine/late_ranks.h"
#include "daemon/engine/launch_order.h"
#include "daemon/engine/nccl_algorithm.h"
#include "daemon/engine/nccl_tuning.h"
#include "daemon/engine/simulation.h"
#include "daemon/engine/trace_budget.h"
#include "daemon/server/daemon_server.h"
#include "daemon/server/http_endpoint.h"
#include "daemon/server/metrics.h"
#include "daemon/server/progress_line.h"
#include "daemon/server/status.h"
#include "common/cli_number.h"
#include "common/status_macros.h"
#include "common/version.h"
#include "proto/graph_file.h"
#include "proto/graph_topology.h"
#include "daemon/hybrid/follow_graph.h"

namespace {

// Largest --lag-limit-ms: one hour (milliseconds become int64 nanoseconds).
constexpr int64_t kMaxLagLimitMs = 3'600'000;
// --trace without --trace-ranks: one rank per program (pipeline stage), at most this many.
constexpr size_t kDefaultTraceRanks = 64;

struct Flags {
  std::string graph;
  bool simulate = false;
  uint64_t iterations = 0;
  bool json = false;
  bool no_classes = false;
  std::string nic_model = "queues";
  std::string step_cost_us = "auto";
  int64_t p2p_buffer_kib = static_cast<int64_t>(prism::engine::NcclBehaviour::kNcclP2pBuffer.count() >> 10);
  bool p2p_eager = true;
  bool calibrate = true;
  double step_turnaround_us = 0;
  double collective_turnaround_us = 0;
  std::string launch_order = "graph";
  std::string nccl_algo;
  std::string nccl_proto;
  std::string algorithm_choice = "nccl";
  std::string trace;
  std::string trace_ranks;  // empty: one rank per program
  uint64_t trace_limit_mb = 256;
  std::string realtime;
  int64_t lag_limit_ms = 100;
  int64_t spin_us = 1000;  // RealtimeOptions::spin
  std::string metrics_address = "127.0.0.1:9464";
  bool metrics_address_given = false;
  std::string listen;
  std::string real_ranks;
  std::string late;  // --late RANK:ITERATION:MS[,...]
  // Hybrid mode (daemon/hybrid/).
  std::string nccl_comm_id;
  int wire_profile = 0;  // learnt from the first real rank
  bool allow_unverified_profile = false;
  uint16_t bootstrap_port = 0;
  std::string record_wire;
  int nccl_runtime_connect = 0;
  std::string torch_store = "127.0.0.1:29500";
  bool torch_store_given = false;
  std::string bootstrap_routable;
  std::vector<std::string> bootstrap_allow;
  int64_t lookahead_ms = 0;
  std::string ring_hold = "on";
  std::string ring_forecast = "on";
  std::string on_divergence = "stop";
  int64_t stall_after_s = 5;
  std::string record_sessions;
  bool follow = false;  // --follow: the real ranks' groups and operations, no program from the graph
};

// Exit statuses: 0 done; 1 the work failed (a graph that cannot be read, a
// port taken, ...); 2 a usage error (a flag missing, unknown or out of range);
// 3 the real ranks diverged from the graph (--on-divergence stop).
constexpr int kExitFailed = 1;
constexpr int kExitUsage = 2;

int Fail(const absl::Status& s, int code = kExitFailed) {
  std::fprintf(stderr, "prismd: %s\n", std::string(s.message()).c_str());
  return code;
}

// --step-cost-us: "auto" (the graph's measured figure, else the one for
// NCCL 2.28's Simple ring; nccl_tuning.h) or microseconds, 0 to 1000.
absl::Status StepCostOption(const std::string& flag, const prism::graph::Graph& g,
                            prism::engine::SimulationOptions* o) {
  if (flag == "auto") {
    const prism::engine::StepCost c =
        prism::engine::GraphNcclStepCost(g.cluster()).value_or(prism::engine::DefaultNcclStepCost());
    o->nccl.step_cost = c.cost;
    o->step_cost_source = c.measured;
    return absl::OkStatus();
  }
  double us = 0;
  if (!absl::SimpleAtod(flag, &us) || !(us >= 0 && us <= 1000))
    return absl::InvalidArgumentError(absl::StrCat(
        "--step-cost-us ", flag, ": auto or microseconds from 0 to 1000 (NCCL's cost per ring step)"));
  o->nccl.step_cost = prism::Nanoseconds(static_cast<int64_t>(us * 1000.0 + 0.5));
  o->step_cost_source = "--step-cost-us";
  return absl::OkStatus();
}

// Builds the engine options shared by both modes.
absl::StatusOr<prism::engine::SimulationOptions> EngineOptions(const Flags& f, const prism::graph::Graph& g,
                                                               bool hybrid) {
  prism::engine::SimulationOptions o;
  o.iterations = f.iterations;
  o.use_classes = !f.no_classes;
  o.graph_validated = true;  // ReadGraphFile validated it
  if (f.nic_model == "shared") {
    if (hybrid)
      return absl::InvalidArgumentError(
          "--nic-model shared: with --simulate only (hybrid runs use queues or calendar)");
    o.nic_model = prism::engine::NicModel::kShared;
  } else if (f.nic_model == "calendar") {
    o.nic_model = prism::engine::NicModel::kCalendar;
  } else if (f.nic_model == "interleave") {
    o.nic_model = prism::engine::NicModel::kInterleave;
  } else if (f.nic_model == "turns") {
    o.nic_model = prism::engine::NicModel::kTurns;
  } else if (f.nic_model != "queues") {
    return absl::InvalidArgumentError(
        absl::StrCat("--nic-model ", f.nic_model, ": queues, calendar, shared, interleave or turns"));
  }
  PRISM_RETURN_IF_ERROR(StepCostOption(f.step_cost_us, g, &o));
  o.nccl.p2p_buffer = prism::Bytes(static_cast<uint64_t>(f.p2p_buffer_kib) << 10);
  o.nccl.p2p_eager = f.p2p_eager;
  o.nccl.calibrate = f.calibrate;
  o.nccl.step_turnaround = prism::Nanoseconds(static_cast<int64_t>(f.step_turnaround_us * 1000.0 + 0.5));
  o.nccl.collective_turnaround = prism::Nanoseconds(static_cast<int64_t>(f.collective_turnaround_us * 1000.0 + 0.5));
  auto launch = prism::engine::ResolveLaunchOrder(f.launch_order, g.job());
  if (!launch.ok()) return launch.status();
  o.nccl.launch_in_order = launch->in_order;
  o.launch_order_source = std::move(launch->source);
  auto algorithms = prism::engine::ParseNcclAlgo(f.nccl_algo);
  if (!algorithms.ok()) return absl::InvalidArgumentError(absl::StrCat("--nccl-algo: ", algorithms.status().message()));
  o.nccl.ring = algorithms->ring;
  o.nccl.tree = algorithms->tree;
  o.nccl.pat = algorithms->pat;
  o.nccl_algo = f.nccl_algo;
  auto protocols = prism::engine::ParseNcclProto(f.nccl_proto);
  if (!protocols.ok()) return absl::InvalidArgumentError(absl::StrCat("--nccl-proto: ", protocols.status().message()));
  o.nccl.ll = protocols->ll;
  o.nccl.ll128 = protocols->ll128;
  o.nccl.simple = protocols->simple;
  if (f.algorithm_choice != "nccl" && f.algorithm_choice != "model")
    return absl::InvalidArgumentError(absl::StrCat("--algorithm-choice ", f.algorithm_choice,
                                                   ": nccl (NCCL 2.28.9's tuning) or model (the ring/tree formulas)"));
  o.nccl.nccl_choice = f.algorithm_choice == "nccl";
  const uint32_t world = prism::graph::RankCount(g);
  if (!f.trace.empty()) {
    std::vector<uint32_t> ranks = prism::engine::OneRankPerProgram(g, kDefaultTraceRanks);
    if (!f.trace_ranks.empty()) {
      auto parsed = prism::engine::ParseRankList(f.trace_ranks, world);
      if (!parsed.ok()) return absl::InvalidArgumentError(absl::StrCat("--trace-ranks: ", parsed.status().message()));
      ranks = *parsed;
    }
    // Refused before the replay rather than a file of gigabytes after it.
    const auto iterations = prism::engine::IterationsFor(g, f.iterations);
    const uint64_t bytes = prism::engine::EstimateTraceBytes(g, ranks, iterations.ok() ? *iterations : 1);
    if (bytes > (f.trace_limit_mb << 20))
      return absl::InvalidArgumentError(absl::StrCat(
          "--trace of ", ranks.size(), " rank(s) would be about ", bytes >> 20, " MiB, over --trace-limit-mb ",
          f.trace_limit_mb, ": trace fewer ranks (--trace-ranks; the default is one rank per pipeline stage) or "
          "fewer --iterations, or raise --trace-limit-mb"));
    o.trace_ranks = std::move(ranks);
  }
  if (!f.real_ranks.empty()) {
    auto ranks = prism::engine::ParseRankList(f.real_ranks, world);
    if (!ranks.ok()) return absl::InvalidArgumentError(absl::StrCat("--real-ranks: ", ranks.status().message()));
    o.real_ranks = *ranks;
  }
  if (!f.late.empty()) {
    auto late = prism::engine::ParseLateRanks(f.late);
    if (!late.ok()) return late.status();
    for (const prism::engine::LateRank& l : *late) {
      if (l.rank >= world)
        return absl::InvalidArgumentError(absl::StrCat("--late: rank ", l.rank, " is outside the graph's ", world,
                                                       " ranks"));
      if (std::find(o.real_ranks.begin(), o.real_ranks.end(), l.rank) != o.real_ranks.end())
        return absl::InvalidArgumentError(absl::StrCat(
            "--late: rank ", l.rank, " is a real rank: make it late in its own program (--late is for virtual ranks)"));
    }
    o.late = *std::move(late);
  }
  if (!f.realtime.empty() || hybrid) {
    prism::engine::RealtimeOptions rt;
    if (!f.realtime.empty()) PRISM_RETURN_IF_ERROR(prism::engine::ParseRealtimeMode(f.realtime, &rt.mode));
    rt.lag_limit = prism::FromMilliseconds(f.lag_limit_ms);
    rt.spin = prism::FromMicroseconds(f.spin_us);
    o.realtime = rt;
    o.progress_every_events = 256;  // paced: keep /metrics fresh
  }
  return o;
}

// The report first, whatever then happens to the trace; a peak over the
// GPU's memory also on stderr (the report says it too).
int PrintResult(const Flags& f, const prism::graph::Graph& g, const prism::engine::SimulationResult& r) {
  std::cout << (f.json ? r.report.ToJson() : r.report.ToText()) << std::flush;
  const prism::engine::MemoryRow* worst = nullptr;
  for (const prism::engine::MemoryRow& m : r.report.memory)
    if (m.over_capacity && (worst == nullptr || m.peak_bytes > worst->peak_bytes)) worst = &m;
  if (worst != nullptr)
    std::fprintf(stderr, "prismd: warning: memory: %s (%llu ranks) peaks at %.2f GiB, over the GPU's %.2f GiB "
                 "(the report lists every rank class)\n", worst->program.c_str(),
                 static_cast<unsigned long long>(worst->ranks), static_cast<double>(worst->peak_bytes) / (1 << 30),
                 static_cast<double>(r.report.gpu_memory_bytes) / (1 << 30));
  if (!f.trace.empty())
    if (auto s = r.WriteTrace(g, f.trace); !s.ok()) return Fail(s);
  return 0;
}

// An output file must be creatable before the work that fills it starts:
// its directory exists and is writable, and the path is not a directory.
absl::Status CheckOutputPath(const std::string& flag, const std::string& path) {
  struct stat st {};
  if (stat(path.c_str(), &st) == 0) {
    if (S_ISDIR(st.st_mode))
      return absl::InvalidArgumentError(absl::StrCat(flag, " ", path, " is a directory; pass a file path"));
    if (access(path.c_str(), W_OK) != 0)
      return absl::InvalidArgumentError(absl::StrCat(flag, " ", path, " is not writable: ", std::strerror(errno)));
    return absl::OkStatus();
  }
  const std::string dir = std::filesystem::path(path).parent_path().string();
  const std::string where = dir.empty() ? "." : dir;
  if (stat(where.c_str(), &st) != 0 || !S_ISDIR(st.st_mode))
    return absl::InvalidArgumentError(absl::StrCat(flag, " ", path, ": directory ", where,
                                                   " does not exist; create it or pass another path"));
  if (access(where.c_str(), W_OK | X_OK) != 0)
    return absl::InvalidArgumentError(absl::StrCat(flag, " ", path, ": cannot create files in ", where, ": ",
                                                   std::strerror(errno)));
  return absl::OkStatus();
}

// SIGINT and SIGTERM are blocked in the calling thread before any other
// thread starts, so every thread inherits the mask and only sigwait() (the
// hybrid loop, or SignalStop below) ever receives them: a signal delivered to
// a civetweb or gRPC thread would end the process without cleanup.
sigset_t BlockStopSignals() {
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  return signals;
}

// --simulate: the first SIGINT/SIGTERM stops the replay (a StopRequest on
// `inbox`); Simulate then returns the report so far, which is printed.
class SignalStop {
 public:
  SignalStop(const sigset_t& signals, prism::engine::EngineInbox* inbox)
      : signals_(signals), thread_([this, inbox] { Wait(inbox); }) {}
  ~SignalStop() {
    done_ = true;
    thread_.join();
  }
  SignalStop(const SignalStop&) = delete;
  SignalStop& operator=(const SignalStop&) = delete;

  int signal() const { return signal_; }  // 0 while none arrived

 private:
  void Wait(prism::engine::EngineInbox* inbox) {
    const timespec tick{0, 20'000'000};  // how soon the destructor's join returns
    while (!done_) {
      const int sig = sigtimedwait(&signals_, nullptr, &tick);
      if (sig <= 0 || signal_ != 0) continue;
      signal_ = sig;
      std::fprintf(stderr, "prismd: %s received, stopping the replay (partial report follows)\n",
                   sig == SIGINT ? "SIGINT" : "SIGTERM");
      inbox->Post(prism::engine::StopRequest{});
    }
  }

  sigset_t signals_;
  std::atomic<bool> done_{false};
  std::atomic<int> signal_{0};
  std::thread thread_;
};

int RunSimulate(const Flags& f, const prism::graph::Graph& g, prism::engine::SimulationOptions options,
                prism::server::StatusBoard& status, prism::server::Metrics& metrics, const SignalStop& signals) {
  std::optional<prism::server::DaemonServer> server;  // destroyed (socket removed) on every return
  if (!f.listen.empty()) {
    server.emplace(&status);
    if (auto s = server->Start(f.listen); !s.ok()) return Fail(s);
  }
  prism::server::ProgressLine progress(stderr);  // on a terminal only
  prism::engine::ObserverList observers;
  observers.Add(&metrics);
  observers.Add(&progress);
  options.observer = &observers;
  status.SetState("running");
  auto result = prism::engine::Simulate(g, options);
  progress.Finish();
  if (!result.ok()) {
    status.SetState(absl::StrCat("failed: ", result.status().message()));
    return Fail(result.status());
  }
  status.SetState(result->report.stopped ? "stopped" : "finished");
  const int rc = PrintResult(f, g, *result);
  // A signal that came after the replay ended changed nothing: the report is whole.
  return result->report.stopped && signals.signal() != 0 ? 128 + signals.signal() : rc;
}

prism::daemon::ControlPlaneOptions ControlPlaneOptionsFrom(const Flags& f,
                                                           const prism::engine::SimulationOptions& o) {
  prism::daemon::ControlPlaneOptions c;
  c.real_ranks.assign(o.real_ranks.begin(), o.real_ranks.end());
  c.nccl_comm_id = f.nccl_comm_id;  // empty: NCCL ids from PyTorch's store
  // With --nccl-comm-id the ranks bring their own store unless one is asked for.
  const bool store = f.torch_store != "none" && (f.nccl_comm_id.empty() || f.torch_store_given);
  c.torch_store = store ? f.torch_store : std::string();
  c.bootstrap_routable_host = f.bootstrap_routable;
  c.bootstrap_allow = f.bootstrap_allow;
  c.nccl_version = f.wire_profile;
  c.allow_unverified_profile = f.allow_unverified_profile;
  c.runtime_connect = f.nccl_runtime_connect != 0;
  c.bootstrap_port = f.bootstrap_port;
  c.record_wire_dir = f.record_wire;
  c.follow_real_ranks = f.follow;
  c.version = prism::kVersion;
  return c;
}

int RunHybrid(const Flags& f, const prism::graph::Graph& g, prism::engine::SimulationOptions options,
              prism::server::StatusBoard& status, prism::server::Metrics& metrics, const sigset_t& signals) {
  prism::daemon::HybridOptions h;
  h.control = ControlPlaneOptionsFrom(f, options);
  h.control.status = &status;
  h.engine = std::move(options);
  h.listen = f.listen;
  h.trace_path = f.trace;
  h.lookahead = prism::FromMilliseconds(f.lookahead_ms);
  h.ring_hold = f.ring_hold == "on";
  h.ring_forecast = f.ring_forecast == "on";
  h.record_sessions_path = f.record_sessions;
  auto on_divergence = prism::daemon::ParseOnDivergence(f.on_divergence);
  if (!on_divergence.ok()) return Fail(on_divergence.status(), kExitUsage);
  h.on_divergence = *on_divergence;
  h.stall_after = prism::FromSeconds(f.stall_after_s);
  if (auto s = prism::daemon::RunHybrid(g, std::move(h), &status, &metrics, signals); !s.ok())
    return Fail(s, s.code() == absl::StatusCode::kAborted ? prism::daemon::kExitDiverged : kExitFailed);
  return 0;
}

int Run(const Flags& f) {
  const sigset_t stop_signals = BlockStopSignals();  // before any thread starts
  prism::engine::EngineInbox inbox;                   // --simulate: SIGINT/SIGTERM stop the replay through it
  std::optional<SignalStop> signal_stop;
  if (f.simulate) signal_stop.emplace(stop_signals, &inbox);
  if (!f.trace.empty())  // found now, not after the replay
    if (auto s = CheckOutputPath("--trace", f.trace); !s.ok()) return Fail(s);
  // The graph's messages live on an arena: parsed without one allocation per
  // rank and communicator, freed at once when main returns.
  google::protobuf::Arena arena;
  prism::graph::Graph* graph = google::protobuf::Arena::CreateMessage<prism::graph::Graph>(&arena);
  absl::Status read;
  {
    google::protobuf::LogSilencer quiet;  // a corrupt file is reported below, once, clearly
    // --simulate reads format 2's tables in place (graph::Topology); hybrid
    // runs hand the graph to code that reads its records.
    read = prism::graph::ReadGraphFileInto(f.graph, graph, {.keep_tables = f.simulate});
  }
  if (!read.ok()) return Fail(read);
  if (f.follow) {
    auto followed = prism::daemon::FollowGraph(*graph);
    if (!followed.ok()) return Fail(followed.status(), kExitUsage);
    *graph = std::move(*followed);
  }
  auto options = EngineOptions(f, *graph, !f.simulate);
  if (!options.ok()) return Fail(options.status(), kExitUsage);
  auto iterations = prism::engine::IterationsFor(*graph, f.iterations);
  if (!iterations.ok()) return Fail(iterations.status());
  prism::server::StatusBoard status;
  status.SetGraph(graph->job().name(), prism::graph::RankCount(*graph),
                  f.simulate ? *iterations : prism::daemon::HybridIterations(*graph, f.iterations));
  status.SetMode(f.simulate ? "simulate" : "hybrid");
  status.SetRealRanks(options->real_ranks);  // the status page lists them, "not connected yet"
  prism::server::Metrics metrics(&status);
  std::unique_ptr<prism::server::HttpEndpoint> http;
  if (f.metrics_address != "none") {
    auto endpoint = prism::server::HttpEndpoint::Start(f.metrics_address, &metrics, &status);
    if (endpoint.ok()) {
      http = std::move(*endpoint);
    } else if (f.simulate && !f.metrics_address_given) {  // a simulation does not need the default port
      std::fprintf(stderr, "prismd: warning: %s; simulating without metrics\n",
                   std::string(endpoint.status().message()).c_str());
    } else {
      return Fail(endpoint.status());
    }
  }
  if (!f.simulate) return RunHybrid(f, *graph, *options, status, metrics, stop_signals);
  options->inbox = &inbox;
  options->report_when_stopped = true;
  return RunSimulate(f, *graph, *options, status, metrics, *signal_stop);
}

// Flag values CLI11 accepts but prismd must not (it would wrap or ignore them).
absl::Status CheckFlags(const Flags& f, bool iterations_given) {
  if (iterations_given && (f.iterations == 0 || f.iterations > prism::engine::kMaxIterations))
    return absl::InvalidArgumentError(absl::StrCat("--iterations must be 1 to ", prism::engine::kMaxIterations,
                                                   " (leave it out for the graph's own count)"));
  if (f.lag_limit_ms < 0 || f.lag_limit_ms > kMaxLagLimitMs)
    return absl::InvalidArgumentError(absl::StrCat("--lag-limit-ms must be 0 to ", kMaxLagLimitMs, ", got ",
                                                   f.lag_limit_ms));
  if (f.spin_us < 0 || f.spin_us > 10000)
    return absl::InvalidArgumentError(absl::StrCat("--spin-us must be 0 to 10000, got ", f.spin_us));
  if (f.simulate && !f.real_ranks.empty())
    return absl::InvalidArgumentError(
        "--real-ranks with --simulate: a simulation plays every rank virtually and would wait forever for a real "
        "one; leave out --simulate to run real ranks (hybrid mode), or leave out --real-ranks");
  if (f.follow && (f.simulate || f.real_ranks.empty() || !f.nccl_comm_id.empty()))
    return absl::InvalidArgumentError(
        "--follow plays the virtual ranks after real ones: it needs --real-ranks, ids from PyTorch's store (no "
        "--nccl-comm-id) and no --simulate");
  return absl::OkStatus();
}

}  // namespace

int main(int argc, char** argv) {
  Flags f;
  CLI::App app{"prismd: replays a Prism execution graph (virtual ranks, metrics, traces)"};
  app.add_option("--graph", f.graph, "execution graph file (prism-graphgen output)")->required();
  app.add_flag("--simulate", f.simulate, "replay every rank virtually and print the predicted iteration time");
  app.add_option("--iterations", f.iterations, "iterations to replay, 1 to 10^6 (default: the graph's, else 1; hybrid: the graph's or 1000, "
                 "whichever is more)")
      ->check(prism::NonNegativeNumber());
  app.add_flag("--json", f.json, "print the simulation report as one JSON object");
  app.add_flag("--no-classes", f.no_classes, "replay every rank (no equivalence classes)");
  app.add_option("--nic-model", f.nic_model,
                 "queues (default: each member of a ring collective queues its share on its own NIC, first "
                 "come first served; a point-to-point transfer behind such a share goes between its steps; "
                 "other transfers as calendar), calendar (a transfer holds all its NICs alone "
                 "in a gap common to them), shared (transfers in flight share each NIC equally; --simulate "
                 "only), interleave (queues, and a ring share that finds its NIC carrying another communicator's "
                 "ring share goes behind that one's step in progress, then shares the NIC with the rest) or turns "
                 "(interleave without waiting for the step in progress: a NIC that serves its queue pairs in "
                 "turn, the plugin's PRISM_LINK_ORDER=round-robin); docs/network-model.md");
  app.add_option("--step-cost-us", f.step_cost_us,
                 "NCCL's own cost per ring step beyond the link latency, in us, or auto (the graph's figure, "
                 "measured by prism capture, else the one measured for NCCL 2.28's Simple ring; "
                 "docs/network-model.md)");
  app.add_option("--p2p-buffer-kib", f.p2p_buffer_kib,
                 "what a p2p connection between nodes holds in flight, KiB: a send is done once its last byte is in "
                 "it, as NCCL's is (default 2048: 2 channels x 8 steps x 128 KiB; 0: a send ends with its receive; "
                 "docs/network-model.md)")
      ->check(CLI::Range(int64_t{0}, int64_t{1} << 30));
  app.add_flag("--p2p-eager,!--no-p2p-eager", f.p2p_eager,
               "a send that fits in the p2p buffer goes on the wire when posted, before its receive, as NCCL's "
               "receiving proxy allows and the GPU host's truths show (the default); --no-p2p-eager: when both "
               "sides are posted (docs/network-model.md, \"Send completion\")");
  app.add_flag("--calibration,!--no-calibration", f.calibrate,
               "hybrid runs: a real rank's clean measurement of a collective times the all-virtual ones of the "
               "same kind, size and shape (the default); --no-calibration: virtual ranks play the model alone "
               "(docs/timing.md, \"Calibration\")");
  app.add_option("--late", f.late,
                 "RANK:ITERATION:MS[,...]: that virtual rank starts that iteration (0-based) late by MS "
                 "milliseconds (its first compute op lasts that much longer), in --simulate and in hybrid runs; "
                 "the report says what the iteration took beyond the others (docs/timing.md, \"A late virtual "
                 "rank\")");
  app.add_option("--step-turnaround-us", f.step_turnaround_us,
                 "a ring step's turnaround across nodes that the wire does not hide, us per step (default 0; the "
                 "GPU host's 16 ranks packed on one H200: 140, 8 ranks: 45; docs/network-model.md)")
      ->check(CLI::Range(0.0, 100000.0));
  app.add_option("--collective-turnaround-us", f.collective_turnaround_us,
                 "the same host cost paid once per ring collective across nodes instead of per step, us (default "
                 "0; docs/network-model.md, \"A packed host's step turnaround\")")
      ->check(CLI::Range(0.0, 100000.0));
  app.add_option("--launch-order", f.launch_order,
                 "graph (default: the graph's nccl_launch_order attribute, program or streams; without it each "
                 "stream on its own), true (a rank's communication ops start in the order it issued them, whatever "
                 "their stream, and a send or receive once the collectives issued before it have ended, as the GPU "
                 "host's truths show) or false (each stream on its own); docs/network-model.md, \"Launch order\"")
      ->check(CLI::IsMember({"graph", "true", "false"}));
  app.add_option("--nccl-algo", f.nccl_algo,
                 "the job's NCCL_ALGO (e.g. Ring): the model resolves default algorithms among those it allows "
                 "(prism run passes the ranks' NCCL_ALGO)");
  app.add_option("--nccl-proto", f.nccl_proto,
                 "the job's NCCL_PROTO (e.g. Simple): NCCL's algorithm choice considers only those protocols");
  app.add_option("--algorithm-choice", f.algorithm_choice,
                 "how collectives without an algorithm in the graph get one: nccl (what NCCL 2.28.9's tuning picks "
                 "for the collective, its size and the communicator's shape: ring, tree or PAT; the default) or "
                 "model (the ring and tree formulas compared, as before 2026-12-02)");
  app.add_option("--trace", f.trace,
                 "write a Chrome/Perfetto trace JSON of --trace-ranks (the path is checked before the replay)");
  app.add_option("--trace-ranks", f.trace_ranks,
                 "ranks to trace, e.g. 0-15,1024 (default: the first rank of each program, i.e. one rank per "
                 "pipeline stage of a job graph, so pipeline flows show; at most 64)");
  app.add_option("--trace-limit-mb", f.trace_limit_mb,
                 "refuse a --trace estimated larger than this many MiB, before the replay (default 256)")
      ->check(CLI::Range(uint64_t{1}, uint64_t{1} << 30));
  app.add_option("--realtime", f.realtime, "pace to the wall clock: best-effort or hard-limit");
  app.add_option("--lag-limit-ms", f.lag_limit_ms, "hard-limit: largest lag tolerated, 0 to 3600000 (default 100)");
  app.add_option("--spin-us", f.spin_us,
                 "paced: the engine polls for this long before each event instead of sleeping, 0 to 10000 "
                 "(default 1000)");
  app.add_option("--metrics-address", f.metrics_address, "HOST:PORT for /metrics and /status, or none");
  app.add_option("--listen", f.listen,
                 "gRPC address (hybrid default unix://$XDG_RUNTIME_DIR/prismd.sock, else "
                 "unix:///tmp/prismd-$UID.sock; created 0600, never taken from a live prismd)");
  app.add_option("--real-ranks", f.real_ranks, "hybrid: ranks played by real processes, e.g. 0,8");
  app.add_flag("--follow", f.follow,
               "hybrid without the program's graph: the virtual ranks join the groups the real ranks make and are "
               "on time for their operations; --graph then gives only the world and cluster (docs/capture.md)");
  app.add_option("--lookahead-ms", f.lookahead_ms,
                 "hybrid: how far ahead of the wall clock virtual ranks are replayed, 0 to 10000 (default 0: causal; "
                 "more lets a real rank's late report arrive after events it should have delayed)")
      ->check(CLI::Range(int64_t{0}, int64_t{10000}));
  app.add_option("--ring-hold", f.ring_hold,
                 "hybrid: on (default): a real rank's ring collective whose virtual members have not reached it in "
                 "the engine waits for them (the plugin holds its receives); off: they count as on time")
      ->check(CLI::IsMember({"on", "off"}));
  app.add_option("--ring-forecast", f.ring_forecast,
                 "hybrid: on (default): a real rank's collective whose virtual members only compute after its own "
                 "previous one gets its schedule ahead, relative to that one's end, and a pipeline receive from a "
                 "virtual sender gets its schedule once the send's time is fixed; off: both wait for the engine")
      ->check(CLI::IsMember({"on", "off"}));
  app.add_option("--on-divergence", f.on_divergence,
                 "hybrid: stop (default: the first divergence of the real ranks from the graph ends the run, exit "
                 "status 3, with the reason) or follow (keep serving and say what prismd does instead)");
  app.add_option("--stall-after-s", f.stall_after_s,
                 "hybrid: when every real rank is inside an NCCL operation still waiting for its virtual peers' time, the "
                 "replay waits for them and no report came for this many seconds, say what each side waits for and treat it as a divergence (default 5; "
                 "0: never)")
      ->check(CLI::Range(int64_t{0}, int64_t{3600}));
  app.add_option("--record-sessions", f.record_sessions,
                 "hybrid: record the plugin sessions' events and the schedules sent into FILE (CI replays)");
  app.add_option("--nccl-comm-id", f.nccl_comm_id,
                 "hybrid: the real ranks' NCCL_COMM_ID host:port; every communicator then shares that id, one "
                 "init at a time (default: none, ids come from PyTorch's store)");
  app.add_option("--torch-store", f.torch_store,
                 "hybrid: host PyTorch's TCPStore here, HOST:PORT = the ranks' MASTER_ADDR:MASTER_PORT, or none "
                 "(default 127.0.0.1:29500, none with --nccl-comm-id); prismd plays or joins every NCCL root "
                 "announced through it");
  app.add_option("--bootstrap-routable", f.bootstrap_routable,
                 "hybrid: give virtual ranks routable bootstrap addresses on HOST (one port each) for real ranks "
                 "on other hosts (default: loopback aliases, this host only)");
  app.add_option("--bootstrap-allow", f.bootstrap_allow,
                 "hybrid, with --bootstrap-routable: peers accepted, a.b.c.d[/len] (repeatable; default any)")
      ->delimiter(',');
  app.add_option("--wire-profile", f.wire_profile,
                 "hybrid: NCCL version code of the real ranks, e.g. 22809 (default: the release the first real "
                 "rank's plugin announces at NCCL init)");
  app.add_flag("--allow-unverified-wire-profile", f.allow_unverified_profile,
               "hybrid: serve a release whose wire profile is not yet verified against a real rank (to verify it)");
  app.add_option("--bootstrap-port", f.bootstrap_port, "hybrid: port of the virtual ranks' bootstrap listener");
  app.add_option("--record-wire", f.record_wire, "hybrid: record bytes exchanged with real ranks into DIR");
  app.add_option("--nccl-runtime-connect", f.nccl_runtime_connect,
                 "hybrid: the real ranks' NCCL_RUNTIME_CONNECT (prism run sets 0)");
  // Usage errors: one "prismd: ..." line and exit status 2 (CLI11_PARSE
  // would exit with CLI11's own codes, 106 for a missing flag).
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp&) {
    std::cout << app.help();
    return 0;
  } catch (const CLI::CallForAllHelp&) {
    std::cout << app.help("", CLI::AppFormatMode::All);
    return 0;
  } catch (const CLI::ParseError& e) {
    std::fprintf(stderr, "prismd: %s (prismd --help lists the flags)\n", e.what());
    return kExitUsage;
  }
  f.metrics_address_given = app.count("--metrics-address") > 0;
  f.torch_store_given = app.count("--torch-store") > 0;
  if (auto s = CheckFlags(f, app.count("--iterations") > 0); !s.ok()) return Fail(s, kExitUsage);
  return Run(f);
}
