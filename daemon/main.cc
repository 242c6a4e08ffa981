// prismd: the Prism replay daemon.
//
//   prismd --graph G --simulate [--iterations N] [--json] [--trace out.json]
//       replays every rank virtually and prints the predicted iteration time.
//   prismd --graph G [--listen unix://$XDG_RUNTIME_DIR/prismd.sock] [--real-ranks 0,1]
//       hybrid mode: serves gRPC (Daemon + registered services) and metrics,
//       replays the graph paced to the wall clock, until SIGINT/SIGTERM.
#include <pthread.h>
#include <signal.h>

#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <optional>
#include <string>
#include <thread>

#include <google/protobuf/stubs/logging.h>

#include "CLI/CLI.hpp"
#include "absl/strings/str_cat.h"
#include "daemon/control_plane.h"
#include "daemon/engine/simulation.h"
#include "daemon/server/daemon_server.h"
#include "daemon/server/http_endpoint.h"
#include "daemon/server/metrics.h"
#include "daemon/server/status.h"
#include "common/status_macros.h"
#include "common/version.h"
#include "proto/graph_file.h"

namespace {

struct Flags {
  std::string graph;
  bool simulate = false;
  uint64_t iterations = 0;
  bool json = false;
  bool no_classes = false;
  std::string trace;
  std::string trace_ranks = "0-7";
  std::string realtime;
  int64_t lag_limit_ms = 100;
  std::string metrics_address = "127.0.0.1:9464";
  bool metrics_address_given = false;
  std::string listen;
  std::string real_ranks;
  // Hybrid control plane (daemon/control_plane.h).
  std::string nccl_comm_id;
  int wire_profile = 22809;
  uint16_t bootstrap_port = 0;
  std::string record_wire;
  int nccl_runtime_connect = 0;
};

int Fail(const absl::Status& s) {
  std::fprintf(stderr, "prismd: %s\n", std::string(s.message()).c_str());
  return 1;
}

// Builds the engine options shared by both modes.
absl::StatusOr<prism::engine::SimulationOptions> EngineOptions(const Flags& f, const prism::graph::Graph& g,
                                                               bool hybrid) {
  prism::engine::SimulationOptions o;
  o.iterations = f.iterations;
  o.use_classes = !f.no_classes;
  const uint32_t world = static_cast<uint32_t>(g.ranks_size());
  if (!f.trace.empty()) {
    std::string spec = f.trace_ranks;
    if (spec == "0-7" && world < 8) spec = absl::StrCat("0-", world - 1);
    auto ranks = prism::engine::ParseRankList(spec, world);
    if (!ranks.ok()) return absl::InvalidArgumentError(absl::StrCat("--trace-ranks: ", ranks.status().message()));
    o.trace_ranks = *ranks;
  }
  if (!f.real_ranks.empty()) {
    auto ranks = prism::engine::ParseRankList(f.real_ranks, world);
    if (!ranks.ok()) return absl::InvalidArgumentError(absl::StrCat("--real-ranks: ", ranks.status().message()));
    o.real_ranks = *ranks;
  }
  if (!f.realtime.empty() || hybrid) {
    prism::engine::RealtimeOptions rt;
    if (!f.realtime.empty()) PRISM_RETURN_IF_ERROR(prism::engine::ParseRealtimeMode(f.realtime, &rt.mode));
    rt.lag_limit = prism::FromMilliseconds(f.lag_limit_ms);
    o.realtime = rt;
    o.progress_every_events = 256;  // paced: keep /metrics fresh
  }
  return o;
}

int PrintResult(const Flags& f, const prism::graph::Graph& g, const prism::engine::SimulationResult& r) {
  if (!f.trace.empty())
    if (auto s = r.WriteTrace(g, f.trace); !s.ok()) return Fail(s);
  std::cout << (f.json ? r.report.ToJson() : r.report.ToText());
  return 0;
}

prism::daemon::ControlPlaneOptions ControlPlaneOptionsFrom(const Flags& f,
                                                           const prism::engine::SimulationOptions& o) {
  prism::daemon::ControlPlaneOptions c;
  c.real_ranks.assign(o.real_ranks.begin(), o.real_ranks.end());
  c.nccl_comm_id = f.nccl_comm_id;
  if (c.nccl_comm_id.empty()) {
    const char* env = std::getenv("NCCL_COMM_ID");
    c.nccl_comm_id = env ? env : "127.0.0.1:29555";  // prism run's default
  }
  c.nccl_version = f.wire_profile;
  c.runtime_connect = f.nccl_runtime_connect != 0;
  c.bootstrap_port = f.bootstrap_port;
  c.record_wire_dir = f.record_wire;
  c.version = prism::kVersion;
  return c;
}

int RunHybrid(const Flags& f, const prism::graph::Graph& g, prism::engine::SimulationOptions options,
              prism::server::StatusBoard& status, prism::server::Metrics& metrics) {
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);  // before any thread starts: all inherit it
  prism::server::DaemonServer server(&status);
  auto control = prism::daemon::ControlPlane::Create(g, ControlPlaneOptionsFrom(f, options), &metrics);
  if (!control.ok()) return Fail(control.status());
  server.RegisterService((*control)->session_service());
  const std::string listen = f.listen.empty() ? prism::server::DefaultListenAddress() : f.listen;
  if (auto s = server.Start(listen); !s.ok()) return Fail(s);
  if (auto s = (*control)->Start(); !s.ok()) return Fail(s);
  std::fprintf(stderr, "prismd: serving gRPC on %s; Ctrl-C to stop\n", listen.c_str());
  prism::engine::EngineInbox inbox;
  options.inbox = &inbox;
  // The pacer outlives the engine so that services can convert wall-clock stamps
  // (pacer.EmulatedFromRealtime) and inject RankReachedOp events into `inbox`.
  prism::engine::WallClockPacer pacer(options.realtime.value_or(prism::engine::RealtimeOptions{}));
  pacer.Start();
  options.pacer = &pacer;
  options.observer = &metrics;
  status.SetState("running");
  absl::Status engine_status;
  std::thread engine([&] {
    auto r = prism::engine::Simulate(g, options);
    engine_status = r.ok() ? absl::OkStatus() : r.status();
    status.SetState(r.ok() ? "finished" : absl::StrCat("stopped: ", r.status().message()));
    if (r.ok()) std::fprintf(stderr, "%s", r->report.ToText().c_str());
    else if (!absl::IsCancelled(r.status()))  // reported now; prismd keeps serving until signalled
      std::fprintf(stderr, "prismd: replay stopped: %s\n", std::string(r.status().message()).c_str());
  });
  int sig = 0;
  sigwait(&signals, &sig);
  std::fprintf(stderr, "prismd: %s received, shutting down\n", sig == SIGINT ? "SIGINT" : "SIGTERM");
  inbox.Post(prism::engine::StopRequest{});
  engine.join();
  (*control)->Stop();
  server.Shutdown();
  if (!engine_status.ok() && !absl::IsCancelled(engine_status)) return Fail(engine_status);
  return 0;
}

