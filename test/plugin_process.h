// Launches helper processes for the plugin tests and benches: fork+exec with
// stdin/stdout pipes, line I/O, and a bounded wait (kills on timeout so a
// broken plugin fails a test instead of hanging it).
#ifndef PRISM_TEST_PLUGIN_PROCESS_H_
#define PRISM_TEST_PLUGIN_PROCESS_H_

#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <memory>
#include <exception>
#include <string>
#include <utility>
#include <vector>

namespace prism::testing {

class ChildProcess {
 public:
  // argv[0] is the program path; `env` entries ("K=V") are added to ours.
  ChildProcess(const std::vector<std::string>& argv, const std::vector<std::string>& env) {
    int in[2], out[2];
    if (pipe(in) != 0 || pipe(out) != 0) return;
    pid_ = fork();
    if (pid_ == 0) {
      dup2(in[0], 0);
      dup2(out[1], 1);
      close(in[0]); close(in[1]); close(out[0]); close(out[1]);
      for (const std::string& e : env) putenv(const_cast<char*>(e.c_str()));
      std::vector<char*> args;
      for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
      args.push_back(nullptr);
      execv(args[0], args.data());
      _exit(127);
    }
    close(in[0]);
    close(out[1]);
    to_child_ = in[1];
    from_child_ = out[0];
  }
  ~ChildProcess() {
    if (pid_ > 0 && !reaped_) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
    }
    if (to_child_ >= 0) close(to_child_);
    if (from_child_ >= 0) close(from_child_);
  }
  ChildProcess(const ChildProcess&) = delete;
  ChildProcess& operator=(const ChildProcess&) = delete;

  bool started() const { return pid_ > 0; }

  // One line from the child's stdout (without '\n'); empty on EOF/timeout.
  std::string ReadLine(int timeout_ms = 30000) {
    std::string line;
    char c;
    while (true) {
      pollfd p{from_child_, POLLIN, 0};
      if (poll(&p, 1, timeout_ms) <= 0) return line;
      if (read(from_child_, &c, 1) != 1 || c == '\n') return line;
      line += c;
    }
  }
  void WriteLine(const std::string& line) {
    std::string l = line + "\n";
    ssize_t r = write(to_child_, l.data(), l.size());
    (void)r;
  }

  // Exit code, or -1 when it had to be killed after `timeout_ms`.
  int Wait(int timeout_ms) {
    for (int waited = 0; waited < timeout_ms; waited += 10) {
      int status = 0;
      if (waitpid(pid_, &status, WNOHANG) == pid_) {
        reaped_ = true;
        return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
      }
      usleep(10000);
    }
    kill(pid_, SIGKILL);
    waitpid(pid_, nullptr, 0);
    reaped_ = true;
    return -1;
  }

 private:
  pid_t pid_ = -1;
  int to_child_ = -1;
  int from_child_ = -1;
  bool reaped_ = false;
};

// Starts two plugin_peer processes (roles A and B) for `scenario`, relays
// their listen handles, and returns both exit codes.
inline std::pair<int, int> RunPeerPair(const std::string& peer, const std::string& plugin,
                                       const std::string& scenario,
                                       const std::vector<std::string>& env,
                                       int timeout_ms = 120000) {
  ChildProcess a({peer, plugin, scenario, "A"}, env);
  ChildProcess b({peer, plugin, scenario, "B"}, env);
  const std::string ha = a.ReadLine();
  const std::string hb = b.ReadLine();
  if (ha.rfind("HANDLE ", 0) != 0 || hb.rfind("HANDLE ", 0) != 0) return {-2, -2};
  a.WriteLine("PEER " + hb.substr(7));
  b.WriteLine("PEER " + ha.substr(7));
  const int ra = a.Wait(timeout_ms);
  const int rb = b.Wait(timeout_ms);
  return {ra, rb};
}

// prism-session-testd on a fresh Unix socket; ready when constructed
// (address() empty if it failed to start). Killed by the destructor.
class SessionDaemon {
 public:
  SessionDaemon(const std::string& testd, std::vector<std::string> args) {
    static int counter = 0;
    address_ = "unix:///tmp/prism-plugin-test-" + std::to_string(getpid()) + "-" +
               std::to_string(counter++) + ".sock";
    std::vector<std::string> argv = {testd, "--listen", address_};
    argv.insert(argv.end(), args.begin(), args.end());
    process_ = std::make_unique<ChildProcess>(argv, std::vector<std::string>{});
    if (process_->ReadLine(20000).rfind("READY", 0) != 0) address_.clear();
  }
  const std::string& address() const { return address_; }
  void Kill() { process_.reset(); }

 private:
  std::string address_;
  std::unique_ptr<ChildProcess> process_;
};

// Runs `check` (returns "" on success, else what failed) in a forked child,
// so that it gets a fresh plugin (settings are read once per process).
// Returns the child's message; a crash or a hang past `timeout_ms` is
// reported as a failure.
template <typename Fn>
std::string InChild(Fn check, int timeout_ms = 60000) {
  int fds[2];
  if (pipe(fds) != 0) return "pipe failed";
  pid_t pid = fork();
  if (pid == 0) {
    close(fds[0]);
    std::string msg;
    try {
      msg = check();
    } catch (const std::exception& e) {
      msg = e.what();
    }
    ssize_t r = write(fds[1], msg.data(), msg.size());
    (void)r;
    _exit(0);
  }
  close(fds[1]);
  std::string msg;
  char buf[256];
  for (int waited = 0;; waited += 10) {
    pollfd p{fds[0], POLLIN, 0};
    if (poll(&p, 1, 10) > 0) {
      ssize_t n = read(fds[0], buf, sizeof(buf));
      if (n <= 0) break;
      msg.append(buf, static_cast<size_t>(n));
    }
    if (waited > timeout_ms) {
      kill(pid, SIGKILL);
      msg += " (child hung: killed)";
      break;
    }
  }
  close(fds[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  if (!WIFEXITED(status)) msg += " (child crashed or was killed)";
  return msg;
}

}  // namespace prism::testing

#endif  // PRISM_TEST_PLUGIN_PROCESS_H_
