// The bootstrap listener against hostile or broken peers (issue 12, defects
// 3 and 4): non-loopback peers in loopback-alias mode, forged root
// check-ins, connections idle before their header, too many connections, a
// flood of garbage, and running out of file descriptors.
#include <arpa/inet.h>
#include <ifaddrs.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>
#include <catch2/catch.hpp>

#include <chrono>
#include <cstring>
#include <dirent.h>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "daemon/bootstrap/bootstrap_service.h"
#include "spdlog/sinks/ringbuffer_sink.h"
#include "spdlog/spdlog.h"
#include "test/bootstrap_fake_rank.h"
#include "test/bootstrap_test_util.h"
#include "test/skip.h"

namespace prism::bootstrap::testing {
namespace {

// Polls `pred` every 10 ms, at most `limit_ms`.
bool WaitFor(const std::function<bool()>& pred, int limit_ms = 10000) {
  for (int waited = 0; waited < limit_ms; waited += 10) {
    if (pred()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return pred();
}

// Captures the log lines prismd's code writes through spdlog.
class LogCapture {
 public:
  LogCapture() : sink_(std::make_shared<spdlog::sinks::ringbuffer_sink_mt>(100000)) {
    previous_ = spdlog::default_logger();
    spdlog::set_default_logger(std::make_shared<spdlog::logger>("capture", sink_));
  }
  ~LogCapture() { spdlog::set_default_logger(previous_); }
  int Count(const std::string& needle) const {
    int n = 0;
    for (const std::string& line : sink_->last_formatted()) n += line.find(needle) != std::string::npos ? 1 : 0;
    return n;
  }
  size_t Lines() const { return sink_->last_formatted().size(); }

 private:
  std::shared_ptr<spdlog::sinks::ringbuffer_sink_mt> sink_;
  std::shared_ptr<spdlog::logger> previous_;
};

int ConnectTo(uint32_t ip, uint16_t port) {
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  a.sin_addr.s_addr = htonl(ip);
  if (connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0) {
    close(fd);
    return -1;
  }
  return fd;
}

// True once the peer closed `fd` (read returns 0 or an error), within `limit_ms`.
bool ClosedByPeer(int fd, int limit_ms = 5000) {
  pollfd p{fd, POLLIN, 0};
  if (poll(&p, 1, limit_ms) != 1) return false;
  char c;
  return read(fd, &c, 1) <= 0;
}

std::optional<uint32_t> NonLoopbackIpv4() {
  ifaddrs* list = nullptr;
  if (getifaddrs(&list) != 0) return std::nullopt;
  std::optional<uint32_t> found;
  for (ifaddrs* i = list; i != nullptr && !found; i = i->ifa_next) {
    if (i->ifa_addr == nullptr || i->ifa_addr->sa_family != AF_INET) continue;
    const uint32_t ip = ntohl(reinterpret_cast<sockaddr_in*>(i->ifa_addr)->sin_addr.s_addr);
    if ((ip >> 24) != 127) found = ip;
  }
  freeifaddrs(list);
  return found;
}

BootstrapConfig ConfigFor(uint16_t root_port) {
  BootstrapConfig config;
  config.comm_id = absl::StrCat("127.0.0.1:", root_port);
  return config;
}

size_t OpenFds() {
  size_t n = 0;
  if (DIR* d = opendir("/proc/self/fd")) {
    while (readdir(d) != nullptr) ++n;
    closedir(d);
  }
  return n > 2 ? n - 2 : 0;  // . and ..
}

TEST_CASE("a non-loopback NCCL_COMM_ID is refused at start in loopback-alias mode, naming the fix",
          "[bootstrap][hostile]") {
  BootstrapConfig config;
  config.comm_id = "10.1.2.3:29555";  // this host's own LAN address, say: every check-in would be refused
  BootstrapService service(config, WorldPlan(8, 8, {0}), nullptr);
  const absl::Status s = service.Start();
  CHECK_FALSE(s.ok());
  CHECK_THAT(std::string(s.message()), Catch::Contains("not a loopback address") &&
                                           Catch::Contains("NCCL_COMM_ID=127.0.0.1:29555"));
  service.Stop();
}

// Whether a TCP connection to ip:port is established within `limit_ms`.
bool Establishes(uint32_t ip, uint16_t port, int limit_ms) {
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  a.sin_addr.s_addr = htonl(ip);
  bool up = connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0;
  if (!up && errno == EINPROGRESS) {
    pollfd p{fd, POLLOUT, 0};
    int err = 0;
    socklen_t len = sizeof(err);
    up = poll(&p, 1, limit_ms) == 1 && getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) == 0 && err == 0;
  }
  close(fd);
  return up;
}

TEST_CASE("loopback-alias mode takes no connection that is not from and to loopback", "[bootstrap][hostile]") {
  const std::optional<uint32_t> lan = NonLoopbackIpv4();
  if (!lan) {
    PRISM_SKIP("no non-loopback IPv4 address on this machine: skipped");
  }
  BootstrapService service(ConfigFor(FreePort()), WorldPlan(8, 8, {0}), nullptr);
  REQUIRE(service.Start().ok());
  // Dialled to a LAN address of this host: the listener's socket filter drops
  // the SYN, so no connection is ever set up (as if it listened on loopback).
  CHECK_FALSE(Establishes(*lan, service.port(), 1500));
  // Loopback, the virtual ranks' aliases included, still connects.
  CHECK(Establishes(0x7f000001, service.port(), 5000));
  CHECK(Establishes(0x7f400102, service.port(), 5000));
  CHECK(service.Stats().divergences == 0);
  service.Stop();
}

TEST_CASE("a forged root check-in naming a foreign address is not dialled, and the genuine rank gets in",
          "[bootstrap][hostile]") {
  const uint16_t root_port = FreePort();
  // Rank 0 virtual: prismd hosts the root; rank 3 is the one real rank.
  BootstrapService service(ConfigFor(root_port), WorldPlan(4, 8, {3}), nullptr);
  REQUIRE(service.Start().ok());
  // The forger names an address it owns off loopback (where possible, a
  // listener of ours, so that a dial would be seen).
  const std::optional<uint32_t> lan = NonLoopbackIpv4();
  int trap = -1;
  Ipv4Endpoint foreign{0x0afffe01, 9};  // 10.255.254.1:9
  if (lan) {
    trap = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(*lan);
    REQUIRE(bind(trap, reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0);
    REQUIRE(listen(trap, 16) == 0);
    socklen_t len = sizeof(a);
    getsockname(trap, reinterpret_cast<sockaddr*>(&a), &len);
    foreign = {*lan, ntohs(a.sin_port)};
  }
  const int forger = ConnectTo(0x7f000001, root_port);
  REQUIRE(forger >= 0);
  std::string msg(12 + 4 + 172, '\0');
  const uint64_t magic = kNcclMagic;
  const int32_t type = 1, size = 172, rank = 3, nranks = 4, nroots = 1;
  std::memcpy(msg.data(), &magic, 8);
  std::memcpy(msg.data() + 8, &type, 4);
  std::memcpy(msg.data() + 12, &size, 4);
  std::memcpy(msg.data() + 16, &rank, 4);
  std::memcpy(msg.data() + 20, &nranks, 4);
  std::memcpy(msg.data() + 28, &nroots, 4);
  const SockAddrBytes where = EncodeSockAddr(foreign);
  std::memcpy(msg.data() + 16 + 16, where.data(), where.size());
  std::memcpy(msg.data() + 16 + 44, where.data(), where.size());
  REQUIRE(write(forger, msg.data(), msg.size()) == static_cast<ssize_t>(msg.size()));
  close(forger);
  REQUIRE(WaitFor([&] { return service.Stats().divergences >= 1; }));
  FakeRankOptions o;
  o.rank = 3;
  o.nranks = 4;
  o.comm_id = {0x7f000001, root_port};
  o.timeout_ms = 10000;
  FakeRealRank genuine(o);
  CHECK_NOTHROW(genuine.Init());
  genuine.Destroy();
  if (trap >= 0) {
    const int dialled = accept4(trap, nullptr, nullptr, SOCK_CLOEXEC);
    CHECK(dialled < 0);  // prismd never connected to the forger's address
    if (dialled >= 0) close(dialled);
    close(trap);
  }
  const BootstrapStats st = service.Stats();
  CHECK(st.jobs_failed == 0);
  REQUIRE_FALSE(st.recent_divergences.empty());
  CHECK(st.recent_divergences.front().find("not an expected real-rank address") != std::string::npos);
  service.Stop();
}

TEST_CASE("connections idle before their header are closed", "[bootstrap][hostile]") {
  BootstrapConfig config = ConfigFor(FreePort());
  config.header_timeout_ms = 200;
  BootstrapService service(config, WorldPlan(8, 8, {0}), nullptr);
  REQUIRE(service.Start().ok());
  const int idle = ConnectTo(0x7f000001, service.port());
  REQUIRE(idle >= 0);
  CHECK(ClosedByPeer(idle));
  close(idle);
  CHECK(service.Stats().rejected_connections == 1);
  CHECK(service.Stats().divergences == 0);
  service.Stop();
}

TEST_CASE("connections without a header are capped, and accepting resumes when they close", "[bootstrap][hostile]") {
  LogCapture log;
  BootstrapConfig config = ConfigFor(FreePort());
  config.max_unidentified_connections = 8;
  config.header_timeout_ms = 600000;
  BootstrapService service(config, WorldPlan(8, 8, {0}), nullptr);
  REQUIRE(service.Start().ok());
  std::vector<int> clients;
  for (int i = 0; i < 20; ++i) {
    const int fd = ConnectTo(0x7f000001, service.port());  // queued by the kernel past the cap
    REQUIRE(fd >= 0);
    clients.push_back(fd);
  }
  REQUIRE(WaitFor([&] { return log.Count("connection cap reached") == 1; }));
  CHECK(service.Stats().accepted_connections == 8);
  for (int fd : clients) close(fd);
  CHECK(WaitFor([&] { return service.Stats().accepted_connections == 20; }));
  CHECK(log.Count("connection cap reached") <= 5);  // rate limited
  service.Stop();
}

TEST_CASE("a flood of garbage connections is rejected, not counted as divergences, and logged briefly",
          "[bootstrap][hostile]") {
  LogCapture log;
  BootstrapService service(ConfigFor(FreePort()), WorldPlan(8, 8, {0}), nullptr);
  REQUIRE(service.Start().ok());
  const int kFlood = 500;
  for (int i = 0; i < kFlood; ++i) {
    const int fd = ConnectTo(0x7f400000 + 1000 + i, service.port());  // no live endpoint there
    REQUIRE(fd >= 0);
    const char garbage[12] = "not-nccl-xx";
    REQUIRE(write(fd, garbage, sizeof(garbage)) == 12);
    CHECK(ClosedByPeer(fd));
    close(fd);
  }
  const BootstrapStats st = service.Stats();
  CHECK(st.divergences == 0);
  CHECK(st.rejected_connections == kFlood);
  CHECK(log.Lines() <= 2 * 5 + 4);  // a burst, a "not logged" summary per window
  service.Stop();
}

TEST_CASE("out of file descriptors: the listener pauses instead of spinning and says so once",
          "[bootstrap][hostile]") {
  LogCapture log;
  BootstrapConfig config = ConfigFor(FreePort());
  config.header_timeout_ms = 600000;  // the accepted ones stay open
  BootstrapService service(config, WorldPlan(8, 8, {0}), nullptr);
  REQUIRE(service.Start().ok());
  std::vector<int> clients;
  for (int i = 0; i < 40; ++i) clients.push_back(socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  rlimit saved{};
  REQUIRE(getrlimit(RLIMIT_NOFILE, &saved) == 0);
  rlimit low = saved;
  low.rlim_cur = OpenFds() + 8;  // prismd can accept about 8 more, then EMFILE
  REQUIRE(setrlimit(RLIMIT_NOFILE, &low) == 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(service.port());
  a.sin_addr.s_addr = htonl(0x7f000001);
  for (int fd : clients) connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a));  // the backlog holds the rest
  const bool failed_thrice = WaitFor([&] { return service.Stats().accept_failures >= 3; });
  const BootstrapStats st = service.Stats();
  REQUIRE(setrlimit(RLIMIT_NOFILE, &saved) == 0);
  REQUIRE(failed_thrice);
  // Every failed accept4 took the listener out of epoll (no retry in a loop).
  CHECK(st.accept_failures == st.accept_pauses);
  CHECK(log.Count("cannot accept bootstrap connections") == 1);
  for (int fd : clients) close(fd);
  service.Stop();
}

}  // namespace
}  // namespace prism::bootstrap::testing
