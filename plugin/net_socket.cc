#include "plugin/net_socket.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <cstddef>
#include <cstring>
#include <vector>

namespace prism::plugin {
namespace {

std::string Errno(const char* what) { return std::string(what) + ": " + std::strerror(errno); }

// TCP_NODELAY on a TCP socket; a Unix-domain socket has no such option.
void Tune(int fd) {
  int domain = 0;
  socklen_t len = sizeof(domain);
  if (getsockopt(fd, SOL_SOCKET, SO_DOMAIN, &domain, &len) != 0 || domain != AF_INET) return;
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

// The abstract address of `name`: sun_path holds a NUL, then the name
// (not NUL-terminated); `*len` is the address's length.
sockaddr_un MakeUnixAddr(const std::string& name, socklen_t* len) {
  sockaddr_un a{};
  a.sun_family = AF_UNIX;
  const size_t n = std::min(name.size(), sizeof(a.sun_path) - 1);
  std::memcpy(a.sun_path + 1, name.data(), n);
  *len = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + 1 + n);
  return a;
}

// A non-blocking stream socket of `family` bound to `addr` and listening;
// the fd, or -1 with `*why` naming `where`.
int ListenOn(int family, const sockaddr* addr, socklen_t len, const std::string& where, std::string* why) {
  const int fd = socket(family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    *why = Errno("socket");
    return -1;
  }
  if (bind(fd, addr, len) != 0) {
    *why = Errno(("bind " + where).c_str());
    close(fd);
    return -1;
  }
  if (listen(fd, 1024) != 0) {
    *why = Errno("listen");
    close(fd);
    return -1;
  }
  return fd;
}

// One non-blocking read (`read()` returns what recv/recvmsg return), EINTR
// retried: bytes read, 0 on EAGAIN, -1 at end of stream or on error.
template <typename Read>
long RetryRead(Read&& read, std::string* why) {
  for (;;) {
    const ssize_t n = read();
    if (n > 0) return n;
    if (n == 0) {
      *why = "peer closed the connection";
      return -1;
    }
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) return 0;
    *why = Errno("recv from peer");
    return -1;
  }
}

sockaddr_in MakeAddr(uint32_t ipv4_be, uint16_t port_be) {
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = ipv4_be;
  a.sin_port = port_be;
  return a;
}

}  // namespace

bool ChooseLocalIpv4(const std::string& ifaddr, uint32_t* ipv4_be, std::string* why) {
  if (!ifaddr.empty()) {
    in_addr a{};
    if (inet_pton(AF_INET, ifaddr.c_str(), &a) != 1) {
      *why = "PRISM_SOCKET_IFADDR='" + ifaddr + "' is not an IPv4 address (e.g. 10.0.0.5)";
      return false;
    }
    *ipv4_be = a.s_addr;
    return true;
  }
  *ipv4_be = htonl(INADDR_LOOPBACK);
  ifaddrs* list = nullptr;
  if (getifaddrs(&list) != 0) return true;
  for (ifaddrs* it = list; it != nullptr; it = it->ifa_next) {
    if (it->ifa_addr == nullptr || it->ifa_addr->sa_family != AF_INET) continue;
    if ((it->ifa_flags & IFF_UP) == 0 || (it->ifa_flags & IFF_LOOPBACK) != 0) continue;
    *ipv4_be = reinterpret_cast<sockaddr_in*>(it->ifa_addr)->sin_addr.s_addr;
    break;
  }
  freeifaddrs(list);
  return true;
}

int OpenListener(uint32_t ipv4_be, uint16_t* port_be, std::string* why) {
  sockaddr_in a = MakeAddr(ipv4_be, 0);
  const int fd = ListenOn(AF_INET, reinterpret_cast<sockaddr*>(&a), sizeof(a), Ipv4ToString(ipv4_be, 0), why);
  if (fd < 0) return -1;
  socklen_t len = sizeof(a);
  getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  *port_be = a.sin_port;
  return fd;
}

int StartConnect(uint32_t ipv4_be, uint16_t port_be, std::string* why) {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    *why = Errno("socket");
    return -1;
  }
  Tune(fd);
  sockaddr_in a = MakeAddr(ipv4_be, port_be);
  if (connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0 && errno != EINPROGRESS) {
    *why = Errno(("connect " + Ipv4ToString(ipv4_be, port_be)).c_str());
    close(fd);
    return -1;
  }
  return fd;
}

int OpenUnixListener(const std::string& name, std::string* why) {
  socklen_t len = 0;
  sockaddr_un a = MakeUnixAddr(name, &len);
  return ListenOn(AF_UNIX, reinterpret_cast<sockaddr*>(&a), len, "@" + name, why);
}

int StartConnectUnix(const std::string& name, bool* again, std::string* why) {
  *again = false;
  int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    *why = Errno("socket(AF_UNIX)");
    return -1;
  }
  socklen_t len = 0;
  sockaddr_un a = MakeUnixAddr(name, &len);
  if (connect(fd, reinterpret_cast<sockaddr*>(&a), len) == 0) return fd;
  // A full backlog answers EAGAIN on a non-blocking Unix socket; neither it
  // nor EINTR started the connection: the caller dials again later.
  *again = errno == EAGAIN || errno == EINTR;
  if (!*again) *why = Errno(("connect @" + name).c_str());
  close(fd);
  return -1;
}

