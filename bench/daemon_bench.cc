// Replay engine throughput and the GPT-3 175B (8192 ranks) simulate time.
//
//   daemon_bench [GRAPH] [--write-gpt PATH]
// Prints: events/s of a 1024-rank training graph replayed rank by rank (no
// equivalence classes); the wall time of one simulated iteration of an
// 8192-rank TP8 PP16 DP64 1F1B graph (24 microbatches, 6 layers per stage)
// with classes, and of GRAPH when given. --write-gpt writes that graph file.
#include <chrono>
#include <cstdio>
#include <string>

#include "daemon/engine/simulation.h"
#include "proto/graph_file.h"
#include "test/daemon_test_graphs.h"

namespace {

void Report(const char* what, const prism::graph::Graph& g, bool classes) {
  prism::engine::SimulationOptions o;
  o.use_classes = classes;
  o.iterations = 1;
  const auto t0 = std::chrono::steady_clock::now();
  auto r = prism::engine::Simulate(g, o);
  const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (!r.ok()) {
    std::printf("%s: error: %s\n", what, std::string(r.status().message()).c_str());
    return;
  }
  const auto& rep = r->report;
  std::printf("%s: ranks %llu actors %llu events %llu; event loop %.3f s = %.2f M events/s; "
              "simulate total (setup + replay) %.3f s = %.2f M events/s; predicted iteration %.6f s\n",
              what, static_cast<unsigned long long>(rep.world_size), static_cast<unsigned long long>(rep.actors),
              static_cast<unsigned long long>(rep.events), rep.engine_wall_s, rep.events / rep.engine_wall_s / 1e6,
              wall, rep.events / wall / 1e6, rep.mean_iteration.seconds());
}

}  // namespace

int main(int argc, char** argv) {
  std::string graph_path, write_path;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--write-gpt" && i + 1 < argc) write_path = argv[++i];
    else graph_path = a;
  }
  prism::testing::TrainingSpec gpt;  // defaults: TP8 PP16 DP64, 24 microbatches, 6 layers per stage
  const auto t0 = std::chrono::steady_clock::now();
  const prism::graph::Graph big = prism::testing::TrainingGraph(gpt);
  std::printf("built GPT-3-shaped graph (%d ranks, %d ops per stage program) in %.3f s\n", big.ranks_size(),
              big.programs(1).ops_size(),
              std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  if (!write_path.empty()) {
    auto s = prism::graph::WriteGraphFile(big, write_path);
    std::printf("wrote %s: %s\n", write_path.c_str(), s.ok() ? "ok" : std::string(s.message()).c_str());
  }
  prism::testing::TrainingSpec mid = gpt;
  mid.dp = 8;  // TP8 PP16 DP8 = 1024 ranks
  Report("1024-rank training graph, --no-classes", prism::testing::TrainingGraph(mid), false);
  Report("8192-rank GPT-3-shaped graph, classes", big, true);
  if (!graph_path.empty()) {
    const auto t1 = std::chrono::steady_clock::now();
    auto g = prism::graph::ReadGraphFile(graph_path);
    if (!g.ok()) {
      std::printf("%s: %s\n", graph_path.c_str(), std::string(g.status().message()).c_str());
      return 1;
    }
    std::printf("loaded %s in %.3f s\n", graph_path.c_str(),
                std::chrono::duration<double>(std::chrono::steady_clock::now() - t1).count());
    Report(graph_path.c_str(), *g, true);
  }
  return 0;
}
