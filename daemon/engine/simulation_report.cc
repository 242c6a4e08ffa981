#include "daemon/engine/simulation_report.h"

#include <algorithm>
#include <cctype>
#include <cstdlib>

#include "fmt/format.h"
#include "nlohmann/json.hpp"
#include "proto/graph_topology.h"

namespace prism::engine {
namespace {

std::string Lower(std::string s, const std::string& prefix) {
  if (s.rfind(prefix, 0) == 0) s = s.substr(prefix.size());
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

std::string OpKindName(int k) {
  if (k == kOpKindSend) return "send";
  if (k == kOpKindRecv) return "recv";
  return Lower(graph::CollectiveKind_Name(static_cast<graph::CollectiveKind>(k)), "");
}

KindRow Row(std::string name, const KindTotals& t, double per) {
  return KindRow{std::move(name), static_cast<double>(t.time_ns) * 1e-9 / per, static_cast<double>(t.ops) / per,
                 static_cast<double>(t.bytes) / per};
}

nlohmann::ordered_json RowsJson(const std::vector<KindRow>& rows) {
  nlohmann::ordered_json j = nlohmann::ordered_json::object();
  for (const KindRow& r : rows)
    j[r.name] = {{"time_s_per_rank", r.time_s_per_rank}, {"ops_per_rank", r.ops_per_rank},
                 {"bytes_per_rank", r.bytes_per_rank}};
  return j;
}

// The job's sequence length, as prism-graphgen records it; 0 when absent.
uint64_t SeqLen(const graph::Graph& graph) {
  const auto& a = graph.job().attributes();
  auto it = a.find("model.seq_len");
  if (it == a.end()) return 0;
  char* end = nullptr;
  const unsigned long long v = std::strtoull(it->second.c_str(), &end, 10);
  return end != nullptr && *end == '\0' ? v : 0;
}

Throughput ThroughputOf(const graph::Graph& graph, Nanoseconds iteration) {
  Throughput t;
  std::vector<double> program_flops(graph.programs_size(), 0.0);
  for (int p = 0; p < graph.programs_size(); ++p)
    for (const graph::Op& op : graph.programs(p).ops())
      if (op.has_compute()) program_flops[p] += static_cast<double>(op.compute().flops());
  const uint32_t ranks = graph::RankCount(graph);
  for (uint32_t r = 0; r < ranks; ++r) {
    const uint32_t p = graph::ProgramOfRank(graph, r);
    if (p < program_flops.size()) t.model_flops_per_iteration += program_flops[p];
  }
  t.tokens_per_iteration = uint64_t{graph.layout().global_batch()} * SeqLen(graph);
  const double peak = static_cast<double>(graph.cluster().gpu().peak_bf16_flops());
  const double seconds = iteration.seconds();
  t.known = t.model_flops_per_iteration > 0 && t.tokens_per_iteration > 0 && peak > 0 && seconds > 0 &&
            ranks > 0;
  if (!t.known) return t;
  t.tokens_per_s = static_cast<double>(t.tokens_per_iteration) / seconds;
  t.tflops_per_gpu = t.model_flops_per_iteration / seconds / ranks / 1e12;
  t.peak_tflops_per_gpu = peak / 1e12;
  t.mfu = t.tflops_per_gpu / t.peak_tflops_per_gpu;
  return t;
}

std::vector<MemoryRow> Memory(const graph::Graph& graph, const EngineWorld& world, const ReplayStats& stats) {
  bool models_memory = false;
  for (const ProgramInfo& p : world.programs) {
    models_memory |= p.static_memory > 0;
    for (const OpInfo& op : p.ops) models_memory |= op.memory_delta != 0;
  }
  std::vector<MemoryRow> rows;
  if (!models_memory) return rows;
  rows.resize(world.programs.size());
  for (size_t p = 0; p < rows.size(); ++p) {
    rows[p].program = world.programs[p].name;
    rows[p].static_bytes = world.programs[p].static_memory;
    rows[p].peak_bytes = INT64_MIN;
  }
  for (size_t a = 0; a < world.actors.size(); ++a) {
    MemoryRow& r = rows[world.actors[a].program];
    r.ranks += world.actors[a].weight;
    const __int128 peak = static_cast<__int128>(r.static_bytes) + stats.actor_peak_memory[a];
    r.peak_bytes = std::max<int64_t>(r.peak_bytes, static_cast<int64_t>(std::clamp<__int128>(peak, INT64_MIN, INT64_MAX)));
  }
  std::erase_if(rows, [](const MemoryRow& r) { return r.ranks == 0; });
  const uint64_t capacity = graph.cluster().gpu().memory_bytes();
  for (MemoryRow& r : rows)
    r.over_capacity = capacity > 0 && r.peak_bytes > 0 && static_cast<uint64_t>(r.peak_bytes) > capacity;
  return rows;
}

}  // namespace

SimulationReport BuildReport(const graph::Graph& graph, const EngineWorld& world, const ReplayStats& stats,
                             uint64_t iterations, double wall_s) {
  SimulationReport r;
  r.graph_name = graph.job().name();
  r.world_size = graph::RankCount(graph);
  r.iterations = iterations;
  Nanoseconds prev(0);
  for (Nanoseconds end : stats.iteration_end) {
    r.iteration_times.push_back(end - prev);
    prev = end;
  }
  r.mean_iteration = Nanoseconds(prev.count() / static_cast<int64_t>(std::max<uint64_t>(iterations, 1)));
  r.emulated_end = stats.end;
  r.events = stats.events;
  r.wall_s = wall_s;
  r.engine_wall_s = stats.run_wall_s;
  r.actors = world.actors.size();
  r.classes = world.classes;
  r.reduced = world.reduced;
  r.reduction_note = world.reduction_note;
  const double per = static_cast<double>(std::max<uint64_t>(r.world_size, 1)) * static_cast<double>(std::max<uint64_t>(iterations, 1));
  const double per_iteration = static_cast<double>(std::max<uint64_t>(iterations, 1));
  auto mean_and_max = [&](const std::vector<Nanoseconds>& per_actor, double& mean, double& max) {
    __int128 sum = 0;
    int64_t most = 0;
    for (size_t a = 0; a < world.actors.size() && a < per_actor.size(); ++a) {
      sum += static_cast<__int128>(per_actor[a].count()) * world.actors[a].weight;
      most = std::max(most, per_actor[a].count());
    }
    mean = static_cast<double>(sum) * 1e-9 / per;
    max = static_cast<double>(most) * 1e-9 / per_iteration;
  };
  mean_and_max(stats.actor_exposed, r.exposed_comm_s_mean, r.exposed_comm_s_max);
  mean_and_max(stats.actor_pipeline_wait, r.pipeline_wait_s_mean, r.pipeline_wait_s_max);
  r.throughput = ThroughputOf(graph, r.mean_iteration);
  r.gpu_memory_bytes = graph.cluster().gpu().memory_bytes();
  r.compute_s_per_rank = static_cast<double>(stats.compute_ns) * 1e-9 / per;
  for (int k = 0; k < kCommKinds; ++k)
    if (stats.by_comm[k].ops > 0)
      r.by_comm.push_back(Row(Lower(graph::CommKind_Name(static_cast<graph::CommKind>(k)), "COMM_KIND_"),
                              stats.by_comm[k], per));
  for (int k = 0; k < kOpKinds; ++k)
    if (stats.by_op[k].ops > 0) r.by_op.push_back(Row(OpKindName(k), stats.by_op[k], per));
  r.memory = Memory(graph, world, stats);
  return r;
}

void MarkHybridRun(const graph::Graph& graph, SimulationReport& report) {
  report.hybrid = true;
  if (report.iteration_times.size() < 2) {
    report.throughput.known = false;  // iteration 0 alone is the start-up, not a training step
    return;
  }
  report.throughput = ThroughputOf(graph, report.SteadyIteration());
}

Nanoseconds SimulationReport::SteadyIteration() const {
  if (iteration_times.size() < 2) return Nanoseconds(0);
  Nanoseconds sum(0);
  for (size_t i = 1; i < iteration_times.size(); ++i) sum += iteration_times[i];
  return Nanoseconds(sum.count() / static_cast<int64_t>(iteration_times.size() - 1));
}

std::string SimulationReport::ToJson(bool include_wall) const {
  nlohmann::ordered_json j;
  j["graph"] = graph_name;
  j["world_size"] = world_size;
  j["iterations"] = iterations;
  if (stopped) {
    j["stopped"] = true;
    j["iterations_requested"] = iterations_requested;
  }
  j["iteration_time_s"] = mean_iteration.seconds();
  if (hybrid) {
    j["hybrid"] = true;
    j["steady_iteration_time_s"] = SteadyIteration().seconds();
  }
  auto& times = j["iteration_times_s"] = nlohmann::ordered_json::array();
  for (Nanoseconds t : iteration_times) times.push_back(t.seconds());
  j["emulated_time_s"] = emulated_end.seconds();
  j["events"] = events;
  if (include_wall) {
    j["events_per_second"] = engine_wall_s > 0 ? static_cast<double>(events) / engine_wall_s : 0.0;
    j["wall_s"] = wall_s;
    j["engine_wall_s"] = engine_wall_s;
  }
  j["replay"] = {{"actors", actors}, {"classes", classes}, {"equivalence_classes", reduced}, {"note", reduction_note}};
  j["compute_s_per_rank"] = compute_s_per_rank;
  j["nccl_step_cost_us"] = static_cast<double>(step_cost.count()) / 1e3;
  j["nccl_step_cost_source"] = step_cost_source;
  j["nccl_step_turnaround_us"] = static_cast<double>(step_turnaround.count()) / 1e3;
  j["nccl_collective_turnaround_us"] = static_cast<double>(collective_turnaround.count()) / 1e3;
  j["nccl_algo"] = nccl_algo;
  j["nccl_launch_order"] = launch_in_order ? "program" : "streams";
  j["nccl_launch_order_source"] = launch_order_source;
  j["algorithm_choice"] = algorithm_choice;
  if (!late.empty()) {
    auto& l = j["late"] = nlohmann::ordered_json::array();
    for (const LateRank& r : late)
      l.push_back({{"rank", r.rank}, {"iteration", r.iteration}, {"ms", static_cast<double>(r.extra.count()) / 1e6},
                   {"iteration_over_others_ms", static_cast<double>(OverOtherIterations(r.iteration).count()) / 1e6}});
  }
  auto& algos = j["algorithms"] = nlohmann::ordered_json::array();
  for (const AlgorithmRow& a : algorithms)
    algos.push_back({{"kind", a.kind}, {"algorithm", a.algorithm}, {"protocol", a.protocol}, {"forced", a.forced},
                     {"calls_per_iteration", a.calls}});
  j["exposed_communication_s"] = {{"mean_per_rank", exposed_comm_s_mean}, {"max_rank", exposed_comm_s_max}};
  j["pipeline_wait_s"] = {{"mean_per_rank", pipeline_wait_s_mean}, {"max_rank", pipeline_wait_s_max}};
  j["exposed_other_communication_s"] = {{"mean_per_rank", exposed_comm_s_mean - pipeline_wait_s_mean}};
  if (throughput.known) {
    j["throughput"] = {{"tokens_per_iteration", throughput.tokens_per_iteration},
                       {"tokens_per_s", throughput.tokens_per_s},
                       {"model_flops_per_iteration", throughput.model_flops_per_iteration},
                       {"tflops_per_gpu", throughput.tflops_per_gpu},
                       {"peak_tflops_per_gpu", throughput.peak_tflops_per_gpu},
                       {"mfu", throughput.mfu}};
  } else {
    j["throughput"] = nullptr;
  }
  j["communicators"] = RowsJson(by_comm);
  j["collectives"] = RowsJson(by_op);
  auto& mem = j["memory"] = nlohmann::ordered_json::array();
  for (const MemoryRow& m : memory)
    mem.push_back({{"program", m.program}, {"ranks", m.ranks}, {"static_bytes", m.static_bytes},
                   {"peak_bytes", m.peak_bytes}, {"over_capacity", m.over_capacity}});
  j["gpu_memory_bytes"] = gpu_memory_bytes;
  j["memory_over_capacity"] =
      std::any_of(memory.begin(), memory.end(), [](const MemoryRow& m) { return m.over_capacity; });
  return j.dump(2) + "\n";
}

Nanoseconds SimulationReport::OverOtherIterations(uint64_t k) const {
  if (k >= iteration_times.size()) return Nanoseconds(0);
  std::vector<int64_t> others;
  for (size_t i = 1; i < iteration_times.size(); ++i)
    if (i != k) others.push_back(iteration_times[i].count());
  if (others.empty()) return Nanoseconds(0);
  std::sort(others.begin(), others.end());
  const size_t n = others.size();
  const int64_t median = n % 2 == 1 ? others[n / 2] : (others[n / 2 - 1] + others[n / 2]) / 2;
  return Nanoseconds(iteration_times[k].count() - median);
}

std::string SimulationReport::ToText() const {
  std::string out = fmt::format("graph {} ({} ranks), {} iteration(s)\n", graph_name, world_size, iterations);
  if (stopped)
    out += fmt::format("STOPPED after {} of {} iteration(s): a partial report (per-iteration sums include the "
                       "unfinished iteration)\n", iterations, iterations_requested);
  if (!hybrid) {
    out += fmt::format("predicted iteration time: {:.6f} s (mean)\n", mean_iteration.seconds());
  } else if (iteration_times.size() >= 2) {
    out += fmt::format("this hybrid run's iteration time: {:.6f} s steady (mean of iterations 1-{}; iteration 0, "
                       "the start-up, {:.6f} s), on the engine's clock\n",
                       SteadyIteration().seconds(), iteration_times.size() - 1, iteration_times[0].seconds());
  } else if (iteration_times.size() == 1) {
    out += fmt::format("this hybrid run's iteration time: no steady iteration (iteration 0, the start-up, "
                       "{:.6f} s)\n", iteration_times[0].seconds());
  } else {
    out += "this hybrid run's iteration time: no iteration completed\n";
  }
  for (size_t i = 0; i < iteration_times.size() && i < 20; ++i)
    out += fmt::format("  iteration {}: {:.6f} s\n", i, iteration_times[i].seconds());
  if (!late.empty()) {
    out += fmt::format("late (--late): {}\n", DescribeLateRanks(late));
    for (const LateRank& l : late)
      out += fmt::format("  iteration {}: {:+.3f} ms against the median of the other iterations after the first\n",
                         l.iteration, static_cast<double>(OverOtherIterations(l.iteration).count()) / 1e6);
  }
  if (throughput.known)
    out += fmt::format("throughput: {:.0f} tokens/s ({} tokens per iteration), {:.1f} TFLOP/s per GPU of "
                       "{:.0f} peak: MFU {:.1f}% (model FLOPs: docs/metrics.md)\n",
                       throughput.tokens_per_s, throughput.tokens_per_iteration, throughput.tflops_per_gpu,
                       throughput.peak_tflops_per_gpu, throughput.mfu * 100);
  out += fmt::format("compute per rank: {:.6f} s; exposed communication per rank: {:.6f} s mean, {:.6f} s max\n",
                     compute_s_per_rank, exposed_comm_s_mean, exposed_comm_s_max);
  out += fmt::format("  of which pipeline bubble (only pipeline send/recv in flight): {:.6f} s mean, {:.6f} s max; "
                     "other communication {:.6f} s mean\n",
                     pipeline_wait_s_mean, pipeline_wait_s_max, exposed_comm_s_mean - pipeline_wait_s_mean);
  out += fmt::format("NCCL step cost: {:.2f} us per ring step{}\n", static_cast<double>(step_cost.count()) / 1e3,
                     step_cost_source.empty() ? "" : " (" + step_cost_source + ")");
  if (step_turnaround.count() > 0)
    out += fmt::format("ring step turnaround: {:.2f} us per step across nodes (--step-turnaround-us)\n",
                       static_cast<double>(step_turnaround.count()) / 1e3);
  if (collective_turnaround.count() > 0)
    out += fmt::format("ring collective turnaround: {:.2f} us per collective across nodes (--collective-turnaround-us)\n",
                       static_cast<double>(collective_turnaround.count()) / 1e3);
  out += fmt::format("NCCL launch order: {}{}\n",
                     launch_in_order ? "program order, a p2p op after the collectives issued before it"
                                     : "each stream on its own",
                     launch_order_source.empty() ? "" : " (" + launch_order_source + ")");
  if (!nccl_algo.empty()) out += fmt::format("NCCL_ALGO: {} (the model's algorithms follow it)\n", nccl_algo);
  if (!algorithms.empty()) {
    out += fmt::format("collective algorithms ({}; calls per iteration, all ranks):\n", algorithm_choice);
    for (const AlgorithmRow& a : algorithms)
      out += fmt::format("  {:<14} {:<8} {:<7} {:>12}{}\n", a.kind, a.algorithm, a.protocol, a.calls,
                         a.forced ? "  (the graph's)" : "");
  }
  out += "time per communicator kind (per rank per iteration, issue to completion: waiting for peers included):\n";
  for (const KindRow& r : by_comm)
    out += fmt::format("  {:<14} {:.6f} s  {:>10.1f} ops  {:>16.0f} bytes\n", r.name, r.time_s_per_rank,
                       r.ops_per_rank, r.bytes_per_rank);
  out += "time per collective kind (per rank per iteration):\n";
  for (const KindRow& r : by_op)
    out += fmt::format("  {:<14} {:.6f} s  {:>10.1f} ops  {:>16.0f} bytes\n", r.name, r.time_s_per_rank,
                       r.ops_per_rank, r.bytes_per_rank);
  if (!memory.empty()) {
    out += "peak memory per rank class:\n";
    for (const MemoryRow& m : memory)
      out += fmt::format("  {:<20} {:>6} ranks  peak {:.3f} GiB (static {:.3f} GiB){}\n", m.program, m.ranks,
                         static_cast<double>(m.peak_bytes) / (1 << 30), static_cast<double>(m.static_bytes) / (1 << 30),
                         m.over_capacity ? fmt::format("  OVER the GPU's {:.0f} GiB",
                                                       static_cast<double>(gpu_memory_bytes) / (1 << 30))
                                         : "");
  }
  out += fmt::format("replay: {} actor(s) for {} ranks{}{}\n", actors, world_size,
                     reduced ? " (equivalence classes)" : "", reduction_note.empty() ? "" : "; " + reduction_note);
  out += fmt::format("{} events in {:.3f} s wall, of which the event loop {:.3f} s ({:.2f} M events/s)\n", events,
                     wall_s, engine_wall_s, engine_wall_s > 0 ? static_cast<double>(events) / engine_wall_s / 1e6 : 0.0);
  return out;
}

}  // namespace prism::engine
