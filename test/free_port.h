// A loopback TCP port free at the time of the call, for tests that need a
// fixed address such as NCCL_COMM_ID.
//
// The port comes from below Linux's ephemeral range (32768..60999 by
// default), so the kernel never hands it to another socket's connect() or
// bind(0) meanwhile, which made tests that bind the port later flaky under a
// parallel ctest. Each call tries a different port, spread by process id, and
// checks with a bind that nothing holds it. Another test that binds the same
// fixed port by hand could still take it first. Thread-safe.
#ifndef PRISM_TEST_FREE_PORT_H_
#define PRISM_TEST_FREE_PORT_H_

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>

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

inline uint16_t FreeLoopbackPort() {
  constexpr uint32_t kFirst = 20000, kCount = 12000;  // 20000..31999
  static std::atomic<uint32_t> calls{0};
  const uint32_t base = static_cast<uint32_t>(getpid()) * 7919u;
  for (int attempt = 0; attempt < 1000; ++attempt) {
    const uint32_t n = calls.fetch_add(1, std::memory_order_relaxed);
    const auto port = static_cast<uint16_t>(kFirst + (base + n * 104729u) % kCount);
    if (LoopbackPortBindable(port)) return port;
  }
  return 0;  // nothing free: the caller's bind fails and says so
}

}  // namespace prism::testing

#endif  // PRISM_TEST_FREE_PORT_H_
