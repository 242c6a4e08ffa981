// prism-cpu-stalls: how long each CPU of a host left a waiting thread waiting,
// beside a ground truth (bench/fidelity/run-gpu.sh CPU_STALLS=1; README.md,
// "Where a packed host loses time").
//
// A truth packs 16 ranks' threads onto one host's cores, and on the GPU host
// each core is a virtual CPU of a microVM. When a proxy thread with work
// waits 10-20 ms for a core, the truth's iteration grows by as much. Two
// causes look alike from inside a rank and differ here:
//   * the guest's scheduler ran other runnable threads first (a crowded
//     run queue): a SCHED_OTHER ("fair") sleeper on that CPU wakes late, a
//     SCHED_FIFO sleeper, which preempts every fair thread, does not;
//   * the hypervisor did not run the virtual CPU at all (steal): both wake
//     late, and /proc/stat's steal column grows.
// So per CPU this runs one fair and (as root) one FIFO thread, pinned, each
// sleeping --period-us at a time and recording how much later than asked it
// woke. It runs until SIGTERM or SIGINT (or --duration-ms), then writes:
//
//   stall WALL_NS C POLICY LATE_US    (each wake later than --stall-us; WALL_NS is
//                                      CLOCK_REALTIME when the sleep began, as
//                                      driver.py's host records)
//   # prism-cpu-stalls: ...
//   wakes POLICY cpu C n N p50_us A p99_us B max_us M over N2 over_ms T
//   steal cpu C ms S                  (from /proc/stat, over the watch)
// (the summary last, so that a copy of the file's tail keeps it).
//
// Its own cost: 2 x CPUs wake-ups per period (about 0.05 of a core at 1 ms).
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <sys/prctl.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cinttypes>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

