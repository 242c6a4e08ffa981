// Plain TCP on loopback for the plugin benches' baselines (header-only):
// a listening socket on an ephemeral port, a connected socket with
// TCP_NODELAY (as the plugin's and NCCL's sockets), and the process's CPU time.
#ifndef PRISM_BENCH_TCP_LOOPBACK_H_
#define PRISM_BENCH_TCP_LOOPBACK_H_

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/resource.h>
#include <sys/socket.h>

#include <cstdint>
#include <stdexcept>

namespace prism::bench {

// Listens on 127.0.0.1; `*port` gets the port. Throws on failure.
inline int LoopbackListen(int* port, int backlog) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (fd < 0 || bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0 || listen(fd, backlog) != 0) {
    throw std::runtime_error("tcp listen on loopback failed");
  }
  socklen_t len = sizeof(a);
  getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  *port = ntohs(a.sin_port);
  return fd;
}

inline void SetNoDelay(int fd) {
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

// Connects to 127.0.0.1:`port` (blocking), TCP_NODELAY set. Throws on failure.
inline int LoopbackConnect(int port) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = htons(static_cast<uint16_t>(port));
  if (fd < 0 || connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0) {
    throw std::runtime_error("tcp connect on loopback failed");
  }
  SetNoDelay(fd);
  return fd;
}

// User + system time of this process (all its threads), in ns.
inline int64_t ProcessCpuNs() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return (int64_t{u.ru_utime.tv_sec} + u.ru_stime.tv_sec) * 1000000000 +
         (int64_t{u.ru_utime.tv_usec} + u.ru_stime.tv_usec) * 1000;
}

}  // namespace prism::bench

#endif  // PRISM_BENCH_TCP_LOOPBACK_H_
