// What NCCL's proxy thread pays for test() on a posted receive from a real
// peer while nothing has come yet (a pipeline receive waiting for its stage,
// a ring step waiting for its neighbour): the call it makes on every pass.
//   idle_test_bench [--calls N] [--rounds K]
// One process, both ends on this host: a connection whose payloads go
// through shared memory (PRISM_SAME_HOST_RING, the default), where the
// sender counts its headers in the ring (SharedRing::AnnounceHeader) and an
// idle test() reads no socket, beside one without a ring
// (PRISM_SAME_HOST_RING=0), where every idle test() asks the socket for a
// header. Per connection it prints the median ns per call over K rounds of
// N calls (the two alternate in each round), and their ratio.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "common/net_handles.h"
#include "plugin/comm.h"
#include "plugin/host_identity.h"
#include "plugin/net_socket.h"
#include "plugin/real_handshake.h"
#include "plugin/settings.h"

namespace prism::plugin {
namespace {

// Both ends of one real-peer connection on this host, and a receive posted on it.
struct IdleConnection {
  IdleConnection(int64_t ring_bytes, uint64_t listen_id) : settings(LoadSettings(nullptr)) {
    settings.same_host_ring_bytes = ring_bytes;
    env.settings = &settings;
    env.logger = &logger;
    env.nics = &nics;
    env.same_host_key = SameHostKey();
    std::string why;
    RealListenHandle handle{};
    handle.listen_id = listen_id;
    handle.ipv4_be = htonl(INADDR_LOOPBACK);
    handle.host_key = env.same_host_key;
    const int tcp = OpenListener(handle.ipv4_be, &handle.port_be, &why);
    const int unix_fd = OpenUnixListener(SameHostSocketName(listen_id), &why);
    if (tcp < 0 || unix_fd < 0) Fail("listen: " + why);
    listen = std::make_unique<ListenComm>(env, engines, tcp, unix_fd, handle, nullptr);
    PendingConnect dial(env, engines, handle, 0);
    const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    while ((!send || !recv) && std::chrono::steady_clock::now() < end) {
      if (!send && dial.Step(&send) != prism_ncclSuccess) Fail("connect failed");
      if (!recv && listen->Accept(&recv) != prism_ncclSuccess) Fail("accept failed");
    }
    if (!send || !recv) Fail("no connection within 5 s");
    void* data = buffer.data();
    size_t bytes = buffer.size();
    const int tag = 1;
    MessageTag none;
    if (recv->Irecv(1, &data, &bytes, &tag, nullptr, &none, &request) != prism_ncclSuccess) Fail("irecv failed");
  }

  // Mean ns per test() over `calls` calls (nothing arrives meanwhile).
  double NsPerIdleTest(int calls) {
    int done = 0;
    const auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < calls; ++i) static_cast<Request*>(request)->Test(&done, nullptr);
    const auto t1 = std::chrono::steady_clock::now();
    if (done != 0) Fail("an idle receive completed");
    return std::chrono::duration<double, std::nano>(t1 - t0).count() / calls;
  }

  [[noreturn]] static void Fail(const std::string& why) {
    std::fprintf(stderr, "idle_test_bench: %s\n", why.c_str());
    std::exit(1);
  }

  Settings settings;
  Logger logger;
  NicLinks nics{1, 0, 0};
  CommEnv env;
  std::shared_ptr<ProgressEnginePool> engines = std::make_shared<ProgressEnginePool>(-1, 0);
  std::unique_ptr<ListenComm> listen;
  std::unique_ptr<NetComm> send, recv;
  std::vector<char> buffer = std::vector<char>(4096);
  void* request = nullptr;
};

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace
}  // namespace prism::plugin

int main(int argc, char** argv) {
  using prism::plugin::IdleConnection;
  int calls = 200000, rounds = 5;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (std::strcmp(argv[i], "--calls") == 0) calls = std::max(1, std::atoi(argv[i + 1]));
    else if (std::strcmp(argv[i], "--rounds") == 0) rounds = std::max(1, std::atoi(argv[i + 1]));
    else IdleConnection::Fail(std::string("unknown option ") + argv[i] + " (--calls N, --rounds K)");
  }
  const uint64_t id = (uint64_t{static_cast<uint32_t>(getpid())} << 24) | 0x1d0000;
  IdleConnection ring(4 << 20, id + 1), socket_only(0, id + 2);
  std::vector<double> with_ring, without;
  for (int k = 0; k < rounds; ++k) {
    with_ring.push_back(ring.NsPerIdleTest(calls));
    without.push_back(socket_only.NsPerIdleTest(calls));
  }
  const double a = prism::plugin::Median(with_ring), b = prism::plugin::Median(without);
  std::printf("idle test() on a posted receive, median of %d rounds of %d calls:\n", rounds, calls);
  std::printf("  shared-memory ring (headers counted): %8.1f ns\n", a);
  std::printf("  socket only (a read per call):        %8.1f ns\n", b);
  std::printf("  socket only / ring: %.2f\n", b / a);
  return 0;
}
