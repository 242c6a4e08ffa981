// prismd's --listen Unix socket (issue 12, items 1 and 2): never taken over
// from a live daemon, removed on exit only while it is still ours, created
// 0600 at a per-user default path; two users' daemons never share one.
#include <catch2/catch.hpp>
#include <fcntl.h>
#include <grpcpp/grpcpp.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "common/daemon_address.h"
#include "daemon/server/daemon_server.h"
#include "proto/graph_file.h"
#include "proto/prism_service.grpc.pb.h"
#include "test/daemon_test_graphs.h"
#include "test/skip.h"

namespace {

std::string SocketPath(const std::string& name) {
  return "/tmp/prism-sock-test-" + std::to_string(getpid()) + "-" + name + ".sock";
}

bool Healthy(const std::string& path) {
  auto stub = prism::rpc::Daemon::NewStub(grpc::CreateChannel("unix://" + path, grpc::InsecureChannelCredentials()));
  grpc::ClientContext ctx;
  ctx.set_wait_for_ready(true);  // until it listens
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(20));
  prism::rpc::HealthReply reply;
  return stub->Health(&ctx, prism::rpc::HealthRequest(), &reply).ok() && reply.serving();
}

// A socket file bound at `path`; listening when `listen`, else stale once closed.
int BindUnix(const std::string& path, bool listen_on) {
  sockaddr_un addr {};
  addr.sun_family = AF_UNIX;
  std::strncpy(addr.sun_path, path.c_str(), sizeof(addr.sun_path) - 1);
  const int fd = socket(AF_UNIX, SOCK_STREAM, 0);
  REQUIRE(bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0);
  if (listen_on) REQUIRE(listen(fd, 4) == 0);
  return fd;
}

}  // namespace

TEST_CASE("a second daemon on a live socket is refused and the first keeps serving", "[daemon][socket]") {
  const std::string path = SocketPath("live");
  prism::server::StatusBoard status;
  prism::server::DaemonServer first(&status);
  REQUIRE(first.Start("unix://" + path).ok());
  {
    prism::server::DaemonServer second(&status);
    const absl::Status s = second.Start("unix://" + path);
    INFO(s.message());
    CHECK_FALSE(s.ok());
    CHECK(std::string(s.message()).find("another prismd") != std::string::npos);
  }  // the refused one's shutdown must not remove the first's socket
  CHECK(access(path.c_str(), F_OK) == 0);
  CHECK(Healthy(path));
  first.Shutdown();
  CHECK(access(path.c_str(), F_OK) != 0);
}

TEST_CASE("a second daemon on a live TCP port is refused and the first keeps serving", "[daemon][socket]") {
  prism::server::StatusBoard status;
  prism::server::DaemonServer first(&status);
  REQUIRE(first.Start("127.0.0.1:0").ok());
  const std::string address = "127.0.0.1:" + std::to_string(first.bound_port());
  {
    prism::server::DaemonServer second(&status);
    const absl::Status s = second.Start(address);
    INFO(s.message());
    CHECK_FALSE(s.ok());
    CHECK(std::string(s.message()).find("in use") != std::string::npos);
  }
  auto stub = prism::rpc::Daemon::NewStub(grpc::CreateChannel(address, grpc::InsecureChannelCredentials()));
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(20));
  prism::rpc::HealthReply reply;
  CHECK(stub->Health(&ctx, prism::rpc::HealthRequest(), &reply).ok());
  first.Shutdown();
}

TEST_CASE("a stale socket of an earlier daemon is replaced", "[daemon][socket]") {
  const std::string path = SocketPath("stale");
  close(BindUnix(path, false));  // the file stays, nobody answers
  prism::server::StatusBoard status;
  prism::server::DaemonServer server(&status);
  REQUIRE(server.Start("unix://" + path).ok());
  CHECK(Healthy(path));
}

TEST_CASE("a socket path of up to 107 bytes is served, a longer one refused by its length", "[daemon][socket]") {
  // Before: the temporary "<path>.<pid>.new" overflowed sun_path for paths of
  // 96-107 bytes and prismd said "in use or bad address?".
  const std::string dir = "/tmp/prism-sock-long-" + std::to_string(getpid());
  REQUIRE(mkdir(dir.c_str(), 0700) == 0);
  std::string path = dir + "/";
  path += std::string(107 - path.size() - 5, 'p') + ".sock";
  REQUIRE(path.size() == 107);
  {
    prism::server::StatusBoard status;
    prism::server::DaemonServer server(&status);
    const absl::Status s = server.Start("unix://" + path);
    INFO(s.message());
    REQUIRE(s.ok());
    CHECK(Healthy(path));
    server.Shutdown();
  }
  prism::server::StatusBoard status;
  prism::server::DaemonServer server(&status);
  const absl::Status s = server.Start("unix://" + path + "x");
  CHECK_FALSE(s.ok());
  CHECK(std::string(s.message()).find("108 bytes, longer than the 107") != std::string::npos);
  rmdir(dir.c_str());
}

TEST_CASE("shutdown removes the socket only while it is still the daemon's own", "[daemon][socket]") {
  const std::string path = SocketPath("replaced");
  prism::server::StatusBoard status;
  prism::server::DaemonServer server(&status);
  REQUIRE(server.Start("unix://" + path).ok());
  REQUIRE(unlink(path.c_str()) == 0);  // someone else's socket now lives at the path
  const int other = BindUnix(path, true);
  server.Shutdown();
  struct stat st {};
  CHECK(lstat(path.c_str(), &st) == 0);
  CHECK(S_ISSOCK(st.st_mode));
  close(other);
  unlink(path.c_str());
}