int SetSendBuffer(int fd, int bytes, std::string* why) {
  if (setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &bytes, sizeof(bytes)) != 0) {
    *why = Errno("setsockopt(SO_SNDBUF)");
    return -1;
  }
  int granted = 0;
  socklen_t len = sizeof(granted);
  if (getsockopt(fd, SOL_SOCKET, SO_SNDBUF, &granted, &len) != 0) {
    *why = Errno("getsockopt(SO_SNDBUF)");
    return -1;
  }
  return granted;
}

ConnectState PollConnect(int fd, std::string* why) {
  pollfd p{fd, POLLOUT, 0};
  int n = poll(&p, 1, 0);
  if (n == 0) return ConnectState::kInProgress;
  if (n < 0) return errno == EINTR ? ConnectState::kInProgress : ConnectState::kFailed;
  int err = 0;
  socklen_t len = sizeof(err);
  getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len);
  if (err == 0) return ConnectState::kConnected;
  *why = std::string("connect: ") + std::strerror(err);
  if (err == ECONNREFUSED || err == ETIMEDOUT || err == ECONNRESET) return ConnectState::kRefused;
  return ConnectState::kFailed;
}

int AcceptOne(int listen_fd, bool* again, std::string* why) {
  *again = false;
  for (;;) {
    int fd = accept4(listen_fd, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd >= 0) {
      Tune(fd);
      return fd;
    }
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK || errno == ECONNABORTED) {
      *again = true;
      return -1;
    }
    *why = Errno("accept");
    return -1;
  }
}

long WriteSome(int fd, const void* buf, size_t len, std::string* why) {
  for (;;) {
    ssize_t n = send(fd, buf, len, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n >= 0) return n;
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) return 0;
    *why = Errno("send to peer");
    return -1;
  }
}

long ReadSome(int fd, void* buf, size_t len, std::string* why) {
  return RetryRead([&] { return recv(fd, buf, len, MSG_DONTWAIT); }, why);
}

long ReadSome2(int fd, void* first, size_t first_len, void* second, size_t second_len, std::string* why) {
  iovec iov[2] = {{first, first_len}, {second, second_len}};
  msghdr msg{};
  msg.msg_iov = iov;
  msg.msg_iovlen = second_len > 0 ? 2 : 1;
  return RetryRead([&] { return recvmsg(fd, &msg, MSG_DONTWAIT); }, why);
}

long WriteSomeWithFds(int fd, const void* buf, size_t len, const int* pass, size_t count, std::string* why) {
  constexpr size_t kMaxFds = 8;
  if (count == 0 || count > kMaxFds) {
    *why = "WriteSomeWithFds: " + std::to_string(count) + " fds (1.." + std::to_string(kMaxFds) + ")";
    return -1;
  }
  iovec iov{const_cast<void*>(buf), len};
  alignas(cmsghdr) char control[CMSG_SPACE(kMaxFds * sizeof(int))] = {};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  msg.msg_control = control;
  msg.msg_controllen = CMSG_SPACE(count * sizeof(int));
  cmsghdr* c = CMSG_FIRSTHDR(&msg);
  c->cmsg_level = SOL_SOCKET;
  c->cmsg_type = SCM_RIGHTS;
  c->cmsg_len = CMSG_LEN(count * sizeof(int));
  std::memcpy(CMSG_DATA(c), pass, count * sizeof(int));
  for (;;) {
    ssize_t n = sendmsg(fd, &msg, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n >= 0) return n;
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) return 0;
    *why = Errno("send to peer");
    return -1;
  }
}

long ReadSomeWithFds(int fd, void* buf, size_t len, std::vector<int>* passed, std::string* why) {
  iovec iov{buf, len};
  alignas(cmsghdr) char control[CMSG_SPACE(8 * sizeof(int))] = {};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  msg.msg_control = control;
  msg.msg_controllen = sizeof(control);
  const long n = RetryRead([&] { return recvmsg(fd, &msg, MSG_DONTWAIT | MSG_CMSG_CLOEXEC); }, why);
  if (n <= 0) return n;
  for (cmsghdr* c = CMSG_FIRSTHDR(&msg); c != nullptr; c = CMSG_NXTHDR(&msg, c)) {
    if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) continue;
    const size_t count = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
    for (size_t i = 0; i < count; ++i) {
      int got = -1;
      std::memcpy(&got, CMSG_DATA(c) + i * sizeof(int), sizeof(int));
      passed->push_back(got);
    }
  }
  return n;
}

bool PeerHungUp(int fd) {
  pollfd p{fd, POLLRDHUP, 0};
  return poll(&p, 1, 0) > 0 && (p.revents & (POLLRDHUP | POLLHUP | POLLERR | POLLNVAL)) != 0;
}

size_t BytesWaiting(int fd) {
  int n = 0;
  return ioctl(fd, FIONREAD, &n) == 0 && n > 0 ? static_cast<size_t>(n) : 0;
}

std::string Ipv4ToString(uint32_t ipv4_be, uint16_t port_be) {
  char text[INET_ADDRSTRLEN] = {};
  in_addr a{};
  a.s_addr = ipv4_be;
  inet_ntop(AF_INET, &a, text, sizeof(text));
  return std::string(text) + ":" + std::to_string(ntohs(port_be));
}

}  // namespace prism::plugin
