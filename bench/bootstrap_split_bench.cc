// Prints what one ncclCommSplit of an N-rank world costs a fake real rank
// (test/bootstrap_fake_rank.h: NCCL 2.28.9's bootstrap, blocking sockets)
// against prismd's bootstrap server playing the N-1 other ranks: the split
// kinds of a Megatron-core start-up with device_id (every new_group a split
// of the world; non-members pass NOCOLOR): a singleton group of another rank,
// the real rank's TP pair, its data-parallel group (N/4 ranks, stride 4).
// Per kind: wall time per split, the fake rank's own CPU time in it (its
// sockets' work: the floor a real NCCL pays whatever prismd does) and the
// rest of the process's CPU time (prismd's bootstrap threads).
// Usage: bootstrap_split_bench [N [SPLITS_PER_KIND]]   (default 8192 5)
#include <time.h>

#include <chrono>
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

namespace {

double ProcessCpuSeconds() {
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

double ThreadCpuSeconds() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

struct Kind {
  std::string name;
  std::vector<uint32_t> members;
};

}  // namespace

int main(int argc, char** argv) {
  const uint32_t n = argc > 1 ? static_cast<uint32_t>(std::atoi(argv[1])) : 8192;
  const int per_kind = argc > 2 ? std::atoi(argv[2]) : 5;
  if (n < 8 || per_kind < 1) {
    std::fprintf(stderr, "usage: bootstrap_split_bench [N>=8 [SPLITS_PER_KIND>=1]]\n");
    return 2;
  }
  std::vector<Kind> kinds = {{"singleton of another rank (NOCOLOR)", {n - 1}}, {"TP pair {0,1}", {0, 1}}};
  Kind dp{"DP group (stride 4)", {}};
  for (uint32_t m = 0; m < n; m += 4) dp.members.push_back(m);
  kinds.push_back(dp);
  BootstrapPlan plan = WorldPlan(n, 8, {0});
  int32_t color = 100;
  for (const Kind& k : kinds)
    for (int i = 0; i < per_kind; ++i) AddSplit(plan, 0, k.members, color++, 0, absl::StrCat(k.name, i));
  const uint16_t root_port = FreePort();
  BootstrapConfig config;
  config.comm_id = absl::StrCat("127.0.0.1:", root_port);
  BootstrapService service(config, plan, nullptr);
  if (!service.Start().ok()) return 1;
  FakeRankOptions o;
  o.rank = 0;
  o.nranks = static_cast<int>(n);
  o.comm_id = {0x7f000001, root_port};
  FakeRealRank fake(o);
  try {
    fake.Init();
    std::printf("N=%u: world init %.3f s\n", n, fake.init_seconds());
    color = 100;
    for (const Kind& k : kinds) {
      const bool member = k.members.front() == 0;
      double wall = 0, cpu = 0, all = 0;
      for (int i = 0; i < per_kind; ++i, ++color) {
        const auto t0 = std::chrono::steady_clock::now();
        const double c0 = ThreadCpuSeconds(), p0 = ProcessCpuSeconds();
        auto child = fake.Split(member ? color : -1, 0);
        cpu += ThreadCpuSeconds() - c0;
        all += ProcessCpuSeconds() - p0;
        wall += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        if (child) child->Destroy();
      }
      std::printf("N=%u split, %s: %.4f s wall, CPU %.4f s the real rank's, %.4f s prismd's (mean of %d)\n", n,
                  k.name.c_str(), wall / per_kind, cpu / per_kind, (all - cpu) / per_kind, per_kind);
    }
  } catch (const std::exception& e) {
    std::printf("N=%u FAILED: %s\n", n, e.what());
    return 1;
  }
  fake.Destroy();
  service.Stop();
  return 0;
}
