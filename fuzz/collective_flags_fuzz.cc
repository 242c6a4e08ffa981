// libFuzzer target: the `prism-graphgen collective` command line (CLI11
// parsing, the numeric validators, --bytes sizes, range checks, generation,
// validation and the atomic write). The input is split on whitespace into
// arguments after "prism-graphgen collective"; "-o OUT" into a private
// temporary directory is appended, and any output option the input carries
// is dropped, so that nothing is written elsewhere. A graph it writes must
// read back (ReadGraphFile), else the target traps.
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <sstream>
#include <string>
#include <vector>

#include <google/protobuf/stubs/logging.h>

#include "common/limits.h"
#include "graphgen/cli.h"
#include "proto/graph_file.h"

namespace {

// World sizes above this (but within prismd's limit) are skipped: writing a
// graph of millions of ranks takes seconds. Larger ones are kept (refused fast).
constexpr uint64_t kMaxFuzzRanks = 65536;

std::vector<std::string> Split(const std::string& text) {
  std::vector<std::string> out;
  std::string cur;
  for (char c : text) {
    if (c == ' ' || c == '\n' || c == '\t' || c == '\r') {
      if (!cur.empty()) out.push_back(cur), cur.clear();
    } else {
      cur.push_back(c);
    }
  }
  if (!cur.empty()) out.push_back(cur);
  return out;
}

bool IsOutputOption(const std::string& arg) { return arg.rfind("-o", 0) == 0 || arg.rfind("--output", 0) == 0; }

bool TooSlow(const std::vector<std::string>& args) {
  for (size_t i = 0; i + 1 < args.size(); ++i) {
    if (args[i] != "--ranks") continue;
    const unsigned long long ranks = std::strtoull(args[i + 1].c_str(), nullptr, 10);
    if (ranks > kMaxFuzzRanks && ranks <= prism::limits::kMaxRanks) return true;
  }
  return false;
}

const std::string& OutputPath() {
  static const std::string path = [] {
    const auto dir = std::filesystem::temp_directory_path() / ("prism-fuzz-collective-" + std::to_string(getpid()));
    std::filesystem::create_directories(dir);
    return (dir / "out.graph").string();
  }();
  return path;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size > 4096) return 0;
  google::protobuf::LogSilencer quiet;
  std::vector<std::string> args = {"prism-graphgen", "collective"};
  for (std::string& a : Split(std::string(reinterpret_cast<const char*>(data), size)))
    if (!IsOutputOption(a)) args.push_back(std::move(a));
  if (TooSlow(args)) return 0;
  args.push_back("-o");
  args.push_back(OutputPath());
  std::ostringstream out, err;
  const int code = prism::graphgen::RunGraphgenCli(args, out, err);
  // What prism-graphgen writes, prismd must read (exit 0 without a file: --help).
  if (code == prism::graphgen::kExitOk && std::filesystem::exists(OutputPath()) &&
      !prism::graph::ReadGraphFile(OutputPath()).ok())
    __builtin_trap();
  std::filesystem::remove(OutputPath());
  return 0;
}
