// Ring all-reduce or all-gather traffic between R processes through libnccl-net-prism.so,
// beside the same traffic over plain TCP moved the way NCCL's Socket
// transport moves it on an interface where it starts no helper threads
// (loopback, NCCL_SOCKET_NTHREADS unset): one socket per connection, a 4-byte
// size then the payload, progressed inside test() by the thread that calls it.
//
//   plugin_ring_bench [--ranks 2,8] [--channels 2] [--sizes 1,8,32] [--iters 5]
//                     [--repeat 3] [--step-bytes 524288] [--plugin PATH]
//                     [--op allreduce|allgather|sendrecv] [--load N] [--only plugin|tcp]
//                     [--gpu-us US] [--proxy loop|nccl] [--env K=V]...
//
// Every rank is one process with one driver thread that plays NCCL's proxy:
// per channel one send comm to the next rank and one receive comm from the
// previous, at most 8 (NCCL_STEPS) requests in flight per direction, only the
// oldest tested. An all-reduce of S MiB moves, per channel, 2(R-1) ring steps of S/(channels*R) bytes
// (an all-gather of S MiB of output, R-1 such steps; a send/recv of S MiB, one step of S/channels bytes
// that no receive holds back, as NCCL's ring of batch_isend_irecv), each cut into messages of at most
// --step-bytes (NCCL's NET step: NCCL_BUFFSIZE 4 MiB / 8); the send of
// message i of step s waits for the receive of message i of step s-1, and
// --gpu-us more for the reduction or copy the GPU does in between (0: left
// out), counted from when test() said the receive was done. Each row: the
// slowest rank's wall time per all-reduce and the CPU time of all ranks
// together (user + system, every thread: syscalls, copies, spinning, wake-
// ups), each the median of --repeat runs with plugin and TCP alternated (the
// plugin first in odd-numbered runs, TCP first in even-numbered ones), and
// the ratios TCP/plugin (above 1: the plugin is faster / cheaper). On a
// host with fewer cores than busy threads the CPU time is the steadier
// figure: the wall time then measures the scheduler as much as the transport.
// --proxy nccl: per pass one call per direction and channel, as NCCL 2.28's net proxy (PumpChannelNccl);
// `loop` (default): all it can per pass. --env: to the plugin's processes (e.g. PRISM_PROGRESS_THREADS=-1).
// --load N runs N busy threads in the parent while the ranks run (both
// transports alike): a host whose cores are all taken, as on a GPU host
// where every rank's Python thread and NCCL's proxy thread spin.
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "bench/tcp_loopback.h"
#include "test/plugin_driver.h"
#include "test/plugin_process.h"

namespace {

using prism::testing::NowNs;
using prism::testing::PluginDriver;
using prism::testing::PluginError;

constexpr int kSteps = 8;  // NCCL_STEPS: requests in flight per direction

// What the ring driver needs from a transport; channel `ch` names one send
// comm (to the next rank) and one receive comm (from the previous).
class Transport {
 public:
  virtual ~Transport() = default;
  // Null: no request free now, retry later.
  virtual void* Isend(int ch, const char* data, size_t size) = 0;
  virtual void* Irecv(int ch, char* data, size_t size) = 0;
  // True once the request completed; throws on failure.
  virtual bool Test(void* req) = 0;
};

class PluginTransport final : public Transport {
 public:
  PluginTransport(PluginDriver* drv, std::vector<void*> sends, std::vector<void*> recvs,
                  const char* send_buf, size_t send_len, char* recv_buf, size_t recv_len)
      : drv_(drv), sends_(std::move(sends)), recvs_(std::move(recvs)) {
    for (size_t c = 0; c < sends_.size(); ++c) {
      void* mh = nullptr;
      PRISM_DRV_CHECK(drv_->net().regMr(sends_[c], const_cast<char*>(send_buf), send_len,
                                        kPrismPtrHost, &mh));
      smh_.push_back(mh);
      PRISM_DRV_CHECK(drv_->net().regMr(recvs_[c], recv_buf, recv_len, kPrismPtrHost, &mh));
      rmh_.push_back(mh);
    }
  }
  ~PluginTransport() override {
    for (size_t c = 0; c < sends_.size(); ++c) {
      drv_->net().deregMr(sends_[c], smh_[c]);
      drv_->net().deregMr(recvs_[c], rmh_[c]);
      drv_->net().closeSend(sends_[c]);
      drv_->net().closeRecv(recvs_[c]);
    }
  }
  void* Isend(int ch, const char* data, size_t size) override {
    void* req = nullptr;
    PRISM_DRV_CHECK(drv_->net().isend(sends_[ch], const_cast<char*>(data), size, 0, smh_[ch],
                                      nullptr, &req));
    return req;
  }
  void* Irecv(int ch, char* data, size_t size) override {
    void* d[1] = {data};
    size_t m[1] = {size};
    int t[1] = {0};
    void* mh[1] = {rmh_[ch]};
    void* req = nullptr;
    PRISM_DRV_CHECK(drv_->net().irecv(recvs_[ch], 1, d, m, t, mh, nullptr, &req));
    return req;
  }
  bool Test(void* req) override {
    int done = 0, sizes[1] = {0};
    PRISM_DRV_CHECK(drv_->net().test(req, &done, sizes));
    return done != 0;
  }

