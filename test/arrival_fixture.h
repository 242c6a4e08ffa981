// The fixture of the virtual-receive arrival tests (plugin_arrival_test.cc,
// plugin_arrival_pat_test.cc): a link in closed form for the pure rules of
// plugin/arrival.h, and a Rig of VirtualRecvComm / VirtualSendComm with
// FakeNccl's tags and a DaemonSession that never connects (schedules are
// put into its book by hand). Catch2's assertions: test code only.
#ifndef PRISM_TEST_ARRIVAL_FIXTURE_H_
#define PRISM_TEST_ARRIVAL_FIXTURE_H_

#include <catch2/catch.hpp>

#include <chrono>
#include <cstdint>
#include <optional>
#include <thread>
#include <vector>

#include "plugin/arrival.h"
#include "plugin/clock.h"
#include "plugin/daemon_session.h"
#include "plugin/op_schedules.h"
#include "plugin/op_tracker.h"
#include "plugin/virtual_comms.h"
#include "test/plugin_fake_nccl.h"
#include "test/virtual_recv_rig.h"

namespace prism::test::arrival {

using prism::plugin::Arrival;
using prism::plugin::ArrivalForm;
using prism::plugin::ArrivalInput;
using prism::plugin::ResolveArrival;
using prism::plugin::SessionEvent;
using prism::plugin::StreamStepBytes;
using prism::plugin::VirtualLink;
using prism::plugin::WireTime;
using prism::BitsPerSecond;
using prism::Bytes;
using prism::Nanoseconds;

// A link of B bytes/ns and latency L.
inline constexpr int64_t kB = 2;
inline constexpr uint64_t kLinkBits = kB * 8'000'000'000ull;
inline constexpr int64_t kL = 5'000;
inline const VirtualLink kLink{BitsPerSecond(kLinkBits), Nanoseconds(kL)};

inline ArrivalInput Input(ArrivalForm form, int64_t posted, uint64_t bytes, int64_t ready = 0, int64_t own_send = 0,
                   VirtualLink link = kLink) {
  ArrivalInput in;
  in.form = form;
  in.posted = Nanoseconds(posted);
  in.bytes = Bytes(bytes);
  in.ready = Nanoseconds(ready);
  in.own_send_done = Nanoseconds(own_send);
  in.link = link;
  return in;
}

// The rule with the previous wire end given in plain nanoseconds.
inline Arrival Resolve(const ArrivalInput& in, int64_t wire_end) { return ResolveArrival(in, Nanoseconds(wire_end)); }

using prism::plugin::CommEnv;
using prism::plugin::DaemonSession;
using prism::plugin::Logger;
using prism::plugin::MessageTag;
using prism::plugin::NicLinks;
using prism::plugin::OpInfo;
using prism::plugin::OpKey;
using prism::plugin::OpKind;
using prism::plugin::OpSchedule;
using prism::plugin::OpScheduleBook;
using prism::plugin::OpSummary;
using prism::plugin::OpTracker;
using prism::plugin::Request;
using prism::plugin::Schedule;
using prism::plugin::Settings;
using prism::plugin::VirtualRecvComm;
using prism::plugin::VirtualSendComm;
using prism::plugin::WallNowNs;
using prism::test::FakeColl;
using prism::test::FakeNccl;
using prism::test::FakeP2p;
using prism::test::FakeSub;


// The plugin's own link: 1 byte/ns, and a latency long enough that every
// completion lies well after its posting (so the posting-time floor never hides a rule).
inline constexpr uint64_t kOwnBits = 8'000'000'000ull;
inline constexpr int64_t kOwnLatency = 20'000'000;
inline constexpr uint64_t kHash = 0x5EED;

inline Settings TestSettings() {
  Settings s;
  s.link_bits_per_second = kOwnBits;
  s.link_latency_ns = kOwnLatency;
  s.daemon_timeout_ms = 600'000;
  s.recv_fill = prism::plugin::RecvFill::kNone;
  return s;
}

// Everything a virtual comm needs, with a session that never connects.
struct Rig : prism::test::VirtualRecvRig {
  // This process is rank `rank` of a communicator of `nranks`.
  explicit Rig(int nranks = 4, int rank = 1)
      : VirtualRecvRig(TestSettings(), kOwnBits, kOwnLatency, kHash, nranks, rank) {}
};

// Completed.waited_for_schedule of the latest receive completed on
// connection `conn` among the session's unsent events; nullopt: none.
inline std::optional<bool> ReceiveWaitedForSchedule(DaemonSession* session, uint64_t conn) {
  std::optional<bool> out;
  for (const SessionEvent& e : session->PendingEvents())
    if (e.kind == SessionEvent::kCompleted && e.id == conn) out = e.waited_for_schedule;
  return out;
}

// irecv of one buffer of `size` bytes tagged `tag`; the request.
inline Request* PostReceive(VirtualRecvComm* comm, std::vector<char>* buf, const MessageTag* tag) {
  void* data = buf->data();
  const size_t size = buf->size();
  const int nccl_tag = 0;
  void* request = nullptr;
  REQUIRE(comm->Irecv(1, &data, &size, &nccl_tag, nullptr, tag, &request) == prism_ncclSuccess);
  REQUIRE(request != nullptr);
  return static_cast<Request*>(request);
}

// Tests `r` until done; the size it reported, or -1 (error, or 5 s passed).
inline int WaitDone(Request* r) {
  const int64_t deadline = WallNowNs() + 5'000'000'000;
  while (WallNowNs() < deadline) {
    int done = 0;
    int size = -1;
    if (r->Test(&done, &size) != prism_ncclSuccess) return -1;
    if (done) return size;
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
  return -1;
}

// True while `r` stays not done for `ms` milliseconds of tests.
inline bool StaysPending(Request* r, int ms) {
  const int64_t until = WallNowNs() + ms * 1'000'000ll;
  while (WallNowNs() < until) {
    int done = 0;
    int size = 0;
    if (r->Test(&done, &size) != prism_ncclSuccess || done) return false;
    std::this_thread::sleep_for(std::chrono::microseconds(500));
  }
  return true;
}

// One ring all-reduce of 1 channel, 1 network step, with its send and
// receive proxy ops started and step 0 started on both.
struct OneStepRing {
  explicit OneStepRing(Rig* rig, uint64_t seq, const char* proto = "SIMPLE", const char* func = "AllReduce",
                       size_t count = 1024, const char* datatype = "ncclFloat32")
      : rig(rig) {
    FakeColl c;
    c.func = func;
    c.datatype = datatype;
    c.proto = proto;
    c.seq = seq;
    c.count = count;
    c.channels = 1;
    tasks = rig->nccl.StartTasks({c}, {});
    rig->nccl.StopTasks(tasks);
    send = rig->nccl.Sub(tasks[0], 0, 2, 1, 1, true);
    recv = rig->nccl.Sub(tasks[0], 0, 0, 1, 1, false);
    for (FakeSub* s : {&send, &recv}) {
      rig->nccl.StartProxyOp(s);
      rig->nccl.StartStep(s, 0);
    }
  }
  MessageTag send_tag() { return FakeNccl::Transfer(&send, 0); }
  MessageTag recv_tag() { return FakeNccl::Transfer(&recv, 0); }
  // Stops both proxy ops; the op's summary.
  OpSummary Finish() {
    for (FakeSub* s : {&send, &recv}) {
      rig->nccl.StopStep(s, 0);
      rig->nccl.StopProxyOp(s);
    }
    REQUIRE(rig->listener.count > 0);
    return rig->listener.last;
  }
  Rig* rig;
  std::vector<void*> tasks;
  FakeSub send;
  FakeSub recv;
};

// A receive completes at `expected` unless posted later (the floor of every
// rule): on a stalled machine the posting at some time up to `posted_by`.
inline void CheckArrival(int64_t end_ns, int64_t expected, int64_t posted_by) {
  if (posted_by <= expected) {
    CHECK(end_ns == expected);
  } else {
    WARN("the test machine stalled; only bounds checked");
    CHECK(end_ns >= expected);
    CHECK(end_ns <= posted_by);
  }
}

// The plugin's own isend of `bytes` for `tag`; when it leaves the wire.
inline int64_t OwnSend(VirtualSendComm* comm, const MessageTag& tag, size_t bytes) {
  std::vector<char> buf(bytes);
  void* request = nullptr;
  REQUIRE(comm->Isend(buf.data(), bytes, 0, nullptr, tag, &request) == prism_ncclSuccess);
  REQUIRE(request != nullptr);
  int64_t wire_done = 0;
  uint64_t sent = 0;
  REQUIRE(tag.op->SendOf(tag.channel, tag.step, &wire_done, &sent));
  CHECK(sent == bytes);
  return wire_done;
}


// A ring all-reduce (seq 1) of `count` floats under LL, started and
// stopped as NCCL's profiler front end does; its tasks.
inline std::vector<void*> LlAllReduceTask(Rig* rig, size_t count) {
  FakeColl c;
  c.proto = "LL";
  c.seq = 1;
  c.count = count;
  std::vector<void*> tasks = rig->nccl.StartTasks({c}, {});
  rig->nccl.StopTasks(tasks);
  return tasks;
}

}  // namespace prism::test::arrival

#endif  // PRISM_TEST_ARRIVAL_FIXTURE_H_
