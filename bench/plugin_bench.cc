// Real-peer throughput and latency of libnccl-net-prism.so on loopback,
// beside a plain TCP socket pair measured by the same two processes.
//
//   plugin_bench [--plugin PATH] [--count N] [--shaped-gbps G] [--shaped-latency-us L]
//
// Part 1 (unshaped): GB/s of the plugin and of one plain TCP socket for
// 64 KiB, 1 MiB and 64 MiB messages, and their ratio; ping-pong latency.
// Part 2 (shaped: PRISM_LINK_GBPS=G, PRISM_LINK_LATENCY_US=L; default 8 Gbit/s
// = 1 GB/s and 20 us): measured bandwidth (64 MiB messages) and one-way
// latency (8 B ping-pong, median) against the setting, with the error in %.
// Each part runs two worker processes (this program with --worker).
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

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

int TcpListen(int* port) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a));
  listen(fd, 1);
  socklen_t len = sizeof(a);
  getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  *port = ntohs(a.sin_port);
  return fd;
}

int TcpConnect(int port) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = htons(static_cast<uint16_t>(port));
  if (connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0) throw PluginError("tcp connect");
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  return fd;
}

// tasks: "bw:SIZE:COUNT", "tcp:SIZE:COUNT", "lat:SIZE:ITERS", comma-separated.
int WorkerMain(const std::string& plugin, bool is_a, const std::string& tasks) {
  PluginDriver drv(plugin);
  void* ctx = drv.Init();
  std::vector<char> handle;
  void* lc = drv.Listen(ctx, &handle);
  int port = 0;
  int tcp_listener = TcpListen(&port);
  std::cout << "HANDLE " << prism::testing::HexEncode(handle) << " " << port << std::endl;
  std::string word, hex;
  int peer_port = 0;
  std::cin >> word >> hex >> peer_port;
  Worker w{&drv, nullptr, nullptr, -1, is_a, std::vector<char>(4 * (64u << 20) + 4096), nullptr,
           nullptr};
  drv.ConnectAccept(ctx, prism::testing::HexDecode(hex), lc, &w.send, &w.recv);
  drv.net().closeListen(lc);
  if (is_a) {
    w.tcp = TcpConnect(peer_port);
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
                                      const std::string& tasks, std::vector<std::string> env) {
  prism::testing::ChildProcess a({self, "--worker", plugin, "A", tasks}, env);
  prism::testing::ChildProcess b({self, "--worker", plugin, "B", tasks}, env);
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

}  // namespace

int main(int argc, char** argv) {
  try {
    if (argc >= 2 && std::string(argv[1]) == "--worker") {
      return WorkerMain(argv[2], std::string(argv[3]) == "A", argv[4]);
    }
    std::string plugin = PRISM_PLUGIN_SO;
    int count = 8;
    double gbps = 8, lat_us = 20;
    for (int i = 1; i + 1 < argc; i += 2) {
      std::string k = argv[i];
      if (k == "--plugin") plugin = argv[i + 1];
      if (k == "--count") count = std::stoi(argv[i + 1]);
      if (k == "--shaped-gbps") gbps = std::stod(argv[i + 1]);
      if (k == "--shaped-latency-us") lat_us = std::stod(argv[i + 1]);
    }
    const std::string self = "/proc/self/exe";
    char exe[4096] = {};
    if (readlink(self.c_str(), exe, sizeof(exe) - 1) <= 0) return 1;

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
