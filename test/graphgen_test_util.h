// Helpers shared by the graphgen tests: build jobs from YAML snippets, pick
// communicators by kind, sum op bytes by label.
#ifndef PRISM_TEST_GRAPHGEN_TEST_UTIL_H_
#define PRISM_TEST_GRAPHGEN_TEST_UTIL_H_

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "graphgen/job_spec.h"
#include "proto/graph.pb.h"

namespace prism::graphgen::testing {

// A job YAML with a small dense GPT model and the given `parallel:` body
// (flow-style, e.g. "{tp: 2, pp: 2, dp: 2}") plus optional extra model keys.
std::string SmallJobYaml(const std::string& parallel, const std::string& extra_model = "");

// A complete, valid job file (TP2 PP2 DP2 on 8 H100s), for tests that
// append or break one key.
inline constexpr const char* kValidJobYaml = R"(name: ok
model: {layers: 8, hidden: 1024, heads: 16, seq_len: 1024, vocab: 32000}
parallel: {tp: 2, pp: 2, dp: 2, micro_batch: 1, global_batch: 8}
cluster:
  gpus_per_node: 8
  gpu: {name: H100, bf16_tflops: 989, hbm_gbps: 3350, memory_gib: 80}
  nic: {count: 8, gbps: 400, latency_us: 5}
  nvlink: {gbps: 3600, latency_us: 1}
)";

// Parses and generates; REQUIREs success.
prism::graph::Graph GraphOf(const std::string& yaml);
// The same for a job file (e.g. one of examples/).
prism::graph::Graph GraphOfFile(const std::string& path);
JobSpec SpecOf(const std::string& yaml);

// Member lists of the communicators whose name starts with "<slot>[", in
// creation order.
std::vector<std::vector<uint32_t>> MembersOf(const prism::graph::Graph& g, const std::string& slot);

// Sum of bytes (and count) of ops of `p` that satisfy `pred`.
struct Tally {
  uint64_t bytes = 0;
  uint64_t count = 0;
};
Tally TallyOps(const prism::graph::Program& p, const std::function<bool(const prism::graph::Op&)>& pred);

// Label of a collective/send/recv/compute op ("" for groups).
std::string LabelOf(const prism::graph::Op& op);
// Slot name an op uses ("" for compute and groups).
std::string SlotOf(const prism::graph::Program& p, const prism::graph::Op& op);

// A fresh path in a temporary directory (file not created).
std::string TempPath(const std::string& name);

}  // namespace prism::graphgen::testing

#endif  // PRISM_TEST_GRAPHGEN_TEST_UTIL_H_
