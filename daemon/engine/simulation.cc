#include "daemon/engine/simulation.h"

#include <algorithm>
#include <chrono>
#include <sstream>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "daemon/engine/algorithm_report.h"

namespace prism::engine {
namespace {

// A program's running memory (static + deltas, over `iterations`) must stay
// representable: the engine sums it in 64 bits.
absl::Status CheckMemoryRange(const EngineWorld& world, uint64_t iterations) {
  for (const ProgramInfo& p : world.programs) {
    __int128 net = 0, swing = p.static_memory;
    for (const OpInfo& op : p.ops) {
      net += op.memory_delta;
      swing += op.memory_delta < 0 ? -static_cast<__int128>(op.memory_delta) : op.memory_delta;
    }
    const __int128 worst = (net < 0 ? -net : net) * static_cast<__int128>(iterations) + swing;
    if (worst >= static_cast<__int128>(kMaxTimeNs))
      return absl::OutOfRangeError(absl::StrCat(
          "program ", p.name, " changes memory by ", static_cast<int64_t>(net), " bytes per iteration (",
          iterations, " iterations): its memory would leave the range the engine represents; the graph's "
          "memory deltas should balance within an iteration (prism-graphgen inspect shows them)"));
  }
  return absl::OkStatus();
}

// A clock that reached the engine's limit means sums were clamped: every
// figure after that point would be wrong (0 s iterations, negative times).
absl::Status CheckClock(const ReplayStats& stats) {
  if (stats.end.count() < kMaxTimeNs) return absl::OkStatus();
  return absl::OutOfRangeError(absl::StrCat(
      "the replayed clock reached the engine's limit (", kMaxTimeNs, " ns, about 146 years): the graph's op "
      "durations and sizes over its links add up beyond it, so no figure would be right; check the link "
      "bandwidths and the op figures (prism-graphgen inspect)"));
}

// Counts completed iterations for a partial report and forwards every
// callback to the caller's observer (nullable). Paced, the time inside the
// caller's observer is a step of its own for the lag's causes
// (EngineStep::kObservers; the engine's work before it, kEvents).
class IterationCounter final : public EngineObserver {
 public:
  explicit IterationCounter(EngineObserver* next) : next_(next) {}
  uint64_t done() const { return done_; }
  void SetPacer(WallClockPacer* pacer) { pacer_ = pacer; }

  void OnProgress(const EngineProgress& p) override {
    done_ = std::max(done_, p.iterations_done);
    if (next_) Forward([&] { next_->OnProgress(p); });
  }
  void OnIteration(uint64_t index, Nanoseconds duration) override {
    done_ = std::max(done_, index + 1);
    if (next_) Forward([&] { next_->OnIteration(index, duration); });
  }
  void OnCollective(graph::CollectiveKind kind, graph::CommKind comm, Nanoseconds latency, Bytes bytes) override {
    if (next_) Forward([&] { next_->OnCollective(kind, comm, latency, bytes); });
  }
  void OnPointToPoint(Nanoseconds latency, Bytes bytes) override {
    if (next_) Forward([&] { next_->OnPointToPoint(latency, bytes); });
  }
  void OnRealRankOpComplete(uint32_t rank, uint32_t op, Nanoseconds at) override {
    if (next_) Forward([&] { next_->OnRealRankOpComplete(rank, op, at); });
  }
  void OnWorld(const EngineWorld& world) override {
    if (next_) Forward([&] { next_->OnWorld(world); });
  }
  void OnVirtualMembersArrived(uint32_t comm, uint64_t call, Nanoseconds arrived) override {
    if (next_) Forward([&] { next_->OnVirtualMembersArrived(comm, call, arrived); });
  }
  void OnVirtualMembersForecast(uint32_t comm, uint64_t call, uint32_t after_comm, uint64_t after_call,
                                Nanoseconds floor, Nanoseconds after_end) override {
    if (next_) Forward([&] { next_->OnVirtualMembersForecast(comm, call, after_comm, after_call, floor, after_end); });
  }
  void OnVirtualSendToReal(uint32_t comm, uint32_t send_rank, uint32_t recv_rank, uint64_t index, Nanoseconds ready,
                           Bytes bytes) override {
    if (next_) Forward([&] { next_->OnVirtualSendToReal(comm, send_rank, recv_rank, index, ready, bytes); });
  }
  void OnVirtualSendToRealForecast(uint32_t comm, uint32_t send_rank, uint32_t recv_rank, uint64_t index,
                                   Nanoseconds ready, Bytes bytes) override {
    if (next_) Forward([&] { next_->OnVirtualSendToRealForecast(comm, send_rank, recv_rank, index, ready, bytes); });
  }
  void OnAwaitingRealRanks(const std::vector<RealRankPosition>& positions) override {
    if (next_) Forward([&] { next_->OnAwaitingRealRanks(positions); });
  }

 private:
  template <typename F>
  void Forward(F call) {
    if (pacer_ != nullptr) pacer_->StepDone(EngineStep::kEvents);
    call();
    if (pacer_ != nullptr) pacer_->StepDone(EngineStep::kObservers);
  }

