// libFuzzer target: job YAML (ParseJobSpec: yaml-cpp, the strict key reader,
// duplicate keys, ValidateJobSpec) and, for jobs small enough to build in
// moments, the graph generator behind it (GenerateJobGraph + ValidateGraph).
// Any input must give a Status, never a crash, hang or unbounded allocation;
// a generated graph that fails ValidateGraph for anything but a limit, or
// that does not decode after encoding, is a generator bug and traps.
#include <cstddef>
#include <cstdint>
#include <string>

#include <google/protobuf/stubs/logging.h>

#include "graphgen/job_graph.h"
#include "graphgen/job_spec.h"
#include "proto/graph_file.h"

namespace {

// Jobs larger than this are parsed and validated but not generated (each
// input must run in milliseconds).
constexpr uint64_t kMaxFuzzWorld = 512;
constexpr uint64_t kMaxFuzzOps = 50000;

bool SmallEnough(const prism::graphgen::JobSpec& spec) {
  const auto& p = spec.parallel;
  const uint64_t ops = uint64_t{2} * p.microbatches() * (spec.model.layers / p.pp) * (12 + 2 * uint64_t{p.cp});
  return p.world() <= kMaxFuzzWorld && ops <= kMaxFuzzOps;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  google::protobuf::LogSilencer quiet;
  const std::string text(reinterpret_cast<const char*>(data), size);
  // A relative compute_table path resolves under a directory that does not exist.
  auto spec = prism::graphgen::ParseJobSpec(text, "<fuzz>", "/nonexistent-prism-fuzz");
  if (!spec.ok() || !SmallEnough(*spec)) return 0;
  auto graph = prism::graphgen::GenerateJobGraph(*spec);
  if (!graph.ok()) return 0;
  const absl::Status valid = prism::graph::ValidateGraph(*graph);
  if (!valid.ok() && !absl::IsOutOfRange(valid)) __builtin_trap();
  if (!valid.ok()) return 0;
  // What prism-graphgen would write, prismd must read.
  auto bytes = prism::graph::EncodeGraph(*graph);
  if (bytes.ok() && !prism::graph::DecodeGraph(*bytes).ok()) __builtin_trap();
  return 0;
}
