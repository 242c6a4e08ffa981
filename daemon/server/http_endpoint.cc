#include "daemon/server/http_endpoint.h"

#include <civetweb.h>
#include <netdb.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <thread>

#include "absl/strings/str_cat.h"
#include "daemon/server/status_page.h"

namespace prism::server {
namespace {

int Reply(mg_connection* conn, const char* type, const std::string& body) {
  mg_printf(conn,
            "HTTP/1.1 200 OK\r\nContent-Type: %s\r\nContent-Length: %zu\r\nConnection: close\r\n\r\n", type,
            body.size());
  mg_write(conn, body.data(), body.size());
  return 200;
}

int MetricsHandler(mg_connection* conn, void* data) {
  const auto* self = static_cast<const HttpEndpoint*>(data);
  return Reply(conn, "text/plain; version=0.0.4; charset=utf-8", self->metrics()->Exposition());
}

int StatusHandler(mg_connection* conn, void* data) {
  const auto* self = static_cast<const HttpEndpoint*>(data);
  return Reply(conn, "application/json", self->status()->Json());
}

int QuietLog(const mg_connection*, const char*) { return 1; }

// One connection to HOST:PORT, closed at once (it ends a poll() of civetweb's
// master thread on the listening socket).
void Poke(const std::string& host, int port) {
  addrinfo hints {};
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  if (getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &found) != 0) return;
  for (addrinfo* a = found; a != nullptr; a = a->ai_next) {
    const int fd = socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
    if (fd < 0) continue;
    const bool connected = connect(fd, a->ai_addr, a->ai_addrlen) == 0;
    close(fd);
    if (connected) break;
  }
  freeaddrinfo(found);
}

// "HOST:PORT" or "[V6]:PORT" -> HOST (what the listener is bound to).
std::string HostOf(const std::string& address) {
  std::string host = address.substr(0, address.rfind(':'));
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
  return host.empty() ? "127.0.0.1" : host;
}

// Why civetweb could not listen on `address` (it says only "Failed to setup
// server ports"): an IPv6 address this civetweb cannot serve, or what bind()
// says of the IPv4 address.
std::string WhyNotServed(const std::string& address) {
  constexpr unsigned kIpv6Feature = 8;  // mg_check_feature: IPv6 support built in
  if (!address.empty() && address[0] == '[' && mg_check_feature(kIpv6Feature) == 0)
    return "this build serves IPv4 addresses only (civetweb without IPv6); give e.g. 127.0.0.1:PORT";
  const size_t colon = address.rfind(':');
  addrinfo hints{};
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE;
  addrinfo* found = nullptr;
  const std::string host = address.substr(0, colon), port = address.substr(colon + 1);
  if (getaddrinfo(host.empty() ? nullptr : host.c_str(), port.c_str(), &hints, &found) != 0 || found == nullptr)
    return "not an IPv4 HOST:PORT";
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  const int rc = fd < 0 ? -1 : bind(fd, found->ai_addr, found->ai_addrlen);
  const int err = errno;
  if (fd >= 0) close(fd);
  freeaddrinfo(found);
  if (rc == 0) return "civetweb could not listen there";
  return err == EADDRINUSE ? "the address is in use (another prismd?)" : std::strerror(err);
}

}  // namespace

absl::StatusOr<std::unique_ptr<HttpEndpoint>> HttpEndpoint::Start(const std::string& address, const Metrics* metrics,
                                                                  const StatusBoard* status) {
  if (address.find(':') == std::string::npos)
    return absl::InvalidArgumentError(absl::StrCat("--metrics-address ", address, " is not HOST:PORT (or none)"));
  std::unique_ptr<HttpEndpoint> self(new HttpEndpoint(metrics, status));
  self->host_ = HostOf(address);
  mg_init_library(0);
  // Slow or idle clients cannot hold the workers for long: a scraper sends its
  // request at once, so 2 s to read a request is plenty.
  const std::string threads = std::to_string(kThreads), timeout = std::to_string(kRequestTimeoutMs);
  const char* options[] = {"listening_ports", address.c_str(), "num_threads", threads.c_str(),
                           "request_timeout_ms", timeout.c_str(), "linger_timeout_ms", "0", nullptr};
  mg_callbacks callbacks;
  std::memset(&callbacks, 0, sizeof(callbacks));
  callbacks.log_message = QuietLog;
  self->ctx_ = mg_start(&callbacks, nullptr, options);
  if (self->ctx_ == nullptr)
    return absl::UnavailableError(absl::StrCat("cannot serve metrics on ", address, ": ", WhyNotServed(address),
                                               "; pass --metrics-address HOST:PORT or none"));
  mg_set_request_handler(self->ctx_, "/metrics$", MetricsHandler, self.get());
  mg_set_request_handler(self->ctx_, "/status$", StatusHandler, self.get());
  RegisterStatusPage(self->ctx_);  // GET /: the live status page
  mg_server_port ports[4];
  std::memset(ports, 0, sizeof(ports));
  if (mg_get_server_ports(self->ctx_, 4, ports) > 0) self->port_ = ports[0].port;
  return self;
}

HttpEndpoint::~HttpEndpoint() {
  if (ctx_) Stop();
  mg_exit_library();
}

// mg_stop() sets civetweb's stop flag and waits for its master thread, which
// polls the listening socket in 2 s quanta (SOCKET_TIMEOUT_QUANTUM in
// civetweb 1.15) and sees the flag only when a poll returns: every exit would
// wait up to 2 s. A waker thread connects to the port until mg_stop() has
// returned, so the poll returns at once.
void HttpEndpoint::Stop() {
  std::atomic<bool> stopped{false};
  std::thread waker([&] {
    while (!stopped.load()) {
      Poke(host_, port_);
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
  });
  mg_stop(ctx_);
  ctx_ = nullptr;
  stopped.store(true);
  waker.join();
}

}  // namespace prism::server
