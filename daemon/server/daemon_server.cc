#include "daemon/server/daemon_server.h"

#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include <grpcpp/grpcpp.h>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "common/daemon_address.h"
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

namespace {

constexpr char kUnix[] = "unix://";

// Whether something accepts connections on the Unix socket at `path`.
// Ok(true): it answered, or its backlog is full (EAGAIN: alive but busy);
// Ok(false): nobody listens (ECONNREFUSED). Non-blocking: never hangs.
absl::StatusOr<bool> SocketAnswers(const std::string& path) {
  sockaddr_un addr {};
  addr.sun_family = AF_UNIX;
  if (path.size() >= sizeof(addr.sun_path))
    return absl::InvalidArgumentError(absl::StrCat("socket path ", path, " is longer than ",
                                                   sizeof(addr.sun_path) - 1, " bytes; pass a shorter --listen"));
  std::memcpy(addr.sun_path, path.c_str(), path.size() + 1);
  const int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd < 0) return absl::UnavailableError(absl::StrCat("socket(): ", std::strerror(errno)));
  const int rc = connect(fd, reinterpret_cast<const sockaddr*>(&addr), sizeof(addr));
  const int err = errno;
  close(fd);
  if (rc == 0 || err == EAGAIN) return true;
  if (err == ECONNREFUSED) return false;
  return absl::FailedPreconditionError(absl::StrCat("cannot probe the socket ", path, ": ", std::strerror(err),
                                                    "; pass another --listen unix:///PATH"));
}

// Clears the way for a new socket at `path`: nothing there, or a stale socket
// of this user that nobody answers on (removed). Never takes over a live one.
absl::Status ClaimSocketPath(const std::string& path) {
  struct stat st {};
  if (lstat(path.c_str(), &st) != 0) return absl::OkStatus();
  if (!S_ISSOCK(st.st_mode))
    return absl::FailedPreconditionError(absl::StrCat(path, " exists and is not a socket; pass another --listen"));
  if (st.st_uid != geteuid())
    return absl::FailedPreconditionError(absl::StrCat(path, " belongs to uid ", st.st_uid, ", not to this user (uid ",
                                                      geteuid(), "); pass --listen unix:///PATH of your own"));
  auto answers = SocketAnswers(path);
  if (!answers.ok()) return answers.status();
  if (*answers)
    return absl::AlreadyExistsError(absl::StrCat("another prismd is serving on ", path,
                                                 " (it answered a connection); stop it, or pass --listen with "
                                                 "another path"));
  if (unlink(path.c_str()) != 0 && errno != ENOENT)  // a stale socket of an earlier prismd
    return absl::FailedPreconditionError(absl::StrCat("cannot remove the stale socket ", path, ": ",
                                                      std::strerror(errno)));
  return absl::OkStatus();
}

// The private name gRPC binds before the socket is linked to `path`: in
// path's directory (link() needs the same file system) and short enough for
// sun_path whenever `path` itself is. Empty when no such name fits.
std::string PrivateBindPath(const std::string& path) {
  constexpr size_t kMaxPath = sizeof(sockaddr_un::sun_path) - 1;
  const std::string pid = std::to_string(getpid());
  const size_t slash = path.rfind('/');
  const std::string dir = slash == std::string::npos ? std::string(".") : path.substr(0, slash);
  for (const std::string& candidate : {absl::StrCat(path, ".", pid, ".new"), absl::StrCat(dir, "/.", pid),
                                       absl::StrCat(dir, "/.n")}) {
    if (candidate.size() <= kMaxPath && candidate != path) return candidate;
  }
  return "";
}

}  // namespace

std::string DefaultListenAddress() { return prism::DefaultDaemonAddress(); }