int Run(const Flags& f) {
  absl::StatusOr<prism::graph::Graph> graph;
  {
    google::protobuf::LogSilencer quiet;  // a corrupt file is reported below, once, clearly
    graph = prism::graph::ReadGraphFile(f.graph);
  }
  if (!graph.ok()) return Fail(graph.status());
  auto options = EngineOptions(f, *graph, !f.simulate);
  if (!options.ok()) return Fail(options.status());
  auto iterations = prism::engine::IterationsFor(*graph, f.iterations);
  if (!iterations.ok()) return Fail(iterations.status());
  prism::server::StatusBoard status;
  status.SetGraph(graph->job().name(), graph->ranks_size(), *iterations);
  status.SetMode(f.simulate ? "simulate" : "hybrid");
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
  if (!f.simulate) return RunHybrid(f, *graph, *options, status, metrics);
  std::optional<prism::server::DaemonServer> server;
  if (!f.listen.empty()) {
    server.emplace(&status);
    if (auto s = server->Start(f.listen); !s.ok()) return Fail(s);
  }
  options->observer = &metrics;
  status.SetState("running");
  auto result = prism::engine::Simulate(*graph, *options);
  if (!result.ok()) {
    status.SetState(absl::StrCat("failed: ", result.status().message()));
    return Fail(result.status());
  }
  status.SetState("finished");
  return PrintResult(f, *graph, *result);
}

}  // namespace

int main(int argc, char** argv) {
  Flags f;
  CLI::App app{"prismd: replays a Prism execution graph (virtual ranks, metrics, traces)"};
  app.add_option("--graph", f.graph, "execution graph file (prism-graphgen output)")->required();
  app.add_flag("--simulate", f.simulate, "replay every rank virtually and print the predicted iteration time");
  app.add_option("--iterations", f.iterations, "iterations to replay (default: the graph's, else 1)");
  app.add_flag("--json", f.json, "print the simulation report as one JSON object");
  app.add_flag("--no-classes", f.no_classes, "replay every rank (no equivalence classes)");
  app.add_option("--trace", f.trace, "write a Chrome/Perfetto trace JSON of --trace-ranks");
  app.add_option("--trace-ranks", f.trace_ranks, "ranks to trace, e.g. 0-15,1024 (default 0-7)");
  app.add_option("--realtime", f.realtime, "pace to the wall clock: best-effort or hard-limit");
  app.add_option("--lag-limit-ms", f.lag_limit_ms, "hard-limit: largest lag tolerated (default 100)");
  app.add_option("--metrics-address", f.metrics_address, "HOST:PORT for /metrics and /status, or none");
  app.add_option("--listen", f.listen,
                 "gRPC address (hybrid default unix://$XDG_RUNTIME_DIR/prismd.sock, else "
                 "unix:///tmp/prismd-$UID.sock; created 0600, never taken from a live prismd)");
  app.add_option("--real-ranks", f.real_ranks, "hybrid: ranks played by real processes, e.g. 0,8");
  app.add_option("--nccl-comm-id", f.nccl_comm_id,
                 "hybrid: the real ranks' NCCL_COMM_ID host:port (default: $NCCL_COMM_ID, else 127.0.0.1:29555)");
  app.add_option("--wire-profile", f.wire_profile, "hybrid: NCCL version code of the real ranks (default 22809)");
  app.add_option("--bootstrap-port", f.bootstrap_port, "hybrid: port of the virtual ranks' bootstrap listener");
  app.add_option("--record-wire", f.record_wire, "hybrid: record bytes exchanged with real ranks into DIR");
  app.add_option("--nccl-runtime-connect", f.nccl_runtime_connect,
                 "hybrid: the real ranks' NCCL_RUNTIME_CONNECT (prism run sets 0)");
  CLI11_PARSE(app, argc, argv);
  f.metrics_address_given = app.count("--metrics-address") > 0;
  if (f.iterations > prism::engine::kMaxIterations) {
    std::fprintf(stderr, "prismd: --iterations must be 1 to %llu\n",
                 static_cast<unsigned long long>(prism::engine::kMaxIterations));
    return 2;
  }
  return Run(f);
}
