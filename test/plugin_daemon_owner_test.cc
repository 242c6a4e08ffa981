// The plugin trusts only its own user's prismd (or uids PRISM_DAEMON_UIDS
// names): SO_PEERCRED on the daemon's Unix socket (issue 12, item 2).
#include <catch2/catch.hpp>

#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <string>

#include "plugin/daemon_owner.h"
#include "test/skip.h"

using prism::plugin::CheckDaemonOwner;
using prism::plugin::ParseUidList;
using prism::plugin::UnixSocketPath;

namespace {

// A listening Unix socket in a fresh directory, owned by this process.
class Listener {
 public:
  Listener() {
    char dir[] = "/tmp/prism-owner-XXXXXX";
    REQUIRE(mkdtemp(dir) != nullptr);
    dir_ = dir;
    path_ = dir_ + "/prismd.sock";
    fd_ = socket(AF_UNIX, SOCK_STREAM, 0);
    sockaddr_un sa{};
    sa.sun_family = AF_UNIX;
    std::memcpy(sa.sun_path, path_.c_str(), path_.size());
    REQUIRE(bind(fd_, reinterpret_cast<sockaddr*>(&sa), sizeof(sa)) == 0);
    REQUIRE(listen(fd_, 4) == 0);
  }
  ~Listener() {
    close(fd_);
    unlink(path_.c_str());
    rmdir(dir_.c_str());
  }
  std::string address() const { return "unix://" + path_; }

 private:
  std::string dir_, path_;
  int fd_ = -1;
};

}  // namespace

TEST_CASE("daemon owner: Unix addresses are checked, others are not", "[plugin][unit]") {
  CHECK(UnixSocketPath("unix:///run/user/1000/prismd.sock") == std::string("/run/user/1000/prismd.sock"));
  CHECK(UnixSocketPath("unix:prismd.sock") == std::string("prismd.sock"));
  CHECK_FALSE(UnixSocketPath("127.0.0.1:50051").has_value());
  CHECK_FALSE(UnixSocketPath("dns:///host:1").has_value());
  CHECK(CheckDaemonOwner("127.0.0.1:50051", getuid() + 1, {}).empty());
}

TEST_CASE("daemon owner: this user's daemon is trusted, another user's is refused unless named", "[plugin][unit]") {
  Listener daemon;
  CHECK(CheckDaemonOwner(daemon.address(), getuid(), {}).empty());
  // Seen from another user (uid + 1), the daemon belongs to a stranger.
  const uid_t other = getuid() + 1;
  const std::string why = CheckDaemonOwner(daemon.address(), other, {});
  REQUIRE_FALSE(why.empty());
  CHECK(why.find("runs as uid " + std::to_string(getuid())) != std::string::npos);
  CHECK(why.find("PRISM_DAEMON_UIDS=" + std::to_string(getuid())) != std::string::npos);
  CHECK(CheckDaemonOwner(daemon.address(), other, {static_cast<uint32_t>(getuid())}).empty());
  // Nobody listening: not this check's business (the connect fails by itself).
  CHECK(CheckDaemonOwner("unix:///nonexistent/prismd.sock", other, {}).empty());
}

TEST_CASE("daemon owner: PRISM_DAEMON_UIDS parses uid lists and rejects the rest", "[plugin][unit]") {
  std::vector<uint32_t> uids;
  CHECK(ParseUidList("", &uids));
  CHECK(uids.empty());
  CHECK(ParseUidList("0,1001", &uids));
  CHECK(uids == std::vector<uint32_t>{0, 1001});
  for (const char* bad : {"a", "1,,2", "-1", "1,", "99999999999"}) {
    INFO(bad);
    CHECK_FALSE(ParseUidList(bad, &uids));
  }
}

TEST_CASE("daemon owner: a daemon really run by another uid is refused", "[plugin][unit]") {
  if (geteuid() != 0) {
    PRISM_SKIP("skipped: needs root to listen as another uid (CI runs as root)");
  }
  char dir[] = "/tmp/prism-owner-XXXXXX";
  REQUIRE(mkdtemp(dir) != nullptr);
  REQUIRE(chmod(dir, 0777) == 0);
  const std::string path = std::string(dir) + "/prismd.sock";
  int ready[2];
  REQUIRE(pipe(ready) == 0);
  const pid_t child = fork();
  REQUIRE(child >= 0);
  if (child == 0) {  // a "daemon" of uid 65534: listens until killed
    if (setgid(65534) != 0 || setuid(65534) != 0) _exit(10);
    const int fd = socket(AF_UNIX, SOCK_STREAM, 0);
    sockaddr_un sa{};
    sa.sun_family = AF_UNIX;
    std::memcpy(sa.sun_path, path.c_str(), path.size());
    if (bind(fd, reinterpret_cast<sockaddr*>(&sa), sizeof(sa)) != 0 || listen(fd, 4) != 0) _exit(11);
    chmod(path.c_str(), 0666);
    const char ok = 1;
    if (write(ready[1], &ok, 1) != 1) _exit(12);
    pause();
    _exit(0);
  }
  char ok = 0;
  REQUIRE(read(ready[0], &ok, 1) == 1);
  const std::string why = CheckDaemonOwner("unix://" + path, getuid(), {});
  CHECK(why.find("runs as uid 65534") != std::string::npos);
  CHECK(CheckDaemonOwner("unix://" + path, getuid(), {65534}).empty());
  kill(child, SIGKILL);
  waitpid(child, nullptr, 0);
  close(ready[0]), close(ready[1]);
  unlink(path.c_str());
  rmdir(dir);
}
