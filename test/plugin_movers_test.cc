// Who moves a real peer's bytes (plugin/real_comms.h): NCCL's proxy thread
// inside isend/irecv/test for messages of at most PRISM_INLINE_BYTES, the
// comm's progress thread for larger ones; data verified on both paths, and a
// peer that goes away fails the receive instead of hanging it.
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstdlib>
#include <string>
#include <vector>

#include "test/plugin_driver.h"
#include "test/plugin_process.h"

using prism::testing::InChild;
using prism::testing::NowNs;
using prism::testing::PluginDriver;

namespace {

std::pair<int, int> Run(const std::string& scenario, std::vector<std::string> env) {
  return prism::testing::RunPeerPair(PRISM_PLUGIN_PEER, PRISM_PLUGIN_SO, scenario, env);
}

// One process, one context: a send comm connected to a receive comm.
struct Loop {
  explicit Loop(PluginDriver& d) : drv(d) {
    void* ctx = drv.Init();
    std::vector<char> handle;
    void* lc = drv.Listen(ctx, &handle);
    drv.ConnectAccept(ctx, handle, lc, &send, &recv);
    drv.net().closeListen(lc);
  }
  void* Irecv(std::vector<char>* buf) {
    void* d[1] = {buf->data()};
    size_t m[1] = {buf->size()};
    int t[1] = {5};
    void* mh[1] = {nullptr};
    return drv.Recv(recv, 1, d, m, t, mh);
  }
  // test() until done or an error; "" when done, else what happened.
  std::string Finish(void* req) {
    const int64_t deadline = NowNs() + 30'000'000'000;
    for (int done = 0; !done;) {
      if (drv.net().test(req, &done, nullptr) != prism_ncclSuccess) return "error";
      if (NowNs() > deadline) return "hung";
    }
    return "";
  }
  PluginDriver& drv;
  void* send = nullptr;
  void* recv = nullptr;
};

// In a fresh child: one progress thread per comm, messages over 64 KiB
// bulk; runs `body` on a connected loop, closes it, returns what failed.
template <typename Body>
std::string WithThreadedLoop(Body body) {
  return InChild([&]() -> std::string {
    setenv("PRISM_PROGRESS_THREADS", "0", 1);
    setenv("PRISM_INLINE_BYTES", "65536", 1);
    PluginDriver drv(PRISM_PLUGIN_SO);
    Loop l(drv);
    const std::string why = body(drv, l);
    drv.net().closeSend(l.send);
    drv.net().closeRecv(l.recv);
    return why;
  });
}

}  // namespace

TEST_CASE("real peers: a small send is on the wire when isend returns (one progress thread per comm)",
          "[plugin][real][movers]") {
  const std::string msg = WithThreadedLoop([](PluginDriver& drv, Loop& l) -> std::string {
    std::vector<char> out(4096, 7), in(4096, 0);
    for (int i = 0; i < 20; ++i) {
      void* r = l.Irecv(&in);
      void* s = drv.Send(l.send, out.data(), out.size(), 5, nullptr);
      // No wait: the caller moved it inside isend, no hand-over to a thread.
      int done = 0;
      if (drv.net().test(s, &done, nullptr) != prism_ncclSuccess) return "send test failed";
      if (!done) return "message " + std::to_string(i) + ": the send was not done at its first test()";
      drv.Wait(r);
      if (in != out) return "data differs";
    }
    return "";
  });
  CHECK(msg == "");
}

TEST_CASE("real peers: a small message into a large receive buffer is read by the caller, not handed over",
          "[plugin][real][movers]") {
  // NCCL posts Simple and LL128 receives with whole step buffers (512 KiB and
  // more): the message's own size decides, as its header tells the caller.
  const std::string msg = WithThreadedLoop([](PluginDriver& drv, Loop& l) -> std::string {
    std::vector<char> out(4096, 9), in(1 << 20, 0);
    void* r = l.Irecv(&in);
    drv.Send(l.send, out.data(), out.size(), 5, nullptr);
    // No test() yet: a progress thread that read it would have written it.
    usleep(100000);
    if (in[out.size() - 1] != 0) return "the payload landed without a test(): a thread read it";
    if (!l.Finish(r).empty()) return "the receive did not complete";
    if (in[out.size() - 1] != 9) return "data differs";
    return "";
  });
  CHECK(msg == "");
}