absl::Status DaemonServer::Start(const std::string& address) {
  if (server_) return absl::FailedPreconditionError("DaemonServer already started");
  std::string unix_path, listen = address;
  if (address.rfind(kUnix, 0) == 0) {
    unix_path = address.substr(sizeof(kUnix) - 1);
    if (unix_path.empty()) return absl::InvalidArgumentError("--listen unix:// needs a path: unix:///PATH");
    if (unix_path.size() >= sizeof(sockaddr_un::sun_path))
      return absl::InvalidArgumentError(absl::StrCat("socket path ", unix_path, " is ", unix_path.size(),
                                                     " bytes, longer than the ", sizeof(sockaddr_un::sun_path) - 1,
                                                     " a Unix socket may have; pass a shorter --listen"));
    const std::string bind_path = PrivateBindPath(unix_path);
    if (bind_path.empty())
      return absl::InvalidArgumentError(absl::StrCat("socket path ", unix_path, " leaves no room for prismd's ",
                                                     "temporary name beside it; pass a shorter --listen"));
    if (auto s = ClaimSocketPath(unix_path); !s.ok()) return s;
    // gRPC binds a private name and removes that name again at shutdown; the
    // socket reaches `unix_path` by link() below, which never replaces a file
    // (gRPC would unlink whatever is at the path it bound, and so remove a
    // successor's socket).
    listen = absl::StrCat(kUnix, bind_path);
    unlink(bind_path.c_str());
  }
  grpc::ServerBuilder builder;
  // gRPC binds TCP ports with SO_REUSEPORT by default: a second prismd on the
  // same HOST:PORT would start and share the first's connections at random.
  builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
  builder.AddListeningPort(listen, grpc::InsecureServerCredentials(), &bound_port_);
  builder.RegisterService(daemon_service_.get());
  for (grpc::Service* s : extra_) builder.RegisterService(s);
  // The socket file is born 0600: nobody else may connect, not even briefly.
  const mode_t old_mask = unix_path.empty() ? 0 : umask(0177);
  server_ = builder.BuildAndStart();
  if (!unix_path.empty()) umask(old_mask);
  if (!server_)
    return absl::UnavailableError(absl::StrCat("cannot listen for gRPC on ", address,
                                               " (in use or bad address?); pass --listen unix:///PATH or HOST:PORT"));
  if (unix_path.empty()) return absl::OkStatus();
  return PublishSocket(listen.substr(sizeof(kUnix) - 1), unix_path);
}

absl::Status DaemonServer::PublishSocket(const std::string& bound, const std::string& path) {
  struct stat st {};
  const bool ours = lstat(bound.c_str(), &st) == 0 && S_ISSOCK(st.st_mode) && st.st_uid == geteuid();
  if (ours) chmod(bound.c_str(), 0600);  // the umask made it so already; whatever another thread did to it
  const bool linked = ours && link(bound.c_str(), path.c_str()) == 0;
  const int err = errno;
  unlink(bound.c_str());
  if (!linked) {
    server_->Shutdown(std::chrono::system_clock::now());
    server_->Wait();
    server_.reset();
    if (err == EEXIST)
      return absl::AlreadyExistsError(absl::StrCat("another prismd started on ", path,
                                                   " meanwhile; stop it, or pass --listen with another path"));
    return absl::UnavailableError(absl::StrCat("cannot create the socket ", path, ": ", std::strerror(err),
                                               "; pass another --listen unix:///PATH"));
  }
  unix_path_ = path;
  unix_dev_ = st.st_dev;
  unix_ino_ = st.st_ino;
  return absl::OkStatus();
}

void DaemonServer::Shutdown() {
  if (!server_) return;
  // Plugin sessions are streams that never end by themselves: waiting longer
  // than a short grace for them only delays exit (2 s each time before).
  server_->Shutdown(std::chrono::system_clock::now() + kShutdownGrace);
  server_->Wait();
  server_.reset();
  if (unix_path_.empty()) return;
  struct stat st {};  // remove the socket only if it is still the one we created
  if (lstat(unix_path_.c_str(), &st) == 0 && S_ISSOCK(st.st_mode) && st.st_dev == unix_dev_ &&
      st.st_ino == unix_ino_)
    unlink(unix_path_.c_str());
  unix_path_.clear();
}

}  // namespace prism::server
