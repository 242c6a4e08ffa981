// prismd's gRPC server: the Daemon service (Health, Status) plus any service
// other modules register (the PluginSession service of daemon/session).
//
// Lifecycle: construct, RegisterService() zero or more times, Start() once,
// Shutdown() (also done by the destructor). Registered services are not
// owned and must outlive the server. Start/Shutdown from one thread; the
// handlers run on gRPC's threads and only read the thread-safe StatusBoard.
#ifndef PRISM_DAEMON_SERVER_DAEMON_SERVER_H_
#define PRISM_DAEMON_SERVER_DAEMON_SERVER_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "daemon/server/status.h"

namespace grpc {
class Server;
class Service;
}  // namespace grpc

namespace prism::server {

inline constexpr char kDefaultListenAddress[] = "unix:///tmp/prismd.sock";

class DaemonServer {
 public:
  explicit DaemonServer(const StatusBoard* status);
  ~DaemonServer();
  DaemonServer(const DaemonServer&) = delete;
  DaemonServer& operator=(const DaemonServer&) = delete;

  // Adds a service; FailedPrecondition after Start().
  absl::Status RegisterService(grpc::Service* service);

  // Listens on `address`: "unix:///path" (a stale socket file is replaced)
  // or "HOST:PORT" (TCP, insecure; PORT 0 picks one, see bound_port()).
  absl::Status Start(const std::string& address);
  void Shutdown();

  int bound_port() const { return bound_port_; }

 private:
  class DaemonService;
  const StatusBoard* status_;
  std::unique_ptr<DaemonService> daemon_service_;
  std::vector<grpc::Service*> extra_;
  std::unique_ptr<grpc::Server> server_;
  std::string unix_path_;
  int bound_port_ = 0;
};

}  // namespace prism::server

#endif  // PRISM_DAEMON_SERVER_DAEMON_SERVER_H_