 private:
  PluginDriver* drv_;
  std::vector<void*> sends_, recvs_, smh_, rmh_;
};

// NCCL Socket's scheme with no helper threads, written for this bench.
class TcpTransport final : public Transport {
 public:
  TcpTransport(std::vector<int> send_fds, std::vector<int> recv_fds)
      : sends_(send_fds.size()), recvs_(recv_fds.size()) {
    for (size_t c = 0; c < send_fds.size(); ++c) sends_[c].fd = send_fds[c];
    for (size_t c = 0; c < recv_fds.size(); ++c) {
      recvs_[c].fd = recv_fds[c];
      recvs_[c].recv = true;
    }
  }
  ~TcpTransport() override {
    for (Conn& c : sends_) close(c.fd);
    for (Conn& c : recvs_) close(c.fd);
  }
  void* Isend(int ch, const char* data, size_t size) override {
    return Post(&sends_[ch], const_cast<char*>(data), size);
  }
  void* Irecv(int ch, char* data, size_t size) override { return Post(&recvs_[ch], data, size); }
  bool Test(void* r) override {
    Req* req = static_cast<Req*>(r);
    Conn* c = req->conn;
    // Requests of one connection complete in order: move the older ones first.
    while (c->head != c->tail) {
      Req& h = c->reqs[c->head % kPool];
      if (!Progress(c, &h)) return false;
      ++c->head;
      if (&h == req) return true;
    }
    return true;
  }

 private:
  static constexpr int kPool = 2 * kSteps;
  struct Conn;
  struct Req {
    Conn* conn = nullptr;
    char* data = nullptr;
    uint32_t size = 0;
    uint32_t hdr = 0;
    size_t hdr_done = 0;
    size_t done = 0;
  };
  struct Conn {
    int fd = -1;
    bool recv = false;
    Req reqs[kPool];
    uint64_t head = 0, tail = 0;
  };

  void* Post(Conn* c, char* data, size_t size) {
    if (c->tail - c->head == kPool) return nullptr;
    Req& r = c->reqs[c->tail++ % kPool];
    r = Req{c, data, static_cast<uint32_t>(size), static_cast<uint32_t>(size), 0, 0};
    return &r;
  }
  // One transfer of up to `len` bytes; false when the socket would block.
  static bool Move(Conn* c, char* p, size_t len, size_t* done) {
    while (*done < len) {
      ssize_t got = c->recv ? recv(c->fd, p + *done, len - *done, MSG_DONTWAIT)
                            : send(c->fd, p + *done, len - *done, MSG_DONTWAIT | MSG_NOSIGNAL);
      if (got < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) return false;
      if (got <= 0) throw PluginError(std::string("tcp baseline: ") + std::strerror(errno));
      *done += static_cast<size_t>(got);
    }
    return true;
  }
  // True once the request's size word and payload are through.
  static bool Progress(Conn* c, Req* r) {
    if (!Move(c, reinterpret_cast<char*>(&r->hdr), sizeof(r->hdr), &r->hdr_done)) return false;
    if (c->recv && r->hdr > r->size) throw PluginError("tcp baseline: message larger than buffer");
    return Move(c, r->data, r->hdr, &r->done);
  }

