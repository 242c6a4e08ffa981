// A loopback TCP port free at the time of the call, for tests that need a
// fixed address such as NCCL_COMM_ID.
//
// The port comes from below Linux's ephemeral range (32768..60999 by
// default), so the kernel never hands it to another socket's connect() or
// bind(0) meanwhile, which made tests that bind the port later flaky under a
// parallel ctest. Each call tries a different port, spread by process id, and
// checks with a bind that nothing holds it.
//
// A bind check alone let two test processes of one ctest run pick the same
// port (both checked before either bound it). NCCL_COMM_ID's connections all
// carry NCCL's fixed magic, so one test's virtual ranks checking in at "their"
// root then reached the other test's root and broke both (seen once in CI,
// 2026-12-02: "a fresh recording of the fake replays"). So a port is also
// reserved across processes: the caller takes an exclusive flock on
// $TMPDIR/prism-test-port-<port>.lock and holds it until the process exits
// (the descriptor is kept open on purpose), and a port whose lock another
// live process holds is skipped. Another program that binds the same fixed
// port by hand could still take it first. Thread-safe.
#ifndef PRISM_TEST_FREE_PORT_H_
#define PRISM_TEST_FREE_PORT_H_

#include <arpa/inet.h>
#include <fcntl.h>
#include <sys/file.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <string>

namespace prism::testing {

// True when a listening socket could bind 127.0.0.1:port just now.
inline bool LoopbackPortBindable(uint16_t port) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return false;
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = htons(port);
  const bool ok = bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0;
  close(fd);
  return ok;
}

// True when this process now holds the cross-process reservation of port
// (an exclusive flock on a lock file it keeps open until it exits). A lock
// file that cannot be created counts as reserved, so a read-only temp
// directory degrades to the bind check alone.
inline bool ReserveTestPort(uint16_t port) {
  const char* tmp = std::getenv("TMPDIR");
  const std::string path = std::string(tmp != nullptr && *tmp != '\0' ? tmp : "/tmp") + "/prism-test-port-" +
                           std::to_string(port) + ".lock";
  const int fd = open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0666);
  if (fd < 0) return true;
  if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
    close(fd);
    return false;
  }
  return true;  // fd stays open: the lock lasts as long as this process
}

inline uint16_t FreeLoopbackPort() {
  constexpr uint32_t kFirst = 20000, kCount = 12000;  // 20000..31999
  static std::atomic<uint32_t> calls{0};
  const uint32_t base = static_cast<uint32_t>(getpid()) * 7919u;
  for (int attempt = 0; attempt < 1000; ++attempt) {
    const uint32_t n = calls.fetch_add(1, std::memory_order_relaxed);
    const auto port = static_cast<uint16_t>(kFirst + (base + n * 104729u) % kCount);
    if (LoopbackPortBindable(port) && ReserveTestPort(port)) return port;
  }
  return 0;  // nothing free: the caller's bind fails and says so
}

}  // namespace prism::testing

#endif  // PRISM_TEST_FREE_PORT_H_
