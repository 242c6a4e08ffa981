// prism-session-capture: capture recordings (docs/capture.md) of a hybrid
// run's real ranks, with compute durations measured from prismd's session
// recording (session_capture.h), for prism-graphgen extrapolate.
//
//   prism-session-capture SESSIONS.rec --graph G -o DIR [--skip-iterations N]
//   prism-session-capture SESSIONS.rec -o DIR [--skip-iterations N] [--torch-trace TDIR] [--world-graph W]
//       a prismd --follow run (follow_capture.h); TDIR: prism capture's torch traces (torch_trace.h);
//       W: the world graph prismd ran with (its links: NCCL's step cost is fitted only with it)
//   prism-session-capture SESSIONS.rec --slim OUT.rec
//       writes only what a follow capture reads of SESSIONS.rec (FollowCaptureInput) to a new file
//   prism-session-capture SESSIONS.rec --ops-only OUT.rec
//       any run: writes what a replay reads (communicators, operation starts and ends, schedules;
//       KeepOperationEvents) to a new file: a hybrid check run's recording small enough to keep
//
// Exit: 0; 2 bad input; 1 the output could not be written.
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <optional>

#include "CLI/CLI.hpp"
#include "absl/strings/str_cat.h"
#include "daemon/engine/nccl_tuning.h"
#include "daemon/engine/network_model.h"
#include "daemon/hybrid/follow_capture.h"
#include "daemon/hybrid/op_time_report.h"
#include "daemon/hybrid/session_capture.h"
#include "daemon/hybrid/session_replay.h"
#include "daemon/hybrid/step_cost_fit.h"
#include "graphgen/capture_recording.h"
#include "proto/graph_file.h"

