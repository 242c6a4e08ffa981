// Virtual peers through a running session server (prism-session-testd):
//   plugin_virtual_bench [--messages N] [--interval-ns D] [--bytes B]
// Phase 1 (paced): prismd schedules receive k at T0 + k*D (pushed ahead);
// the plugin is driven like NCCL's proxy (32 receives in flight, test() in
// order). Prints p50/p99/max lateness (completion - scheduled time), the
// number completed early (must be 0) and the sustained messages/s.
// Phase 2 (unpaced): schedules without time constraints, and virtual sends
// on an unshaped link: the most messages/s the plugin + session sustain.
// Each phase runs in a forked child (fresh plugin settings).
// --daemon ADDR: run only phase 2 against a server already running there
// (it must connect a virtual sender to each listen comm, as testd
// --auto-accept 1 does).
#include <sys/wait.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "common/net_handles.h"
#include "test/plugin_driver.h"
#include "test/plugin_process.h"

namespace {

using prism::testing::NowNs;
using prism::testing::PluginDriver;
using prism::testing::PluginError;

constexpr int kInFlight = 32;

void* AcceptVirtual(PluginDriver& drv, void* ctx) {
  std::vector<char> handle;
  void* lc = drv.Listen(ctx, &handle);
  void* rc = nullptr;
  prism_ncclNetDeviceHandle_t* dev = nullptr;
  const int64_t deadline = NowNs() + 10'000'000'000;
  while (rc == nullptr) {
    PRISM_DRV_CHECK(drv.net().accept(lc, &rc, &dev));
    if (NowNs() > deadline) throw PluginError("no virtual receive comm from the daemon");
  }
  drv.net().closeListen(lc);
  return rc;
}

// Receives `n` messages keeping kInFlight posted; returns completion times.
std::vector<int64_t> ReceiveAll(PluginDriver& drv, void* rc, int64_t n, size_t bytes) {
  std::vector<std::vector<char>> bufs(kInFlight, std::vector<char>(bytes));
  std::vector<void*> reqs(kInFlight, nullptr);
  std::vector<int64_t> done_at(static_cast<size_t>(n), 0);
  int64_t posted = 0, completed = 0;
  int tag = 0;
  while (completed < n) {
    while (posted < n && posted - completed < kInFlight) {
      const int slot = static_cast<int>(posted % kInFlight);
      void* d[1] = {bufs[slot].data()};
      size_t m[1] = {bytes};
      void* mh[1] = {nullptr};
      void* req = nullptr;
      PRISM_DRV_CHECK(drv.net().irecv(rc, 1, d, m, &tag, mh, nullptr, &req));
      if (req == nullptr) break;
      reqs[slot] = req;
      ++posted;
    }
    const int slot = static_cast<int>(completed % kInFlight);
    int done = 0;
    PRISM_DRV_CHECK(drv.net().test(reqs[slot], &done, nullptr));
    if (done) done_at[static_cast<size_t>(completed++)] = NowNs();
  }
  return done_at;
}

int PacedPhase(const std::string& address, int64_t t0, int64_t interval, int64_t n,
               size_t bytes) {
  setenv("PRISM_DAEMON", address.c_str(), 1);
  PluginDriver drv(PRISM_PLUGIN_SO);
  void* ctx = drv.Init();
  void* rc = AcceptVirtual(drv, ctx);
  const int64_t ready = NowNs();
  std::vector<int64_t> done = ReceiveAll(drv, rc, n, bytes);
  std::printf("[paced] set up %.1f ms before receive 0 was due\n",
              static_cast<double>(t0 - ready) / 1e6);
  std::vector<int64_t> late;
  int64_t early = 0;
  for (int64_t k = 0; k < n; ++k) {
    const int64_t l = done[static_cast<size_t>(k)] - (t0 + k * interval);
    if (l < 0) ++early;
    late.push_back(l);
  }
  int64_t worst_k = 0;
  for (int64_t k = 0; k < n; ++k) {
    if (late[static_cast<size_t>(k)] > late[static_cast<size_t>(worst_k)]) worst_k = k;
  }
  int64_t over20 = 0;
  for (int64_t l : late) over20 += l > 20000;
  std::printf("[paced] latest was receive %lld; %lld receives more than 20 us late\n",
              static_cast<long long>(worst_k), static_cast<long long>(over20));
  std::sort(late.begin(), late.end());
  auto pct = [&](double p) {
    return static_cast<double>(late[static_cast<size_t>(p * static_cast<double>(n - 1))]) / 1e3;
  };
  const double secs = static_cast<double>(done.back() - done.front()) / 1e9;
  std::printf("[paced] %lld receives of %zu B scheduled every %lld ns\n",
              static_cast<long long>(n), bytes, static_cast<long long>(interval));
  std::printf("[paced] lateness after scheduled time: p50 %.2f us, p99 %.2f us, p99.9 %.2f us, "
              "max %.2f us; completed early: %lld\n",
              pct(0.5), pct(0.99), pct(0.999), static_cast<double>(late.back()) / 1e3,
              static_cast<long long>(early));
  std::printf("[paced] sustained %.0f messages/s\n", static_cast<double>(n - 1) / secs);
  drv.net().closeRecv(rc);
  drv.net().finalize(ctx);
  return 0;
}

int UnpacedPhase(const std::string& address, int64_t n, size_t bytes) {
  setenv("PRISM_DAEMON", address.c_str(), 1);
  setenv("PRISM_LINK_GBPS", "100000", 1);  // sends: effectively unshaped
  setenv("PRISM_RECV_FILL", "none", 1);
  PluginDriver drv(PRISM_PLUGIN_SO);
  void* ctx = drv.Init();
  void* rc = AcceptVirtual(drv, ctx);
  const int64_t r0 = NowNs();
  std::vector<int64_t> done = ReceiveAll(drv, rc, n, bytes);
  const double rsecs = static_cast<double>(NowNs() - r0) / 1e9;
  std::printf("[unpaced] receives: %.0f messages/s (%lld x %zu B)\n",
              static_cast<double>(n) / rsecs, static_cast<long long>(n), bytes);
  prism::VirtualHandle h;
  h.conn_id = 0xabcdef;
  std::vector<char> hb(128, 0);
  std::memcpy(hb.data(), &h, sizeof(h));
  void* sc = nullptr;
  prism_ncclNetDeviceHandle_t* dev = nullptr;
  PRISM_DRV_CHECK(drv.net().connect(ctx, 0, hb.data(), &sc, &dev));
  std::vector<char> buf(bytes);
  std::vector<void*> reqs(kInFlight, nullptr);
  const int64_t s0 = NowNs();
  for (int64_t i = 0; i < n + kInFlight; ++i) {
    const int slot = static_cast<int>(i % kInFlight);
    if (reqs[slot] != nullptr) drv.Wait(reqs[slot]);
    if (i < n) reqs[slot] = drv.Send(sc, buf.data(), bytes, 0, nullptr);
  }
  const double ssecs = static_cast<double>(NowNs() - s0) / 1e9;
  std::printf("[unpaced] sends: %.0f messages/s\n", static_cast<double>(n) / ssecs);
  drv.net().closeSend(sc);
  drv.net().closeRecv(rc);
  drv.net().finalize(ctx);
  return 0;
}

template <typename Fn>
int InFork(Fn fn) {
  std::fflush(stdout);
  pid_t pid = fork();
  if (pid == 0) {
    int rc = 1;
    try {
      rc = fn();
    } catch (const std::exception& e) {
      std::fprintf(stderr, "plugin_virtual_bench: %s\n", e.what());
    }
    std::fflush(stdout);
    _exit(rc);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 1;
}

}  // namespace

int main(int argc, char** argv) {
  int64_t n = 200000, interval = 5000;
  size_t bytes = 4096;
  std::string external;
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string k = argv[i];
    if (k == "--daemon") external = argv[i + 1];
    if (k == "--messages") n = std::stoll(argv[i + 1]);
    if (k == "--interval-ns") interval = std::stoll(argv[i + 1]);
    if (k == "--bytes") bytes = std::stoull(argv[i + 1]);
  }
  int rc = 0;
  if (!external.empty()) {  // a running server with auto-accept: unpaced phase only
    return InFork([&] { return UnpacedPhase(external, n * 2, bytes); });
  }
  {
    const int64_t t0 = NowNs() + 1'500'000'000;  // setup happens before T0
    prism::testing::SessionDaemon daemon(
        PRISM_SESSION_TESTD,
        {"--mode", "paced", "--paced-start-ns", std::to_string(t0), "--paced-interval-ns",
         std::to_string(interval), "--window", "4096", "--auto-accept", "1"});
    if (daemon.address().empty()) return 1;
    rc |= InFork([&] { return PacedPhase(daemon.address(), t0, interval, n, bytes); });
  }
  {
    prism::testing::SessionDaemon daemon(
        PRISM_SESSION_TESTD,
        {"--mode", "link", "--gbps", "0", "--latency-us", "0", "--window", "4096",
         "--auto-accept", "1"});
    if (daemon.address().empty()) return 1;
    rc |= InFork([&] { return UnpacedPhase(daemon.address(), n * 2, bytes); });
  }
  return rc;
}