  std::vector<Conn> sends_, recvs_;
};

// One channel's share of one all-reduce.
struct ChannelRun {
  int msgs = 0;       // messages each way
  int per_step = 0;   // messages per ring step
  size_t size = 0;
  int sent = 0, send_done = 0, recvd = 0, recv_done = 0;
  int posted = 0, recv_seen = 0;  // --proxy nccl: send slots handed to the GPU, receives it was told of
  std::vector<int64_t> recv_at;  // when each receive was seen done (--gpu-us)
  void* sreq[kSteps] = {};
  void* rreq[kSteps] = {};
};

// Moves what it can on channel `ch` without blocking; true when it did anything.
// A send that waits for a receive goes `gpu_ns` after that receive was seen
// done (the GPU's reduction or copy in between; 0: at once).
bool PumpChannel(Transport& t, int ch, ChannelRun& c, const char* send_buf, char* recv_slots, int64_t gpu_ns) {
  bool moved = false;
  while (c.send_done < c.sent && t.Test(c.sreq[c.send_done % kSteps])) {
    ++c.send_done;
    moved = true;
  }
  while (c.recv_done < c.recvd && t.Test(c.rreq[c.recv_done % kSteps])) {
    if (gpu_ns > 0) c.recv_at[c.recv_done] = NowNs();
    ++c.recv_done;
    moved = true;
  }
  while (c.recvd < c.msgs && c.recvd - c.recv_done < kSteps) {
    const int slot = c.recvd % kSteps;
    void* r = t.Irecv(ch, recv_slots + static_cast<size_t>(slot) * c.size, c.size);
    if (r == nullptr) break;
    c.rreq[slot] = r;
    ++c.recvd;
    moved = true;
  }
  // Step s's message i goes once step s-1's message i has arrived.
  while (c.sent < c.msgs && c.sent - c.send_done < kSteps && c.sent < c.recv_done + c.per_step &&
         (gpu_ns == 0 || c.sent < c.per_step || NowNs() >= c.recv_at[c.sent - c.per_step] + gpu_ns)) {
    void* r = t.Isend(ch, send_buf, c.size);
    if (r == nullptr) break;
    c.sreq[c.sent % kSteps] = r;
    ++c.sent;
    moved = true;
  }
  return moved;
}

// As NCCL 2.28's net.cc calls the plugin, one phase per direction per pass: a send slot handed to the GPU,
// else one isend, else a test() of the oldest send; one irecv, else a test() of the oldest receive, else
// one received step passed to the GPU (so a burst of arrivals reaches it once a test() finds nothing).
bool PumpChannelNccl(Transport& t, int ch, ChannelRun& c, const char* send_buf, char* recv_slots, int64_t gpu_ns) {
  bool moved = true;  // a send-side phase did something
  if (c.posted < c.msgs && c.posted < c.send_done + kSteps) {
    ++c.posted;
  } else if (c.sent < c.posted && c.sent < c.recv_seen + c.per_step &&
             (gpu_ns == 0 || c.sent < c.per_step || NowNs() >= c.recv_at[c.sent - c.per_step] + gpu_ns)) {
    void* r = t.Isend(ch, send_buf, c.size);
    if ((moved = r != nullptr)) c.sreq[c.sent++ % kSteps] = r;
  } else {
    moved = c.send_done < c.sent && t.Test(c.sreq[c.send_done % kSteps]) && ++c.send_done > 0;
  }
  if (c.recvd < c.msgs && c.recvd - c.recv_seen < kSteps) {
    void* r = t.Irecv(ch, recv_slots + static_cast<size_t>(c.recvd % kSteps) * c.size, c.size);
    if (r != nullptr) return (c.rreq[c.recvd++ % kSteps] = r) != nullptr;
  }
  if (c.recv_done < c.recvd && t.Test(c.rreq[c.recv_done % kSteps])) return ++c.recv_done > 0;
  if (c.recv_seen == c.recv_done) return moved;
  if (gpu_ns > 0) c.recv_at[c.recv_seen] = NowNs();
  return ++c.recv_seen > 0;
}

struct RingShape {
  int ranks = 2;
  int channels = 2;
  size_t step_bytes = 512u << 10;
  bool all_gather = false;  // R-1 ring steps per channel, not 2(R-1)
  bool send_recv = false;   // one step: S/channels bytes to the next rank, none waits for a receive
  int64_t gpu_ns = 0;       // --gpu-us: from a receive seen done to the send that waits for it
  bool nccl_proxy = false;  // --proxy nccl: PumpChannelNccl
};

RingShape ShapeFor(const std::string& op, int ranks, int channels, size_t step_bytes, int64_t gpu_ns) {
  RingShape s{ranks, channels, step_bytes};
  s.gpu_ns = gpu_ns;
  s.all_gather = op == "allgather";
  s.send_recv = op == "sendrecv";
  return s;
}

const char* OpName(const RingShape& s) { return s.send_recv ? "sendrecv" : s.all_gather ? "allgather" : "allreduce"; }

// Bytes one channel moves per ring step of an operation of `bytes`.
size_t StepChunk(const RingShape& shape, size_t bytes) {
  const size_t parts = static_cast<size_t>(shape.channels) * (shape.send_recv ? 1 : shape.ranks);
  return std::max<size_t>(1, bytes / parts);
}

// One all-reduce (all-gather) of `bytes` on every channel, as this rank sees it.
void RingOp(Transport& t, const RingShape& shape, size_t bytes, const char* send_buf,
            char* recv_area) {
  const size_t chunk = StepChunk(shape, bytes);
  const int per_step = static_cast<int>((chunk + shape.step_bytes - 1) / shape.step_bytes);
  std::vector<ChannelRun> runs(shape.channels);
  for (ChannelRun& c : runs) {
    c.per_step = per_step;
    c.msgs = shape.send_recv ? per_step : (shape.all_gather ? 1 : 2) * (shape.ranks - 1) * per_step;
    c.size = (chunk + per_step - 1) / per_step;
    c.recv_at.assign(static_cast<size_t>(c.msgs), 0);
  }
  for (bool busy = true; busy;) {
    busy = false;
    bool moved = false;
    for (int ch = 0; ch < shape.channels; ++ch) {
      ChannelRun& c = runs[ch];
      char* slots = recv_area + static_cast<size_t>(ch) * kSteps * shape.step_bytes;
      moved = (shape.nccl_proxy ? PumpChannelNccl : PumpChannel)(t, ch, c, send_buf, slots, shape.gpu_ns) || moved;
      busy = busy || c.send_done < c.msgs || (shape.nccl_proxy ? c.recv_seen : c.recv_done) < c.msgs;
    }
    if (busy && !moved) sched_yield();  // as NCCL's proxy thread does when idle
  }
}

int TcpConnect(int port, uint32_t channel) {
  const int fd = prism::bench::LoopbackConnect(port);
  if (send(fd, &channel, sizeof(channel), MSG_NOSIGNAL) != sizeof(channel)) throw PluginError("tcp hello");
  return fd;
}

// Connects the plugin's send comms to the next rank while accepting the
// previous rank's on this rank's listen comms (one per channel).
void PluginConnect(PluginDriver& drv, void* ctx, const std::vector<std::vector<char>>& next,
                   const std::vector<void*>& listens, std::vector<void*>* sends,
                   std::vector<void*>* recvs) {
  const size_t n = listens.size();
  sends->assign(n, nullptr);
  recvs->assign(n, nullptr);
  const int64_t deadline = NowNs() + 60'000'000'000;
  prism_ncclNetDeviceHandle_t* dev = nullptr;
  std::vector<std::vector<char>> handles = next;  // connect() keeps state in the handle
  for (bool pending = true; pending;) {
    pending = false;
    for (size_t c = 0; c < n; ++c) {
      if ((*sends)[c] == nullptr) {
        PRISM_DRV_CHECK(drv.net().connect(ctx, 0, handles[c].data(), &(*sends)[c], &dev));
      }
      if ((*recvs)[c] == nullptr) PRISM_DRV_CHECK(drv.net().accept(listens[c], &(*recvs)[c], &dev));
      pending = pending || (*sends)[c] == nullptr || (*recvs)[c] == nullptr;
    }
    if (NowNs() > deadline) throw PluginError("ring connect timed out");
  }
  for (void* lc : listens) drv.net().closeListen(lc);
}

std::unique_ptr<Transport> TcpRing(int listener, int next_port, int channels) {
  std::vector<int> sends(channels), recvs(channels, -1);
  for (int c = 0; c < channels; ++c) sends[c] = TcpConnect(next_port, static_cast<uint32_t>(c));
  for (int i = 0; i < channels; ++i) {
    int fd = accept(listener, nullptr, nullptr);
    uint32_t c = 0;
    if (fd < 0 || recv(fd, &c, sizeof(c), MSG_WAITALL) != sizeof(c) || c >= static_cast<uint32_t>(channels)) {
      throw PluginError("tcp accept");
    }
    prism::bench::SetNoDelay(fd);
    recvs[c] = fd;
  }
  return std::make_unique<TcpTransport>(sends, recvs);
}

std::string Expect(const std::string& word) {
  std::string line;
  if (!std::getline(std::cin, line) || line.rfind(word, 0) != 0) {
    throw PluginError("expected " + word + ", got '" + line + "'");
  }
  return line.substr(word.size());
}

// Worker: one rank (argv: plugin, rank, ranks, channels, step bytes, op, GPU ns).
int WorkerMain(const std::string& plugin, RingShape shape) {
  PluginDriver drv(plugin);
  void* ctx = drv.Init();
  std::vector<void*> listens(shape.channels);
  std::string line = "HANDLES";
  for (int c = 0; c < shape.channels; ++c) {
    std::vector<char> h;
    listens[c] = drv.Listen(ctx, &h);
    line += " " + prism::testing::HexEncode(h);
  }
  int port = 0;
  const int listener = prism::bench::LoopbackListen(&port, 64);
  std::cout << line << " " << port << std::endl;
  std::istringstream next(Expect("NEXT "));
  std::vector<std::vector<char>> next_handles(shape.channels);
  for (auto& h : next_handles) {
    std::string hex;
    next >> hex;
    h = prism::testing::HexDecode(hex);
  }
  int next_port = 0;
  next >> next_port;
  std::vector<void*> sends, recvs;
  PluginConnect(drv, ctx, next_handles, listens, &sends, &recvs);
  std::unique_ptr<Transport> tcp = TcpRing(listener, next_port, shape.channels);
  close(listener);

  const size_t slot_bytes = shape.step_bytes;
  std::vector<char> send_buf(slot_bytes, 1);
  std::vector<char> recv_area(static_cast<size_t>(shape.channels) * kSteps * slot_bytes);
  auto plugin_t = std::make_unique<PluginTransport>(&drv, sends, recvs, send_buf.data(),
                                                    send_buf.size(), recv_area.data(),
                                                    recv_area.size());
  std::cout << "READY" << std::endl;
  for (;;) {
    std::getline(std::cin, line);
    if (line.rfind("RUN ", 0) != 0) break;
    char kind[16] = {};
    size_t bytes = 0;
    int iters = 0;
    std::sscanf(line.c_str(), "RUN %15s %zu %d", kind, &bytes, &iters);
    Transport& t = std::string(kind) == "tcp" ? *tcp : *plugin_t;
    RingOp(t, shape, bytes, send_buf.data(), recv_area.data());  // warm-up
    std::cout << "WARM" << std::endl;
    Expect("GO");
    const int64_t start = NowNs(), cpu_start = prism::bench::ProcessCpuNs();
    for (int i = 0; i < iters; ++i) RingOp(t, shape, bytes, send_buf.data(), recv_area.data());
    std::cout << "TIME " << (NowNs() - start) << " " << (prism::bench::ProcessCpuNs() - cpu_start) << std::endl;
  }
  plugin_t.reset();
  tcp.reset();
  std::cout << "DONE" << std::endl;
  return 0;
}

std::vector<std::string> Split(const std::string& s, char sep) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, sep)) {
    if (!item.empty()) out.push_back(item);
  }
  return out;
}

