// Bad job files: the error names the key (full path) and the reason, the
// exit code is 2, and no output file is left behind.
#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "graphgen/cli.h"
#include "graphgen/job_spec.h"
#include "test/graphgen_test_util.h"

using prism::graphgen::testing::TempPath;

namespace {

const char* const kGood = prism::graphgen::testing::kValidJobYaml;

std::string Replace(std::string text, const std::string& from, const std::string& to) {
  const size_t at = text.find(from);
  REQUIRE(at != std::string::npos);
  return text.replace(at, from.size(), to);
}

struct CliResult {
  int code = 0;
  std::string err;
  bool output_exists = false;
};

CliResult RunJob(const std::string& yaml) {
  const std::string job = TempPath("job.yaml");
  const std::string out = TempPath("out.graph");
  std::ofstream(job) << yaml;
  std::ostringstream o, e;
  CliResult r;
  r.code = prism::graphgen::RunGraphgenCli({"prism-graphgen", "job", job, "-o", out}, o, e);
  r.err = e.str();
  r.output_exists = std::filesystem::exists(out);
  // No temporary left beside it either.
  for (const auto& f : std::filesystem::directory_iterator(std::filesystem::path(out).parent_path()))
    if (f.path().filename().string().rfind("out.graph.tmp", 0) == 0) r.output_exists = true;
  return r;
}

void ExpectRejected(const std::string& yaml, const std::string& key, const std::string& reason) {
  const CliResult r = RunJob(yaml);
  INFO(r.err);
  CHECK(r.code == prism::graphgen::kExitBadInput);
  CHECK(r.err.find(key + ":") != std::string::npos);
  CHECK(r.err.find(reason) != std::string::npos);
  CHECK_FALSE(r.output_exists);
}

}  // namespace

TEST_CASE("the good job file is accepted and written", "[graphgen][errors]") {
  const CliResult r = RunJob(kGood);
  INFO(r.err);
  CHECK(r.code == 0);
  CHECK(r.output_exists);
}

TEST_CASE("unknown keys are named with their full path", "[graphgen][errors]") {
  ExpectRejected(Replace(kGood, "name: ok", "name: ok\nmodle: {}"), "modle", "unknown key");
  ExpectRejected(Replace(kGood, "tp: 2", "tpp: 2"), "parallel.tpp", "unknown key");
  ExpectRejected(Replace(kGood, "bf16_tflops", "tflops"), "cluster.gpu.tflops", "unknown key");
  ExpectRejected(Replace(kGood, "latency_us: 5", "latency: 5"), "cluster.nic.latency", "unknown key");
  ExpectRejected(Replace(kGood, "vocab: 32000", "vocab: 32000, vocabulary: 3"), "model.vocabulary", "unknown key");
}

TEST_CASE("sizes that do not divide are named", "[graphgen][errors]") {
  ExpectRejected(Replace(Replace(kGood, "heads: 16", "heads: 2"), "tp: 2", "tp: 4"), "model.heads",
                 "not divisible by parallel.tp");
  ExpectRejected(Replace(kGood, "layers: 8", "layers: 7"), "model.layers", "not divisible by parallel.pp * parallel.vpp");
  ExpectRejected(Replace(kGood, "pp: 2, dp: 2", "pp: 2, vpp: 3, dp: 2"), "model.layers", "not divisible");
  ExpectRejected(Replace(kGood, "global_batch: 8", "global_batch: 7"), "parallel.global_batch",
                 "not divisible by parallel.micro_batch * parallel.dp");
  ExpectRejected(Replace(Replace(kGood, "dp: 2, ", ""), "name: ok", "name: ok\nworld: 10"), "world",
                 "not divisible by tp*pp*cp");
  ExpectRejected(Replace(kGood, "dp: 2,", "dp: 2, cp: 3,"), "model.seq_len", "not divisible by 2 * parallel.cp");
}

TEST_CASE("ep must divide the data-parallel ranks", "[graphgen][errors]") {
  const std::string moe = Replace(kGood, "vocab: 32000", "vocab: 32000, experts: 8, topk: 2");
  // tp*dp*cp = 4 data-parallel (x tp) ranks per stage; ep 8 does not fit.
  ExpectRejected(Replace(moe, "dp: 2,", "dp: 2, ep: 8, sequence_parallel: true,"), "parallel.ep",
                 "does not divide the data-parallel ranks");
  ExpectRejected(Replace(kGood, "dp: 2,", "dp: 2, ep: 2,"), "parallel.ep", "needs an MoE model");
  ExpectRejected(Replace(moe, "dp: 2,", "dp: 2, ep: 3, sequence_parallel: true,"), "model.experts",
                 "not divisible by parallel.ep");
}

