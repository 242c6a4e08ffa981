// Whether this host has idle cores now: the runnable threads the kernel
// counts (/proc/loadavg's "R/T" field) against the CPUs this process may run
// on. PRISM_IDLE_INLINE_BYTES uses it to give bulk messages to progress
// threads only while cores are idle (few ranks per host), and to NCCL's
// proxy thread otherwise (docs/plugin.md, "Per-message cost").
//
// Thread-safety: Idle() from any thread; a sample is at most `period_ns` old.
#ifndef PRISM_PLUGIN_HOST_LOAD_H_
#define PRISM_PLUGIN_HOST_LOAD_H_

#include <atomic>
#include <cstdint>
#include <string>

namespace prism::plugin {

// The runnable count in a /proc/loadavg line ("0.5 0.4 0.3 3/912 4242" -> 3);
// -1 when the line does not have one.
int RunnableThreads(const std::string& loadavg_line);

// Idle: at most half the CPUs have a runnable thread (the caller among them).
inline bool CoresIdle(int runnable, int cpus) { return runnable >= 0 && cpus > 0 && 2 * runnable <= cpus; }

class HostLoad {
 public:
  explicit HostLoad(int64_t period_ns = 50'000'000);
  HostLoad(const HostLoad&) = delete;
  HostLoad& operator=(const HostLoad&) = delete;

  bool Idle();
  int cpus() const { return cpus_; }

 private:
  const int64_t period_ns_;
  const int cpus_;
  std::atomic<int64_t> sampled_at_{-1};
  std::atomic<bool> idle_{false};
};

}  // namespace prism::plugin

#endif  // PRISM_PLUGIN_HOST_LOAD_H_
