// Virtual peers: the plugin against prism-session-testd (a standalone
// PluginSession server), driven through dlopen like NCCL's proxy. Each case
// runs in a forked child so the plugin reads its PRISM_* settings afresh.
#include <dirent.h>
#include <sys/wait.h>

#include <catch2/catch.hpp>
#include <cstring>
#include <thread>

#include "common/net_handles.h"
#include "test/plugin_driver.h"
#include "test/plugin_process.h"

namespace {

using prism::testing::InChild;
using prism::testing::NowNs;
using prism::testing::PluginDriver;
using prism::testing::SessionDaemon;

std::vector<char> VirtualHandleBytes(uint64_t conn_id, uint64_t same_node_bits_per_second = 0) {
  prism::VirtualHandle h;
  h.conn_id = conn_id;
  h.virtual_rank = 5;
  h.same_node_bits_per_second = same_node_bits_per_second;
  std::vector<char> bytes(128, 0);
  std::memcpy(bytes.data(), &h, sizeof(h));
  return bytes;
}

int ThreadCount() {
  int n = 0;
  DIR* d = opendir("/proc/self/task");
  while (dirent* e = readdir(d)) n += e->d_name[0] != '.';
  closedir(d);
  return n;
}

// Listens and accepts until the daemon's virtual sender arrives.
void* AcceptVirtual(PluginDriver& drv, void* ctx, void** lc_out = nullptr) {
  std::vector<char> handle;
  void* lc = drv.Listen(ctx, &handle);
  void* rc = nullptr;
  prism_ncclNetDeviceHandle_t* dev = nullptr;
  const int64_t deadline = NowNs() + 10'000'000'000;
  while (rc == nullptr && NowNs() < deadline) PRISM_DRV_CHECK(drv.net().accept(lc, &rc, &dev));
  if (lc_out != nullptr) *lc_out = lc; else drv.net().closeListen(lc);
  return rc;
}

void* ConnectVirtual(PluginDriver& drv, void* ctx, uint64_t conn_id, uint64_t same_node_bits_per_second = 0) {
  std::vector<char> h = VirtualHandleBytes(conn_id, same_node_bits_per_second);
  void* sc = nullptr;
  prism_ncclNetDeviceHandle_t* dev = nullptr;
  PRISM_DRV_CHECK(drv.net().connect(ctx, 0, h.data(), &sc, &dev));
  return sc;
}

// Receives `size` into `buf` and returns (posted, completed) times.
std::pair<int64_t, int64_t> TimedRecv(PluginDriver& drv, void* rc, std::vector<char>& buf,
                                      int* got) {
  void* mh = nullptr;
  PRISM_DRV_CHECK(drv.net().regMr(rc, buf.data(), buf.size(), kPrismPtrHost, &mh));
  void* d[1] = {buf.data()};
  size_t m[1] = {buf.size()};
  int t[1] = {0};
  void* mhs[1] = {mh};
  const int64_t posted = NowNs();
  void* req = drv.Recv(rc, 1, d, m, t, mhs);
  drv.Wait(req, got);
  const int64_t done = NowNs();
  drv.net().deregMr(rc, mh);
  return {posted, done};
}

}  // namespace