class Ring {
 public:
  Ring(const std::string& self, const std::string& plugin, const RingShape& shape,
       const std::vector<std::string>& env) {
    for (int r = 0; r < shape.ranks; ++r) {
      workers_.push_back(std::make_unique<prism::testing::ChildProcess>(
          std::vector<std::string>{self, "--worker", plugin, std::to_string(r),
                                   std::to_string(shape.ranks), std::to_string(shape.channels),
                                   std::to_string(shape.step_bytes), OpName(shape), std::to_string(shape.gpu_ns),
                                   shape.nccl_proxy ? "nccl" : "loop"},
          env));
    }
    std::vector<std::string> hello;
    for (auto& w : workers_) {
      std::string l = w->ReadLine(60000);
      if (l.rfind("HANDLES ", 0) != 0) throw PluginError("a worker did not start: '" + l + "'");
      hello.push_back(l.substr(8));
    }
    for (int r = 0; r < shape.ranks; ++r) workers_[r]->WriteLine("NEXT " + hello[(r + 1) % shape.ranks]);
    for (auto& w : workers_) {
      if (w->ReadLine(120000) != "READY") throw PluginError("a worker did not connect");
    }
  }
  ~Ring() {
    for (auto& w : workers_) w->WriteLine("QUIT");
    for (auto& w : workers_) w->Wait(30000);
  }
  struct Figures {
    double wall_ns;  // the slowest rank's, per all-reduce
    double cpu_ns;   // every rank's CPU time together, per all-reduce
  };
  Figures Run(const std::string& kind, size_t bytes, int iters) {
    for (auto& w : workers_) w->WriteLine("RUN " + kind + " " + std::to_string(bytes) + " " + std::to_string(iters));
    for (auto& w : workers_) {
      if (w->ReadLine(600000) != "WARM") throw PluginError("a worker failed (" + kind + ")");
    }
    for (auto& w : workers_) w->WriteLine("GO");
    int64_t slowest = 0, cpu = 0;
    for (auto& w : workers_) {
      const std::string l = w->ReadLine(600000);
      long long wall = 0, used = 0;
      if (std::sscanf(l.c_str(), "TIME %lld %lld", &wall, &used) != 2) {
        throw PluginError("a worker failed (" + kind + ")");
      }
      slowest = std::max<int64_t>(slowest, wall);
      cpu += used;
    }
    return Figures{static_cast<double>(slowest) / iters, static_cast<double>(cpu) / iters};
  }

