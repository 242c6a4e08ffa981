#include "daemon/server/daemon_server.h"

#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <grpcpp/grpcpp.h>

#include "absl/strings/str_cat.h"
#include "common/version.h"
#include "proto/prism_service.grpc.pb.h"

namespace prism::server {

class DaemonServer::DaemonService final : public rpc::Daemon::Service {
 public:
  explicit DaemonService(const StatusBoard* status) : status_(status) {}
  grpc::Status Health(grpc::ServerContext*, const rpc::HealthRequest*, rpc::HealthReply* reply) override {
    reply->set_serving(true);
    reply->set_version(prism::kDaemonVersion);
    return grpc::Status::OK;
  }
  grpc::Status Status(grpc::ServerContext*, const rpc::StatusRequest*, rpc::StatusReply* reply) override {
    reply->set_json(status_->Json());
    return grpc::Status::OK;
  }

 private:
  const StatusBoard* status_;
};

DaemonServer::DaemonServer(const StatusBoard* status)
    : status_(status), daemon_service_(std::make_unique<DaemonService>(status)) {}

DaemonServer::~DaemonServer() { Shutdown(); }

absl::Status DaemonServer::RegisterService(grpc::Service* service) {
  if (server_) return absl::FailedPreconditionError("RegisterService after Start");
  extra_.push_back(service);
  return absl::OkStatus();
}

absl::Status DaemonServer::Start(const std::string& address) {
  if (server_) return absl::FailedPreconditionError("DaemonServer already started");
  constexpr char kUnix[] = "unix://";
  if (address.rfind(kUnix, 0) == 0) {
    unix_path_ = address.substr(sizeof(kUnix) - 1);
    struct stat st {};
    if (!unix_path_.empty() && lstat(unix_path_.c_str(), &st) == 0) {
      if (!S_ISSOCK(st.st_mode))
        return absl::FailedPreconditionError(absl::StrCat(unix_path_, " exists and is not a socket; pass another --listen"));
      unlink(unix_path_.c_str());  // a stale socket of an earlier prismd
    }
  }
  grpc::ServerBuilder builder;
  builder.AddListeningPort(address, grpc::InsecureServerCredentials(), &bound_port_);
  builder.RegisterService(daemon_service_.get());
  for (grpc::Service* s : extra_) builder.RegisterService(s);
  server_ = builder.BuildAndStart();
  if (!server_)
    return absl::UnavailableError(absl::StrCat("cannot listen for gRPC on ", address,
                                               " (in use or bad address?); pass --listen unix:///PATH or HOST:PORT"));
  return absl::OkStatus();
}

void DaemonServer::Shutdown() {
  if (!server_) return;
  server_->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(2));
  server_->Wait();
  server_.reset();
  if (!unix_path_.empty()) unlink(unix_path_.c_str());
}

}  // namespace prism::server
