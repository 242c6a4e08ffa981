#include "graphgen/cli.h"

#include <algorithm>
#include <optional>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <new>
#include <fstream>
#include <sstream>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

#include "CLI/CLI.hpp"
#include "common/cli_number.h"
#include "graphgen/capture_recording.h"
#include "graphgen/chakra_et.h"
#include "graphgen/extrapolate.h"
#include "graphgen/collective_graph.h"
#include "graphgen/fidelity_graph.h"
#include "graphgen/inspect.h"
#include "graphgen/job_graph.h"
#include "graphgen/job_spec.h"
#include "graphgen/signal_cleanup.h"
#include "graphgen/yaml_reader.h"
#include "proto/graph_file.h"
#include "proto/graph_rules.h"
#include "proto/graph_topology.h"

namespace prism::graphgen {
namespace {

int Fail(std::ostream& err, int code, const absl::Status& s) {
  err << "prism-graphgen: error: " << s.message() << "\n";
  return code;
}

// Beyond a limit of common/limits.h: prismd would refuse the graph, so it is
// not written (the input asked for too much).
int BeyondLimits(std::ostream& err, const absl::Status& s) {
  return Fail(err, kExitBadInput, absl::OutOfRangeError(absl::StrCat(
      "the requested graph is beyond what prismd accepts: ", std::string(s.message()))));
}

// The output's folder must exist: said by its own name (after the input is
// known good: bad input is reported first).
absl::Status CheckOutputFolder(const std::string& path) {
  const std::filesystem::path folder = std::filesystem::path(path).parent_path();
  if (folder.empty()) return absl::OkStatus();
  std::error_code ec;
  if (std::filesystem::is_directory(folder, ec)) return absl::OkStatus();
  return absl::NotFoundError(absl::StrCat("-o ", path, ": folder ", folder.string(),
                                          std::filesystem::exists(folder, ec) ? " is not a folder" : " does not exist",
                                          "; create it or pass another path"));
}

int WriteGraph(const prism::graph::Graph& g, const std::string& path, std::ostream& out, std::ostream& err) {
  if (auto s = CheckOutputFolder(path); !s.ok()) return Fail(err, kExitWriteFailed, s);
  // Rules: checked from the rules (the send/recv pairs by whoever reads the file).
  if (auto s = prism::graph::ValidateGraphRules(g); !s.ok()) {
    if (absl::IsOutOfRange(s)) return BeyondLimits(err, s);
    return Fail(err, kExitWriteFailed, absl::InternalError(absl::StrCat("generated graph is invalid (a bug): ",
                                                                        std::string(s.message()))));
  }
  absl::Status written;
  {
    ScopedTemporaryFile cleanup(prism::graph::TemporaryPathFor(path));  // removed if a signal ends us mid-write
    written = prism::graph::WriteGraphFile(g, path);
  }
  if (absl::IsOutOfRange(written)) return BeyondLimits(err, written);
  if (!written.ok()) return Fail(err, kExitWriteFailed, written);
  uint32_t ranks = 0, communicators = 0;
  if (g.has_rules()) {
    ranks = prism::graph::RulesRankCount(g.rules());
    communicators = prism::graph::RulesCommunicatorCount(g.rules());
  } else if (const auto topology = prism::graph::Topology::Of(g); topology.ok()) {  // ValidateGraph passed
    ranks = topology->ranks();
    communicators = topology->communicators();
  }
  out << "wrote " << path << ": " << ranks << " ranks, " << g.programs_size() << " programs, " << communicators
      << " communicators\n";
  return kExitOk;
}

int RunJob(const std::string& job_path, const std::string& output, std::ostream& out, std::ostream& err) {
  auto spec = ParseJobSpecFile(job_path);
  if (!spec.ok()) return Fail(err, kExitBadInput, spec.status());
  auto graph = GenerateJobGraph(*spec, JobGraphForm::kRules);  // format 3: a job of any size as a few rules
  if (!graph.ok()) return Fail(err, kExitBadInput, graph.status());
  const int rc = WriteGraph(*graph, output, out, err);
  if (rc != kExitOk) return rc;
  // The graph is written either way (a simulation of it is still telling);
  // a peak over the GPU's memory is said on stderr and in inspect's JSON.
  if (const std::string w = MemoryWarning(InspectClasses(*graph)); !w.empty())
    err << "prism-graphgen: warning: memory: " << w << "\n";
  return rc;
}

int RunCollective(CollectiveJob job, const std::string& bytes, const std::string& output, std::ostream& out,
                  std::ostream& err) {
  auto size = ParseByteSize(bytes);
  if (!size.ok()) return Fail(err, kExitBadInput, size.status());
  job.bytes = *size;
  auto graph = GenerateCollectiveGraph(job);
  if (!graph.ok()) return Fail(err, kExitBadInput, graph.status());
  return WriteGraph(*graph, output, out, err);
}

int RunFidelity(const std::string& spec_path, const std::string& output, std::ostream& out, std::ostream& err) {
  auto spec = ParseFidelitySpecFile(spec_path);
  if (!spec.ok()) return Fail(err, kExitBadInput, spec.status());
  auto graph = GenerateFidelityGraph(*spec);
  if (!graph.ok()) return Fail(err, kExitBadInput, graph.status());
  return WriteGraph(*graph, output, out, err);
}

int RunInspect(const std::string& path, bool as_json, std::optional<uint32_t> ops_rank, std::ostream& out,
               std::ostream& err) {
  auto graph = prism::graph::ReadGraphFile(path);
  if (!graph.ok()) return Fail(err, kExitBadInput, graph.status());
  if (ops_rank) {
    auto program = RankProgram(*graph, *ops_rank);
    if (!program.ok()) return Fail(err, kExitBadInput, program.status());
    out << program->dump() << "\n";
  } else if (as_json) {
    out << InspectGraph(*graph, true).dump(1) << "\n";
  } else {
    out << FormatInspectText(InspectGraph(*graph, false));
  }
  return kExitOk;
}

int RunChakraExport(const std::string& graph_path, const std::string& dir, const std::string& name, std::ostream& out,
                    std::ostream& err) {
  auto graph = prism::graph::ReadGraphFile(graph_path);
  if (!graph.ok()) return Fail(err, kExitBadInput, graph.status());
  const std::string set_name = name.empty() ? "prism" : name;
  if (auto s = chakra::WriteTraceSet(*graph, dir, set_name); !s.ok())
    return Fail(err, absl::IsInvalidArgument(s) ? kExitBadInput : kExitWriteFailed, s);
  out << "wrote " << dir << "/" << set_name << ".{0.." << graph->ranks_size() - 1 << "}.et, " << set_name
      << ".comm_groups.json, " << set_name << ".prism.json: " << graph->ranks_size() << " ranks\n";
  return kExitOk;
}

int RunChakraImport(const std::string& dir, const std::string& name, const std::string& output, std::ostream& out,
                    std::ostream& err) {
  std::string set_name = name;
  if (set_name.empty()) {
    auto found = chakra::FindTraceSetName(dir);
    if (!found.ok()) return Fail(err, kExitBadInput, found.status());
    set_name = *found;
  }
  auto graph = chakra::ReadTraceSet(dir, set_name);
  if (!graph.ok()) return Fail(err, kExitBadInput, graph.status());
  return WriteGraph(*graph, output, out, err);
}

// A file that starts with the graph file magic.
bool IsGraphFile(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  char magic[sizeof(prism::graph::kGraphMagic)] = {};
  f.read(magic, sizeof(magic));
  return f && std::equal(magic, magic + sizeof(magic), prism::graph::kGraphMagic);
}

// "0,512,3" -> ranks.
absl::StatusOr<std::vector<uint32_t>> ParseRankList(const std::string& text) {
  std::vector<uint32_t> ranks;
  std::stringstream in(text);
  std::string item;
  while (std::getline(in, item, ',')) {
    char* end = nullptr;
    const unsigned long long v = std::strtoull(item.c_str(), &end, 10);
    if (item.empty() || *end != '\0' || item[0] == '-' || v >= (1ull << 32))
      return absl::InvalidArgumentError(absl::StrCat("--ranks: '", Excerpt(item), "' is not a rank; give e.g. 0,512"));
    ranks.push_back(static_cast<uint32_t>(v));
  }
  if (ranks.empty()) return absl::InvalidArgumentError("--ranks: no rank given; give e.g. 0,512");
  return ranks;
}

int RunCaptureFromGraph(const std::string& graph_path, const std::string& ranks_text, const std::string& dir,
                        std::ostream& out, std::ostream& err) {
  auto graph = prism::graph::ReadGraphFile(graph_path);
  if (!graph.ok()) return Fail(err, kExitBadInput, graph.status());
  auto ranks = ParseRankList(ranks_text);
  if (!ranks.ok()) return Fail(err, kExitBadInput, ranks.status());
  std::vector<std::pair<std::string, std::string>> files;
  for (uint32_t r : *ranks) {
    auto rec = RecordingFromGraph(*graph, r);
    if (!rec.ok()) return Fail(err, kExitBadInput, rec.status());
    files.emplace_back(absl::StrCat("rank-", r, ".capture.jsonl"), EncodeRecording(*rec));
  }
  std::error_code ec;
  if (std::filesystem::exists(dir, ec))
    return Fail(err, kExitWriteFailed, absl::AlreadyExistsError(absl::StrCat("-o ", dir, ": already exists; remove "
                                                                             "it or name a new folder")));
  if (!std::filesystem::create_directory(dir, ec))
    return Fail(err, kExitWriteFailed, absl::UnavailableError(absl::StrCat("cannot create folder ", dir, ": ",
                                                                           ec.message())));
  for (const auto& [name, text] : files) {
    std::ofstream f(dir + "/" + name, std::ios::binary);
    f << text;
    f.close();
    if (!f) return Fail(err, kExitWriteFailed, absl::UnavailableError(absl::StrCat("cannot write ", dir, "/", name)));
  }
  out << "wrote " << files.size() << " recording" << (files.size() == 1 ? "" : "s") << " into " << dir << "\n";
  return kExitOk;
}

// Every *.capture.jsonl of a folder, or the file itself.
absl::StatusOr<std::vector<std::string>> RecordingPaths(const std::vector<std::string>& inputs) {
  std::vector<std::string> paths;
  for (const std::string& in : inputs) {
    std::error_code ec;
    if (!std::filesystem::is_directory(in, ec)) {
      paths.push_back(in);
      continue;
    }
    std::vector<std::string> found;
    for (const auto& e : std::filesystem::directory_iterator(in, ec))
      if (absl::EndsWith(e.path().filename().string(), ".capture.jsonl")) found.push_back(e.path().string());
    if (found.empty())
      return absl::NotFoundError(absl::StrCat(in, ": no recording (*.capture.jsonl) in this folder"));
    std::sort(found.begin(), found.end());
    paths.insert(paths.end(), found.begin(), found.end());
  }
  return paths;
}

int RunExtrapolate(const std::vector<std::string>& inputs, const std::string& cluster_file, const std::string& name,
                   const std::string& output, std::ostream& out, std::ostream& err) {
  auto paths = RecordingPaths(inputs);
  if (!paths.ok()) return Fail(err, kExitBadInput, paths.status());
  ExtrapolationOptions options;
  if (!name.empty()) options.name = name;
  std::optional<prism::graph::Cluster> graph_cluster;  // --cluster naming a graph file: its cluster as it is
  if (!cluster_file.empty()) {
    if (IsGraphFile(cluster_file)) {
      auto g = prism::graph::ReadGraphFile(cluster_file);
      if (!g.ok()) return Fail(err, kExitBadInput, g.status());
      graph_cluster = g->cluster();
    } else {
      auto cluster = ParseClusterFile(cluster_file);
      if (!cluster.ok()) return Fail(err, kExitBadInput, cluster.status());
      options.cluster = *cluster;
    }
  }
  std::vector<Recording> recordings;
  for (const std::string& path : *paths) {
    auto rec = ReadRecordingFile(path);
    if (!rec.ok()) return Fail(err, kExitBadInput, rec.status());
    recordings.push_back(std::move(*rec));
  }
  auto result = Extrapolate(std::move(recordings), options);
  if (!result.ok()) return Fail(err, kExitBadInput, result.status());
  if (graph_cluster) {
    const uint64_t world = static_cast<uint64_t>(result->graph.ranks_size()), gpn = graph_cluster->gpus_per_node();
    if (graph_cluster->nodes() != (world + gpn - 1) / gpn)
      return Fail(err, kExitBadInput, absl::InvalidArgumentError(absl::StrCat(
          "--cluster ", cluster_file, ": its cluster has ", graph_cluster->nodes(), " nodes of ", gpn,
          " GPUs; the recordings' ", world, " ranks need ", (world + gpn - 1) / gpn, " (give a graph of this world "
          "size, or a YAML file's cluster: keys)")));
    // NCCL's step cost measured on the recorded ranks wins over the cluster graph's.
    prism::graph::Cluster cluster = *graph_cluster;
    if (result->graph.cluster().nccl_step_costs_size() > 0)
      *cluster.mutable_nccl_step_costs() = result->graph.cluster().nccl_step_costs();
    *result->graph.mutable_cluster() = cluster;
    for (auto& rank : *result->graph.mutable_ranks()) {
      rank.set_node(rank.rank() / graph_cluster->gpus_per_node());
      rank.set_local_gpu(rank.rank() % graph_cluster->gpus_per_node());
    }
  }
  const int rc = WriteGraph(result->graph, output, out, err);
  if (rc == kExitOk) out << result->Summary();
  return rc;
}

// Edit distance (insertions, deletions, substitutions, adjacent swaps).
size_t EditDistance(const std::string& a, const std::string& b) {
  std::vector<std::vector<size_t>> d(a.size() + 1, std::vector<size_t>(b.size() + 1, 0));
  for (size_t i = 0; i <= a.size(); ++i) d[i][0] = i;
  for (size_t j = 0; j <= b.size(); ++j) d[0][j] = j;
  for (size_t i = 1; i <= a.size(); ++i)
    for (size_t j = 1; j <= b.size(); ++j) {
      d[i][j] = std::min({d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1)});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1])
        d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
    }
  return d[a.size()][b.size()];
}

