// Small POSIX socket helpers for the real-peer transport: TCP between hosts,
// abstract Unix-domain stream sockets between peers on one host
// (host_identity.h). All sockets are non-blocking and close-on-exec; TCP ones
// TCP_NODELAY. Functions return false/-1 and
// fill `*why` (strerror text plus context) on failure; they never block.
#ifndef PRISM_PLUGIN_NET_SOCKET_H_
#define PRISM_PLUGIN_NET_SOCKET_H_

#include <cstdint>
#include <string>
#include <vector>

namespace prism::plugin {

// The IPv4 address (network order) real peers should dial: `ifaddr` if
// non-empty (must parse), else the first up, non-loopback IPv4 interface,
// else 127.0.0.1.
bool ChooseLocalIpv4(const std::string& ifaddr, uint32_t* ipv4_be, std::string* why);

// Listening socket on ipv4_be:ephemeral port; returns fd and the port.
int OpenListener(uint32_t ipv4_be, uint16_t* port_be, std::string* why);

// Starts a non-blocking connect; returns the fd (connect may be in progress).
int StartConnect(uint32_t ipv4_be, uint16_t port_be, std::string* why);

// Listening Unix-domain stream socket on the abstract name `name` (no
// leading NUL; gone with its last fd, never a file); returns the fd.
int OpenUnixListener(const std::string& name, std::string* why);
// Connects to the abstract name `name` without blocking (a Unix-domain
// connect completes at once); returns the fd. -1 with `*again` set when the
// listener's backlog is full (try again later), -1 with `*why` otherwise
// (e.g. ECONNREFUSED: nobody listens on that name).
int StartConnectUnix(const std::string& name, bool* again, std::string* why);

enum class ConnectState { kInProgress, kConnected, kRefused, kFailed };
// Checks a connect started by StartConnect without blocking.
ConnectState PollConnect(int fd, std::string* why);

// Asks for a send buffer of `bytes` (SO_SNDBUF) on `fd`; the kernel caps the
// request at net.core.wmem_max (an unprivileged process cannot go past it)
// and books twice what it grants. Returns the size the kernel reports after
// the request, or -1 with `*why` set. A Unix stream socket's sender waits
// (EAGAIN) once this much is queued toward its peer: a larger buffer lets a
// large message go out in fewer, longer writes.
int SetSendBuffer(int fd, int bytes, std::string* why);

// accept4 on a non-blocking listener (TCP or Unix): fd, or -1 with *again=true when none
// is pending.
int AcceptOne(int listen_fd, bool* again, std::string* why);

// Non-blocking I/O that retries EINTR: bytes moved (>0), 0 on EAGAIN,
// -1 on error or (for reads) end of stream (`*why` says which).
long WriteSome(int fd, const void* buf, size_t len, std::string* why);
long ReadSome(int fd, void* buf, size_t len, std::string* why);
// ReadSome into `first` then `second` (each {pointer, length}) in one recvmsg.
long ReadSome2(int fd, void* first, size_t first_len, void* second, size_t second_len, std::string* why);

// WriteSome that passes `count` fds (1..8, SCM_RIGHTS) with the bytes: the
// peer's ReadSomeWithFds of the first of them receives copies. Unix sockets only.
long WriteSomeWithFds(int fd, const void* buf, size_t len, const int* pass, size_t count, std::string* why);
// ReadSome that also takes the fds passed with the bytes (close-on-exec),
// appending them to `*passed` (the caller owns and closes them).
long ReadSomeWithFds(int fd, void* buf, size_t len, std::vector<int>* passed, std::string* why);
// Whether the peer closed its end, or the socket failed (poll, no wait).
// Bytes still unread do not count: a closed peer's last bytes may wait.
bool PeerHungUp(int fd);

// Bytes the socket holds unread now (FIONREAD); 0 on error.
size_t BytesWaiting(int fd);

std::string Ipv4ToString(uint32_t ipv4_be, uint16_t port_be);

}  // namespace prism::plugin

#endif  // PRISM_PLUGIN_NET_SOCKET_H_
