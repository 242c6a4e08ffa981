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

}  // namespace prism::testing

#endif  // PRISM_TEST_PLUGIN_PROCESS_H_