TEST_CASE("real peers: small messages by the caller, bulk by the progress thread, data verified",
          "[plugin][real][movers]") {
  // 65536: the sizes scenario (0 B .. 64 MiB) and the random stream cross
  // the threshold both ways on one comm; 0: every message by the thread.
  for (const char* inline_bytes : {"65536", "0"}) {
    for (const char* scenario : {"sizes", "grouped", "out_of_order", "limits", "stream"}) {
      INFO(scenario << " PRISM_INLINE_BYTES=" << inline_bytes);
      auto [a, b] = Run(scenario, {std::string("PRISM_INLINE_BYTES=") + inline_bytes,
                                   "PRISM_SOCKS_PER_COMM=3", "PRISM_MIN_CHUNK_BYTES=4096"});
      CHECK(a == 0);
      CHECK(b == 0);
    }
  }
}

TEST_CASE("real peers: PRISM_IDLE_INLINE_BYTES, either threshold as the host's load says, data verified",
          "[plugin][real][movers]") {
  for (const char* scenario : {"sizes", "stream"}) {
    INFO(scenario);
    auto [a, b] = Run(scenario, {"PRISM_IDLE_INLINE_BYTES=4096", "PRISM_SOCKS_PER_COMM=3", "PRISM_MIN_CHUNK_BYTES=4096"});
    CHECK(a == 0);
    CHECK(b == 0);
  }
}

TEST_CASE("real peers: 10 comms, one thread, bulk and small messages mixed", "[plugin][real][movers][threads]") {
  auto [a, b] = Run("multi", {"PRISM_SAME_HOST_RING=0", "PRISM_PROGRESS_THREADS=1", "PRISM_TEST_EXPECT_THREADS=1",
                              "PRISM_INLINE_BYTES=65536"});
  CHECK(a == 0);
  CHECK(b == 0);
}

TEST_CASE("real peers: a sender that goes away fails the receive, small or bulk, never hangs it",
          "[plugin][real][movers]") {
  for (const char* inline_bytes : {"1073741824", "65536", "0"}) {
    for (size_t size : {size_t{1000}, size_t{8} << 20}) {
      INFO("PRISM_INLINE_BYTES=" << inline_bytes << ", " << size << " B");
      const std::string msg = InChild([&]() -> std::string {
        setenv("PRISM_INLINE_BYTES", inline_bytes, 1);
        PluginDriver drv(PRISM_PLUGIN_SO);
        Loop l(drv);
        std::vector<char> out(size, 3), in(size, 0);
        // A message the receiver never finishes: the sender closes its comm
        // (its sockets) with part of it, or none, on the wire.
        void* r = l.Irecv(&in);
        drv.Send(l.send, out.data(), out.size() / 2, 5, nullptr);
        drv.net().closeSend(l.send);
        std::string first = l.Finish(r);
        // The next receive fails when posted (the comm is broken) or in test().
        void* d[1] = {in.data()};
        size_t m[1] = {in.size()};
        int t[1] = {5};
        void* mh[1] = {nullptr};
        void* second = nullptr;
        std::string then = "error";
        if (drv.net().irecv(l.recv, 1, d, m, t, mh, nullptr, &second) == prism_ncclSuccess) {
          then = second == nullptr ? "no request" : l.Finish(second);
        }
        drv.net().closeRecv(l.recv);
        if (then != "error") return "the receive posted after the sender left: " + (then.empty() ? "done" : then);
        (void)first;  // the half message may have landed whole before the close
        return "";
      });
      CHECK(msg == "");
    }
  }
}
