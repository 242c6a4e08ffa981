// Real-peer throughput and latency of libnccl-net-prism.so on loopback,
// beside a plain TCP socket pair measured by the same two processes.
//
//   plugin_bench [--plugin PATH] [--count N] [--shaped-gbps G] [--shaped-latency-us L]
//   plugin_bench --multi K [--threads 1,4,0] [--size BYTES] [--count N] [--repeat R]
//                [--plugin PATH]
//
// Part 1 (unshaped): GB/s of the plugin and of one plain TCP socket for
// 64 KiB, 1 MiB and 64 MiB messages, and their ratio; ping-pong latency.
// Part 2 (shaped: PRISM_LINK_GBPS=G, PRISM_LINK_LATENCY_US=L; default 8 Gbit/s
// = 1 GB/s and 20 us): measured bandwidth (64 MiB messages) and one-way
// latency (8 B ping-pong, median) against the setting, with the error in %.
// Each part runs two worker processes (this program with --worker).
//
// --multi K (instead of parts 1 and 2): K connections each way between two
// processes (2K comms per plugin context), all streaming at once both ways,
// `count` messages of `size` (default 512 KiB, NCCL's usual NET step) per
// comm with 8 in flight, posted and tested by one driver thread as NCCL's
// proxy does. One row per PRISM_PROGRESS_THREADS value: aggregate GB/s (both
// directions), progress threads started, CPU cores the worker used while
// streaming, and CPU used over 1 s idle with every comm still open; each
// row is the median (by GB/s) of R runs (default 3).
#include <dirent.h>
#include <sys/resource.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <memory>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "bench/tcp_loopback.h"
#include "test/plugin_driver.h"
#include "test/plugin_process.h"