TEST_CASE("the socket is created 0600 and a non-socket or a foreign socket is refused", "[daemon][socket]") {
  const std::string path = SocketPath("mode");
  prism::server::StatusBoard status;
  {
    prism::server::DaemonServer server(&status);
    REQUIRE(server.Start("unix://" + path).ok());
    struct stat st {};
    REQUIRE(lstat(path.c_str(), &st) == 0);
    CHECK((st.st_mode & 0777) == 0600);
  }
  const std::string file = SocketPath("plainfile");
  FILE* f = std::fopen(file.c_str(), "w");
  REQUIRE(f != nullptr);
  std::fclose(f);
  prism::server::DaemonServer server(&status);
  CHECK_FALSE(server.Start("unix://" + file).ok());
  CHECK(access(file.c_str(), F_OK) == 0);  // not removed
  unlink(file.c_str());
  if (geteuid() == 0) {  // a stale socket that belongs to another user is not removed
    const std::string foreign = SocketPath("foreign");
    close(BindUnix(foreign, false));
    REQUIRE(chown(foreign.c_str(), 65534, 65534) == 0);
    prism::server::DaemonServer other(&status);
    const absl::Status s = other.Start("unix://" + foreign);
    CHECK_FALSE(s.ok());
    CHECK(std::string(s.message()).find("uid 65534") != std::string::npos);
    CHECK(access(foreign.c_str(), F_OK) == 0);
    unlink(foreign.c_str());
  }
}

TEST_CASE("the default address is per user: XDG_RUNTIME_DIR, else /tmp/prismd-UID.sock", "[daemon][socket]") {
  const char* saved = std::getenv("XDG_RUNTIME_DIR");
  const std::string keep = saved ? saved : "";
  setenv("XDG_RUNTIME_DIR", "/run/user/4242", 1);
  CHECK(prism::server::DefaultListenAddress() == "unix:///run/user/4242/prismd.sock");
  setenv("XDG_RUNTIME_DIR", "relative/dir", 1);  // not absolute: ignored
  CHECK(prism::server::DefaultListenAddress() == "unix:///tmp/prismd-" + std::to_string(getuid()) + ".sock");
  unsetenv("XDG_RUNTIME_DIR");
  CHECK(prism::server::DefaultListenAddress() == "unix:///tmp/prismd-" + std::to_string(getuid()) + ".sock");
  if (saved) setenv("XDG_RUNTIME_DIR", keep.c_str(), 1);
}

TEST_CASE("two users' daemons get their own sockets and cannot reach each other's", "[daemon][socket]") {
  if (geteuid() != 0) {
    PRISM_SKIP("skipped: needs root to run prismd as two uids (CI runs as root)");
  }
  // prismd (hybrid, default --listen) as uid 65534 and as uid 65533; each
  // user then tries to connect() to the other's socket.
  const uid_t uids[2] = {65534, 65533};
  const std::string graph = "/tmp/prism-sock-test-" + std::to_string(getpid()) + ".graph";
  REQUIRE(prism::graph::WriteGraphFile(
              prism::testing::CollectiveGraph(8, prism::graph::ALLREDUCE, 1024, prism::graph::ALGORITHM_RING, 1, 0),
              graph).ok());
  REQUIRE(chmod(graph.c_str(), 0644) == 0);
  std::string sockets[2];
  pid_t daemons[2];
  for (int i = 0; i < 2; ++i) {
    sockets[i] = "/tmp/prismd-" + std::to_string(uids[i]) + ".sock";
    unlink(sockets[i].c_str());
    daemons[i] = fork();
    REQUIRE(daemons[i] >= 0);
    if (daemons[i] == 0) {
      const int null = open("/dev/null", O_WRONLY);
      dup2(null, 1), dup2(null, 2);
      unsetenv("XDG_RUNTIME_DIR");
      if (setgid(uids[i]) != 0 || setuid(uids[i]) != 0) _exit(10);
      execl(PRISMD_PATH, PRISMD_PATH, "--graph", graph.c_str(), "--metrics-address", "none",
            static_cast<char*>(nullptr));
      _exit(127);
    }
  }
  for (int i = 0; i < 2; ++i) CHECK(Healthy(sockets[i]));  // waits until each serves
  for (int i = 0; i < 2; ++i) {
    struct stat st {};
    REQUIRE(lstat(sockets[i].c_str(), &st) == 0);
    CHECK(st.st_uid == uids[i]);
    CHECK((st.st_mode & 0777) == 0600);
    // uid i tries the other user's daemon: refused by the file mode.
    const pid_t probe = fork();
    REQUIRE(probe >= 0);
    if (probe == 0) {
      if (setgid(uids[i]) != 0 || setuid(uids[i]) != 0) _exit(10);
      sockaddr_un addr {};
      addr.sun_family = AF_UNIX;
      std::strncpy(addr.sun_path, sockets[1 - i].c_str(), sizeof(addr.sun_path) - 1);
      const int fd = socket(AF_UNIX, SOCK_STREAM, 0);
      if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0) _exit(20);
      _exit(errno == EACCES ? 0 : 21);
    }
    int status = 0;
    REQUIRE(waitpid(probe, &status, 0) == probe);
    INFO("uid " << uids[i] << ": exit " << WEXITSTATUS(status) << " (20: it reached the other user's prismd)");
    CHECK(WIFEXITED(status));
    CHECK(WEXITSTATUS(status) == 0);
  }
  for (pid_t pid : daemons) kill(pid, SIGTERM);
  for (pid_t pid : daemons) waitpid(pid, nullptr, 0);
  for (const std::string& path : sockets) CHECK(access(path.c_str(), F_OK) != 0);
  std::remove(graph.c_str());
}
