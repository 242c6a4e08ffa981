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
// PRISM_YIELD_FIFO=1 also moves each thread that yields (the pollers: NCCL's
// proxy threads, the plugin's progress threads, CUDA's waits) to SCHED_FIFO
// priority 1 at its first yield, so that when one wakes with work it takes a
// core from the ranks' other threads at once instead of waiting for the
// scheduler (needs root or CAP_SYS_NICE; without it, a one-time note on
// stderr and the normal policy). Every yield still sleeps, so these threads
// leave the cores between polls.
//
// Applied to every rank of a ground truth and of the hybrid runs compared
// with it (the same NCCL, the same waits). Not for production use.
#include <sched.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <cstdio>
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

bool WantsFifo() {
  static const bool fifo = [] {
    const char* v = std::getenv("PRISM_YIELD_FIFO");
    return v != nullptr && v[0] == '1';
  }();
  return fifo;
}

// Once per thread: SCHED_FIFO 1 when PRISM_YIELD_FIFO=1.
void RaiseOnFirstYield() {
  static thread_local bool raised = false;
  if (raised || !WantsFifo()) return;
  raised = true;
  const sched_param p{1};
  if (sched_setscheduler(0, SCHED_FIFO, &p) != 0) {
    static bool told = false;
    if (!told) {
      told = true;
      std::fprintf(stderr, "libprism-yield-sleep: PRISM_YIELD_FIFO=1 but SCHED_FIFO was refused (not root?)\n");
    }
  }
}

// Threads inherit their creator's timer slack: set it before NCCL starts any.
__attribute__((constructor)) void TightTimerSlack() { prctl(PR_SET_TIMERSLACK, 1000UL, 0, 0, 0); }

}  // namespace

extern "C" __attribute__((visibility("default"))) int sched_yield() {
  RaiseOnFirstYield();
  const long ns = YieldSleepNs();
  if (ns == 0) return static_cast<int>(syscall(SYS_sched_yield));
  timespec ts{0, ns};
  nanosleep(&ts, nullptr);
  return 0;
}