namespace {

int Fail(int code, const std::string& what) {
  std::cerr << "prism-session-capture: error: " << what << "\n";
  return code;
}

double Seconds(uint64_t ns) { return static_cast<double>(ns) / 1e9; }

absl::Status MakeFolder(const std::string& dir) {
  std::error_code ec;
  if (std::filesystem::exists(dir, ec)) return absl::AlreadyExistsError("-o " + dir + ": already exists; name a new folder");
  if (!std::filesystem::create_directory(dir, ec))
    return absl::InternalError("cannot create folder " + dir + ": " + ec.message());
  return absl::OkStatus();
}

bool Write(const std::string& path, const prism::graphgen::Recording& rec) {
  std::ofstream f(path, std::ios::binary);
  f << prism::graphgen::EncodeRecording(rec);
  f.close();
  return static_cast<bool>(f);
}

// The step cost the run's prismd played: --run-step-cost-us, else what
// prismd's "auto" takes for `graph` (its figure, else the table's).
prism::Nanoseconds RunStepCost(double run_step_cost_us, const prism::graph::Graph& graph) {
  if (run_step_cost_us >= 0) return prism::Nanoseconds(static_cast<int64_t>(run_step_cost_us * 1000.0 + 0.5));
  return prism::engine::GraphNcclStepCost(graph.cluster()).value_or(prism::engine::DefaultNcclStepCost()).cost;
}

// NCCL's step cost fitted from rank `rank`'s ring collectives (step_cost_fit.h)
// into its header; prints what was fitted. `graph`: the graph prismd ran with;
// `graph_round`: a run with a graph (not --follow), which keeps that graph's
// figure (RoundStepCosts).
void FitStepCost(const std::map<uint32_t, std::vector<prism::daemon::RingOpTiming>>& timings,
                 const prism::graph::Graph& graph, prism::Nanoseconds run_step_cost,
                 prism::graphgen::Recording& rec, bool graph_round) {
  const uint32_t rank = rec.header.rank();
  const auto it = timings.find(rank);
  const auto fits = prism::daemon::FitStepCost(it != timings.end() ? it->second
                                                                   : std::vector<prism::daemon::RingOpTiming>{},
                                               graph.cluster(), run_step_cost);
  bool kept = false;
  for (auto& e : prism::daemon::RoundStepCosts(fits, rank, graph.cluster(), graph_round, &kept))
    *rec.header.add_nccl_step_costs() = std::move(e);
  std::cout << prism::daemon::DescribeFits(fits, rank) << "\n";
  if (kept) std::cout << "step cost, rank " << rank << ": the run's graph's figure stands\n";
}

// A prismd --follow run: the real ranks' operations and communicators
// become the programs (follow_capture.h).
int FromFollowRun(const std::string& sessions, const std::string& dir, uint64_t skip, const std::string& torch_dir,
                  const std::string& world_graph, double run_step_cost_us) {
  auto recording = prism::daemon::ReadRecording(sessions);
  if (!recording.ok()) return Fail(2, std::string(recording.status().message()));
  std::optional<prism::graph::Graph> world;
  if (!world_graph.empty()) {
    auto read = prism::graph::ReadGraphFile(world_graph);
    if (!read.ok()) return Fail(2, std::string(read.status().message()));
    world = std::move(*read);
  }
  std::map<uint32_t, prism::daemon::TorchTrace> traces;
  if (!torch_dir.empty()) {
    auto read = prism::daemon::ReadTorchTraces(torch_dir);
    if (!read.ok()) return Fail(2, std::string(read.status().message()));
    traces = std::move(*read);
  }
  auto capture = prism::daemon::CaptureFromFollow(*recording, skip, torch_dir.empty() ? nullptr : &traces);
  if (!capture.ok()) return Fail(2, std::string(capture.status().message()));
  if (auto s = MakeFolder(dir); !s.ok()) return Fail(1, std::string(s.message()));
  const auto timings = world ? prism::daemon::RingOpTimings(*recording, *world)
                              : std::map<uint32_t, std::vector<prism::daemon::RingOpTiming>>{};
  for (size_t i = 0; i < capture->recordings.size(); ++i) {
    auto& rec = capture->recordings[i];
    if (world) FitStepCost(timings, *world, RunStepCost(run_step_cost_us, *world), rec, false);
    const std::string path = absl::StrCat(dir, "/rank-", rec.header.rank(), ".capture.jsonl");
    if (!Write(path, rec)) return Fail(1, "cannot write " + path);
    std::cout << capture->summary[i] << "; wrote " << path << "\n";
  }
  return 0;
}

// --slim: what a follow capture reads of `sessions`, into the new file `out`.
int Slim(const std::string& sessions, const std::string& out) {
  auto recording = prism::daemon::ReadRecording(sessions);
  if (!recording.ok()) return Fail(2, std::string(recording.status().message()));
  if (recording->graph.rfind("follow:", 0) != 0)
    return Fail(2, "--slim: " + sessions + " is a recording of graph '" + recording->graph.substr(0, 64) +
                       "', not of a prismd --follow run (a capture with --graph reads other lines)");
  const prism::daemon::Recording slim = prism::daemon::FollowCaptureInput(*recording);
  if (auto s = prism::daemon::WriteRecording(out, slim); !s.ok()) return Fail(1, std::string(s.message()));
  std::cout << "wrote " << out << ": " << slim.lines.size() << " of " << recording->lines.size()
            << " lines (communicators and operation starts and ends)\n";
  return 0;
}

// --ops-only: what a replay reads of `sessions` (any run), into the new file `out`.
int OpsOnly(const std::string& sessions, const std::string& out) {
  auto recording = prism::daemon::ReadRecording(sessions);
  if (!recording.ok()) return Fail(2, std::string(recording.status().message()));
  const prism::daemon::Recording kept = prism::daemon::KeepOperationEvents(*recording);
  if (auto s = prism::daemon::WriteRecording(out, kept); !s.ok()) return Fail(1, std::string(s.message()));
  std::cout << "wrote " << out << ": " << kept.lines.size() << " of " << recording->lines.size()
            << " lines (communicators, schedules, operation starts and ends)\n";
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"capture recordings of a hybrid run's real ranks, compute measured from prismd --record-sessions "
               "(docs/capture.md)", "prism-session-capture"};
  std::string sessions, graph_path, dir, torch_dir, slim, ops_only, world_graph;
  uint64_t skip = 1;
  double run_step_cost_us = -1;
  app.add_option("sessions", sessions, "prismd --record-sessions file")->required();
  app.add_option("--graph", graph_path, "the graph the run used (leave out for a prismd --follow run)");
  app.add_option("-o,--output", dir, "folder to create for rank-<r>.capture.jsonl");
  app.add_option(
      "--slim", slim, "instead of capturing: write what a prismd --follow run's capture reads of SESSIONS "
                      "(communicators, operation starts and ends) to this new file: a small recording that "
                      "captures the same");
  app.add_option("--ops-only", ops_only,
                 "instead of capturing: write what a replay reads of SESSIONS, of any run (communicators, schedules, "
                 "operation starts and ends; no per-message events) to this new file: for bench/hybrid_explain and "
                 "bench/hybrid_gap.py");
  app.add_option("--skip-iterations", skip, "iterations left out of the mean (warm-up; default 1)");
  app.add_option("--torch-trace", torch_dir,
                 "a prismd --follow run only: the folder of the real ranks' torch-rank-<r>.jsonl (prism capture's "
                 "torch trace): order, streams, dependencies and memory from the program's calls");
  app.add_option("--world-graph", world_graph,
                 "a prismd --follow run only: the world graph prismd ran with; its links let NCCL's step cost be "
                 "fitted from the real ranks' ring collectives (with --graph, that graph's are used)");
  app.add_option("--run-step-cost-us", run_step_cost_us,
                 "the step cost the run's prismd played (its --step-cost-us; default: what its auto takes, the "
                 "graph's figure else the table's): operations the plugin's lockstep floor may have paced are "
                 "left out of the fit")
      ->check(CLI::Range(0.0, 1000.0));
  CLI11_PARSE(app, argc, argv);
  if (!ops_only.empty()) {
    if (!slim.empty() || !graph_path.empty() || !torch_dir.empty() || !dir.empty() || !world_graph.empty())
      return Fail(2, "--ops-only writes a recording and captures nothing: leave out --slim, -o, --graph, "
                     "--torch-trace and --world-graph");
    return OpsOnly(sessions, ops_only);
  }
  if (!slim.empty()) {
    if (!graph_path.empty() || !torch_dir.empty() || !dir.empty() || !world_graph.empty())
      return Fail(2, "--slim writes a recording and captures nothing: leave out -o, --graph, --torch-trace and "
                     "--world-graph");
    return Slim(sessions, slim);
  }
  if (dir.empty()) return Fail(2, "-o FOLDER is required (the folder to create for rank-<r>.capture.jsonl)");
  if (graph_path.empty()) return FromFollowRun(sessions, dir, skip, torch_dir, world_graph, run_step_cost_us);
  if (!world_graph.empty())
    return Fail(2, "--world-graph goes with a prismd --follow run (no --graph): with --graph, its links are used");
  if (!torch_dir.empty()) return Fail(2, "--torch-trace goes with a prismd --follow run (no --graph): a run with a "
                                         "graph takes streams and dependencies from the graph");

