#include "graphgen/cli.h"

#include <algorithm>
#include <optional>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <new>
#include <sstream>

#include "absl/strings/str_cat.h"

#include "CLI/CLI.hpp"
#include "common/cli_number.h"
#include "graphgen/collective_graph.h"
#include "graphgen/fidelity_graph.h"
#include "graphgen/inspect.h"
#include "graphgen/job_graph.h"
#include "graphgen/job_spec.h"
#include "graphgen/signal_cleanup.h"
#include "graphgen/yaml_reader.h"
#include "proto/graph_file.h"

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
  if (auto s = prism::graph::ValidateGraph(g); !s.ok()) {
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
  out << "wrote " << path << ": " << g.ranks_size() << " ranks, " << g.programs_size() << " programs, "
      << g.communicators_size() << " communicators\n";
  return kExitOk;
}

int RunJob(const std::string& job_path, const std::string& output, std::ostream& out, std::ostream& err) {
  auto spec = ParseJobSpecFile(job_path);
  if (!spec.ok()) return Fail(err, kExitBadInput, spec.status());
  auto graph = GenerateJobGraph(*spec);
  if (!graph.ok()) return Fail(err, kExitBadInput, graph.status());
  const int rc = WriteGraph(*graph, output, out, err);
  if (rc != kExitOk) return rc;
  // The graph is written either way (a simulation of it is still telling);
  // a peak over the GPU's memory is said on stderr and in inspect's JSON.
  if (const std::string w = MemoryWarning(InspectGraph(*graph, false)); !w.empty())
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
  c->add_option("--algo", coll.algo, "ring|tree (default: the network model chooses)");
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
  const std::string& output = job->parsed() ? job_output : fid->parsed() ? fidelity_output : coll_output;
  try {
    if (job->parsed()) return RunJob(job_path, job_output, out, err);
    if (c->parsed()) return RunCollective(coll, coll_bytes, coll_output, out, err);
    if (fid->parsed()) return RunFidelity(fidelity_path, fidelity_output, out, err);
    return RunInspect(inspect_path, inspect_json, ops_rank, out, err);
  } catch (const std::bad_alloc&) {
    if (!output.empty()) std::remove(prism::graph::TemporaryPathFor(output).c_str());
    return Fail(err, kExitBadInput, absl::ResourceExhaustedError(
        "out of memory while building or writing the graph: the job asks for more than this machine can "
        "hold; make it smaller (fewer layers, microbatches or ranks) or run where more memory is available"));
  }
}

}  // namespace prism::graphgen
