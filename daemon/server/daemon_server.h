// prismd's gRPC server: the Daemon service (Health, Status) plus any service
// other modules register (the PluginSession service of daemon/session).
//
// Lifecycle: construct, RegisterService() zero or more times, Start() once,
// Shutdown() (also done by the destructor). Registered services are not
// owned and must outlive the server. Start/Shutdown from one thread; the
// handlers run on gRPC's threads and only read the thread-safe StatusBoard.
#ifndef PRISM_DAEMON_SERVER_DAEMON_SERVER_H_
#define PRISM_DAEMON_SERVER_DAEMON_SERVER_H_

#include <chrono>
#include <cstdint>
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


class DaemonServer {
 public:
  explicit DaemonServer(const StatusBoard* status);
  ~DaemonServer();
  DaemonServer(const DaemonServer&) = delete;
  DaemonServer& operator=(const DaemonServer&) = delete;

  // Adds a service; FailedPrecondition after Start().
  absl::Status RegisterService(grpc::Service* service);

  // Listens on `address`: "unix:///path" or "HOST:PORT" (TCP, insecure;
  // PORT 0 picks one, see bound_port()). DefaultListenAddress() is the
  // per-user default.
  // A Unix socket is never taken over: an existing file at the path must be
  // a socket owned by this user on which nothing answers a connect() (a stale
  // socket of an earlier prismd, then replaced); a live one gives
  // AlreadyExists, anything else FailedPrecondition. The new socket is
  // created with mode 0600 (only this user may connect).
  absl::Status Start(const std::string& address);
  // Stops serving: calls in flight get kShutdownGrace to finish, then are
  // cancelled (plugin session streams end there); removes the Unix socket
  // only if the file at the path is still the one Start created (same device
  // and inode).
  void Shutdown();
  static constexpr std::chrono::milliseconds kShutdownGrace{100};

  int bound_port() const { return bound_port_; }

 private:
  class DaemonService;
  // Moves the socket gRPC bound at `bound` to `path` (link, never replacing).
  absl::Status PublishSocket(const std::string& bound, const std::string& path);
  const StatusBoard* status_;
  std::unique_ptr<DaemonService> daemon_service_;
  std::vector<grpc::Service*> extra_;
  std::unique_ptr<grpc::Server> server_;
  std::string unix_path_;
  uint64_t unix_dev_ = 0, unix_ino_ = 0;  // identity of the socket file Start created
  int bound_port_ = 0;
};

// unix://$XDG_RUNTIME_DIR/prismd.sock, else unix:///tmp/prismd-$UID.sock
// (common/daemon_address.h; the plugin and scripts/prism use the same).
std::string DefaultListenAddress();

}  // namespace prism::server

#endif  // PRISM_DAEMON_SERVER_DAEMON_SERVER_H_
