#include "test/graphgen_test_util.h"

#include <unistd.h>

#include <catch2/catch.hpp>
#include <filesystem>

#include "graphgen/job_graph.h"

namespace prism::graphgen::testing {

namespace pg = prism::graph;

std::string SmallJobYaml(const std::string& parallel, const std::string& extra_model) {
  return "name: t\n"
         "model: {layers: 8, hidden: 1024, heads: 16, seq_len: 1024, vocab: 32768" +
         (extra_model.empty() ? std::string() : ", " + extra_model) +
         "}\n"
         "parallel: " + parallel + "\n"
         "cluster: {gpus_per_node: 8}\n";
}

JobSpec SpecOf(const std::string& yaml) {
  auto spec = ParseJobSpec(yaml);
  INFO(yaml);
  REQUIRE(spec.ok());
  return *spec;
}

pg::Graph GraphOf(const std::string& yaml) {
  auto g = GenerateJobGraph(SpecOf(yaml));
  REQUIRE(g.ok());
  return *std::move(g);
}

pg::Graph GraphOfFile(const std::string& path) {
  auto spec = ParseJobSpecFile(path);
  INFO(path << ": " << spec.status().message());
  REQUIRE(spec.ok());
  auto g = GenerateJobGraph(*spec);
  REQUIRE(g.ok());
  return *std::move(g);
}

std::vector<std::vector<uint32_t>> MembersOf(const pg::Graph& g, const std::string& slot) {
  std::vector<std::vector<uint32_t>> out;
  const std::string prefix = slot + "[";
  for (const auto& c : g.communicators())
    if (c.name().rfind(prefix, 0) == 0) out.emplace_back(c.members().begin(), c.members().end());
  return out;
}

std::string LabelOf(const pg::Op& op) {
  if (op.has_collective()) return op.collective().label();
  if (op.has_send()) return op.send().label();
  if (op.has_recv()) return op.recv().label();
  if (op.has_compute()) return op.compute().label();
  return "";
}

std::string SlotOf(const pg::Program& p, const pg::Op& op) {
  uint32_t s = UINT32_MAX;
  if (op.has_collective()) s = op.collective().comm_slot();
  if (op.has_send()) s = op.send().comm_slot();
  if (op.has_recv()) s = op.recv().comm_slot();
  if (s == UINT32_MAX || s >= static_cast<uint32_t>(p.comm_slot_names_size())) return "";
  return p.comm_slot_names(s);
}

Tally TallyOps(const pg::Program& p, const std::function<bool(const pg::Op&)>& pred) {
  Tally t;
  for (const auto& op : p.ops()) {
    if (!pred(op)) continue;
    ++t.count;
    if (op.has_collective()) t.bytes += op.collective().bytes();
    if (op.has_send()) t.bytes += op.send().bytes();
    if (op.has_recv()) t.bytes += op.recv().bytes();
  }
  return t;
}

std::string TempPath(const std::string& name) {
  const auto dir = std::filesystem::temp_directory_path() / ("prism-graphgen-test-" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  const auto p = dir / name;
  std::filesystem::remove(p);
  return p.string();
}

}  // namespace prism::graphgen::testing