namespace {

using prism::testing::NowNs;
using prism::testing::PluginDriver;
using prism::testing::PluginError;

struct Worker {
  PluginDriver* drv;
  void* send;
  void* recv;
  int tcp;
  bool is_a;
  std::vector<char> buf;
  void* smh;
  void* rmh;
};

void Ack(Worker& w) {  // B -> A, one byte through the plugin
  if (w.is_a) {
    void* d[1] = {w.buf.data()};
    size_t m[1] = {1};
    int t[1] = {99};
    void* mh[1] = {w.rmh};
    w.drv->Wait(w.drv->Recv(w.recv, 1, d, m, t, mh));
  } else {
    w.drv->Wait(w.drv->Send(w.send, w.buf.data(), 1, 99, w.smh));
  }
}

// A sends `count` messages of `size` with up to 4 in flight; returns GB/s
// measured at A from the first post to B's acknowledgement.
double PluginBandwidth(Worker& w, size_t size, int count) {
  constexpr int kWindow = 4;
  std::vector<void*> reqs(kWindow, nullptr);
  const int64_t start = NowNs();
  for (int i = 0; i < count + kWindow; ++i) {
    const int slot = i % kWindow;
    if (reqs[slot] != nullptr) w.drv->Wait(reqs[slot]);
    reqs[slot] = nullptr;
    if (i >= count) continue;
    char* p = w.buf.data() + static_cast<size_t>(slot) * size;
    if (w.is_a) {
      reqs[slot] = w.drv->Send(w.send, p, size, 1, w.smh);
    } else {
      void* d[1] = {p};
      size_t m[1] = {size};
      int t[1] = {1};
      void* mh[1] = {w.rmh};
      reqs[slot] = w.drv->Recv(w.recv, 1, d, m, t, mh);
    }
  }
  Ack(w);
  return static_cast<double>(size) * count / static_cast<double>(NowNs() - start);
}

double TcpBandwidth(Worker& w, size_t size, int count) {
  const int64_t start = NowNs();
  for (int i = 0; i < count; ++i) {
    size_t done = 0;
    while (done < size) {
      ssize_t n = w.is_a ? send(w.tcp, w.buf.data() + done, size - done, MSG_NOSIGNAL)
                         : recv(w.tcp, w.buf.data() + done, size - done, 0);
      if (n <= 0) throw PluginError("tcp baseline failed");
      done += static_cast<size_t>(n);
    }
  }
  char c = 0;
  if (w.is_a) {
    if (recv(w.tcp, &c, 1, MSG_WAITALL) != 1) throw PluginError("tcp ack");
  } else {
    if (send(w.tcp, &c, 1, MSG_NOSIGNAL) != 1) throw PluginError("tcp ack");
  }
  return static_cast<double>(size) * count / static_cast<double>(NowNs() - start);
}

// Ping-pong of `size` bytes; returns the median one-way time in us.
double PluginLatency(Worker& w, size_t size, int iters) {
  std::vector<int64_t> rtt;
  void* d[1] = {w.buf.data()};
  size_t m[1] = {size};
  int t[1] = {2};
  void* mh[1] = {w.rmh};
  for (int i = 0; i < iters; ++i) {
    const int64_t start = NowNs();
    if (w.is_a) {
      w.drv->Wait(w.drv->Send(w.send, w.buf.data(), size, 2, w.smh));
      w.drv->Wait(w.drv->Recv(w.recv, 1, d, m, t, mh));
    } else {
      w.drv->Wait(w.drv->Recv(w.recv, 1, d, m, t, mh));
      w.drv->Wait(w.drv->Send(w.send, w.buf.data(), size, 2, w.smh));
    }
    rtt.push_back(NowNs() - start);
  }
  std::sort(rtt.begin(), rtt.end());
  return static_cast<double>(rtt[rtt.size() / 2]) / 2e3;
}

double TcpLatency(Worker& w, size_t size, int iters) {
  std::vector<int64_t> rtt;
  auto xfer = [&](bool out) {
    size_t done = 0;
    while (done < size) {
      ssize_t n = out ? send(w.tcp, w.buf.data() + done, size - done, MSG_NOSIGNAL)
                      : recv(w.tcp, w.buf.data() + done, size - done, 0);
      if (n <= 0) throw PluginError("tcp ping-pong failed");
      done += static_cast<size_t>(n);
    }
  };
  for (int i = 0; i < iters; ++i) {
    const int64_t start = NowNs();
    xfer(w.is_a);
    xfer(!w.is_a);
    rtt.push_back(NowNs() - start);
  }
  std::sort(rtt.begin(), rtt.end());
  return static_cast<double>(rtt[rtt.size() / 2]) / 2e3;
}

// tasks: "bw:SIZE:COUNT", "tcp:SIZE:COUNT", "lat:SIZE:ITERS", comma-separated.
int WorkerMain(const std::string& plugin, bool is_a, const std::string& tasks) {
  PluginDriver drv(plugin);
  void* ctx = drv.Init();
  std::vector<char> handle;
  void* lc = drv.Listen(ctx, &handle);
  int port = 0;
  int tcp_listener = prism::bench::LoopbackListen(&port, 1);
  std::cout << "HANDLE " << prism::testing::HexEncode(handle) << " " << port << std::endl;
  std::string word, hex;
  int peer_port = 0;
  std::cin >> word >> hex >> peer_port;
  Worker w{&drv, nullptr, nullptr, -1, is_a, std::vector<char>(4 * (64u << 20) + 4096), nullptr,
           nullptr};
  drv.ConnectAccept(ctx, prism::testing::HexDecode(hex), lc, &w.send, &w.recv);
  drv.net().closeListen(lc);
  if (is_a) {
    w.tcp = prism::bench::LoopbackConnect(peer_port);
  } else {
    w.tcp = accept(tcp_listener, nullptr, nullptr);
  }
  close(tcp_listener);
  PRISM_DRV_CHECK(drv.net().regMr(w.send, w.buf.data(), w.buf.size(), kPrismPtrHost, &w.smh));
  PRISM_DRV_CHECK(drv.net().regMr(w.recv, w.buf.data(), w.buf.size(), kPrismPtrHost, &w.rmh));
  std::stringstream ss(tasks);
  std::string task;
  while (std::getline(ss, task, ',')) {
    char kind[16] = {};
    size_t size = 0;
    int count = 0;
    std::sscanf(task.c_str(), "%15[a-z]:%zu:%d", kind, &size, &count);
    double v = 0;
    if (std::string(kind) == "bw") v = PluginBandwidth(w, size, count);
    if (std::string(kind) == "tcp") v = TcpBandwidth(w, size, count);
    if (std::string(kind) == "lat") v = PluginLatency(w, size, count);
    if (std::string(kind) == "tcplat") v = TcpLatency(w, size, count);
    if (is_a) std::cout << "RESULT " << task << " " << v << std::endl;
  }
  drv.net().deregMr(w.send, w.smh);
  drv.net().deregMr(w.recv, w.rmh);
  drv.net().closeSend(w.send);
  drv.net().closeRecv(w.recv);
  close(w.tcp);
  std::cout << "DONE" << std::endl;
  return 0;
}

std::map<std::string, double> RunPair(const std::string& self, const std::string& plugin,
                                      const std::string& tasks, std::vector<std::string> env,
                                      const std::string& mode = "--worker") {
  prism::testing::ChildProcess a({self, mode, plugin, "A", tasks}, env);
  prism::testing::ChildProcess b({self, mode, plugin, "B", tasks}, env);
  const std::string ha = a.ReadLine(), hb = b.ReadLine();
  if (ha.rfind("HANDLE ", 0) != 0 || hb.rfind("HANDLE ", 0) != 0) {
    throw PluginError("workers did not start");
  }
  a.WriteLine("PEER " + hb.substr(7));
  b.WriteLine("PEER " + ha.substr(7));
  std::map<std::string, double> out;
  for (;;) {
    std::string line = a.ReadLine(600000);
    if (line.empty() || line == "DONE") break;
    std::istringstream is(line);
    std::string word, task;
    double v;
    is >> word >> task >> v;
    out[task] = v;
  }
  if (a.Wait(60000) != 0 || b.Wait(60000) != 0) throw PluginError("a worker failed");
  return out;
}

int ThreadCount() {
  int n = 0;
  DIR* d = opendir("/proc/self/task");
  while (dirent* e = readdir(d)) n += e->d_name[0] != '.';
  closedir(d);
  return n;
}


// One direction of one comm: `count` messages with up to kMultiWindow posted.
struct Lane {
  static constexpr int kMultiWindow = 8;
  void* comm = nullptr;
  void* mh = nullptr;
  char* buf = nullptr;  // kMultiWindow slots of `size` (receives) or one (sends)
  bool recv = false;
  int posted = 0, done = 0;
  void* reqs[kMultiWindow] = {};
};

// Tests the oldest request and posts what the window allows, never blocking.
// Returns true while the lane has work left.
bool PumpLane(PluginDriver& drv, Lane& l, size_t size, int count) {
  while (l.done < l.posted) {
    int finished = 0;
    int sizes[1];
    PRISM_DRV_CHECK(drv.net().test(l.reqs[l.done % Lane::kMultiWindow], &finished, sizes));
    if (!finished) break;
    ++l.done;
  }
  while (l.posted < count && l.posted - l.done < Lane::kMultiWindow) {
    const int slot = l.posted % Lane::kMultiWindow;
    void* req = nullptr;
    if (l.recv) {
      void* d[1] = {l.buf + static_cast<size_t>(slot) * size};
      size_t m[1] = {size};
      int t[1] = {3};
      void* mh[1] = {l.mh};
      PRISM_DRV_CHECK(drv.net().irecv(l.comm, 1, d, m, t, mh, nullptr, &req));
    } else {
      PRISM_DRV_CHECK(drv.net().isend(l.comm, l.buf, size, 3, l.mh, nullptr, &req));
    }
    if (req == nullptr) break;  // request pool full: retry on the next pass
    l.reqs[slot] = req;
    ++l.posted;
  }
  return l.done < count;
}

// spec "K:SIZE:COUNT". A prints RESULT lines: gbps, threads, busy_cores, idle_cores.
int MultiWorkerMain(const std::string& plugin, bool is_a, const std::string& spec) {
  int k = 0, count = 0;
  size_t size = 0;
  if (std::sscanf(spec.c_str(), "%d:%zu:%d", &k, &size, &count) != 3 || k < 1) return 2;
  PluginDriver drv(plugin);
  void* ctx = drv.Init();
  std::vector<char> handle;
  void* lc = drv.Listen(ctx, &handle);
  std::cout << "HANDLE " << prism::testing::HexEncode(handle) << " 0" << std::endl;
  std::string word, hex;
  std::cin >> word >> hex;
  const int threads_before = ThreadCount();
  std::vector<void*> sends(k), recvs(k);
  for (int i = 0; i < k; ++i) {
    drv.ConnectAccept(ctx, prism::testing::HexDecode(hex), lc, &sends[i], &recvs[i]);
  }
  const int threads = ThreadCount() - threads_before;
  drv.net().closeListen(lc);
  prism::testing::OrderRecvsByPeerIndex(drv, sends, &recvs);

  std::vector<char> send_buf(size);
  std::vector<char> recv_bufs(static_cast<size_t>(k) * Lane::kMultiWindow * size);
  std::vector<Lane> lanes(2 * static_cast<size_t>(k));
  for (int i = 0; i < k; ++i) {
    Lane& s = lanes[2 * i];
    s.comm = sends[i];
    s.buf = send_buf.data();
    PRISM_DRV_CHECK(drv.net().regMr(s.comm, s.buf, size, kPrismPtrHost, &s.mh));
    Lane& r = lanes[2 * i + 1];
    r.comm = recvs[i];
    r.recv = true;
    r.buf = recv_bufs.data() + static_cast<size_t>(i) * Lane::kMultiWindow * size;
    PRISM_DRV_CHECK(
        drv.net().regMr(r.comm, r.buf, Lane::kMultiWindow * size, kPrismPtrHost, &r.mh));
  }
  // Start together: one message each way on link 0.
  char token = 0;
  void* d[1] = {&token};
  size_t m[1] = {1};
  int t[1] = {98};
  void* mh[1] = {nullptr};
  drv.Wait(drv.Send(sends[0], &token, 1, 98, nullptr));
  drv.Wait(drv.Recv(recvs[0], 1, d, m, t, mh));

  const int64_t cpu0 = prism::bench::ProcessCpuNs(), t0 = NowNs();
  for (bool busy = true; busy;) {
    busy = false;
    for (Lane& l : lanes) busy = PumpLane(drv, l, size, count) || busy;
    if (busy) sched_yield();
  }
  const int64_t cpu1 = prism::bench::ProcessCpuNs(), t1 = NowNs();
  usleep(1000000);  // idle, every comm open
  const int64_t cpu2 = prism::bench::ProcessCpuNs(), t2 = NowNs();
  if (is_a) {
    const double bytes = 2.0 * k * static_cast<double>(count) * static_cast<double>(size);
    std::cout << "RESULT gbps " << bytes / static_cast<double>(t1 - t0) << "\n"
              << "RESULT threads " << threads << "\n"
              << "RESULT busy_cores " << static_cast<double>(cpu1 - cpu0) / (t1 - t0) << "\n"
              << "RESULT idle_cores " << static_cast<double>(cpu2 - cpu1) / (t2 - t1)
              << std::endl;
  }
  // Finish together, so neither closes while the other still measures idle.
  drv.Wait(drv.Send(sends[0], &token, 1, 98, nullptr));
  drv.Wait(drv.Recv(recvs[0], 1, d, m, t, mh));
  for (Lane& l : lanes) drv.net().deregMr(l.comm, l.mh);
  for (int i = 0; i < k; ++i) {
    drv.net().closeSend(sends[i]);
    drv.net().closeRecv(recvs[i]);
  }
  std::cout << "DONE" << std::endl;
  return 0;
}

int MultiMain(const std::string& self, const std::string& plugin, int k,
              const std::string& thread_list, size_t size, int count, int repeat) {
  std::printf("plugin_bench --multi: %s, %d connections each way (%d comms per process), "
              "%d x %zu B per comm per direction, 8 in flight, loopback, %ld CPUs; "
              "median of %d runs\n",
              plugin.c_str(), k, 2 * k, count, size, sysconf(_SC_NPROCESSORS_ONLN), repeat);
  std::printf("\nPRISM_PROGRESS_THREADS  threads  aggregate GB/s  busy CPU (cores)  "
              "idle CPU, 1 s (%% of a core)\n");
  std::stringstream ss(thread_list);
  std::string value;
  while (std::getline(ss, value, ',')) {
    const std::string spec =
        std::to_string(k) + ":" + std::to_string(size) + ":" + std::to_string(count);
    std::vector<std::map<std::string, double>> runs;
    for (int i = 0; i < repeat; ++i) {
      runs.push_back(
          RunPair(self, plugin, spec, {"PRISM_PROGRESS_THREADS=" + value}, "--multi-worker"));
    }
    std::sort(runs.begin(), runs.end(), [](auto& x, auto& y) { return x["gbps"] < y["gbps"]; });
    auto& r = runs[runs.size() / 2];  // the median run by GB/s
    std::printf("%22s  %7.0f  %14.3f  %16.2f  %26.2f\n", value.c_str(), r["threads"],
                r["gbps"], r["busy_cores"], 100 * r["idle_cores"]);
    std::fflush(stdout);
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    if (argc >= 2 && std::string(argv[1]) == "--worker") {
      return WorkerMain(argv[2], std::string(argv[3]) == "A", argv[4]);
    }
    if (argc >= 2 && std::string(argv[1]) == "--multi-worker") {
      return MultiWorkerMain(argv[2], std::string(argv[3]) == "A", argv[4]);
    }
    std::string plugin = PRISM_PLUGIN_SO;
    int count = 8;
    double gbps = 8, lat_us = 20;
    int multi = 0, multi_count = 256, repeat = 3;
    size_t multi_size = 512u << 10;
    std::string thread_list = "1,4,0";
    for (int i = 1; i + 1 < argc; i += 2) {
      std::string k = argv[i];
      if (k == "--plugin") plugin = argv[i + 1];
      if (k == "--count") count = multi_count = std::stoi(argv[i + 1]);
      if (k == "--multi") multi = std::stoi(argv[i + 1]);
      if (k == "--threads") thread_list = argv[i + 1];
      if (k == "--repeat") repeat = std::max(1, std::stoi(argv[i + 1]));
      if (k == "--size") multi_size = std::stoull(argv[i + 1]);
      if (k == "--shaped-gbps") gbps = std::stod(argv[i + 1]);
      if (k == "--shaped-latency-us") lat_us = std::stod(argv[i + 1]);
    }
    const std::string self = "/proc/self/exe";
    char exe[4096] = {};
    if (readlink(self.c_str(), exe, sizeof(exe) - 1) <= 0) return 1;
    if (multi > 0) {
      return MultiMain(exe, plugin, multi, thread_list, multi_size, multi_count, repeat);
    }

    std::printf("plugin_bench: %s, %d messages per size, loopback\n", plugin.c_str(), count);
    std::printf("\n[unshaped] size        plugin GB/s   tcp GB/s   ratio\n");
    const size_t sizes[] = {64u << 10, 1u << 20, 64u << 20};
    std::string tasks;
    for (size_t s : sizes) {
      const int n = s < (1u << 20) ? count * 64 : count;
      tasks += "bw:" + std::to_string(s) + ":" + std::to_string(n) + ",tcp:" + std::to_string(s) +
               ":" + std::to_string(n) + ",";
    }
    tasks += "lat:8:2000,tcplat:8:2000";
    auto r = RunPair(exe, plugin, tasks, {});
    for (size_t s : sizes) {
      const int n = s < (1u << 20) ? count * 64 : count;
      const double p = r["bw:" + std::to_string(s) + ":" + std::to_string(n)];
      const double t = r["tcp:" + std::to_string(s) + ":" + std::to_string(n)];
      std::printf("           %9zu B  %10.3f  %9.3f   %5.2f\n", s, p, t, t > 0 ? p / t : 0);
    }
    std::printf("[unshaped] one-way latency, 8 B ping-pong median: plugin %.2f us, tcp %.2f us\n",
                r["lat:8:2000"], r["tcplat:8:2000"]);

    const std::string g = std::to_string(gbps), l = std::to_string(lat_us);
    auto q = RunPair(exe, plugin,
                     "bw:" + std::to_string(64u << 20) + ":" + std::to_string(count) +
                         ",lat:8:2000",
                     {"PRISM_LINK_GBPS=" + g, "PRISM_LINK_LATENCY_US=" + l});
    const double want_bw = gbps / 8;
    const double bw = q["bw:" + std::to_string(64u << 20) + ":" + std::to_string(count)];
    const double want_lat = lat_us + 8 * 8 / (gbps * 1e3);
    const double lat = q["lat:8:2000"];
    std::printf("\n[shaped %.3g Gbit/s, %.3g us] bandwidth 64 MiB: %.4f GB/s (model %.4f, error %+.2f%%)\n",
                gbps, lat_us, bw, want_bw, 100 * (bw - want_bw) / want_bw);
    std::printf("[shaped %.3g Gbit/s, %.3g us] one-way latency 8 B: %.2f us (model %.2f, error %+.2f%%)\n",
                gbps, lat_us, lat, want_lat, 100 * (lat - want_lat) / want_lat);
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "plugin_bench: %s\n", e.what());
    return 1;
  }
}