TEST_CASE("virtual peers: accept, connect, link-model completion times, zero fill",
          "[plugin][virtual]") {
  SessionDaemon daemon(PRISM_SESSION_TESTD,
                       {"--mode", "link", "--gbps", "8", "--latency-us", "50", "--auto-accept", "1"});
  REQUIRE(!daemon.address().empty());
  const std::string msg = InChild([&]() -> std::string {
    setenv("PRISM_DAEMON", daemon.address().c_str(), 1);
    // The plugin's own link equals the daemon's: a receive resolved before
    // testd's per-message schedule arrives (a plain link from the posting,
    // docs/timing.md) is timed the same as one resolved by that schedule.
    setenv("PRISM_LINK_GBPS", "8", 1);
    setenv("PRISM_LINK_LATENCY_US", "50", 1);
    PluginDriver drv(PRISM_PLUGIN_SO);
    void* ctx = drv.Init();
    void* rc = AcceptVirtual(drv, ctx);
    if (rc == nullptr) return "accept never returned the virtual receive comm";
    std::vector<char> buf(1 << 20, 'x');
    int got = -1;
    auto [posted, done] = TimedRecv(drv, rc, buf, &got);
    if (got != static_cast<int>(buf.size())) return "received size " + std::to_string(got);
    // 1 MiB at 1 GB/s plus 50 us: never earlier than that.
    const int64_t model = (int64_t{1} << 20) + 50'000;
    if (done - posted < model) return "receive completed before its modelled time";
    for (char c : buf) {
      if (c != 0) return "receive buffer not zero-filled";
    }
    void* sc = ConnectVirtual(drv, ctx, 4242);
    if (sc == nullptr) return "connect on a virtual handle returned no comm";
    std::vector<char> sbuf(1 << 20);
    void* mh = nullptr;
    drv.net().regMr(sc, sbuf.data(), sbuf.size(), kPrismPtrHost, &mh);
    const int64_t s0 = NowNs();
    int sent = -1;
    drv.Wait(drv.Send(sc, sbuf.data(), sbuf.size(), 3, mh), &sent);
    if (NowNs() - s0 < (int64_t{1} << 20)) return "send completed before 1 MiB at 1 GB/s";
    if (sent != static_cast<int>(sbuf.size())) return "send size wrong";
    drv.net().deregMr(sc, mh);
    drv.net().closeSend(sc);
    drv.net().closeRecv(rc);
    drv.net().finalize(ctx);
    return "";
  });
  CHECK(msg == "");
}

