// graphgen_bench [JOB.yaml] [OUTPUT.graph]
//
// Generates the full-scale graph of a job (default: the 8192-rank GPT-3
// example), writes it, reads it back and inspects it, and prints wall-clock
// figures: generation seconds (parse + generate + validate + write), file
// MiB, inspect seconds (read + decode + validate + JSON summary with member
// lists + serialisation), text-inspect seconds. Prints figures only; asserts
// nothing about time.
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <string>

#include "graphgen/inspect.h"
#include "graphgen/job_graph.h"
#include "graphgen/job_spec.h"
#include "proto/graph_file.h"

namespace {

double SecondsSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace

int main(int argc, char** argv) {
  const std::string job = argc > 1 ? argv[1] : PRISM_GPT3_EXAMPLE;
  const std::string out = argc > 2 ? argv[2]
                                   : (std::filesystem::temp_directory_path() /
                                      ("graphgen_bench-" + std::to_string(getpid()) + ".graph")).string();
  auto t0 = std::chrono::steady_clock::now();
  auto spec = prism::graphgen::ParseJobSpecFile(job);
  if (!spec.ok()) {
    std::fprintf(stderr, "graphgen_bench: %s\n", std::string(spec.status().message()).c_str());
    return 2;
  }
  auto graph = prism::graphgen::GenerateJobGraph(*spec);
  if (!graph.ok()) {
    std::fprintf(stderr, "graphgen_bench: %s\n", std::string(graph.status().message()).c_str());
    return 1;
  }
  if (auto s = prism::graph::ValidateGraph(*graph); !s.ok()) {
    std::fprintf(stderr, "graphgen_bench: invalid graph: %s\n", std::string(s.message()).c_str());
    return 1;
  }
  if (auto s = prism::graph::WriteGraphFile(*graph, out); !s.ok()) {
    std::fprintf(stderr, "graphgen_bench: %s\n", std::string(s.message()).c_str());
    return 1;
  }
  const double generate_s = SecondsSince(t0);
  const double mib = static_cast<double>(std::filesystem::file_size(out)) / (1024.0 * 1024.0);

  t0 = std::chrono::steady_clock::now();
  auto read = prism::graph::ReadGraphFile(out);
  if (!read.ok()) {
    std::fprintf(stderr, "graphgen_bench: %s\n", std::string(read.status().message()).c_str());
    return 1;
  }
  const std::string json = prism::graphgen::InspectGraph(*read, true).dump(1);
  const double inspect_json_s = SecondsSince(t0);

  t0 = std::chrono::steady_clock::now();
  auto read2 = prism::graph::ReadGraphFile(out);
  const std::string text = prism::graphgen::FormatInspectText(prism::graphgen::InspectGraph(*read2, false));
  const double inspect_text_s = SecondsSince(t0);

  uint64_t ops = 0;
  for (const auto& p : graph->programs()) ops += p.ops_size();
  std::printf("job: %s\n", job.c_str());
  std::printf("ranks: %d, programs: %d, communicators: %d, ops (all programs): %llu\n", graph->ranks_size(),
              graph->programs_size(), graph->communicators_size(), static_cast<unsigned long long>(ops));
  std::printf("generate_seconds: %.3f\n", generate_s);
  std::printf("file_mib: %.2f\n", mib);
  std::printf("inspect_json_seconds: %.3f (json %.2f MiB)\n", inspect_json_s,
              static_cast<double>(json.size()) / (1024.0 * 1024.0));
  std::printf("inspect_text_seconds: %.3f\n", inspect_text_s);
  if (argc <= 2) std::filesystem::remove(out);
  return 0;
}