  auto graph = prism::graph::ReadGraphFile(graph_path);
  if (!graph.ok()) return Fail(2, std::string(graph.status().message()));
  auto recording = prism::daemon::ReadRecording(sessions);
  if (!recording.ok()) return Fail(2, std::string(recording.status().message()));
  auto measured = prism::daemon::MeasureCompute(*graph, *recording, skip);
  if (!measured.ok()) return Fail(2, std::string(measured.status().message()));
  if (measured->empty()) return Fail(2, sessions + ": no real rank reported an operation of the graph's");
  if (auto s = MakeFolder(dir); !s.ok()) return Fail(1, std::string(s.message()));
  const auto timings = prism::daemon::RingOpTimings(*recording, *graph);
  for (const prism::daemon::MeasuredRank& m : *measured) {
    auto rec = prism::graphgen::RecordingFromGraph(*graph, m.rank);
    if (!rec.ok()) return Fail(2, std::string(rec.status().message()));
    uint64_t computes = 0, measured_ops = 0, graph_ns = 0, total_ns = 0;
    for (size_t i = 0; i < rec->ops.size(); ++i) {
      if (!rec->ops[i].has_compute()) continue;
      ++computes;
      graph_ns += rec->ops[i].compute().duration_ns();
      if (m.compute_ns[i]) {
        ++measured_ops;
        rec->ops[i].mutable_compute()->set_duration_ns(*m.compute_ns[i]);
      }
      total_ns += rec->ops[i].compute().duration_ns();
    }
    rec->header.set_source(absl::StrCat("prism-session-capture ", sessions, ": ", measured_ops, " of ", computes,
                                        " compute ops measured"));
    FitStepCost(timings, *graph, RunStepCost(run_step_cost_us, *graph), *rec, true);
    const std::string path = absl::StrCat(dir, "/rank-", m.rank, ".capture.jsonl");
    if (!Write(path, *rec)) return Fail(1, "cannot write " + path);
    // Where the rank's collectives went past the model (op_time_report.h), as prismd says at a run's end.
    prism::engine::NcclBehaviour nccl;
    nccl.step_cost = RunStepCost(run_step_cost_us, *graph);
    const prism::engine::NetworkModel model(prism::engine::NetworkModel::LinkFiguresFromCluster(graph->cluster()),
                                            nccl);
    const auto ops = timings.find(m.rank);
    if (ops != timings.end()) {
      const std::string line =
          prism::daemon::DescribeOpTimes(prism::daemon::GroupCollectiveOps(ops->second, model), m.rank, m.iterations);
      if (!line.empty()) std::cout << line << "\n";
    }
    std::cout << "rank " << m.rank << ": " << m.iterations << " iterations, " << m.matched_ops
              << " operations matched to the program (" << m.unmatched_ops << " not in it); " << measured_ops << " of "
              << computes << " compute ops measured; compute " << Seconds(total_ns)
              << " s per iteration (the graph: " << Seconds(graph_ns) << " s); steady iteration "
              << Seconds(m.steady_iteration_ns) << " s; wrote " << path << "\n";
  }
  return 0;
}
