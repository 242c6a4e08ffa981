// prism-graphgen against hostile but fair inputs (issue 12, item 7): devices,
// directories and huge files, flags that wrap or overflow, duplicate YAML
// keys, file contents echoed into errors, allocation failure, signals while
// writing; and the limits it shares with prismd (item 8).
#include <fcntl.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "common/cli_number.h"
#include "common/limits.h"
#include "graphgen/cli.h"
#include "graphgen/collective_graph.h"
#include "graphgen/job_spec.h"
#include "test/graphgen_test_util.h"

using prism::graphgen::testing::TempPath;

namespace {

const char* const kGood = prism::graphgen::testing::kValidJobYaml;

struct Outcome {
  int code = 0;
  std::string err;
  bool output_exists = false;
};

Outcome Cli(std::vector<std::string> args) {
  const std::string out = TempPath("hostile.graph");
  args.insert(args.begin(), "prism-graphgen");
  args.push_back("-o");
  args.push_back(out);
  std::ostringstream o, e;
  Outcome r;
  r.code = prism::graphgen::RunGraphgenCli(args, o, e);
  r.err = e.str();
  r.output_exists = std::filesystem::exists(out);
  std::filesystem::remove(out);
  return r;
}

Outcome Job(const std::string& yaml) {
  const std::string job = TempPath("hostile-job.yaml");
  std::ofstream(job) << yaml;
  return Cli({"job", job});
}

// Runs the prism-graphgen binary under `sh -c` (for resource limits); returns
// its wait status and stderr.
std::pair<int, std::string> Binary(const std::string& shell_prefix, const std::string& args) {
  const std::string err = TempPath("binary.err");
  const std::string cmd = shell_prefix + " " + PRISM_GRAPHGEN_PATH + " " + args + " >/dev/null 2>" + err;
  const int status = std::system(("sh -c '" + cmd + "'").c_str());
  std::ifstream f(err);
  return {status, std::string((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>())};
}

bool HasControlBytes(const std::string& s) {
  for (unsigned char c : s)
    if ((c < 0x20 && c != '\n') || c >= 0x7f) return true;
  return false;
}

}  // namespace

TEST_CASE("devices and FIFOs are refused as job files and compute tables, not read forever",
          "[graphgen][hostile]") {
  // Under a 1 GiB address-space limit: reading /dev/zero into memory aborted before.
  auto [status, err] = Binary("ulimit -v 1048576;", "job /dev/zero -o /dev/null/never");
  INFO(err);
  CHECK(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == prism::graphgen::kExitBadInput);
  CHECK(err.find("not a regular file") != std::string::npos);
  const std::string job = TempPath("zero-table.yaml");
  std::ofstream(job) << kGood << "compute_table: /dev/zero\n";
  std::tie(status, err) = Binary("ulimit -v 1048576;", "job " + job + " -o /dev/null/never");
  INFO(err);
  CHECK(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == prism::graphgen::kExitBadInput);
  CHECK(err.find("compute_table") != std::string::npos);
  CHECK(err.find("not a regular file") != std::string::npos);
}

TEST_CASE("a directory is reported as a directory (job file and compute table)", "[graphgen][hostile]") {
  const std::string dir = std::filesystem::path(TempPath("x")).parent_path().string();
  Outcome r = Cli({"job", dir});
  CHECK(r.code == prism::graphgen::kExitBadInput);
  CHECK(r.err.find("is a directory") != std::string::npos);
  r = Job(std::string(kGood) + "compute_table: " + dir + "\n");
  INFO(r.err);
  CHECK(r.code == prism::graphgen::kExitBadInput);
  CHECK(r.err.find("compute_table") != std::string::npos);
  CHECK(r.err.find("is a directory") != std::string::npos);
  CHECK_FALSE(r.output_exists);
}

TEST_CASE("oversized job files are refused before they are read", "[graphgen][hostile]") {
  const std::string job = TempPath("huge.yaml");
  {
    std::ofstream f(job);
    f << kGood;
  }
  std::filesystem::resize_file(job, prism::limits::kMaxInputFileBytes + 1);
  const Outcome r = Cli({"job", job});
  CHECK(r.code == prism::graphgen::kExitBadInput);
  CHECK(r.err.find("16 MiB") != std::string::npos);
}

TEST_CASE("file contents are not echoed into errors (control bytes, long lines)", "[graphgen][hostile]") {
  const std::string secret(200, 'S');
  Outcome r = Job(std::string(kGood) + "world: " + secret + "\n");
  INFO(r.err);
  CHECK(r.code == prism::graphgen::kExitBadInput);
  CHECK(r.err.find("world") != std::string::npos);
  CHECK(r.err.find(secret.substr(0, 64)) == std::string::npos);
  r = Job(std::string(kGood) + "\x1b]0;owned\x07: 1\n");
  INFO(r.err);
  CHECK(r.code == prism::graphgen::kExitBadInput);
  CHECK_FALSE(HasControlBytes(r.err));
  const std::string binary = TempPath("binary.yaml");
  std::ofstream(binary) << "a: \"\\\x1b[2J\"\n";  // yaml-cpp quotes the bad escape character
  r = Cli({"job", binary});
  CHECK(r.code == prism::graphgen::kExitBadInput);
  CHECK_FALSE(HasControlBytes(r.err));
}

TEST_CASE("duplicate YAML keys are refused, not silently resolved", "[graphgen][hostile]") {
  Outcome r = Job(std::string(kGood) + "name: again\n");
  INFO(r.err);
  CHECK(r.code == prism::graphgen::kExitBadInput);
  CHECK(r.err.find("name") != std::string::npos);
  CHECK(r.err.find("twice") != std::string::npos);
  std::string nested = kGood;
  nested.replace(nested.find("tp: 2, "), 7, "tp: 2, tp: 4, ");
  r = Job(nested);
  INFO(r.err);
  CHECK(r.code == prism::graphgen::kExitBadInput);
  CHECK(r.err.find("parallel.tp") != std::string::npos);
  CHECK(r.err.find("twice") != std::string::npos);
}

TEST_CASE("nested YAML aliases are refused, not expanded for ever", "[graphgen][hostile]") {
  // Each line holds ten of the one before: 10^9 nodes from about 400 bytes.
  std::string bomb = "a: &a [x, x, x, x, x, x, x, x, x, x]\n";
  for (char c = 'b'; c <= 'i'; ++c) {
    const std::string prev = std::string("*") + static_cast<char>(c - 1);
    bomb += std::string(1, c) + ": &" + std::string(1, c) + " [" + prev;
    for (int i = 1; i < 10; ++i) bomb += ", " + prev;
    bomb += "]\n";
  }
  Outcome r = Job(std::string(kGood) + bomb);
  INFO(r.err);
  CHECK(r.code == prism::graphgen::kExitBadInput);
  CHECK(r.err.find("100000 nodes") != std::string::npos);
}

TEST_CASE("collective flags that would wrap or overflow are refused", "[graphgen][hostile]") {
  const std::vector<std::string> base = {"collective", "--op", "allreduce", "--bytes", "1M", "--ranks", "8"};
  auto with = [&](std::vector<std::string> extra) {
    std::vector<std::string> args = base;
    args.insert(args.end(), extra.begin(), extra.end());
    return Cli(args);
  };
  for (const auto& [flag, value] : std::vector<std::pair<std::string, std::string>>{
           {"--nic-gbps", "-5"}, {"--nic-gbps", "99999999999"}, {"--nvlink-gbps", "-1"},
           {"--nic-latency-us", "1e300"}, {"--nic-latency-us", "-1"}, {"--nvlink-latency-us", "1e30"},
           {"--nic-latency-us", "nan"}, {"--ranks", "-8"}, {"--gpus-per-node", "-1"}, {"--iterations", "-3"}}) {
    const Outcome r = with({flag, value});
    INFO(flag << " " << value << ": " << r.err);
    CHECK(r.code == prism::graphgen::kExitBadInput);
    CHECK(r.err.find(flag) != std::string::npos);
    CHECK_FALSE(r.output_exists);
  }
  CHECK(with({"--nic-latency-us", "1000000", "--nic-gbps", "1000000"}).code == prism::graphgen::kExitOk);
}

TEST_CASE("job figures that would overflow when converted are refused", "[graphgen][hostile]") {
  std::string fast = kGood;
  fast.replace(fast.find("gbps: 400"), 9, "gbps: 9000000000000000000");
  Outcome r = Job(fast);
  INFO(r.err);
  CHECK(r.code == prism::graphgen::kExitBadInput);
  CHECK(r.err.find("cluster.nic.gbps") != std::string::npos);
  std::string flops = kGood;
  flops.replace(flops.find("bf16_tflops: 989"), 16, "bf16_tflops: 9000000000000000000");
  r = Job(flops);
  INFO(r.err);
  CHECK(r.code == prism::graphgen::kExitBadInput);
  CHECK(r.err.find("bf16_tflops") != std::string::npos);
}

TEST_CASE("graphs beyond prismd's limits are refused by graphgen, not written", "[graphgen][hostile][limits]") {
  prism::graphgen::CollectiveJob j;
  j.op = "allreduce";
  j.bytes = 1024;
  j.ranks = static_cast<uint32_t>(prism::limits::kMaxRanks + 1);
  auto g = prism::graphgen::GenerateCollectiveGraph(j);
  REQUIRE_FALSE(g.ok());
  CHECK(std::string(g.status().message()).find("4194304") != std::string::npos);
  // A measured compute time beyond the op-duration limit: refused as input.
  const std::string table = TempPath("slow-table.yaml");
  std::ofstream(table) << "attention: {fwd_ns: 9000000000000000000, bwd_ns: 1}\n";
  const Outcome r = Job(std::string(kGood) + "compute_table: " + table + "\n");
  INFO(r.err);
  CHECK(r.code == prism::graphgen::kExitBadInput);
  CHECK(r.err.find("limit") != std::string::npos);
  CHECK_FALSE(r.output_exists);
}

TEST_CASE("running out of memory is a clear error, not an abort", "[graphgen][hostile]") {
  // 700,000 layers on 4 ranks passes the job checks; under a 1 GiB address
  // space the graph does not fit.
  const std::string job = TempPath("deep.yaml");
  std::ofstream(job) << "model: {layers: 700000, hidden: 1024, heads: 16, seq_len: 1024, vocab: 32000}\n"
                        "parallel: {tp: 1, pp: 1, dp: 4, micro_batch: 1, global_batch: 4}\n";
  const std::string out = TempPath("deep.graph");
  auto [status, err] = Binary("ulimit -v 1048576;", "job " + job + " -o " + out);
  INFO(err);
  CHECK(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == prism::graphgen::kExitBadInput);
  CHECK(err.find("out of memory") != std::string::npos);
  CHECK_FALSE(std::filesystem::exists(out));
}

TEST_CASE("a signal while the graph is written leaves no temporary file", "[graphgen][hostile]") {
  // The child may write 64 KiB (ulimit -f) of a 1 MB graph: the kernel sends
  // SIGXFSZ mid-write, as SIGTERM or ^C could come. (The temporary is created
  // exclusively, so a FIFO planted there no longer holds the writer.)
  const std::string out = TempPath("signalled.graph");
  const pid_t pid = fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    const rlimit fsize{64 << 10, 64 << 10};
    setrlimit(RLIMIT_FSIZE, &fsize);
    const int null = open("/dev/null", O_WRONLY);
    dup2(null, 1), dup2(null, 2);
    execl(PRISM_GRAPHGEN_PATH, PRISM_GRAPHGEN_PATH, "collective", "--op", "allreduce", "--bytes", "1M", "--ranks",
          "65536", "-o", out.c_str(), static_cast<char*>(nullptr));
    _exit(127);
  }
  int status = 0;
  REQUIRE(waitpid(pid, &status, 0) == pid);
  CHECK(WIFSIGNALED(status));
  CHECK(WTERMSIG(status) == SIGXFSZ);
  const std::string tmp = out + ".tmp." + std::to_string(pid);
  struct stat st {};
  CHECK(lstat(tmp.c_str(), &st) != 0);  // removed by prism-graphgen's handler
  CHECK_FALSE(std::filesystem::exists(out));
  std::remove(tmp.c_str());
}

