// For test/status_page_test.py: serves /, /status and /metrics (the real
// HttpEndpoint and status page) from a StatusBoard filled through every
// setter the hybrid code calls (or left empty with --empty). Prints
// "port N" once serving; stops when its standard input closes.
#include <cstdio>
#include <iostream>
#include <string>

#include "daemon/server/http_endpoint.h"
#include "daemon/server/metrics.h"
#include "daemon/server/status.h"

namespace {

void Fill(prism::server::StatusBoard& s) {
  s.SetGraph("fixture-1024", 1024, 10);
  s.SetMode("hybrid");
  s.SetState("running");
  s.SetProgress(prism::FromMilliseconds(3500), 123456, 2, prism::FromMicroseconds(2500));
  s.AddIteration(0, prism::FromMilliseconds(1500));
  s.AddIteration(1, prism::FromMilliseconds(1250));
  s.SetPluginSessions(3);
  s.SetRealRanks({0, 5});
  s.UpdateRealRank(0, true, "allreduce on tp[0], 2 MiB");
  s.SetCommunicator({"tp[0]", "TP", 2, 40, 160, 64 << 20, "allreduce 2 MiB"});
  s.SetCommunicator({"dp_cp[0]", "DP_CP", 256, 3, 16, 1 << 30, "init: waiting for rank 5"});
  s.AddDivergence("rank 5: expected COMMSPLIT of world, got an all-gather of 16 bytes");
  s.SetAlert("rank 5", "real rank 5 has not connected");
}

}  // namespace

int main(int argc, char** argv) {
  const bool empty = argc > 1 && std::string(argv[1]) == "--empty";
  prism::server::StatusBoard status;
  prism::server::Metrics metrics(&status);
  if (!empty) Fill(status);
  auto http = prism::server::HttpEndpoint::Start("127.0.0.1:0", &metrics, &status);
  if (!http.ok()) {
    std::fprintf(stderr, "status_page_server: %s\n", std::string(http.status().message()).c_str());
    return 1;
  }
  std::printf("port %d\n", (*http)->port());
  std::fflush(stdout);
  std::string line;
  while (std::getline(std::cin, line)) {
  }
  return 0;
}