// "unknown command 'jbo'; did you mean 'job'?" when the first word is not a
// subcommand; empty when it is one (or is a flag).
std::string UnknownCommand(const CLI::App& app, const std::vector<std::string>& args) {
  if (args.size() < 2 || args[1].empty() || args[1][0] == '-') return "";
  std::string names, nearest;
  size_t best = SIZE_MAX;
  for (const CLI::App* sub : app.get_subcommands([](const CLI::App*) { return true; })) {
    if (sub->get_name() == args[1]) return "";
    absl::StrAppend(&names, names.empty() ? "" : ", ", sub->get_name());
    const size_t d = EditDistance(args[1], sub->get_name());
    if (d < best) best = d, nearest = sub->get_name();
  }
  const std::string guess = best <= 2 ? absl::StrCat("; did you mean '", nearest, "'?") : std::string(".");
  return absl::StrCat("unknown command '", Excerpt(args[1]), "'", guess, " Commands: ", names);
}

}  // namespace

int RunGraphgenCli(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  CLI::App app{"prism-graphgen: full-scale execution graphs for Prism (see docs/graphgen.md)", "prism-graphgen"};
  app.require_subcommand(1);

  std::string job_path, job_output;
  auto* job = app.add_subcommand("job", "graph of a Megatron-style training job described in YAML");
  job->add_option("job_file", job_path, "job description (YAML)")->required();
  job->add_option("-o,--output", job_output, "graph file to write")->required();

  CollectiveJob coll;
  std::string coll_bytes, coll_output;
  auto* c = app.add_subcommand("collective", "nccl-tests-like graph: one collective repeated on all ranks");
  const CLI::Validator number = NonNegativeNumber();
  c->add_option("--op", coll.op, "allreduce|allgather|reducescatter|alltoall|broadcast|sendrecv")->required();
  c->add_option("--bytes", coll_bytes,
                 "buffer size in bytes (NCCL convention): a whole number, optionally with K, M or G (also written "
                 "KiB/MiB/GiB or KB/MB/GB; all powers of 1024), e.g. 4096, 64K, 1MiB")->required();
  c->add_option("--ranks", coll.ranks, "number of ranks")->required()->check(number);
  c->add_option("--gpus-per-node", coll.gpus_per_node, "GPUs per node (default 1)")->check(number);
  c->add_option("--nics-per-node", coll.nics_per_node, "NICs per node (default 1)")->check(number);
  c->add_option("--nic-gbps", coll.nic_gbps, "NIC bandwidth, Gbit/s (default 400)")->check(number);
  c->add_option("--nic-latency-us", coll.nic_latency_us, "NIC latency, microseconds (default 5)")->check(number);
  c->add_option("--nvlink-gbps", coll.nvlink_gbps, "NVLink bandwidth per GPU, Gbit/s (default 3600)")->check(number);
  c->add_option("--nvlink-latency-us", coll.nvlink_latency_us, "NVLink latency, microseconds (default 1)")
      ->check(number);
  c->add_option("--algo", coll.algo, "ring|tree|pat (default: the network model chooses: what NCCL would)");
  c->add_option("--iterations", coll.iterations, "repetitions (default 20)")->check(number);
  c->add_option("--name", coll.name, "job name");
  c->add_option("--subgroups", coll.subgroup_size,
                "also create TP-like groups of this many consecutive ranks and the matching DP-like groups "
                "(splits of the world, for control-plane tests)")
      ->check(number);
  c->add_option("--max-subgroups", coll.max_subgroups, "create at most this many groups of each kind (0 = all)")
      ->check(number);
  c->add_option("-o,--output", coll_output, "graph file to write")->required();

  std::string fidelity_path, fidelity_output;
  auto* fid = app.add_subcommand("fidelity", "graph of a fidelity experiment (bench/fidelity spec: synthetic step "
                                             "or collective sweep)");
  fid->add_option("spec_file", fidelity_path, "experiment spec (YAML, docs/timing.md)")->required();
  fid->add_option("-o,--output", fidelity_output, "graph file to write")->required();

  std::string inspect_path;
  bool inspect_json = false;
  auto* ins = app.add_subcommand("inspect", "summarise a graph file");
  ins->add_option("graph_file", inspect_path, "graph file")->required();
  ins->add_flag("--json", inspect_json, "machine-readable output (docs/inspect-json.md)");
  std::optional<uint32_t> ops_rank;
  ins->add_option("--ops", ops_rank, "print the program of this rank, op by op, as JSON (docs/inspect-json.md)");

  std::string export_graph, export_dir, export_name;
  auto* cexp = app.add_subcommand("chakra-export", "write a graph as Chakra execution traces, one per rank "
                                                   "(docs/chakra.md)");
  cexp->add_option("graph_file", export_graph, "graph file")->required();
  cexp->add_option("-o,--output", export_dir, "folder to create (must not exist)")->required();
  cexp->add_option("--name", export_name, "trace set name: files NAME.<rank>.et (default prism)");

  std::string import_dir, import_name, import_output;
  auto* cimp = app.add_subcommand("chakra-import", "read Chakra execution traces (one per rank) into a graph "
                                                   "(docs/chakra.md)");
  cimp->add_option("trace_folder", import_dir, "folder holding NAME.<rank>.et")->required();
  cimp->add_option("--name", import_name, "trace set name (default: the one NAME.0.et in the folder)");
  cimp->add_option("-o,--output", import_output, "graph file to write")->required();

  std::string view_graph, view_ranks, view_dir;
  auto* cview = app.add_subcommand("capture-from-graph", "write what a capture would record on some ranks if the "
                                                         "program ran this graph (docs/capture.md)");
  cview->add_option("graph_file", view_graph, "graph file")->required();
  cview->add_option("--ranks", view_ranks, "ranks to record, e.g. 0,512")->required();
  cview->add_option("-o,--output", view_dir, "folder to create for rank-<r>.capture.jsonl")->required();

  std::vector<std::string> extrapolate_inputs;
  std::string extrapolate_cluster, extrapolate_name, extrapolate_output;
  auto* extra = app.add_subcommand("extrapolate", "the full graph from the capture recordings of a slice "
                                                  "(docs/capture.md)");
  extra->add_option("recordings", extrapolate_inputs, "recording files or folders of *.capture.jsonl")->required();
  extra->add_option("--cluster", extrapolate_cluster, "the target's cluster: a graph file (its cluster), or a YAML "
                                                      "file's cluster: keys (a job file will do); default: the "
                                                      "job-file defaults");
  extra->add_option("--name", extrapolate_name, "job name (default captured)");
  extra->add_option("-o,--output", extrapolate_output, "graph file to write")->required();

  std::vector<std::string> rest(args.begin() + (args.empty() ? 0 : 1), args.end());
  std::reverse(rest.begin(), rest.end());  // CLI11 parses a reversed vector
  try {
    app.parse(rest);
  } catch (const CLI::CallForHelp&) {
    out << app.help();
    return kExitOk;
  } catch (const CLI::CallForAllHelp&) {
    out << app.help("", CLI::AppFormatMode::All);
    return kExitOk;
  } catch (const CLI::ParseError& e) {
    if (const std::string unknown = UnknownCommand(app, args); !unknown.empty()) {
      err << "prism-graphgen: error: " << unknown << "\n";
      return kExitBadInput;
    }
    err << "prism-graphgen: error: " << e.what() << "\n";
    if (app.get_subcommands().empty()) err << app.help();
    else err << "run 'prism-graphgen " << app.get_subcommands().front()->get_name() << " --help' for the options\n";
    return kExitBadInput;
  }
  const std::string& output = job->parsed()    ? job_output
                              : fid->parsed()  ? fidelity_output
                              : cimp->parsed() ? import_output
                              : extra->parsed() ? extrapolate_output
                                               : coll_output;
  try {
    if (job->parsed()) return RunJob(job_path, job_output, out, err);
    if (c->parsed()) return RunCollective(coll, coll_bytes, coll_output, out, err);
    if (fid->parsed()) return RunFidelity(fidelity_path, fidelity_output, out, err);
    if (cexp->parsed()) return RunChakraExport(export_graph, export_dir, export_name, out, err);
    if (cimp->parsed()) return RunChakraImport(import_dir, import_name, import_output, out, err);
    if (cview->parsed()) return RunCaptureFromGraph(view_graph, view_ranks, view_dir, out, err);
    if (extra->parsed())
      return RunExtrapolate(extrapolate_inputs, extrapolate_cluster, extrapolate_name, extrapolate_output, out, err);
    return RunInspect(inspect_path, inspect_json, ops_rank, out, err);
  } catch (const std::bad_alloc&) {
    if (!output.empty()) std::remove(prism::graph::TemporaryPathFor(output).c_str());
    return Fail(err, kExitBadInput, absl::ResourceExhaustedError(
        "out of memory while building or writing the graph: the job asks for more than this machine can "
        "hold; make it smaller (fewer layers, microbatches or ranks) or run where more memory is available"));
  }
}

}  // namespace prism::graphgen