namespace {

using Nanos = int64_t;

struct Options {
  Nanos period_ns = 1'000'000;
  Nanos stall_ns = 2'000'000;
  Nanos duration_ns = 0;  // 0: until a signal
  std::string out = "-";
};

struct Stall {
  Nanos wall_ns;
  Nanos late_ns;
};

// One sleeper: its CPU, its policy, what it saw. Written by its own thread
// only; read by main after join.
struct Sleeper {
  int cpu = 0;
  bool fifo = false;
  int policy_error = 0;  // pthread_setschedparam's error for a fifo sleeper it refused
  std::vector<Nanos> late_ns;
  std::vector<Stall> stalls;
};

Nanos Now(clockid_t clock) {
  timespec ts{};
  clock_gettime(clock, &ts);
  return static_cast<Nanos>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

void RunSleeper(Sleeper& s, const Options& opt, const std::atomic<bool>& stop) {
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(s.cpu, &set);
  pthread_setaffinity_np(pthread_self(), sizeof(set), &set);
  if (s.fifo) {
    const sched_param p{sched_get_priority_max(SCHED_FIFO)};
    s.policy_error = pthread_setschedparam(pthread_self(), SCHED_FIFO, &p);
    if (s.policy_error != 0) return;
  }
  prctl(PR_SET_TIMERSLACK, 1000UL, 0, 0, 0);  // wake within 1 us of the period, not the default 50
  s.late_ns.reserve(1 << 16);
  const timespec period{static_cast<time_t>(opt.period_ns / 1'000'000'000),
                        static_cast<long>(opt.period_ns % 1'000'000'000)};
  while (!stop.load(std::memory_order_relaxed)) {
    const Nanos wall = Now(CLOCK_REALTIME);
    const Nanos t0 = Now(CLOCK_MONOTONIC);
    clock_nanosleep(CLOCK_MONOTONIC, 0, &period, nullptr);
    const Nanos late = Now(CLOCK_MONOTONIC) - t0 - opt.period_ns;
    s.late_ns.push_back(late);
    if (late > opt.stall_ns) s.stalls.push_back({wall, late});
  }
}

// Per CPU, the steal column of /proc/stat in clock ticks (empty if unreadable).
std::map<int, long long> StealTicks() {
  std::map<int, long long> steal;
  std::ifstream in("/proc/stat");
  std::string line;
  while (std::getline(in, line)) {
    if (line.size() < 4 || line.compare(0, 3, "cpu") != 0 || line[3] < '0' || line[3] > '9') continue;
    int cpu = -1;
    long long v[8] = {};
    if (std::sscanf(line.c_str(), "cpu%d %lld %lld %lld %lld %lld %lld %lld %lld", &cpu, &v[0], &v[1], &v[2],
                    &v[3], &v[4], &v[5], &v[6], &v[7]) == 9) {
      steal[cpu] = v[7];
    }
  }
  return steal;
}

Nanos Percentile(std::vector<Nanos> v, double q) {
  if (v.empty()) return 0;
  const size_t i = std::min(v.size() - 1, static_cast<size_t>(q * static_cast<double>(v.size())));
  std::nth_element(v.begin(), v.begin() + static_cast<long>(i), v.end());
  return v[i];
}

void Report(FILE* f, const Options& opt, const std::vector<Sleeper>& sleepers, const std::map<int, long long>& steal0,
            const std::map<int, long long>& steal1, Nanos watched_ns) {
  // The stall list first, the summary last: a reader that keeps only a long
  // report's tail (a results packer) still has every summary line.
  for (const Sleeper& s : sleepers) {
    for (const Stall& st : s.stalls) {
      std::fprintf(f, "stall %" PRId64 " %d %s %" PRId64 "\n", st.wall_ns, s.cpu, s.fifo ? "fifo" : "fair",
                   st.late_ns / 1000);
    }
  }
  std::fprintf(f, "# prism-cpu-stalls: %" PRId64 " us sleeps on each CPU, fair and fifo; watched %" PRId64
               " ms; stalls over %" PRId64 " us listed\n",
               opt.period_ns / 1000, watched_ns / 1'000'000, opt.stall_ns / 1000);
  for (const Sleeper& s : sleepers) {
    const char* policy = s.fifo ? "fifo" : "fair";
    if (s.policy_error != 0) {
      std::fprintf(f, "# cpu %d: SCHED_FIFO refused (%s): no fifo sleeper (run as root)\n", s.cpu,
                   std::strerror(s.policy_error));
      continue;
    }
    Nanos over_ns = 0;
    for (const Stall& st : s.stalls) over_ns += st.late_ns;
    const Nanos max_ns = s.late_ns.empty() ? 0 : *std::max_element(s.late_ns.begin(), s.late_ns.end());
    std::fprintf(f, "wakes %s cpu %d n %zu p50_us %" PRId64 " p99_us %" PRId64 " max_us %" PRId64
                 " over %zu over_ms %.1f\n",
                 policy, s.cpu, s.late_ns.size(), Percentile(s.late_ns, 0.5) / 1000, Percentile(s.late_ns, 0.99) / 1000,
                 max_ns / 1000, s.stalls.size(), static_cast<double>(over_ns) / 1e6);
  }
  const long tick = sysconf(_SC_CLK_TCK);
  for (const auto& [cpu, ticks] : steal1) {
    const auto was = steal0.find(cpu);
    const bool watched = std::any_of(sleepers.begin(), sleepers.end(), [cpu = cpu](const Sleeper& s) { return s.cpu == cpu; });
    if (was == steal0.end() || tick <= 0 || !watched) continue;
    std::fprintf(f, "steal cpu %d ms %lld\n", cpu, (ticks - was->second) * 1000 / tick);
  }
}

int Usage(const char* why) {
  std::fprintf(stderr,
               "prism-cpu-stalls: %s\nusage: prism-cpu-stalls [--period-us 1000] [--stall-us 2000] "
               "[--duration-ms N] [--out FILE]\n  runs until SIGTERM/SIGINT (or N ms), then writes its report to "
               "FILE (default stdout)\n",
               why);
  return 2;
}

bool ParsePositive(const char* text, Nanos scale, Nanos* out) {
  char* end = nullptr;
  const long long v = std::strtoll(text, &end, 10);
  if (end == text || *end != '\0' || v <= 0) return false;
  *out = v * scale;
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  Options opt;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (i + 1 >= argc) return Usage(("missing value after " + a).c_str());
    const char* v = argv[++i];
    bool ok = true;
    if (a == "--period-us") ok = ParsePositive(v, 1000, &opt.period_ns);
    else if (a == "--stall-us") ok = ParsePositive(v, 1000, &opt.stall_ns);
    else if (a == "--duration-ms") ok = ParsePositive(v, 1'000'000, &opt.duration_ns);
    else if (a == "--out") opt.out = v;
    else return Usage(("unknown option " + a).c_str());
    if (!ok) return Usage((a + " needs a positive integer, not '" + v + "'").c_str());
  }
  FILE* out = opt.out == "-" ? stdout : std::fopen(opt.out.c_str(), "w");
  if (out == nullptr) {
    std::fprintf(stderr, "prism-cpu-stalls: cannot write %s: %s\n", opt.out.c_str(), std::strerror(errno));
    return 1;
  }

  // Block the stop signals in every thread; main waits for them with sigtimedwait.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGTERM);
  sigaddset(&stop_signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);

  cpu_set_t mine;
  CPU_ZERO(&mine);
  sched_getaffinity(0, sizeof(mine), &mine);
  std::vector<Sleeper> sleepers;
  for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu) {
    if (!CPU_ISSET(cpu, &mine)) continue;
    for (bool fifo : {false, true}) {
      Sleeper s;
      s.cpu = cpu;
      s.fifo = fifo;
      sleepers.push_back(std::move(s));
    }
  }

  const auto steal0 = StealTicks();
  const Nanos t0 = Now(CLOCK_MONOTONIC);
  std::atomic<bool> stop{false};
  std::vector<std::thread> threads;
  threads.reserve(sleepers.size());
  for (Sleeper& s : sleepers) threads.emplace_back(RunSleeper, std::ref(s), std::cref(opt), std::cref(stop));

  if (opt.duration_ns > 0) {
    const timespec wait{static_cast<time_t>(opt.duration_ns / 1'000'000'000),
                        static_cast<long>(opt.duration_ns % 1'000'000'000)};
    sigtimedwait(&stop_signals, nullptr, &wait);
  } else {
    int sig = 0;
    sigwait(&stop_signals, &sig);
  }
  stop.store(true);
  for (std::thread& t : threads) t.join();
  Report(out, opt, sleepers, steal0, StealTicks(), Now(CLOCK_MONOTONIC) - t0);
  if (out != stdout) std::fclose(out);
  return 0;
}
