// Unit tests of plugin internals that need no sockets.
#include <dlfcn.h>
#include <unistd.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <cstdlib>
#include <deque>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <optional>
#include <string>

#include "common/daemon_address.h"
#include "plugin/comm.h"
#include "plugin/daemon_session.h"
#include "plugin/link_arbiter.h"
#include "plugin/link_model.h"
#include "plugin/real_comms.h"
#include "plugin/real_wire.h"
#include "plugin/settings.h"

using prism::plugin::ChunkCount;
using prism::plugin::ChunkOf;
using prism::plugin::LinkArbiter;
using prism::plugin::LinkModel;
using prism::plugin::LinkOrder;

TEST_CASE("link model: back-to-back sends queue behind each other", "[plugin][unit]") {
  LinkModel link(prism::BitsPerSecond(8'000'000'000ull), prism::FromMicroseconds(20));  // 1 GB/s, 20 us
  auto t1 = link.Reserve(prism::Bytes(1000), prism::Nanoseconds(5000));
  CHECK(t1.wire_done.count() == 6000);
  CHECK(t1.deliver.count() == 26000);
  auto t2 = link.Reserve(prism::Bytes(1000), prism::Nanoseconds(5500));  // posted while the link is busy
  CHECK(t2.wire_done.count() == 7000);
  auto t3 = link.Reserve(prism::Bytes(0), prism::Nanoseconds(100000));  // idle link: starts at post time
  CHECK(t3.wire_done.count() == 100000);
  CHECK(t3.deliver.count() == 120000);
}

TEST_CASE("link model: unshaped completes at post time", "[plugin][unit]") {
  LinkModel link(prism::BitsPerSecond(0), prism::Nanoseconds(0));
  CHECK_FALSE(link.shaped());
  CHECK(link.Reserve(prism::Bytes(1 << 30), prism::Nanoseconds(42)).wire_done.count() == 42);
}

namespace {

constexpr prism::BitsPerSecond kOneGBps(8'000'000'000ull);  // 1 byte per ns
prism::Nanoseconds Ns(int64_t ns) { return prism::Nanoseconds(ns); }

// The arbiter as a comm uses it: a message's times come from Post when
// decided at once, else from NextDecided, in posting order per connection.
class ArbiterCaller {
 public:
  ArbiterCaller(prism::BitsPerSecond bandwidth, prism::Nanoseconds latency, LinkOrder order,
                prism::Nanoseconds decide_ahead = prism::Nanoseconds(0))
      : arbiter_(bandwidth, latency, order, decide_ahead) {}
  uint32_t AddConnection(bool whole_messages = false) { return arbiter_.AddConnection(whole_messages); }
  void RemoveConnection(uint32_t conn) {
    arbiter_.RemoveConnection(conn);
    at_once_.erase(conn);
  }
  // Post's own answer: the times when decided at once.
  std::optional<LinkModel::Times> Post(uint32_t conn, prism::Bytes bytes, prism::Nanoseconds now) {
    auto t = arbiter_.Post(conn, bytes, now);
    if (t) at_once_[conn].push_back(*t);
    return t;
  }
  std::optional<LinkModel::Times> NextDecided(uint32_t conn, prism::Nanoseconds now) {
    std::deque<LinkModel::Times>& q = at_once_[conn];
    if (q.empty()) return arbiter_.NextDecided(conn, now);
    const LinkModel::Times t = q.front();
    q.pop_front();
    return t;
  }

 private:
  LinkArbiter arbiter_;
  std::map<uint32_t, std::deque<LinkModel::Times>> at_once_;
};

// conn `a` posts `window` messages of 1000 B at 0, conn `b` one of 100 B at 10.
struct TwoConnections {
  explicit TwoConnections(LinkOrder order, int window = 8) : arbiter(kOneGBps, Ns(20), order) {
    a = arbiter.AddConnection();
    b = arbiter.AddConnection();
    for (int i = 0; i < window; ++i) at_once_a += arbiter.Post(a, prism::Bytes(1000), Ns(0)).has_value();
    at_once_b = arbiter.Post(b, prism::Bytes(100), Ns(10)).has_value();
  }
  ArbiterCaller arbiter;
  int at_once_a = 0;       // a's messages whose times Post gave at once
  bool at_once_b = false;
  uint32_t a = 0, b = 0;
};

}  // namespace

TEST_CASE("link arbiter: as posted, a message waits for every one posted before it", "[plugin][unit]") {
  TwoConnections t(LinkOrder::kPosted);
  CHECK(t.at_once_a == 8);  // as posted, every message's times come with its posting
  CHECK(t.at_once_b);
  for (int i = 0; i < 8; ++i) {
    auto m = t.arbiter.NextDecided(t.a, Ns(10));
    REQUIRE(m);
    CHECK(m->wire_done.count() == 1000 * (i + 1));
  }
  auto m = t.arbiter.NextDecided(t.b, Ns(10));
  REQUIRE(m);
  CHECK(m->wire_done.count() == 8100);
  CHECK(m->deliver.count() == 8120);
  CHECK_FALSE(t.arbiter.NextDecided(t.a, Ns(10)));
}

TEST_CASE("link arbiter: round-robin, a later connection waits only for the message on the wire", "[plugin][unit]") {
  TwoConnections t(LinkOrder::kRoundRobin);
  CHECK(t.at_once_a == 1);  // the NIC was idle for a's first, the rest wait
  CHECK_FALSE(t.at_once_b);
  auto first = t.arbiter.NextDecided(t.a, Ns(10));  // the NIC was idle: out at once
  REQUIRE(first);
  CHECK(first->wire_done.count() == 1000);
  // Before the NIC frees nothing else is decided: a message posted until then
  // could still take the turn.
  CHECK_FALSE(t.arbiter.NextDecided(t.a, Ns(999)));
  CHECK_FALSE(t.arbiter.NextDecided(t.b, Ns(999)));
  auto small = t.arbiter.NextDecided(t.b, Ns(1000));
  REQUIRE(small);
  CHECK(small->wire_done.count() == 1100);
  CHECK(small->deliver.count() == 1120);
  // Then a's window, one after another.
  for (int i = 1; i < 8; ++i) {
    auto m = t.arbiter.NextDecided(t.a, Ns(1'000'000));
    REQUIRE(m);
    CHECK(m->wire_done.count() == 1100 + 1000 * i);
  }
  CHECK_FALSE(t.arbiter.NextDecided(t.a, Ns(1'000'000)));
}

TEST_CASE("link arbiter: round-robin decisions do not depend on when they are asked", "[plugin][unit]") {
  TwoConnections early(LinkOrder::kRoundRobin), late(LinkOrder::kRoundRobin);
  std::vector<int64_t> asked_often, asked_once;
  for (int64_t now = 0; now <= 9000; now += 50) {
    while (auto m = early.arbiter.NextDecided(early.a, Ns(now))) asked_often.push_back(m->wire_done.count());
    while (auto m = early.arbiter.NextDecided(early.b, Ns(now))) asked_often.push_back(-m->wire_done.count());
  }
  while (auto m = late.arbiter.NextDecided(late.a, Ns(9000))) asked_once.push_back(m->wire_done.count());
  while (auto m = late.arbiter.NextDecided(late.b, Ns(9000))) asked_once.push_back(-m->wire_done.count());
  std::sort(asked_often.begin(), asked_often.end());
  std::sort(asked_once.begin(), asked_once.end());
  CHECK(asked_often == asked_once);
  CHECK(asked_once.size() == 9);
}

TEST_CASE("link arbiter: round-robin takes the connections in turn and never before a posting",
          "[plugin][unit]") {
  ArbiterCaller arbiter(kOneGBps, Ns(0), LinkOrder::kRoundRobin);
  const uint32_t a = arbiter.AddConnection(), b = arbiter.AddConnection(), c = arbiter.AddConnection();
  for (int i = 0; i < 3; ++i) {
    arbiter.Post(a, prism::Bytes(100), Ns(0));
    arbiter.Post(b, prism::Bytes(100), Ns(0));
  }
  arbiter.Post(c, prism::Bytes(100), Ns(250));  // after a's and b's first two turns began
  std::vector<std::pair<int64_t, char>> order;
  for (auto [conn, name] : {std::pair{a, 'a'}, std::pair{b, 'b'}, std::pair{c, 'c'}}) {
    while (auto m = arbiter.NextDecided(conn, Ns(10'000))) order.emplace_back(m->wire_done.count(), name);
  }
  std::sort(order.begin(), order.end());
  std::string names;
  for (auto& o : order) names += o.second;
  CHECK(names == "abab" "cab");  // c's turn comes at 300, the first decision after its posting
  CHECK(order.back().first == 700);
  // An idle NIC sends a message at its posting.
  arbiter.Post(c, prism::Bytes(100), Ns(5000));
  auto m = arbiter.NextDecided(c, Ns(5000));
  REQUIRE(m);
  CHECK(m->wire_done.count() == 5100);
}

TEST_CASE("link arbiter: round-robin turns are slices, or whole messages where a connection asks", "[plugin][unit]") {
  const uint64_t slice = prism::plugin::kRoundRobinSlice.count();  // ns at 1 GB/s
  for (bool whole : {false, true}) {
    INFO("a's connection takes whole turns: " << whole);
    ArbiterCaller arbiter(kOneGBps, Ns(0), LinkOrder::kRoundRobin);
    const uint32_t a = arbiter.AddConnection(whole), b = arbiter.AddConnection();
    arbiter.Post(a, prism::Bytes(4 * slice), Ns(0));
    arbiter.Post(b, prism::Bytes(1000), Ns(10));
    // Sliced, it is decided at its last slice; whole, at once (the NIC was idle).
    auto big = arbiter.NextDecided(a, Ns(10));
    CHECK(big.has_value() == whole);
    if (!big) big = arbiter.NextDecided(a, Ns(1'000'000));
    auto small = arbiter.NextDecided(b, Ns(1'000'000));
    REQUIRE(small);
    REQUIRE(big);
    if (whole) {
      CHECK(big->wire_done.count() == static_cast<int64_t>(4 * slice));
      CHECK(small->wire_done.count() == static_cast<int64_t>(4 * slice + 1000));
    } else {
      CHECK(small->wire_done.count() == static_cast<int64_t>(slice + 1000));  // after a's first slice
      CHECK(big->wire_done.count() == static_cast<int64_t>(4 * slice + 1000));
    }
  }
}

TEST_CASE("link arbiter: round-robin turns are decided ahead, with the messages posted by then", "[plugin][unit]") {
  // 1 GB/s; a's first 1000 B message holds the NIC [0, 1000). c posts at 850,
  // after the turn at 1100 was asked for (at 800).
  for (int64_t ahead : {300, 0}) {
    INFO("decided " << ahead << " ns ahead");
    ArbiterCaller arbiter(kOneGBps, Ns(0), LinkOrder::kRoundRobin, Ns(ahead));
    const uint32_t a = arbiter.AddConnection(), b = arbiter.AddConnection(), c = arbiter.AddConnection();
    arbiter.Post(a, prism::Bytes(1000), Ns(0));
    arbiter.Post(a, prism::Bytes(1000), Ns(0));
    arbiter.Post(b, prism::Bytes(100), Ns(600));
    auto first = arbiter.NextDecided(a, Ns(0));  // the NIC was idle: decided at its posting
    REQUIRE(first);
    CHECK(first->wire_done.count() == 1000);
    CHECK(arbiter.NextDecided(b, Ns(1000 - ahead)).has_value());  // the turn at 1000 is due then
    auto second = arbiter.NextDecided(a, Ns(800));
    arbiter.Post(c, prism::Bytes(100), Ns(850));
    auto late = arbiter.NextDecided(c, Ns(5000));
    REQUIRE(late);
    if (!second) second = arbiter.NextDecided(a, Ns(5000));
    REQUIRE(second);
    if (ahead > 0) {  // the turn at 1100 was a's: c takes the next
      CHECK(second->wire_done.count() == 2100);
      CHECK(late->wire_done.count() == 2200);
    } else {  // decided at 1100: c, posted by then, comes before a in turn
      CHECK(late->wire_done.count() == 1200);
      CHECK(second->wire_done.count() == 2200);
    }
  }
}

TEST_CASE("link arbiter: a removed connection's waiting messages leave the NIC to the others", "[plugin][unit]") {
  TwoConnections t(LinkOrder::kRoundRobin);
  REQUIRE(t.arbiter.NextDecided(t.a, Ns(0)));
  t.arbiter.RemoveConnection(t.a);
  auto m = t.arbiter.NextDecided(t.b, Ns(1000));
  REQUIRE(m);
  CHECK(m->wire_done.count() == 1100);
  const uint32_t again = t.arbiter.AddConnection();  // the id is reused, with nothing of a's
  CHECK(again == t.a);
  CHECK_FALSE(t.arbiter.NextDecided(again, Ns(1'000'000)));
}

TEST_CASE("chunks cover the message exactly once", "[plugin][unit]") {
  for (uint64_t size : {0ull, 1ull, 4095ull, 4096ull, 4097ull, 100000ull, 1ull << 26}) {
    for (uint32_t socks : {1u, 2u, 3u, 16u}) {
      const uint32_t n = ChunkCount(size, 4096, socks);
      REQUIRE(n >= 1);
      REQUIRE(n <= socks);
      uint64_t covered = 0;
      for (uint32_t j = 0; j < n; ++j) {
        auto c = ChunkOf(size, n, j);
        CHECK(c.offset == covered);
        covered += c.length;
      }
      CHECK(covered == size);
    }
  }
}

// NCCL's Simple steps (512 KiB) queued behind each other go out one per
// sendmsg: batched, they cost more CPU per byte on a loaded host
// (docs/plugin.md, "Per-message cost"); small messages still share one.
TEST_CASE("real sends: one large message per sendmsg, small ones batched", "[plugin][unit]") {
  struct Item {
    const char* ptr;
    size_t left;
  };
  static const char bytes[1] = {0};
  iovec iov[prism::plugin::kMaxSendIov];
  std::deque<Item> large;
  for (int m = 0; m < 4; ++m) {
    large.push_back(Item{bytes, 32});          // header
    large.push_back(Item{bytes, 512 * 1024});  // payload
  }
  CHECK(prism::plugin::GatherSendIov(large, iov) == 2);
  CHECK(iov[1].iov_len == 512 * 1024);
  std::deque<Item> partly_sent{{bytes, 1000}, {bytes, 32}, {bytes, 512 * 1024}};
  CHECK(prism::plugin::GatherSendIov(partly_sent, iov) == 3);  // the rest of one, then the next
  std::deque<Item> small;
  for (int m = 0; m < 20; ++m) {
    small.push_back(Item{bytes, 32});
    small.push_back(Item{bytes, 4096});
  }
  CHECK(prism::plugin::GatherSendIov(small, iov) == prism::plugin::kMaxSendIov);
  CHECK(prism::plugin::GatherSendIov(std::deque<Item>{}, iov) == 0);
}

TEST_CASE("settings: bad numbers fall back to defaults with a warning", "[plugin][unit]") {
  setenv("PRISM_SOCKS_PER_COMM", "lots", 1);
  setenv("PRISM_LINK_GBPS", "8", 1);
  setenv("PRISM_RECV_FILL", "pattern", 1);
  std::string warnings;
  auto s = prism::plugin::LoadSettings(&warnings);
  unsetenv("PRISM_SOCKS_PER_COMM");
  unsetenv("PRISM_LINK_GBPS");
  unsetenv("PRISM_RECV_FILL");
  CHECK(s.socks_per_comm == 1);
  CHECK(warnings.find("PRISM_SOCKS_PER_COMM") != std::string::npos);
  CHECK(s.link_bits_per_second == 8'000'000'000ull);
  CHECK(s.recv_fill == prism::plugin::RecvFill::kPattern);
}

TEST_CASE("settings: a NIC PCI path that names a GPU or nothing is refused before NCCL sees it", "[plugin][unit]") {
  using prism::plugin::NicPciPathProblem;
  const std::filesystem::path dir = std::filesystem::temp_directory_path() / ("prism-pci-" + std::to_string(getpid()));
  std::filesystem::create_directories(dir / "gpu");
  std::filesystem::create_directories(dir / "bridge");
  std::ofstream(dir / "gpu" / "class") << "0x030200\n";
  std::ofstream(dir / "bridge" / "class") << "0x060400\n";
  CHECK(NicPciPathProblem("").empty());  // unset: a CPU-attached NIC
  CHECK(NicPciPathProblem((dir / "bridge").string()).empty());
  const std::string gpu = NicPciPathProblem((dir / "gpu").string());
  CHECK_THAT(gpu, Catch::Contains("is a GPU (PCI class 0x030200)"));
  CHECK_THAT(gpu, Catch::Contains("name the PCI bridge or switch above it"));
  CHECK_THAT(NicPciPathProblem((dir / "absent").string()), Catch::Contains("does not exist"));
  std::filesystem::remove_all(dir);
}

TEST_CASE("settings: every parameter has a default and a doc", "[plugin][unit]") {
  for (const auto& p : prism::plugin::AllEnvParams()) {
    INFO(p.name);
    CHECK(std::string(p.name).rfind("PRISM_", 0) == 0);
    CHECK(p.default_value != nullptr);
    CHECK(std::string(p.doc).size() > 10);
  }
}

TEST_CASE("docs/plugin.md documents every PRISM_* setting", "[plugin][unit]") {
  std::ifstream in(PRISM_PLUGIN_DOC);
  REQUIRE(in.good());
  const std::string doc((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  for (const auto& p : prism::plugin::AllEnvParams()) {
    INFO(p.name);
    CHECK(doc.find("| `" + std::string(p.name) + "` |") != std::string::npos);
  }
}

TEST_CASE("settings: PRISM_NIC_NAME replaces %d and %% only, and refuses any other %", "[plugin][unit]") {
  using prism::plugin::FormatNicName;
  using prism::plugin::NicNamePatternProblem;
  CHECK(FormatNicName("mlx5_%d", 3) == "mlx5_3");
  CHECK(FormatNicName("n%d-%d", 12) == "n12-12");
  CHECK(FormatNicName("100%%", 0) == "100%");
  CHECK(FormatNicName("plain", 7) == "plain");
  CHECK(NicNamePatternProblem("prism%d").empty());
  CHECK(NicNamePatternProblem("p%%%d").empty());
  for (const char* bad : {"%s%s%s%s", "nic%d%d%x", "%", "a%", "%n", "%08d"}) {
    INFO(bad);
    CHECK_FALSE(NicNamePatternProblem(bad).empty());
  }
  CHECK(NicNamePatternProblem(std::string(65, 'a')).find("over the 64") != std::string::npos);
  CHECK_FALSE(NicNamePatternProblem("a\nb").empty());

  const char* saved = std::getenv("PRISM_NIC_NAME");
  const std::string keep = saved ? saved : "";
  setenv("PRISM_NIC_NAME", "nic%d%p", 1);
  std::string warnings;
  const auto s = prism::plugin::LoadSettings(&warnings);
  CHECK(s.nic.name_pattern == "prism%d");
  CHECK(warnings.find("PRISM_NIC_NAME: 'nic%d%p' holds a '%' other than %d") != std::string::npos);
  if (saved) setenv("PRISM_NIC_NAME", keep.c_str(), 1); else unsetenv("PRISM_NIC_NAME");
}

TEST_CASE("an unreachable prismd's error names this user's default socket, not a shared one", "[plugin][unit]") {
  prism::plugin::Settings s;
  s.daemon_address = "unix:///nonexistent-dir-" + std::to_string(getpid()) + "/prismd.sock";
  s.daemon_timeout_ms = 100;
  const std::string why = prism::plugin::AnnounceToDaemon(s, 0);
  CHECK(why.find("cannot reach prismd") != std::string::npos);
  CHECK(why.find(prism::DefaultDaemonAddress()) != std::string::npos);
  CHECK(why.find("/tmp/prismd.sock") == std::string::npos);
}

TEST_CASE("settings: PRISM_DAEMON unset means prismd's per-user default socket", "[plugin][unit]") {
  const char* saved = std::getenv("PRISM_DAEMON");
  const std::string keep = saved ? saved : "";
  unsetenv("PRISM_DAEMON");
  std::string warnings;
  auto s = prism::plugin::LoadSettings(&warnings);
  CHECK_FALSE(s.daemon_configured);
  CHECK(s.daemon_address == prism::DefaultDaemonAddress());
  CHECK(s.daemon_address.find("/tmp/prismd.sock") == std::string::npos);
  if (saved) setenv("PRISM_DAEMON", keep.c_str(), 1);
}

void NotNcclsLogger(prism_ncclDebugLogLevel, unsigned long, const char*, int, const char*, ...) {}

TEST_CASE("the NCCL version comes from the library that holds NCCL's logger", "[plugin][unit]") {
  CHECK(prism::plugin::NcclVersionOfLogger(nullptr) == 0);
  void* lib = dlopen(PRISM_FAKE_LIBNCCL, RTLD_NOW | RTLD_LOCAL);
  REQUIRE(lib != nullptr);
  auto logger = reinterpret_cast<prism_ncclDebugLogger_t>(dlsym(lib, "fakeNcclDebugLog"));
  REQUIRE(logger != nullptr);
  CHECK(prism::plugin::NcclVersionOfLogger(logger) == 22707);
  dlclose(lib);
  // A logger outside any NCCL (this test binary has no ncclGetVersion).
  CHECK(prism::plugin::NcclVersionOfLogger(NotNcclsLogger) == 0);
}

TEST_CASE("host load: the runnable count from /proc/loadavg, idle while at most half the CPUs run", "[plugin][unit]") {
  using prism::plugin::CoresIdle;
  using prism::plugin::RunnableThreads;
  CHECK(RunnableThreads("0.52 0.58 0.59 3/912 4242") == 3);
  CHECK(RunnableThreads("12.00 9.10 7.00 17/1500 99\n") == 17);
  CHECK(RunnableThreads("") == -1);
  CHECK(RunnableThreads("0.5 0.4 0.3") == -1);
  CHECK(CoresIdle(8, 16));
  CHECK_FALSE(CoresIdle(9, 16));
  CHECK_FALSE(CoresIdle(-1, 16));  // unreadable: not idle (PRISM_INLINE_BYTES holds)
  CHECK_FALSE(CoresIdle(1, 0));
  prism::plugin::HostLoad here;
  CHECK(here.cpus() > 0);
  (void)here.Idle();  // reads this host's /proc/loadavg without failing
}

TEST_CASE("settings: PRISM_IDLE_INLINE_BYTES is off unless set", "[plugin][unit]") {
  unsetenv("PRISM_IDLE_INLINE_BYTES");
  std::string warnings;
  CHECK(prism::plugin::LoadSettings(&warnings).idle_inline_bytes == 0);
  setenv("PRISM_IDLE_INLINE_BYTES", "262144", 1);
  CHECK(prism::plugin::LoadSettings(&warnings).idle_inline_bytes == 262144);
  unsetenv("PRISM_IDLE_INLINE_BYTES");
  CHECK(warnings.empty());
}
