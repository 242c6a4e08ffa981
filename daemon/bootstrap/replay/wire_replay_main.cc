// prism-wire-replay: replays wire fixtures (test/fixtures/wire/<name>/ with
// manifest.json + recording) against a fresh prismd bootstrap service and
// prints the first divergence. Exit 0 = every fixture matched.
//   prism-wire-replay test/fixtures/wire/fake-n8-r0
//   prism-wire-replay --all test/fixtures/wire
#include <cstdio>
#include <string>
#include <vector>

#include "CLI/CLI.hpp"
#include "daemon/bootstrap/replay/wire_replay.h"
#include "spdlog/spdlog.h"

int main(int argc, char** argv) {
  CLI::App app{"Replay prismd wire recordings (fixture dirs with manifest.json)"};
  std::vector<std::string> dirs;
  bool all = false;
  int stall_ms = 15000;
  app.add_option("dirs", dirs, "fixture directories (or roots with --all)")->required();
  app.add_flag("--all", all, "replay every fixture directory under each given root");
  app.add_option("--stall-timeout-ms", stall_ms, "fail after this long without progress");
  std::string log_level = "warn";
  app.add_option("--log-level", log_level, "prismd log level (debug, info, warn, ...)");
  CLI11_PARSE(app, argc, argv);
  spdlog::set_level(spdlog::level::from_str(log_level));
  std::vector<std::string> fixtures;
  for (const std::string& d : dirs) {
    if (!all) {
      fixtures.push_back(d);
      continue;
    }
    for (const std::string& f : prism::bootstrap::ListWireFixtures(d)) fixtures.push_back(f);
  }
  if (fixtures.empty()) {
    std::fprintf(stderr, "no fixture directories (with manifest.json) found\n");
    return 2;
  }
  int failures = 0;
  prism::bootstrap::ReplayOptions options;
  options.stall_timeout_ms = stall_ms;
  for (const std::string& f : fixtures) {
    auto r = prism::bootstrap::ReplayFixture(f, options);
    if (!r.ok()) {
      std::printf("%s: ERROR %s\n", f.c_str(), std::string(r.status().message()).c_str());
      ++failures;
      continue;
    }
    std::printf("%s: %s: %zu connections, %zu events, %llu prismd bytes exact, %llu renamed "
                "(%zu values), %llu real bytes played\n",
                f.c_str(), r->matched ? "MATCH" : "DIVERGED", r->connections, r->events,
                static_cast<unsigned long long>(r->bytes_compared),
                static_cast<unsigned long long>(r->bytes_renamed), r->renamed_values,
                static_cast<unsigned long long>(r->bytes_sent));
    if (!r->matched) {
      std::printf("  first divergence: %s\n", r->divergence.c_str());
      ++failures;
    }
  }
  return failures == 0 ? 0 : 1;
}
