// Real peers on one host connect over abstract Unix sockets (host_identity.h,
// real_handshake.h), peers elsewhere over TCP.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <dirent.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <memory>
#include <thread>
#include <vector>

#include "common/net_handles.h"
#include "plugin/comm.h"
#include "plugin/host_identity.h"
#include "plugin/net_socket.h"
#include "plugin/real_handshake.h"
#include "plugin/real_wire.h"
#include "plugin/settings.h"
#include "test/plugin_log_capture.h"

namespace prism::plugin {
namespace {

TEST_CASE("same-host key: one boot and one network namespace", "[plugin][unit]") {
  const uint64_t k = SameHostKeyOf("3f1c-boot", "net:[4026531840]");
  CHECK(k != 0);
  CHECK(SameHostKeyOf("3f1c-boot", "net:[4026531840]") == k);
  CHECK(SameHostKeyOf("3f1c-boot", "net:[4026532001]") != k);  // a container's own namespace
  CHECK(SameHostKeyOf("77aa-boot", "net:[4026531840]") != k);  // another host (or boot)
  CHECK(SameHostKeyOf("", "net:[4026531840]") == 0);
  CHECK(SameHostKeyOf("3f1c-boot", "") == 0);
  CHECK(SameHostKey() == SameHostKey());
  CHECK(SameHostSocketName(0x6b8b4567ce1c0001ull) == "prism-net/6b8b4567ce1c0001");
}

TEST_CASE("settings: PRISM_SAME_HOST is unix unless tcp, a bad value warned", "[plugin][unit]") {
  std::string warnings;
  CHECK(LoadSettings(&warnings).same_host_unix);
  setenv("PRISM_SAME_HOST", "tcp", 1);
  CHECK_FALSE(LoadSettings(&warnings).same_host_unix);
  setenv("PRISM_SAME_HOST", "shm", 1);
  CHECK(LoadSettings(&warnings).same_host_unix);
  CHECK(warnings.find("PRISM_SAME_HOST='shm' is not unix|tcp") != std::string::npos);
  unsetenv("PRISM_SAME_HOST");
}

TEST_CASE("settings: PRISM_SAME_HOST_SNDBUF is 4 MiB unless set, 0 the kernel's default", "[plugin][unit]") {
  std::string warnings;
  CHECK(LoadSettings(&warnings).same_host_send_buffer == 4 << 20);
  setenv("PRISM_SAME_HOST_SNDBUF", "0", 1);
  CHECK(LoadSettings(&warnings).same_host_send_buffer == 0);
  setenv("PRISM_SAME_HOST_SNDBUF", "lots", 1);
  CHECK(LoadSettings(&warnings).same_host_send_buffer == 4 << 20);
  CHECK(warnings.find("PRISM_SAME_HOST_SNDBUF='lots' is not a number") != std::string::npos);
  unsetenv("PRISM_SAME_HOST_SNDBUF");
}

TEST_CASE("settings: PRISM_SAME_HOST_RING is 4 MiB unless set, 0 none, at least 4096", "[plugin][unit]") {
  std::string warnings;
  CHECK(LoadSettings(&warnings).same_host_ring_bytes == 4 << 20);
  setenv("PRISM_SAME_HOST_RING", "0", 1);
  CHECK(LoadSettings(&warnings).same_host_ring_bytes == 0);
  setenv("PRISM_SAME_HOST_RING", "100", 1);
  CHECK(LoadSettings(&warnings).same_host_ring_bytes == 4096);
  CHECK(warnings.find("PRISM_SAME_HOST_RING=100 is under 4096; using 4096") != std::string::npos);
  setenv("PRISM_SAME_HOST_RING", "big", 1);
  CHECK(LoadSettings(&warnings).same_host_ring_bytes == 4 << 20);
  CHECK(warnings.find("PRISM_SAME_HOST_RING='big' is not a number") != std::string::npos);
  unsetenv("PRISM_SAME_HOST_RING");
}

// A listener on 127.0.0.1 and, when `with_unix`, on its abstract name.
struct Listener {
  Listener(const CommEnv& env, std::shared_ptr<ProgressEnginePool> engines, uint64_t id, bool with_unix) {
    std::string why;
    handle.listen_id = id;
    handle.ipv4_be = htonl(INADDR_LOOPBACK);
    const int tcp = OpenListener(handle.ipv4_be, &handle.port_be, &why);
    REQUIRE(tcp >= 0);
    const int unix_fd = with_unix ? OpenUnixListener(SameHostSocketName(id), &why) : -1;
    if (with_unix) REQUIRE(unix_fd >= 0);
    handle.host_key = env.same_host_key;
    comm = std::make_unique<ListenComm>(env, std::move(engines), tcp, unix_fd, handle, nullptr);
  }
  RealListenHandle handle;
  std::unique_ptr<ListenComm> comm;
};

// Steps the connect and the accept for up to `limit`; true once both gave a
// comm. The comms are closed on return unless `kept` takes them.
struct Comms {
  std::unique_ptr<NetComm> send, recv;
};
bool Handshake(PendingConnect& dial, ListenComm& listen, std::chrono::milliseconds limit, Comms* kept = nullptr) {
  Comms local;
  Comms& c = kept != nullptr ? *kept : local;
  std::unique_ptr<NetComm>& send = c.send;
  std::unique_ptr<NetComm>& recv = c.recv;
  const auto end = std::chrono::steady_clock::now() + limit;
  while (std::chrono::steady_clock::now() < end) {
    if (!send) REQUIRE(dial.Step(&send) == prism_ncclSuccess);
    if (!recv) REQUIRE(listen.Accept(&recv) == prism_ncclSuccess);
    if (send && recv) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return false;
}

// SO_SNDBUF of every connected Unix socket of this process whose own or
// peer address is a plugin listener's abstract name ("\0prism-net/...").
std::vector<int> SameHostSendBuffers() {
  std::vector<int> sizes;
  DIR* dir = opendir("/proc/self/fd");
  REQUIRE(dir != nullptr);
  const std::string prefix = std::string(1, '\0') + "prism-net/";
  while (dirent* e = readdir(dir)) {
    const int fd = std::atoi(e->d_name);
    int domain = 0, listening = 0;
    socklen_t len = sizeof(int);
    if (e->d_name[0] == '.' || getsockopt(fd, SOL_SOCKET, SO_DOMAIN, &domain, &len) != 0 || domain != AF_UNIX)
      continue;
    len = sizeof(int);
    if (getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &listening, &len) != 0 || listening != 0) continue;
    auto named = [&](auto get) {
      sockaddr_un a{};
      socklen_t alen = sizeof(a);
      return get(fd, reinterpret_cast<sockaddr*>(&a), &alen) == 0 &&
             std::string(a.sun_path, std::min<size_t>(prefix.size(), sizeof(a.sun_path))) == prefix;
    };
    if (!named(getsockname) && !named(getpeername)) continue;
    int size = 0;
    len = sizeof(int);
    REQUIRE(getsockopt(fd, SOL_SOCKET, SO_SNDBUF, &size, &len) == 0);
    sizes.push_back(size);
  }
  closedir(dir);
  return sizes;
}

// How many of this process's fds are the plugin's shared-memory rings.
int RingFds() {
  int count = 0;
  DIR* dir = opendir("/proc/self/fd");
  REQUIRE(dir != nullptr);
  while (dirent* e = readdir(dir)) {
    if (e->d_name[0] == '.') continue;
    char target[256] = {};
    const std::string link = std::string("/proc/self/fd/") + e->d_name;
    if (readlink(link.c_str(), target, sizeof(target) - 1) > 0 &&
        std::string(target).find("memfd:prism-net ring") != std::string::npos)
      ++count;
  }
  closedir(dir);
  return count;
}

// Sends `bytes` through `comms` and checks they arrive.
void CheckMessage(Comms& comms, size_t bytes) {
  std::vector<char> in(bytes), out(bytes);
  for (size_t i = 0; i < bytes; ++i) in[i] = static_cast<char>(i * 13);
  void* data = out.data();
  const int tag = 3;
  MessageTag none;
  void *rreq = nullptr, *sreq = nullptr;
  REQUIRE(comms.recv->Irecv(1, &data, &bytes, &tag, nullptr, &none, &rreq) == prism_ncclSuccess);
  REQUIRE(comms.send->Isend(in.data(), bytes, tag, nullptr, none, &sreq) == prism_ncclSuccess);
  int sent = 0, got = 0;
  const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while ((!sent || !got) && std::chrono::steady_clock::now() < end) {
    if (!sent) REQUIRE(static_cast<Request*>(sreq)->Test(&sent, nullptr) == prism_ncclSuccess);
    if (!got) REQUIRE(static_cast<Request*>(rreq)->Test(&got, nullptr) == prism_ncclSuccess);
  }
  REQUIRE((sent && got));
  CHECK(out == in);
}

// A TCP port on 127.0.0.1 nobody listens on (bound once, then closed).
uint16_t ClosedPort() {
  std::string why;
  uint16_t port = 0;
  const int fd = OpenListener(htonl(INADDR_LOOPBACK), &port, &why);
  REQUIRE(fd >= 0);
  close(fd);
  return port;
}

// What a handshake needs around it: settings, a logger, one NIC, this host's key.
struct HandshakeRig {
  explicit HandshakeRig(int64_t connect_timeout_ms) : settings(LoadSettings(nullptr)) {
    settings.connect_timeout_ms = connect_timeout_ms;
    env.settings = &settings;
    env.logger = &logger;
    env.nics = &nics;
    env.same_host_key = SameHostKeyOf("boot", "net:[1]");
  }
  Settings settings;
  Logger logger;
  NicLinks nics{1, 0, 0};
  CommEnv env;
  std::shared_ptr<ProgressEnginePool> engines = std::make_shared<ProgressEnginePool>(-1, 0);
};

TEST_CASE("same-host handshake: Unix socket where the keys match, TCP otherwise", "[plugin][unit]") {
  HandshakeRig rig(5000);
  Settings& settings = rig.settings;
  CommEnv& env = rig.env;
  auto& engines = rig.engines;
  uint64_t id = (uint64_t{static_cast<uint32_t>(getpid())} << 24) | 0x5a0000;

  SECTION("matching keys: the Unix listener takes it though no TCP listener is left") {
    Listener l(env, engines, ++id, true);
    RealListenHandle h = l.handle;
    h.port_be = ClosedPort();
    PendingConnect dial(env, engines, h, 0);
    CHECK(Handshake(dial, *l.comm, std::chrono::milliseconds(2000)));
  }
  SECTION("both ends of a Unix socket get PRISM_SAME_HOST_SNDBUF") {
    // 64 KiB: below every kernel's default (net.core.wmem_default), so the
    // request shows whatever net.core.wmem_max is; Linux books it twice.
    settings.same_host_send_buffer = 64 << 10;
    Listener l(env, engines, ++id, true);
    PendingConnect dial(env, engines, l.handle, 0);
    Comms comms;
    REQUIRE(Handshake(dial, *l.comm, std::chrono::milliseconds(2000), &comms));
    CHECK(SameHostSendBuffers() == std::vector<int>{128 << 10, 128 << 10});
  }
  SECTION("a shared-memory ring passes with the hello: one socket and one ring each end, however many sockets are asked") {
    settings.same_host_ring_bytes = 65536;
    settings.socks_per_comm = 4;
    Listener l(env, engines, ++id, true);
    PendingConnect dial(env, engines, l.handle, 0);
    Comms comms;
    REQUIRE(Handshake(dial, *l.comm, std::chrono::milliseconds(2000), &comms));
    CHECK(SameHostSendBuffers().size() == 2);
    CHECK(RingFds() == 2);
    CheckMessage(comms, 300000);  // more than the ring holds: streamed through it
  }
  SECTION("PRISM_SAME_HOST_RING=0: no ring, the sockets carry the payload") {
    settings.same_host_ring_bytes = 0;
    settings.socks_per_comm = 2;
    Listener l(env, engines, ++id, true);
    PendingConnect dial(env, engines, l.handle, 0);
    Comms comms;
    REQUIRE(Handshake(dial, *l.comm, std::chrono::milliseconds(2000), &comms));
    CHECK(SameHostSendBuffers().size() == 4);
    CHECK(RingFds() == 0);
    CheckMessage(comms, 300000);
  }
  SECTION("a ring's hello without its fd, or a plain hello with one, is dropped, not taken for a comm") {
    Listener l(env, engines, ++id, true);
    for (bool ring_magic : {true, false}) {
      INFO((ring_magic ? "ring hello without an fd" : "plain hello with an fd"));
      bool again = false;
      std::string why;
      const int fd = StartConnectUnix(SameHostSocketName(l.handle.listen_id), &again, &why);
      REQUIRE(fd >= 0);
      const SocketHello hello{ring_magic ? kRingHelloMagic : kRealHandleMagic, l.handle.listen_id, 42, 0, 1};
      const int passed = dup(0);
      const long n = ring_magic ? WriteSome(fd, &hello, sizeof(hello), &why)
                                : WriteSomeWithFds(fd, &hello, sizeof(hello), &passed, 1, &why);
      close(passed);
      REQUIRE(n == static_cast<long>(sizeof(hello)));
      std::unique_ptr<NetComm> recv;
      for (int i = 0; i < 50 && !recv; ++i) {
        REQUIRE(l.comm->Accept(&recv) == prism_ncclSuccess);
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
      }
      CHECK_FALSE(recv);
      char byte = 0;
      CHECK(ReadSome(fd, &byte, 1, &why) < 0);  // the listener closed it
      CHECK(why == "peer closed the connection");
      close(fd);
    }
  }
  SECTION("another host's key: TCP is dialled, so a closed TCP port never connects") {
    Listener l(env, engines, ++id, true);
    RealListenHandle h = l.handle;
    h.port_be = ClosedPort();
    CommEnv other = env;
    other.same_host_key = SameHostKeyOf("another boot", "net:[1]");
    PendingConnect dial(other, engines, h, 0);
    CHECK_FALSE(Handshake(dial, *l.comm, std::chrono::milliseconds(200)));
  }
  SECTION("another host's key: TCP connects") {
    Listener l(env, engines, ++id, true);
    CommEnv other = env;
    other.same_host_key = 0;  // PRISM_SAME_HOST=tcp
    PendingConnect dial(other, engines, l.handle, 0);
    Comms comms;
    CHECK(Handshake(dial, *l.comm, std::chrono::milliseconds(2000), &comms));
    CHECK(RingFds() == 0);  // no shared memory with another host
  }
  SECTION("matching keys but no Unix listener: falls back to TCP") {
    Listener l(env, engines, ++id, false);
    l.handle.host_key = env.same_host_key;
    PendingConnect dial(env, engines, l.handle, 0);
    CHECK(Handshake(dial, *l.comm, std::chrono::milliseconds(2000)));
  }
}

TEST_CASE("Unix sockets: a name nobody listens on is refused at once, not retried", "[plugin][unit]") {
  bool again = true;
  std::string why;
  CHECK(StartConnectUnix(SameHostSocketName(0xdeadull << 40), &again, &why) < 0);
  CHECK_FALSE(again);
  CHECK(why.find("connect @prism-net/") != std::string::npos);
}

TEST_CASE("accept: a peer that never connects is named once, after half of PRISM_CONNECT_TIMEOUT_MS",
          "[plugin][unit]") {
  HandshakeRig rig(200);
  testing::LogCapture::Capture(&rig.logger);
  CommEnv& env = rig.env;
  auto& engines = rig.engines;
  const uint64_t id = (uint64_t{static_cast<uint32_t>(getpid())} << 24) | 0x7b0000;
  Listener l(env, engines, id, true);
  std::unique_ptr<NetComm> recv;
  REQUIRE(l.comm->Accept(&recv) == prism_ncclSuccess);
  std::this_thread::sleep_for(std::chrono::milliseconds(40));
  REQUIRE(l.comm->Accept(&recv) == prism_ncclSuccess);
  CHECK(testing::LogCapture::Text().find("has waited") == std::string::npos);  // 40 ms: under 100
  std::this_thread::sleep_for(std::chrono::milliseconds(80));
  for (int i = 0; i < 3; ++i) REQUIRE(l.comm->Accept(&recv) == prism_ncclSuccess);
  CHECK_FALSE(recv);
  const std::string text = testing::LogCapture::Text();
  CHECK(text.find("accept on listen 127.0.0.1:") != std::string::npos);
  CHECK(text.find("for its peer: 0 connection(s) with their hello read, 0 without") != std::string::npos);
  CHECK(text.find("has waited") == text.rfind("has waited"));  // once
  SECTION("a peer that then connects still gets its comm") {
    PendingConnect dial(env, engines, l.handle, 0);
    CHECK(Handshake(dial, *l.comm, std::chrono::milliseconds(2000)));
  }
  rig.logger.Set(nullptr);
}

TEST_CASE("shared-memory ring: a sender that hangs up while a receive is posted is named, headers counted or not",
          "[plugin][unit]") {
  HandshakeRig rig(5000);
  rig.settings.same_host_ring_bytes = 65536;
  testing::LogCapture::Capture(&rig.logger);
  const uint64_t id = (uint64_t{static_cast<uint32_t>(getpid())} << 24) | 0x7d0000;
  Listener l(rig.env, rig.engines, id, true);
  PendingConnect dial(rig.env, rig.engines, l.handle, 0);
  Comms comms;
  REQUIRE(Handshake(dial, *l.comm, std::chrono::milliseconds(2000), &comms));
  CheckMessage(comms, 1000);  // one header counted and read: the counts agree again after it
  std::vector<char> out(4096);
  void* data = out.data();
  size_t bytes = out.size();
  const int tag = 3;
  MessageTag none;
  void* rreq = nullptr;
  REQUIRE(comms.recv->Irecv(1, &data, &bytes, &tag, nullptr, &none, &rreq) == prism_ncclSuccess);
  int got = 0;
  REQUIRE(static_cast<Request*>(rreq)->Test(&got, nullptr) == prism_ncclSuccess);
  CHECK(got == 0);
  comms.send.reset();  // the sender's process goes away between messages
  Result r = prism_ncclSuccess;
  const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (r == prism_ncclSuccess && got == 0 && std::chrono::steady_clock::now() < end) {
    r = static_cast<Request*>(rreq)->Test(&got, nullptr);
  }
  CHECK(r == prism_ncclSystemError);
  CHECK(testing::LogCapture::Text().find("closed the connection while receives were posted") != std::string::npos);
  rig.logger.Set(nullptr);
}

}  // namespace
}  // namespace prism::plugin
