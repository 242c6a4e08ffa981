// The HTTP endpoint of prismd (civetweb, the server prometheus-cpp's pull
// exposer uses): GET /metrics (Prometheus text format 0.0.4, the registry of
// Metrics) and GET /status (StatusBoard JSON) on one port, 127.0.0.1:9464 by
// default. prometheus::Exposer cannot serve a non-metrics page, so this owns
// the civetweb context itself and serialises the registry per request.
// Requests are served on civetweb's own threads (kThreads of them; a request
// must arrive within kRequestTimeoutMs of its connection, so idle or slow
// clients free their worker quickly); Metrics and StatusBoard are
// thread-safe and must outlive the endpoint. Stopping takes milliseconds, not
// civetweb's 2 s poll quantum.
// Meant for a scraper on this host (127.0.0.1 by default): it serves one
// request per connection on a thread pool, so a hostile local client with
// hundreds of idle connections can still delay scrapes by a few seconds.
#ifndef PRISM_DAEMON_SERVER_HTTP_ENDPOINT_H_
#define PRISM_DAEMON_SERVER_HTTP_ENDPOINT_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "daemon/server/metrics.h"
#include "daemon/server/status.h"

struct mg_context;

namespace prism::server {

class HttpEndpoint {
 public:
  static constexpr int kThreads = 32;
  static constexpr int kRequestTimeoutMs = 2000;

  // `address` is "HOST:PORT" (PORT 0 picks a free port).
  static absl::StatusOr<std::unique_ptr<HttpEndpoint>> Start(const std::string& address, const Metrics* metrics,
                                                              const StatusBoard* status);
  ~HttpEndpoint();  // stops serving (joins civetweb's threads)
  HttpEndpoint(const HttpEndpoint&) = delete;
  HttpEndpoint& operator=(const HttpEndpoint&) = delete;

  int port() const { return port_; }
  const Metrics* metrics() const { return metrics_; }
  const StatusBoard* status() const { return status_; }

 private:
  HttpEndpoint(const Metrics* metrics, const StatusBoard* status) : metrics_(metrics), status_(status) {}
  void Stop();  // mg_stop without the 2 s wait
  const Metrics* metrics_;
  const StatusBoard* status_;
  mg_context* ctx_ = nullptr;
  std::string host_;
  int port_ = 0;
};

}  // namespace prism::server

#endif  // PRISM_DAEMON_SERVER_HTTP_ENDPOINT_H_