 private:
  std::vector<std::unique_ptr<prism::testing::ChildProcess>> workers_;
};

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  try {
    if (argc >= 10 && std::string(argv[1]) == "--worker") {
      RingShape shape =
          ShapeFor(argv[7], std::stoi(argv[4]), std::stoi(argv[5]), std::stoull(argv[6]), std::stoll(argv[8]));
      shape.nccl_proxy = std::string(argv[9]) == "nccl";
      return WorkerMain(argv[2], shape);
    }
    std::string plugin = PRISM_PLUGIN_SO, rank_list = "2,8", size_list = "1,8,32";
    int channels = 2, iters = 5, repeat = 3, load = 0;
    int64_t gpu_ns = 0;
    bool nccl_proxy = false;
    std::string op_arg = "allreduce";
    std::string only;  // --only plugin|tcp: one transport (e.g. under perf record)
    size_t step_bytes = 512u << 10;
    std::vector<std::string> env;
    for (int i = 1; i + 1 < argc; i += 2) {
      const std::string k = argv[i], v = argv[i + 1];
      if (k == "--plugin") plugin = v;
      else if (k == "--ranks") rank_list = v;
      else if (k == "--channels") channels = std::max(1, std::stoi(v));
      else if (k == "--sizes") size_list = v;
      else if (k == "--iters") iters = std::max(1, std::stoi(v));
      else if (k == "--repeat") repeat = std::max(1, std::stoi(v));
      else if (k == "--step-bytes") step_bytes = std::stoull(v);
      else if (k == "--env") env.push_back(v);
      else if (k == "--op" && (v == "allreduce" || v == "allgather" || v == "sendrecv")) op_arg = v;
      else if (k == "--load") load = std::max(0, std::stoi(v));
      else if (k == "--gpu-us") gpu_ns = std::llround(std::max(0.0, std::stod(v)) * 1e3);
      else if (k == "--only" && (v == "plugin" || v == "tcp")) only = v;
      else if (k == "--proxy" && (v == "loop" || v == "nccl")) nccl_proxy = v == "nccl";
      else throw PluginError("unknown option " + k);
    }
    char exe[4096] = {};
    if (readlink("/proc/self/exe", exe, sizeof(exe) - 1) <= 0) return 1;
    std::string env_text;
    for (const std::string& e : env) env_text += " " + e;
    const RingShape op_shape = ShapeFor(op_arg, 2, channels, step_bytes, gpu_ns);
    const char* op = op_shape.send_recv ? "send/recv" : op_shape.all_gather ? "all-gather" : "all-reduce";
    std::printf("plugin_ring_bench: %s%s; %s, %d channel(s), messages of at most %zu B, %d in flight, "
                "loopback, %ld CPUs, %d busy thread(s) beside, %s proxy; %d %ss per run, median of %d runs\n",
                plugin.c_str(), env_text.c_str(), op, channels, step_bytes, kSteps,
                sysconf(_SC_NPROCESSORS_ONLN), load, nccl_proxy ? "NCCL's" : "looping", iters, op, repeat);
    std::printf("\n                         wall time per %s     CPU time per %s (all ranks)\n", op, op);
    std::printf("ranks  %s  message B   plugin us     tcp us  tcp/plugin   plugin us     tcp us  tcp/plugin\n", op);
    std::atomic<bool> stop{false};
    std::vector<std::thread> spinners;
    for (int i = 0; i < load; ++i) {
      spinners.emplace_back([&stop] {
        while (!stop.load(std::memory_order_relaxed)) {
        }
      });
    }
    struct Joiner {
      std::atomic<bool>* stop;
      std::vector<std::thread>* threads;
      ~Joiner() {
        stop->store(true);
        for (std::thread& t : *threads) t.join();
      }
    } joiner{&stop, &spinners};
    for (const std::string& rs : Split(rank_list, ',')) {
      RingShape shape = ShapeFor(op_arg, std::stoi(rs), channels, step_bytes, gpu_ns);
      shape.nccl_proxy = nccl_proxy;
      Ring ring(exe, plugin, shape, env);
      for (const std::string& ss : Split(size_list, ',')) {
        const size_t bytes = static_cast<size_t>(std::stod(ss) * (1u << 20));
        std::vector<double> p, t, pc, tc;
        for (int i = 0; i < repeat; ++i) {
          // Which goes first alternates, so that neither always follows the other's run.
          const bool tcp_first = i % 2 == 1;
          Ring::Figures a{1, 1}, b{1, 1};
          if (tcp_first && only != "plugin") b = ring.Run("tcp", bytes, iters);
          if (only != "tcp") a = ring.Run("plugin", bytes, iters);
          if (!tcp_first && only != "plugin") b = ring.Run("tcp", bytes, iters);
          p.push_back(a.wall_ns);
          pc.push_back(a.cpu_ns);
          t.push_back(b.wall_ns);
          tc.push_back(b.cpu_ns);
        }
        const size_t chunk = StepChunk(shape, bytes);
        const size_t per = (chunk + step_bytes - 1) / step_bytes;
        const double pm = Median(p) / 1e3, tm = Median(t) / 1e3;
        const double pcm = Median(pc) / 1e3, tcm = Median(tc) / 1e3;
        std::printf("%5d  %7s MiB  %9zu  %10.1f  %9.1f  %10.2f  %10.1f  %9.1f  %10.2f\n", shape.ranks,
                    ss.c_str(), (chunk + per - 1) / per, pm, tm, tm / pm, pcm, tcm, tcm / pcm);
        std::fflush(stdout);
      }
    }
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "plugin_ring_bench: %s\n", e.what());
    return 1;
  }
}