TEST_CASE("virtual peers: sends to a virtual peer on this rank's node take the node's link, which they share",
          "[plugin][virtual]") {
  SessionDaemon daemon(PRISM_SESSION_TESTD, {"--mode", "link", "--gbps", "8", "--auto-accept", "1"});
  REQUIRE(!daemon.address().empty());
  const std::string msg = InChild([&]() -> std::string {
    setenv("PRISM_DAEMON", daemon.address().c_str(), 1);
    unsetenv("PRISM_LINK_GBPS");  // the NIC's link: unshaped
    PluginDriver drv(PRISM_PLUGIN_SO);
    void* ctx = drv.Init();
    // Two connections to virtual peers of this node, whose handles give an
    // 8 Gbit/s (1 GB/s) link: 1 MiB takes 1,048,576 ns on it.
    void* a = ConnectVirtual(drv, ctx, 5151, 8'000'000'000ull);
    void* b = ConnectVirtual(drv, ctx, 5152, 8'000'000'000ull);
    if (a == nullptr || b == nullptr) return "connect on a same-node virtual handle returned no comm";
    std::vector<char> abuf(1 << 20), bbuf(1 << 20);
    void* amh = nullptr;
    void* bmh = nullptr;
    drv.net().regMr(a, abuf.data(), abuf.size(), kPrismPtrHost, &amh);
    drv.net().regMr(b, bbuf.data(), bbuf.size(), kPrismPtrHost, &bmh);
    const int64_t s0 = NowNs();
    void* ra = drv.Send(a, abuf.data(), abuf.size(), 3, amh);
    void* rb = drv.Send(b, bbuf.data(), bbuf.size(), 3, bmh);
    int sent = -1;
    drv.Wait(ra, &sent);
    if (NowNs() - s0 < (int64_t{1} << 20)) return "a send to a same-node peer did not take the handle's link";
    drv.Wait(rb, &sent);
    if (NowNs() - s0 < (int64_t{2} << 20)) return "two connections to same-node peers did not share one link";
    drv.net().deregMr(a, amh);
    drv.net().deregMr(b, bmh);
    drv.net().closeSend(a);
    drv.net().closeSend(b);
    drv.net().finalize(ctx);
    return "";
  });
  CHECK(msg == "");
}

// PRISM_LINK_ORDER applies to sends to virtual peers too: in a hybrid run
// the real rank's NIC carries them beside its sends to real peers. Four 16
// MiB sends on one connection, then 64 KiB on another, at 1 GB/s: as posted
// the 64 KiB completes after all four (at least three seen done); round-
// robin after one 64 KiB slice of the first (16.8 ms before the first ends).
TEST_CASE("virtual peers: a NIC's connections take turns under PRISM_LINK_ORDER=round-robin", "[plugin][virtual]") {
  SessionDaemon daemon(PRISM_SESSION_TESTD, {"--mode", "link", "--gbps", "8", "--auto-accept", "1"});
  REQUIRE(!daemon.address().empty());
  for (const char* order : {"posted", "round-robin"}) {
    INFO(order);
    const std::string msg = InChild([&]() -> std::string {
      setenv("PRISM_DAEMON", daemon.address().c_str(), 1);
      setenv("PRISM_LINK_GBPS", "8", 1);
      setenv("PRISM_LINK_ORDER", order, 1);
      PluginDriver drv(PRISM_PLUGIN_SO);
      void* ctx = drv.Init();
      void* a = ConnectVirtual(drv, ctx, 6161);
      void* b = ConnectVirtual(drv, ctx, 6162);
      if (a == nullptr || b == nullptr) return "connect on a virtual handle returned no comm";
      std::vector<char> abuf(64 << 20), bbuf(64 << 10);
      void* amh = nullptr;
      void* bmh = nullptr;
      drv.net().regMr(a, abuf.data(), abuf.size(), kPrismPtrHost, &amh);
      drv.net().regMr(b, bbuf.data(), bbuf.size(), kPrismPtrHost, &bmh);
      std::vector<void*> ra;
      for (int i = 0; i < 4; ++i) ra.push_back(drv.Send(a, abuf.data() + (i << 24), 16 << 20, 3, amh));
      void* rb = drv.Send(b, bbuf.data(), bbuf.size(), 3, bmh);
      std::vector<int> adone(4, 0);
      int bdone = 0, ahead = -1, sizes[8];
      const int64_t deadline = NowNs() + 10'000'000'000;
      while (ahead < 0 || adone[3] == 0) {
        for (int i = 0; i < 4; ++i) {
          if (!adone[i]) PRISM_DRV_CHECK(drv.net().test(ra[i], &adone[i], sizes));
        }
        if (!bdone) PRISM_DRV_CHECK(drv.net().test(rb, &bdone, sizes));
        if (bdone && ahead < 0) ahead = adone[0] + adone[1] + adone[2] + adone[3];
        if (NowNs() > deadline) return std::string("sends never completed");
      }
      drv.net().deregMr(a, amh);
      drv.net().deregMr(b, bmh);
      drv.net().closeSend(a);
      drv.net().closeSend(b);
      drv.net().finalize(ctx);
      const bool turns = std::string(order) == "round-robin";
      // As posted, the fourth ends only 64 KiB's wire time (66 us) before the
      // 64 KiB: a slow pass of tests may see the two done together, the 64
      // KiB looked at last.
      if (turns ? ahead > 0 : ahead < 3) {
        return "the 64 KiB send completed after " + std::to_string(ahead) + " of the four 16 MiB sends";
      }
      return std::string();
    });
    CHECK(msg == "");
  }
}

TEST_CASE("virtual peers: pattern fill and grouped receives", "[plugin][virtual]") {
  SessionDaemon daemon(PRISM_SESSION_TESTD, {"--gbps", "100", "--latency-us", "1", "--auto-accept", "1"});
  REQUIRE(!daemon.address().empty());
  const std::string msg = InChild([&]() -> std::string {
    setenv("PRISM_DAEMON", daemon.address().c_str(), 1);
    setenv("PRISM_RECV_FILL", "pattern", 1);
    PluginDriver drv(PRISM_PLUGIN_SO);
    void* ctx = drv.Init();
    void* rc = AcceptVirtual(drv, ctx);
    if (rc == nullptr) return "no virtual receive comm";
    std::vector<std::vector<char>> bufs(3, std::vector<char>(1000, 0));
    void* d[3];
    size_t m[3];
    int t[3] = {1, 2, 3};
    void* mhs[3] = {nullptr, nullptr, nullptr};
    for (int i = 0; i < 3; ++i) {
      d[i] = bufs[i].data();
      m[i] = 1000 - 100 * i;
    }
    int sizes[3] = {-1, -1, -1};
    drv.Wait(drv.Recv(rc, 3, d, m, t, mhs), sizes);
    for (int i = 0; i < 3; ++i) {
      if (sizes[i] != static_cast<int>(m[i])) return "grouped size wrong";
      for (size_t k = 0; k < m[i]; ++k) {  // receive seq i: byte k = (i * 31 + k) mod 256
        if (static_cast<unsigned char>(bufs[i][k]) != ((i * 31 + k) & 0xff)) return "pattern wrong";
      }
    }
    drv.net().closeRecv(rc);
    return "";
  });
  CHECK(msg == "");
}

TEST_CASE("virtual peers: prismd going away fails receives within the timeout",
          "[plugin][virtual]") {
  auto daemon = std::make_unique<SessionDaemon>(PRISM_SESSION_TESTD,
                                                std::vector<std::string>{"--auto-accept", "1"});
  REQUIRE(!daemon->address().empty());
  int ready[2];
  REQUIRE(pipe(ready) == 0);
  // The child reports when it holds a virtual comm; then the daemon dies.
  std::thread killer([&] {
    char c;
    if (read(ready[0], &c, 1) == 1) daemon->Kill();
  });
  const std::string address = daemon->address();
  const std::string msg = InChild([&]() -> std::string {
      close(ready[0]);
      setenv("PRISM_DAEMON", address.c_str(), 1);
      setenv("PRISM_DAEMON_TIMEOUT_MS", "2000", 1);
      PluginDriver drv(PRISM_PLUGIN_SO);
      void* ctx = drv.Init();
      void* rc = AcceptVirtual(drv, ctx);
      if (rc == nullptr) return "no virtual receive comm";
      char c = 1;
      if (write(ready[1], &c, 1) != 1) return "pipe";
      usleep(300000);  // the parent kills the daemon meanwhile
      std::vector<char> buf(4096);
      void* d[1] = {buf.data()};
      size_t m[1] = {buf.size()};
      int t[1] = {0};
      void* mhs[1] = {nullptr};
      const int64_t start = NowNs();
      // Receives beyond the schedules already pushed can never complete.
      for (int i = 0; i < 100000; ++i) {
        void* req = nullptr;
        prism_ncclResult_t r = drv.net().irecv(rc, 1, d, m, t, mhs, nullptr, &req);
        int done = 0;
        while (r == prism_ncclSuccess && req != nullptr && !done) {
          r = drv.net().test(req, &done, nullptr);
          if (NowNs() - start > 8'000'000'000) return "no error 8 s after prismd died";
        }
        if (r != prism_ncclSuccess) return "";
      }
      return "receives kept completing after prismd died";
    });
  close(ready[1]);
  killer.join();
  close(ready[0]);
  CHECK(msg == "");
}

TEST_CASE("no daemon reachable: NCCL's init of the plugin fails within the timeout", "[plugin][virtual]") {
  const std::string msg = InChild([&]() -> std::string {
    setenv("PRISM_DAEMON", "unix:///tmp/prism-no-such-daemon.sock", 1);
    setenv("PRISM_DAEMON_TIMEOUT_MS", "1000", 1);
    PluginDriver drv(PRISM_PLUGIN_SO);
    const int64_t start = NowNs();
    void* ctx = nullptr;
    prism_ncclNetCommConfig_t config{-1};
    const prism_ncclResult_t r = drv.net().init(&ctx, 0x1234, &config, nullptr, nullptr);
    const int64_t took = NowNs() - start;
    if (r == prism_ncclSuccess) return "init succeeded without a daemon";
    if (took > 6'000'000'000) return "init took " + std::to_string(took / 1000000) + " ms";
    // A second init (another communicator) fails at once with the same result.
    if (drv.net().init(&ctx, 0x1235, &config, nullptr, nullptr) != r) return "second init differs";
    return "";
  });
  CHECK(msg == "");
}

TEST_CASE("virtual peers: without PRISM_DAEMON, listen starts no session", "[plugin][virtual]") {
  const std::string msg = InChild([&]() -> std::string {
    unsetenv("PRISM_DAEMON");
    PluginDriver drv(PRISM_PLUGIN_SO);
    void* ctx = drv.Init();
    const int before = ThreadCount();
    std::vector<char> handle;
    void* lc = drv.Listen(ctx, &handle);
    void* rc = nullptr;
    prism_ncclNetDeviceHandle_t* dev = nullptr;
    drv.net().accept(lc, &rc, &dev);
    const int after = ThreadCount();
    drv.net().closeListen(lc);
    if (after != before) return "threads appeared: " + std::to_string(before) + " -> " + std::to_string(after);
    return "";
  });
  CHECK(msg == "");
}

TEST_CASE("virtual peers: with PRISM_DAEMON, listen opens the session", "[plugin][virtual]") {
  SessionDaemon daemon(PRISM_SESSION_TESTD, {});
  REQUIRE(!daemon.address().empty());
  const std::string msg = InChild([&]() -> std::string {
    setenv("PRISM_DAEMON", daemon.address().c_str(), 1);
    PluginDriver drv(PRISM_PLUGIN_SO);
    void* ctx = drv.Init();
    const int before = ThreadCount();
    std::vector<char> handle;
    void* lc = drv.Listen(ctx, &handle);
    const int after = ThreadCount();
    drv.net().closeListen(lc);
    drv.net().finalize(ctx);
    if (after <= before) return "no session threads after listen";
    return "";
  });
  CHECK(msg == "");
}

// A process that forks after its plugin opened the session (PyTorch
// DataLoader workers): the child exits, the parent keeps working.
TEST_CASE("virtual peers: fork after the session opened", "[plugin][virtual][fork]") {
  SessionDaemon daemon(PRISM_SESSION_TESTD, {"--gbps", "100", "--latency-us", "1", "--auto-accept", "1"});
  REQUIRE(!daemon.address().empty());
  const std::string msg = InChild([&]() -> std::string {
    setenv("PRISM_DAEMON", daemon.address().c_str(), 1);
    PluginDriver drv(PRISM_PLUGIN_SO);
    void* ctx = drv.Init();
    void* rc = AcceptVirtual(drv, ctx);
    if (rc == nullptr) return "no virtual receive comm";
    std::vector<char> buf(4096);
    int got = 0;
    TimedRecv(drv, rc, buf, &got);
    for (int how = 0; how < 2; ++how) {
      pid_t pid = fork();
      if (pid == 0) {
        if (how == 0) exit(0);  // runs atexit handlers and static destructors
        _exit(0);
      }
      int status = -1;
      const int64_t deadline = NowNs() + 10'000'000'000;
      while (waitpid(pid, &status, WNOHANG) == 0) {
        if (NowNs() > deadline) {
          kill(pid, SIGKILL);
          waitpid(pid, &status, 0);
          return std::string("forked child hung in ") + (how == 0 ? "exit()" : "_exit()");
        }
        usleep(1000);
      }
      if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) return "forked child failed";
      for (int i = 0; i < 100; ++i) {
        TimedRecv(drv, rc, buf, &got);
        if (got != static_cast<int>(buf.size())) return "parent receive broken after fork";
      }
    }
    drv.net().closeRecv(rc);
    drv.net().finalize(ctx);
    return "";
  });
  CHECK(msg == "");
}
