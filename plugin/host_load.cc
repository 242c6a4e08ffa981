#include "plugin/host_load.h"

#include <sched.h>

#include <cstdio>
#include <fstream>

#include "plugin/clock.h"

namespace prism::plugin {
namespace {

int AllowedCpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) != 0) return 0;
  return CPU_COUNT(&set);
}

}  // namespace

int RunnableThreads(const std::string& loadavg_line) {
  double a = 0, b = 0, c = 0;
  int runnable = -1, total = -1;
  if (std::sscanf(loadavg_line.c_str(), "%lf %lf %lf %d/%d", &a, &b, &c, &runnable, &total) != 5) return -1;
  return runnable;
}

HostLoad::HostLoad(int64_t period_ns) : period_ns_(period_ns), cpus_(AllowedCpus()) {}

bool HostLoad::Idle() {
  const int64_t now = MonoNowNs();
  const int64_t at = sampled_at_.load(std::memory_order_acquire);
  if (at >= 0 && now - at < period_ns_) return idle_.load(std::memory_order_relaxed);
  std::ifstream in("/proc/loadavg");
  std::string line;
  std::getline(in, line);
  idle_.store(CoresIdle(RunnableThreads(line), cpus_), std::memory_order_relaxed);
  sampled_at_.store(now, std::memory_order_release);
  return idle_.load(std::memory_order_relaxed);
}

}  // namespace prism::plugin
