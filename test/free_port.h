// A loopback TCP port free at the time of the call (the kernel's pick for a
// socket bound and closed at once), for tests that need a fixed address
// such as NCCL_COMM_ID. Another process may take it before the caller does.
#ifndef PRISM_TEST_FREE_PORT_H_
#define PRISM_TEST_FREE_PORT_H_

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdint>

namespace prism::testing {

inline uint16_t FreeLoopbackPort() {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a));
  socklen_t len = sizeof(a);
  getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  close(fd);
  return ntohs(a.sin_port);
}

}  // namespace prism::testing

#endif  // PRISM_TEST_FREE_PORT_H_
