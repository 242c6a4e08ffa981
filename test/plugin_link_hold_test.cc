// A shaped real-peer link in the ground truth: LL/LL128 payloads reach
// NCCL's buffer only at the modelled delivery (the kernel polls flags in
// the data, it does not wait for test()), and the plugin counts how well
// the machine held the model (link_hold.h).
#include <fcntl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <atomic>
#include <chrono>
#include <cstring>
#include <memory>
#include <thread>
#include <vector>

#include "plugin/clock.h"
#include "plugin/comm.h"
#include "plugin/link_hold.h"
#include "plugin/real_comms.h"

namespace {

using prism::plugin::CommEnv;
using prism::plugin::DelayHistogram;
using prism::plugin::LinkHoldStats;
using prism::plugin::Logger;
using prism::plugin::MemRegion;
using prism::plugin::MessageTag;
using prism::plugin::NicLinks;
using prism::plugin::ProgressEnginePool;
using prism::plugin::RealRecvComm;
using prism::plugin::RealSendComm;
using prism::plugin::Request;
using prism::plugin::Settings;
using prism::plugin::WallNowNs;

constexpr int64_t kLatencyNs = 300'000'000;  // bytes land long before delivery, even on a loaded host

struct Pair {
  // `threads`: the progress pool (prism::plugin::kInlineProgress: none).
  // `latency_ns` 0: an unshaped link.
  Pair(LinkHoldStats* stats, int threads, int64_t latency_ns = kLatencyNs) : nics(1, 0, latency_ns) {
    settings.link_latency_ns = latency_ns;
    settings.min_chunk_bytes = 262144;
    env.settings = &settings;
    env.logger = &logger;
    env.nics = &nics;
    env.link_hold = stats;
    int fds[2];
    REQUIRE(socketpair(AF_UNIX, SOCK_STREAM, 0, fds) == 0);
    for (int fd : fds) fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
    pool = std::make_shared<ProgressEnginePool>(threads, 1000);
    send = std::make_unique<RealSendComm>(env, pool, std::vector<int>{fds[0]}, "peer", 0);
    recv = std::make_unique<RealRecvComm>(env, pool, std::vector<int>{fds[1]}, "peer");
  }
  Settings settings;
  Logger logger;
  NicLinks nics;
  CommEnv env;
  std::shared_ptr<ProgressEnginePool> pool;
  std::unique_ptr<RealSendComm> send;
  std::unique_ptr<RealRecvComm> recv;
};

// Posts a receive of 4 KiB (tag 7) into `buf`, registered whole as NCCL
// registers one buffer per protocol, and sends 4 KiB of 0xAB into it.
struct Posted {
  void* rreq = nullptr;
  void* sreq = nullptr;
  std::vector<char> payload = std::vector<char>(4096, static_cast<char>(0xAB));
};
constexpr size_t kPayload = 4096;

void PostPayload(Pair* p, std::vector<char>* buf, Posted* out) {
  MemRegion mr(buf->data(), buf->size(), kPrismPtrHost);
  const MemRegion* mrs[1] = {&mr};
  void* data = buf->data();
  const size_t size = kPayload;
  const int tag = 7;
  MessageTag none;
  REQUIRE(p->recv->Irecv(1, &data, &size, &tag, mrs, &none, &out->rreq) == prism_ncclSuccess);
  REQUIRE(p->send->Isend(out->payload.data(), size, tag, nullptr, none, &out->sreq) == prism_ncclSuccess);
}

void FinishSend(const Posted& posted) {
  int sdone = 0;
  while (!sdone) REQUIRE(static_cast<Request*>(posted.sreq)->Test(&sdone, nullptr) == prism_ncclSuccess);
}

// Sends 4 KiB of 0xAB into a receive buffer registered with `registered`
// bytes; returns whether the buffer ever held the payload while test() still
// said "not done", and fills `*final_ok` with whether it held it at done.
bool PayloadVisibleBeforeDone(Pair* p, size_t registered, bool* final_ok) {
  std::vector<char> buf(registered, 0);
  const size_t size = kPayload;
  Posted posted;
  PostPayload(p, &buf, &posted);
  void* rreq = posted.rreq;
  bool early = false;
  const int64_t deadline = WallNowNs() + 5'000'000'000;
  int done = 0;
  while (!done && WallNowNs() < deadline) {
    int got = -1;
    REQUIRE(static_cast<Request*>(rreq)->Test(&done, &got) == prism_ncclSuccess);
    if (!done && static_cast<unsigned char>(buf[size - 1]) == 0xAB) early = true;
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
  REQUIRE(done);
  *final_ok = static_cast<unsigned char>(buf[0]) == 0xAB && static_cast<unsigned char>(buf[size - 1]) == 0xAB;
  FinishSend(posted);
  return early;
}

}  // namespace

TEST_CASE("shaped real peers: an LL or LL128 payload reaches NCCL's buffer only at the modelled delivery",
          "[plugin][unit][hold]") {
  const int threads = GENERATE(1, prism::plugin::kInlineProgress);
  INFO("progress threads " << threads);
  LinkHoldStats stats;
  Pair p(&stats, threads);
  bool final_ok = false;
  // NCCL registers one buffer per protocol: 512 KiB is LL's, 4800 KiB LL128's.
  CHECK_FALSE(PayloadVisibleBeforeDone(&p, 512 * 1024, &final_ok));
  CHECK(final_ok);
  CHECK_FALSE(PayloadVisibleBeforeDone(&p, 4800 * 1024, &final_ok));
  CHECK(final_ok);
  // Every byte landed long before its delivery, and each was counted; so
  // was each header, read long before it too.
  CHECK(stats.landed_late().count() == 2);
  CHECK(stats.landed_late().CountAbove(0) == 0);
  CHECK(stats.seen_late().count() == 2);
  CHECK(stats.matched_late().count() == 2);
  CHECK(stats.matched_late().CountAbove(0) == 0);
}

TEST_CASE("shaped real peers: a Simple payload is written as it lands (the kernel waits for test())",
          "[plugin][unit][hold]") {
  LinkHoldStats stats;
  Pair p(&stats, 1);
  bool final_ok = false;
  // A 4 MiB (Simple) buffer: the bytes are there long before test() says done.
  CHECK(PayloadVisibleBeforeDone(&p, 4 * 1024 * 1024, &final_ok));
  CHECK(final_ok);
}

TEST_CASE("shaped real peers, no progress threads: test() of a receive not due yet still reads the messages behind it",
          "[plugin][unit][hold]") {
  LinkHoldStats stats;
  Pair p(&stats, prism::plugin::kInlineProgress);
  // Two Simple receives (4 MiB buffers: written as the bytes land), two sends.
  std::vector<char> first(4 * 1024 * 1024, 0), second(4 * 1024 * 1024, 0);
  Posted a, b;
  PostPayload(&p, &first, &a);
  PostPayload(&p, &second, &b);
  // Only the first receive is tested, while its delivery (300 ms away) is not due.
  const int64_t deadline = WallNowNs() + kLatencyNs / 2;
  bool first_done_early = false, test_failed = false;
  while (static_cast<unsigned char>(second[kPayload - 1]) != 0xAB && WallNowNs() < deadline) {
    int done = 0;
    test_failed = test_failed || static_cast<Request*>(a.rreq)->Test(&done, nullptr) != prism_ncclSuccess;
    first_done_early = first_done_early || done != 0;
  }
  CHECK_FALSE(test_failed);
  CHECK_FALSE(first_done_early);
  CHECK(static_cast<unsigned char>(second[kPayload - 1]) == 0xAB);
  for (Posted* x : {&a, &b}) {
    int done = 0;
    bool ok = true;
    while (!done && ok) ok = static_cast<Request*>(x->rreq)->Test(&done, nullptr) == prism_ncclSuccess;
    CHECK(ok);
    FinishSend(*x);
  }
}

TEST_CASE("real peers, no progress threads: test() of a receive returns once it is complete, before the messages "
          "behind it are read",
          "[plugin][unit][hold]") {
  // As NCCL Socket's test(): NCCL hears of a completed receive (and tells the
  // GPU) before the proxy thread copies the next messages.
  const auto setting = GENERATE(prism::plugin::ReturnOnComplete::kReceives, prism::plugin::ReturnOnComplete::kAll,
                                prism::plugin::ReturnOnComplete::kNever);
  INFO("PRISM_RETURN_ON_COMPLETE " << static_cast<int>(setting));
  const bool return_on_complete = setting != prism::plugin::ReturnOnComplete::kNever;
  LinkHoldStats stats;
  Pair p(&stats, prism::plugin::kInlineProgress, 0);
  p.settings.return_on_complete = setting;
  std::vector<char> first(kPayload, 0), second(kPayload, 0);
  const std::vector<char> payload(kPayload, static_cast<char>(0xAB));
  const size_t size = kPayload;
  const int tag = 7;
  MessageTag none;
  void* rreq[2] = {};
  for (int i = 0; i < 2; ++i) {
    void* data = (i == 0 ? first : second).data();
    REQUIRE(p.recv->Irecv(1, &data, &size, &tag, nullptr, &none, &rreq[i]) == prism_ncclSuccess);
  }
  for (int i = 0; i < 2; ++i) {  // both receives posted, then both messages into the socket
    Posted sent;
    REQUIRE(p.send->Isend(const_cast<char*>(payload.data()), size, tag, nullptr, none, &sent.sreq) ==
            prism_ncclSuccess);
    FinishSend(sent);
  }
  const int64_t deadline = WallNowNs() + 10'000'000'000;  // a hang guard, not a timing bound
  auto wait = [&](void* req) {
    int done = 0;
    while (!done && WallNowNs() < deadline) REQUIRE(static_cast<Request*>(req)->Test(&done, nullptr) == prism_ncclSuccess);
    REQUIRE(done);
  };
  wait(rreq[0]);
  CHECK(static_cast<unsigned char>(first[kPayload - 1]) == 0xAB);
  // Still in the socket; with PRISM_RETURN_ON_COMPLETE=0 read by the same test().
  CHECK((second[0] == 0) == return_on_complete);
  wait(rreq[1]);
  CHECK(static_cast<unsigned char>(second[0]) == 0xAB);
  CHECK(static_cast<unsigned char>(second[kPayload - 1]) == 0xAB);
}

TEST_CASE("unshaped real peers: an LL or LL128 payload lands in NCCL's buffer as it arrives (nothing to hold it for)",
          "[plugin][unit][hold]") {
  // One progress thread moves the bytes (Settings' inline_bytes is 0 here),
  // so they land while this thread only watches the buffer, never test().
  LinkHoldStats stats;
  Pair p(&stats, 1, 0);
  for (size_t registered : {size_t{512} * 1024, size_t{4800} * 1024}) {
    INFO("registered " << registered);
    std::vector<char> buf(registered, 0);
    const size_t size = kPayload;
    Posted posted;
    PostPayload(&p, &buf, &posted);
    const int64_t deadline = WallNowNs() + 10'000'000'000;  // a hang guard, not a timing bound
    std::atomic_thread_fence(std::memory_order_acquire);
    while (static_cast<volatile char*>(buf.data())[size - 1] != static_cast<char>(0xAB) && WallNowNs() < deadline) {
      std::this_thread::sleep_for(std::chrono::microseconds(200));
    }
    CHECK(static_cast<unsigned char>(buf[size - 1]) == 0xAB);  // there before any test()
    int done = 0;
    while (!done) REQUIRE(static_cast<Request*>(posted.rreq)->Test(&done, nullptr) == prism_ncclSuccess);
    CHECK(static_cast<unsigned char>(buf[0]) == 0xAB);
    FinishSend(posted);
  }
  CHECK(stats.landed_late().count() == 0);  // unshaped: nothing counted
  CHECK(stats.matched_late().count() == 0);
}

TEST_CASE("link hold: delays in buckets, quantiles as bucket bounds, and the summary", "[plugin][unit][hold]") {
  DelayHistogram h;
  CHECK(h.QuantileUpperUs(0.5) == -1);
  h.Record(-5);          // in time
  h.Record(0);           // in time
  h.Record(3'000);       // 3 us: the 5 us bucket
  h.Record(70'000);      // 70 us: the 100 us bucket
  h.Record(20'000'000);  // 20 ms: beyond the last bound
  CHECK(h.count() == 5);
  CHECK(h.CountAbove(0) == 3);
  CHECK(h.CountAbove(50) == 2);
  CHECK(h.QuantileUpperUs(0.5) == 5);
  CHECK(h.QuantileUpperUs(0.2) == 0);
  CHECK(h.QuantileUpperUs(1.0) == INT64_MAX);
  CHECK(h.max_ns() == 20'000'000);

  LinkHoldStats s;
  CHECK(s.Summary().empty());
  s.RecordLanded(1'000'000, 0, 0);  // unshaped: not counted
  CHECK(s.Summary().empty());
  s.RecordLanded(1'000'000, 2'000'000, 500'000);  // early
  s.RecordLanded(2'030'000, 2'000'000, 500'000);  // 30 us after its delivery
  s.RecordLanded(9'001'000, 2'000'000, 9'000'000);  // posted 7 ms late, landed 1 us after the posting
  s.RecordSeen(4'000);
  s.RecordMatched(600'000, 2'000'000, 500'000);  // header read long before its delivery
  s.RecordMatched(2'040'000, 2'000'000, 500'000);  // read 40 us after its delivery: this side was late
  s.RecordMatched(9'000'000, 0, 0);  // unshaped: not counted
  CHECK(s.matched_late().count() == 2);
  CHECK(s.Summary() ==
        "shaped receives: 3; bytes landed after the modelled delivery (or the posting, if later): 2 (66.7%), "
        "p50 <=1 us, p99 <=50 us, max 30.0 us; test() saw them p50 <=5 us, p99 <=5 us later; "
        "headers read after it: 1, max 40.0 us");
}

TEST_CASE("link hold: a warning when the shaped links clearly did not hold, none within the jitter",
          "[plugin][unit][hold]") {
  LinkHoldStats held;
  CHECK(held.UnheldWarning().empty());  // nothing counted
  for (int i = 0; i < 100; ++i) held.RecordLanded(2'000'000 + (i < 4 ? 80'000 : 30'000), 2'000'000, 0);
  CHECK(held.UnheldWarning().empty());  // 4 of 100 over 50 us: under 1 in 20
  // Two real ranks whose loopback cannot carry the link (the GPU host,
  // 100 Gbit/s, 2026-12-03): most receives land 50-1000 us late.
  LinkHoldStats unheld;
  for (int i = 0; i < 100; ++i) unheld.RecordLanded(2'000'000 + (i < 60 ? 100'000 : 0), 2'000'000, 0);
  const std::string w = unheld.UnheldWarning();
  CHECK(w.find("did not hold the modelled link: 60 of 100 receives (60.0%) landed over 50 us") != std::string::npos);
  CHECK(w.find("max 100.0 us") != std::string::npos);
  CHECK(w.find("fewer real ranks on one host") != std::string::npos);
  CHECK(w.find("PRISM_LINK_REPORT=1") != std::string::npos);
}
