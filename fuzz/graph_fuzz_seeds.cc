// Writes the seed corpus of graph_fuzz: small valid graphs (collectives,
// a 1F1B training graph, send/recv groups) into the directory argv[1].
#include <cstdio>
#include <string>

#include "proto/graph_file.h"
#include "test/daemon_test_graphs.h"

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: graph_fuzz_seeds DIR\n");
    return 2;
  }
  namespace g = prism::graph;
  int n = 0;
  auto write = [&](const g::Graph& graph) {
    const std::string path = std::string(argv[1]) + "/seed-" + std::to_string(n++) + ".graph";
    if (auto s = g::WriteGraphFile(graph, path); !s.ok()) std::fprintf(stderr, "%s\n", std::string(s.message()).c_str());
  };
  for (auto kind : {g::ALLREDUCE, g::ALLGATHER, g::REDUCESCATTER, g::BROADCAST, g::ALLTOALL, g::BARRIER})
    write(prism::testing::CollectiveGraph(4 + 4 * (n % 3), kind, 4096, g::ALGORITHM_DEFAULT, 2, 100));
  write(prism::testing::CollectiveGraph(16, g::ALLREDUCE, 1 << 20, g::ALGORITHM_TREE, 1, 0));
  prism::testing::TrainingSpec s;
  s.tp = 2, s.pp = 2, s.dp = 2, s.microbatches = 3, s.layers_per_stage = 1;
  s.cluster.gpus_per_node = 2;
  write(prism::testing::TrainingGraph(s));
  s.pp = 3, s.dp = 1, s.dp_on_second_stream = false;
  write(prism::testing::TrainingGraph(s));
  std::printf("wrote %d seed graphs to %s\n", n, argv[1]);
  return 0;
}
