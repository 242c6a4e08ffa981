// Prints how long one fake real rank's ncclCommInitRank-equivalent (root
// check-in, ring, ringAllInfo, AG1, AG3) takes against prismd's bootstrap
// server with N-1 virtual ranks. Usage: bootstrap_init_bench [N...]
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "daemon/bootstrap/bootstrap_service.h"
#include "test/bootstrap_fake_rank.h"
#include "test/bootstrap_test_util.h"

using namespace prism::bootstrap;           // NOLINT: benchmark program
using namespace prism::bootstrap::testing;  // NOLINT

int main(int argc, char** argv) {
  std::vector<int> sizes;
  for (int i = 1; i < argc; ++i) sizes.push_back(std::atoi(argv[i]));
  if (sizes.empty()) sizes = {8, 64, 1024, 8192};
  for (int n : sizes) {
    for (int real : {0, 5 % n}) {
      const uint16_t root_port = FreePort();
      BootstrapConfig config;
      config.comm_id = absl::StrCat("127.0.0.1:", root_port);
      BootstrapService service(config, WorldPlan(n, 8, {static_cast<uint32_t>(real)}), nullptr);
      if (!service.Start().ok()) return 1;
      FakeRankOptions o;
      o.rank = real;
      o.nranks = n;
      o.comm_id = {0x7f000001, root_port};
      FakeRealRank fake(o);
      try {
        fake.Init();
      } catch (const std::exception& e) {
        std::printf("N=%d real=%d FAILED: %s\n", n, real, e.what());
        return 1;
      }
      fake.Destroy();
      std::printf("N=%d real rank %d (%s root): init %.3f s\n", n, real,
                  real == 0 ? "real" : "prismd", fake.init_seconds());
      service.Stop();
    }
  }
  return 0;
}