TEST_CASE("names that are not UTF-8 are refused: the graph would not read back", "[graphgen][hostile]") {
  Outcome r = Cli({"collective", "--op", "allreduce", "--bytes", "1M", "--ranks", "8", "--name", "bad\xff\xfe"});
  INFO(r.err);
  CHECK(r.code == prism::graphgen::kExitBadInput);
  CHECK(r.err.find("--name") != std::string::npos);
  CHECK_FALSE(r.output_exists);
  std::string yaml = kGood;
  yaml.replace(yaml.find("name: ok"), 8, "name: \"ok\xc3\x28\"");
  r = Job(yaml);
  INFO(r.err);
  CHECK(r.code == prism::graphgen::kExitBadInput);
  CHECK(r.err.find("UTF-8") != std::string::npos);
  r = Cli({"collective", "--op", "allreduce", "--bytes", "1M", "--ranks", "8", "--name", "caf\xc3\xa9-\xe2\x82\xac"});
  CHECK(r.code == prism::graphgen::kExitOk);  // well-formed UTF-8 is fine
}

TEST_CASE("the numeric flag check prismd and prism-graphgen share refuses signs and NaN, quoting safely",
          "[graphgen][hostile]") {
  const CLI::Validator check = prism::NonNegativeNumber();
  for (std::string ok : {"0", "8", "1.5", "1e3"}) CHECK(check(ok).empty());
  for (std::string bad : {"-1", "nan", "", "8x", "-0.5"}) {
    INFO(bad);
    CHECK(check(bad).find("must be a number, zero or more") != std::string::npos);
  }
  std::string control = "\x01\x1b[2J" + std::string(40, '7') + "x";
  const std::string why = check(control);
  CHECK(why.find('\x1b') == std::string::npos);
  CHECK(why.find("??[2J") != std::string::npos);
  CHECK(why.find("...") != std::string::npos);
}
