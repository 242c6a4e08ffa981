// libprism-yield-sleep.so: an LD_PRELOAD shim for ground truths that pack
// many ranks onto one host's cores (bench/fidelity/run-gpu.sh
// YIELD_SLEEP_US=N; bench/fidelity/README.md, "A ground truth that holds").
//
// NCCL's proxy threads (one per communicator) and the plugin's progress
// threads spin with sched_yield() while they wait. On a machine with a core
// per thread that costs nothing. With 8 or 16 ranks of 3-5 such threads on
// 16 cores, Linux's fair scheduler often picks the yielding thread again,
// and a thread that has work (a proxy thread whose receive landed) waits a
// scheduler slice for its core: measured on the 16-core GPU host, shaped
// receives landed up to 10 ms after their modelled delivery. With this shim
// sched_yield() sleeps PRISM_YIELD_SLEEP_US microseconds (default 20; 0:
// the real yield), and timer slack is 1 us so the sleep is that long, so a
// waiting thread leaves its core to the others and wakes soon.
//
// Applied to every rank of a ground truth and of the hybrid runs compared
// with it (the same NCCL, the same waits). Not for production use.
#include <sched.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <cstdlib>

namespace {

long YieldSleepNs() {
  static const long ns = [] {
    const char* v = std::getenv("PRISM_YIELD_SLEEP_US");
    const long us = v != nullptr && v[0] != '\0' ? std::atol(v) : 20;
    return us > 0 ? us * 1000 : 0;
  }();
  return ns;
}

// Threads inherit their creator's timer slack: set it before NCCL starts any.
__attribute__((constructor)) void TightTimerSlack() { prctl(PR_SET_TIMERSLACK, 1000UL, 0, 0, 0); }

}  // namespace

extern "C" __attribute__((visibility("default"))) int sched_yield() {
  const long ns = YieldSleepNs();
  if (ns == 0) return static_cast<int>(syscall(SYS_sched_yield));
  timespec ts{0, ns};
  nanosleep(&ts, nullptr);
  return 0;
}
