#include "daemon/server/http_endpoint.h"

#include <civetweb.h>

#include <cstring>

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

}  // namespace

absl::StatusOr<std::unique_ptr<HttpEndpoint>> HttpEndpoint::Start(const std::string& address, const Metrics* metrics,
                                                                  const StatusBoard* status) {
  if (address.find(':') == std::string::npos)
    return absl::InvalidArgumentError(absl::StrCat("--metrics-address ", address, " is not HOST:PORT (or none)"));
  std::unique_ptr<HttpEndpoint> self(new HttpEndpoint(metrics, status));
  mg_init_library(0);
  const char* options[] = {"listening_ports", address.c_str(), "num_threads", "4", nullptr};
  mg_callbacks callbacks;
  std::memset(&callbacks, 0, sizeof(callbacks));
  callbacks.log_message = QuietLog;
  self->ctx_ = mg_start(&callbacks, nullptr, options);
  if (self->ctx_ == nullptr)
    return absl::UnavailableError(absl::StrCat("cannot serve metrics on ", address,
                                               " (address in use?); pass --metrics-address HOST:PORT or none"));
  mg_set_request_handler(self->ctx_, "/metrics$", MetricsHandler, self.get());
  mg_set_request_handler(self->ctx_, "/status$", StatusHandler, self.get());
  RegisterStatusPage(self->ctx_);  // GET /: the live status page
  mg_server_port ports[4];
  std::memset(ports, 0, sizeof(ports));
  if (mg_get_server_ports(self->ctx_, 4, ports) > 0) self->port_ = ports[0].port;
  return self;
}

HttpEndpoint::~HttpEndpoint() {
  if (ctx_) mg_stop(ctx_);
  mg_exit_library();
}

}  // namespace prism::server