TEST_CASE("zero, negative and mistyped values are named", "[graphgen][errors]") {
  ExpectRejected(Replace(kGood, "tp: 2", "tp: 0"), "parallel.tp", "at least 1");
  ExpectRejected(Replace(kGood, "hidden: 1024", "hidden: -1024"), "model.hidden", "at least 1");
  ExpectRejected(Replace(kGood, "gpus_per_node: 8", "gpus_per_node: 0"), "cluster.gpus_per_node", "at least 1");
  ExpectRejected(Replace(kGood, "gbps: 400", "gbps: -400"), "cluster.nic.gbps", "at least 1");
  ExpectRejected(Replace(kGood, "layers: 8", "layers: eight"), "model.layers", "whole number");
  ExpectRejected(Replace(kGood, "layers: 8", "layers: 8.5"), "model.layers", "whole number");
  ExpectRejected(Replace(kGood, "global_batch: 8}", "global_batch: 8, sequence_parallel: maybe}"),
                 "parallel.sequence_parallel", "true or false");
  ExpectRejected(Replace(kGood, "layers: 8", "layers: [8]"), "model.layers", "single value");
  ExpectRejected(Replace(kGood, "global_batch: 8}", "global_batch: 8, schedule: zigzag}"), "parallel.schedule",
                 "1f1b");
  ExpectRejected(Replace(kGood, "parallel: {", "parallel: 3\nx: {"), "parallel", "mapping");
}

TEST_CASE("missing model keys and broken YAML are reported", "[graphgen][errors]") {
  ExpectRejected(Replace(kGood, "layers: 8, ", ""), "model.layers", "is required");
  const CliResult r = RunJob("model: {layers: 8\n  hidden: [");
  CHECK(r.code == prism::graphgen::kExitBadInput);
  CHECK(r.err.find("not valid YAML") != std::string::npos);
  CHECK_FALSE(r.output_exists);
}

TEST_CASE("a missing job file and bad flags exit 2 without output", "[graphgen][errors]") {
  const std::string out = TempPath("never.graph");
  std::ostringstream o, e;
  CHECK(prism::graphgen::RunGraphgenCli({"prism-graphgen", "job", "/nonexistent/job.yaml", "-o", out}, o, e) ==
        prism::graphgen::kExitBadInput);
  CHECK(e.str().find("/nonexistent/job.yaml") != std::string::npos);
  CHECK(prism::graphgen::RunGraphgenCli({"prism-graphgen", "job"}, o, e) == prism::graphgen::kExitBadInput);
  CHECK(prism::graphgen::RunGraphgenCli({"prism-graphgen", "frobnicate"}, o, e) == prism::graphgen::kExitBadInput);
  CHECK_FALSE(std::filesystem::exists(out));
}

TEST_CASE("a job file's NCCL step cost is checked", "[graphgen][errors]") {
  const std::string nvlink = "nvlink: {gbps: 3600, latency_us: 1}";
  ExpectRejected(Replace(kGood, nvlink, nvlink + "\n  nccl_step_cost_us: -2"), "cluster.nccl_step_cost_us",
                 "must be 0 to 1000 (microseconds per ring step), got -2");
  ExpectRejected(Replace(kGood, nvlink, nvlink + "\n  nccl_step_cost_us: fast"), "cluster.nccl_step_cost_us",
                 "number");
  ExpectRejected(Replace(kGood, nvlink, nvlink + "\n  nccl_step_cost_us: {simple: 14, tree: 3}"),
                 "cluster.nccl_step_cost_us.tree", "unknown key");
  ExpectRejected(Replace(kGood, nvlink, nvlink + "\n  nccl_step_cost_us: {}"), "cluster.nccl_step_cost_us",
                 "names no protocol");
  ExpectRejected(Replace(kGood, nvlink, nvlink + "\n  nccl_step_cost_us: [14]"), "cluster.nccl_step_cost_us",
                 "mapping of protocols");
  ExpectRejected(Replace(kGood, nvlink, nvlink + "\n  nccl_step_cost_us: {ll: 5000}"), "cluster.nccl_step_cost_us.ll",
                 "must be 0 to 1000");
}
