#include "graphgen/signal_cleanup.h"

#include <limits.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cstring>

namespace prism::graphgen {
namespace {

char g_path[PATH_MAX];
std::atomic<bool> g_registered{false};  // lock-free: safe to read in a handler
static_assert(std::atomic<bool>::is_always_lock_free);

// SIGXFSZ: the file outgrew `ulimit -f` mid-write.
constexpr int kSignals[] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGPIPE, SIGXFSZ};

void OnSignal(int sig) {
  if (g_registered.load()) unlink(g_path);
  signal(sig, SIG_DFL);
  raise(sig);
}

}  // namespace

void InstallSignalCleanup() {
  struct sigaction sa {};
  sa.sa_handler = OnSignal;
  sigemptyset(&sa.sa_mask);
  for (int sig : kSignals) sigaddset(&sa.sa_mask, sig);  // one cleanup at a time
  for (int sig : kSignals) {
    struct sigaction old {};
    sigaction(sig, nullptr, &old);
    if (old.sa_handler == SIG_IGN) continue;  // e.g. nohup: keep ignoring
    sigaction(sig, &sa, nullptr);
  }
}

void RegisterTemporaryFile(const std::string& path) {
  g_registered.store(false);
  if (path.size() >= sizeof(g_path)) return;
  std::memcpy(g_path, path.c_str(), path.size() + 1);
  g_registered.store(true);
}

void UnregisterTemporaryFile() { g_registered.store(false); }

}  // namespace prism::graphgen
