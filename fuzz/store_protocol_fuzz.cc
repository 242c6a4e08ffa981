// libFuzzer target: prismd's PyTorch store (daemon/store) as another local
// user reaches it. Each input is
//   1. parsed as a stream of TCPStore requests the way the server does
//      (ParseRequest from successive offsets); every request that parses
//      must encode back to the same bytes (EncodeRequest), else the target
//      traps;
//   2. sent over loopback to one in-process StoreServer with small limits
//      (first byte odd: prefixed by a valid VALIDATE), whose replies are
//      drained; the connection is then closed. ASan watches the server.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <string>

#include "daemon/store/store_server.h"
#include "daemon/store/tcp_store_protocol.h"
#include "spdlog/spdlog.h"

namespace {

using prism::store::Request;

void CheckRoundTrip(const std::string& data) {
  size_t off = 0;
  while (off < data.size()) {
    Request q;
    auto used = prism::store::ParseRequest(data, off, &q);
    if (!used.ok() || *used == 0) return;
    if (prism::store::EncodeRequest(q) != data.substr(off, *used)) __builtin_trap();
    off += *used;
  }
}

prism::store::StoreServer* Server() {
  static std::unique_ptr<prism::store::StoreServer> server = [] {
    spdlog::set_level(spdlog::level::off);
    prism::store::StoreServerOptions o;
    o.identify_clients = false;
    o.limits.max_stored_bytes = 1 << 20;
    o.limits.max_buffered_bytes = 1 << 20;
    o.limits.handshake_timeout = std::chrono::milliseconds(200);
    auto s = prism::store::StoreServer::Start(o, nullptr);
    if (!s.ok()) std::abort();
    return std::move(*s);
  }();
  return server.get();
}

void SendToServer(const std::string& data, bool validate) {
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(Server()->port());
  a.sin_addr.s_addr = htonl(0x7f000001);
  if (connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0) {
    close(fd);
    return;
  }
  std::string bytes;
  if (validate) {
    Request v;
    v.query = prism::store::Query::kValidate;
    v.word = prism::store::kValidationMagic;
    bytes = prism::store::EncodeRequest(v);
  }
  bytes += data;
  size_t sent = 0;
  char sink[4096];
  // Send while draining replies, for at most ~50 ms of waiting.
  for (int rounds = 0; rounds < 50; ++rounds) {
    pollfd p{fd, static_cast<short>(POLLIN | (sent < bytes.size() ? POLLOUT : 0)), 0};
    if (poll(&p, 1, 1) <= 0) {
      if (sent == bytes.size()) break;
      continue;
    }
    if (p.revents & POLLIN) {
      if (recv(fd, sink, sizeof(sink), MSG_DONTWAIT) <= 0) break;  // closed by the server
    }
    if ((p.revents & POLLOUT) && sent < bytes.size()) {
      const ssize_t w = send(fd, bytes.data() + sent, bytes.size() - sent, MSG_NOSIGNAL | MSG_DONTWAIT);
      if (w < 0) break;
      sent += static_cast<size_t>(w);
    }
    if (p.revents & (POLLERR | POLLHUP)) break;
  }
  close(fd);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const std::string input(reinterpret_cast<const char*>(data) + 1, size - 1);
  CheckRoundTrip(input);
  SendToServer(input, (data[0] & 1) != 0);
  return 0;
}