  EngineObserver* next_;
  WallClockPacer* pacer_ = nullptr;
  uint64_t done_ = 0;
};

// The report of a replay stopped after `done` of `requested` iterations:
// the completed iterations' times; sums so far, per completed iteration.
SimulationReport PartialReport(const graph::Graph& graph, const EngineWorld& world, ReplayStats stats,
                               uint64_t done, uint64_t requested, double wall_s) {
  stats.iteration_end.resize(std::min<uint64_t>(done, stats.iteration_end.size()));
  SimulationReport r = BuildReport(graph, world, stats, done, wall_s);
  r.stopped = true;
  r.iterations_requested = requested;
  return r;
}

}  // namespace

absl::StatusOr<uint64_t> IterationsFor(const graph::Graph& graph, uint64_t requested) {
  uint64_t n = requested;
  if (n == 0) {
    const auto& attrs = graph.job().attributes();
    const auto it = attrs.find("iterations");
    n = 1;
    if (it != attrs.end() && !absl::SimpleAtoi(it->second, &n))
      return absl::InvalidArgumentError(absl::StrCat("graph attribute iterations=\"", it->second,
                                                     "\" is not a number; pass --iterations N"));
  }
  if (n == 0 || n > kMaxIterations)
    return absl::InvalidArgumentError(absl::StrCat(n, " iterations requested; use 1 to ", kMaxIterations));
  return n;
}

std::string SimulationResult::TraceJson(const graph::Graph& graph) const {
  if (!trace) return "";
  std::ostringstream out;
  trace->WriteJson(graph, out);
  return out.str();
}

absl::Status SimulationResult::WriteTrace(const graph::Graph& graph, const std::string& path) const {
  if (!trace) return absl::FailedPreconditionError("no trace was recorded");
  return trace->WriteFile(graph, path);
}

absl::StatusOr<SimulationResult> Simulate(const graph::Graph& graph, const SimulationOptions& options) {
  auto iterations = IterationsFor(graph, options.iterations);
  if (!iterations.ok()) return iterations.status();
  if (options.nic_model == NicModel::kShared && !options.real_ranks.empty())
    return absl::InvalidArgumentError(
        "the shared NIC model replays all-virtual worlds only (prismd --simulate); hybrid runs use the queues "
        "or calendar model");
  const auto wall_start = std::chrono::steady_clock::now();
  const NetworkModel model(NetworkModel::LinkFiguresFromCluster(graph.cluster()), options.nccl);
  WorldOptions wopts;
  wopts.use_classes = options.use_classes;
  wopts.graph_validated = options.graph_validated;
  wopts.real_ranks = options.real_ranks;
  wopts.alone_ranks = LateRankIds(options.late);
  auto world = BuildWorld(graph, model, wopts);
  if (!world.ok()) return world.status();
  if (const uint64_t entries = EngineStateEntries(*world, *iterations); entries > kMaxStateEntries)
    return absl::InvalidArgumentError(absl::StrCat(
        "replaying this graph needs ", entries, " state entries (", world->actors.size(), " actors x ops and ",
        *iterations, " iterations); prismd handles at most ", kMaxStateEntries,
        ": use equivalence classes (drop --no-classes), fewer iterations or a smaller graph"));
  if (auto s = CheckMemoryRange(*world, *iterations); !s.ok()) return s;
  SimulationResult result;
  result.world = std::make_unique<EngineWorld>(std::move(*world));
  if (options.trace_ranks) {
    result.trace = std::make_unique<TraceRecorder>(*options.trace_ranks, *result.world);
    result.trace->SetStepCost(options.nccl.step_cost, options.step_cost_source);
  }
  auto late = LateComputes::Build(*result.world, options.late, *iterations);
  if (!late.ok()) return late.status();
  EngineOptions eopts;
  eopts.iterations = *iterations;
  eopts.late = &*late;
  eopts.progress_every_events = std::max<uint64_t>(options.progress_every_events, 1);
  eopts.nic_model = options.nic_model;
  ReplayEngine engine(*result.world, model, eopts);
  IterationCounter counter(options.observer);
  engine.SetTraceRecorder(result.trace.get());
  std::unique_ptr<WallClockPacer> pacer;
  if (!options.pacer && options.realtime && options.realtime->mode != RealtimeMode::kOff) {
    pacer = std::make_unique<WallClockPacer>(*options.realtime);
    pacer->Start();
  }
  WallClockPacer* paced = options.pacer ? options.pacer : pacer.get();
  counter.SetPacer(paced);
  engine.SetObserver(options.report_when_stopped || paced != nullptr ? &counter : options.observer);
  absl::Status run = engine.Run(paced, options.inbox);
  const bool stopped = absl::IsCancelled(run) && options.report_when_stopped;
  if (!run.ok() && !stopped) return run;
  if (auto s = CheckClock(engine.stats()); !s.ok()) return s;
  const double wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - wall_start).count();
  result.report = stopped ? PartialReport(graph, *result.world, engine.stats(), counter.done(), *iterations, wall_s)
                          : BuildReport(graph, *result.world, engine.stats(), *iterations, wall_s);
  result.report.step_cost = options.nccl.step_cost;
  result.report.step_cost_source = options.step_cost_source;
  result.report.step_turnaround = options.nccl.step_turnaround;
  result.report.collective_turnaround = options.nccl.collective_turnaround;
  result.report.nccl_algo = options.nccl_algo;
  result.report.launch_in_order = options.nccl.launch_in_order;
  result.report.launch_order_source = options.launch_order_source;
  result.report.algorithm_choice = options.nccl.nccl_choice ? "NCCL 2.28.9's tuning" : "the model's formulas";
  result.report.algorithms = AlgorithmChoices(*result.world, model);
  result.report.late = options.late;
  return result;
}

}  // namespace prism::engine
