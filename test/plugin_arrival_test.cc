// When receives from virtual peers complete: the pure rules (plugin/arrival.h)
// checked against closed forms, then VirtualRecvComm end to end (which rule
// it picks, with which inputs), with tags from FakeNccl and a DaemonSession
// that is never started (events stay queued; schedules are put by hand).


#include <catch2/catch.hpp>

#include <atomic>
#include <algorithm>
#include <cstring>
#include <chrono>
#include <cstdint>
#include <optional>
#include <vector>

#include "plugin/arrival.h"
#include "plugin/clock.h"
#include "plugin/daemon_session.h"
#include "plugin/op_schedules.h"
#include "plugin/op_tracker.h"
#include "plugin/ring_loops.h"
#include "plugin/virtual_comms.h"
#include "test/arrival_fixture.h"
#include "test/plugin_fake_nccl.h"

namespace {

using namespace prism::test::arrival;  // NOLINT(build/namespaces): the fixture, test code


TEST_CASE("arrival: wire time rounds up to whole nanoseconds and an unshaped link takes none",
          "[plugin][unit][arrival]") {
  CHECK(WireTime(Bytes(4096), BitsPerSecond(kLinkBits)).count() == 4096 / kB);
  CHECK(WireTime(Bytes(1), BitsPerSecond(3'000'000'000ull)).count() == 3);  // 8/3 ns
  CHECK(WireTime(Bytes(1 << 30), BitsPerSecond(0)).count() == 0);
  CHECK(WireTime(Bytes(0), BitsPerSecond(kLinkBits)).count() == 0);
}

TEST_CASE("arrival: MIRROR, ring of 2 channels: max(own send + L, ready + bytes/B + L)", "[plugin][unit][arrival]") {
  constexpr int kChannels = 2;
  constexpr int kSteps = 6;
  constexpr uint64_t kM = 4096;
  constexpr int64_t kPosted = 900'000;
  constexpr int64_t kReady = 1'010'000;
  auto own_send = [](int ch, int k) -> int64_t { return 1'000'000 + ch * 777 + k * 3'000; };
  int ready_bound = 0;
  int send_bound = 0;
  for (int ch = 0; ch < kChannels; ++ch) {
    for (int k = 0; k < kSteps; ++k) {
      INFO("channel " << ch << " step " << k);
      const int64_t by_send = own_send(ch, k) + kL;
      const int64_t by_ready = kReady + static_cast<int64_t>(kM) / kB + kL;
      const Arrival a = Resolve(Input(ArrivalForm::kMirror, kPosted, kM, kReady, own_send(ch, k)), 123);
      CHECK(a.done.count() == std::max(by_send, by_ready));
      // the sender's link is busy until that message left (a later STREAM
      // or plain receive on this connection queues behind it)
      CHECK(a.wire_end.count() == std::max<int64_t>(123, a.done.count() - kL));
      (by_ready > by_send ? ready_bound : send_bound)++;
    }
  }
  CHECK(ready_bound > 0);  // both terms decide some step
  CHECK(send_bound > 0);

  SECTION("without a ready time the own send alone decides") {
    for (int k = 0; k < kSteps; ++k) {
      CHECK(Resolve(Input(ArrivalForm::kMirror, kPosted, kM, 0, own_send(0, k)), 0).done.count() ==
            own_send(0, k) + kL);
    }
  }
  SECTION("never before the receive was posted") {
    const int64_t late_post = own_send(0, 0) + kL + 1'000'000;
    CHECK(Resolve(Input(ArrivalForm::kMirror, late_post, kM, kReady, own_send(0, 0)), 0).done.count() ==
          late_post);
  }
}

TEST_CASE("arrival: MIRROR, the ring's lockstep floor: start + s (W/2h + L + c) + L + W/h when this rank's own steps are faster",
          "[plugin][unit][arrival]") {
  // A latency-bound ring: this rank's NCCL sends an empty step every 2 us
  // (an LL step with no data waits for nothing), the virtual members pay
  // L = 5 us plus c = 7.5 us per step after the ring started at 1 ms.
  constexpr int64_t kStart = 1'000'000;
  constexpr int64_t kC = 7'500;
  int64_t wire_end = 0;
  for (uint32_t s = 0; s < 64; ++s) {
    ArrivalInput in = Input(ArrivalForm::kMirror, 0, 0, kStart - 1'000, kStart + s * 2'000);
    in.ring_start = Nanoseconds(kStart);
    in.ring_step = s;
    in.step_cost = Nanoseconds(kC);
    const Arrival a = Resolve(in, wire_end);
    CHECK(a.done.count() == kStart + static_cast<int64_t>(s) * (kL + kC) + kL);
    wire_end = a.wire_end.count();
  }
  // The same ring moving 4 KB per step at 1 byte/ns (W/h = 4096 ns): the
  // model's step adds a slice (2048 ns) a step and the last step's second
  // slice (2048 ns): start + s (W/2h + L + c) + W/2h + L + W/2h.
  for (uint32_t s = 0; s < 64; ++s) {
    ArrivalInput in = Input(ArrivalForm::kMirror, 0, 0, kStart - 1'000, kStart + s * 2'000);
    in.ring_start = Nanoseconds(kStart);
    in.ring_step = s;
    in.step_cost = Nanoseconds(kC);
    in.step_wire = Nanoseconds(4096);
    CHECK(Resolve(in, 0).done.count() == kStart + static_cast<int64_t>(s) * (2048 + kL + kC) + 2048 + kL + 2048);
  }
  // A bandwidth-bound ring: own steps 100 us apart, the own send paces it.
  for (uint32_t s = 0; s < 8; ++s) {
    ArrivalInput in = Input(ArrivalForm::kMirror, 0, 4096, kStart - 100'000, kStart + s * 100'000);
    in.ring_start = Nanoseconds(kStart);
    in.ring_step = s;
    in.step_cost = Nanoseconds(kC);
    CHECK(Resolve(in, 0).done.count() == kStart + static_cast<int64_t>(s) * 100'000 + kL);
  }
  // Without a ring start (no schedule) the floor does not apply.
  ArrivalInput none = Input(ArrivalForm::kMirror, 0, 0, 0, kStart + 10 * 2'000);
  none.ring_step = 10;
  none.step_cost = Nanoseconds(kC);
  CHECK(Resolve(none, 0).done.count() == kStart + 10 * 2'000 + kL);
}

TEST_CASE("arrival: a Simple ring step is two network transfers, an LL or LL128 step one", "[plugin][unit][arrival]") {
  using prism::plugin::RingStepOfMessage;
  CHECK(RingStepOfMessage(true, 0) == 0);
  CHECK(RingStepOfMessage(true, 1) == 0);
  CHECK(RingStepOfMessage(true, 2) == 1);
  CHECK(RingStepOfMessage(true, 16381) == 8190);
  CHECK(RingStepOfMessage(false, 0) == 0);
  CHECK(RingStepOfMessage(false, 16381) == 16381);
}

TEST_CASE("arrival: MIRROR, a virtual sender that arrived late sends back to back from ready",
          "[plugin][unit][arrival]") {
  constexpr uint64_t kM = 4096;
  constexpr int64_t kReady = 5'000'000;  // long after this rank's own sends
  int64_t wire_end = 0;
  for (int k = 0; k < 4; ++k) {
    INFO("step " << k);
    const Arrival a = Resolve(Input(ArrivalForm::kMirror, 0, kM, kReady, 1'000'000 + k * 3'000), wire_end);
    CHECK(a.done.count() == kReady + (k + 1) * static_cast<int64_t>(kM) / kB + kL);
    wire_end = a.wire_end.count();
  }
}

TEST_CASE("arrival: STREAM, the k-th chunk arrives at R + cumulative bytes/B + L", "[plugin][unit][arrival]") {
  const std::vector<uint64_t> chunks = {4096, 4096, 1024, 2048, 6};
  constexpr int64_t kReady = 2'000'000;
  constexpr int64_t kPosted = 1'500'000;
  int64_t wire_end = 0;
  uint64_t cumulative = 0;
  for (size_t k = 0; k < chunks.size(); ++k) {
    INFO("chunk " << k);
    cumulative += chunks[k];
    const Arrival a = Resolve(Input(ArrivalForm::kStream, kPosted, chunks[k], kReady), wire_end);
    CHECK(a.wire_end.count() == kReady + static_cast<int64_t>(cumulative) / kB);
    CHECK(a.done.count() == kReady + static_cast<int64_t>(cumulative) / kB + kL);
    wire_end = a.wire_end.count();
  }

  SECTION("a later operation ready while the link is still busy queues behind it") {
    const int64_t busy_until = wire_end;
    const Arrival a = Resolve(Input(ArrivalForm::kStream, kPosted, 512, busy_until - 100), busy_until);
    CHECK(a.done.count() == busy_until + 512 / kB + kL);
  }
  SECTION("a receive posted after the data arrived completes when posted; the link still ran from R") {
    const int64_t late_post = kReady + 1'000'000;
    const Arrival a = Resolve(Input(ArrivalForm::kStream, late_post, 4096, kReady), 0);
    CHECK(a.done.count() == late_post);
    CHECK(a.wire_end.count() == kReady + 4096 / kB);
  }
}

TEST_CASE("arrival: no schedule, the plain link model from the posting time", "[plugin][unit][arrival]") {
  constexpr uint64_t kM = 1000;
  constexpr int64_t kPosted = 50'000;
  int64_t wire_end = 0;
  for (int k = 0; k < 3; ++k) {  // posted together: they queue
    const Arrival a = Resolve(Input(ArrivalForm::kPlainLink, kPosted, kM), wire_end);
    CHECK(a.done.count() == kPosted + (k + 1) * static_cast<int64_t>(kM) / kB + kL);
    wire_end = a.wire_end.count();
  }
  const int64_t idle_post = wire_end + 10'000;  // the link went idle
  CHECK(Resolve(Input(ArrivalForm::kPlainLink, idle_post, kM), wire_end).done.count() ==
        idle_post + static_cast<int64_t>(kM) / kB + kL);
  const VirtualLink unshaped{BitsPerSecond(0), Nanoseconds(kL)};
  CHECK(Resolve(Input(ArrivalForm::kPlainLink, kPosted, 1 << 30, 0, 0, unshaped), 0).done.count() == kPosted + kL);
}

TEST_CASE("arrival: a STREAM step carries at most what is left of the op's per-channel share",
          "[plugin][unit][arrival]") {
  // 10000 bytes over 3 channels: a share of ceil(10000 / 3) = 3334.
  CHECK(StreamStepBytes(10'000, 3, 0, 2048) == 2048);
  CHECK(StreamStepBytes(10'000, 3, 2048, 2048) == 3334 - 2048);
  CHECK(StreamStepBytes(10'000, 3, 3334, 2048) == 2048);  // share used up: the posted size
  CHECK(StreamStepBytes(10'000, 0, 0, 1 << 20) == 10'000);  // 0 channels count as 1
  CHECK(StreamStepBytes(0, 1, 0, 512) == 512);
}

}  // namespace

namespace {

TEST_CASE("virtual recv: own isend stamps its wire time for the mirror", "[plugin][unit][arrival]") {
  Rig rig;
  VirtualSendComm send(rig.env, rig.session, 1, 0);
  OneStepRing ring(&rig, 1);
  const MessageTag tag = ring.send_tag();
  const int64_t before = WallNowNs();
  const int64_t wire_done = OwnSend(&send, tag, 4096);
  const int64_t after = WallNowNs();
  // Posted at p in [before, after] on an idle NIC: leaves at p + bytes / 1 B/ns.
  CHECK(wire_done >= before + 4096);
  CHECK(wire_done <= after + 4096);
  CHECK(ring.Finish().bytes_sent == 4096);
}

TEST_CASE("virtual recv: MIRROR without a schedule completes at own send + latency", "[plugin][unit][arrival]") {
  Rig rig;
  VirtualSendComm send(rig.env, rig.session, 1, 0);
  VirtualRecvComm recv(rig.env, rig.session, 2, 0);
  OneStepRing ring(&rig, 1);
  const int64_t sent = OwnSend(&send, ring.send_tag(), 4096);
  std::vector<char> buf(8192);
  const MessageTag tag = ring.recv_tag();
  Request* r = PostReceive(&recv, &buf, &tag);
  const int64_t posted_by = WallNowNs();
  CHECK(WaitDone(r) == 4096);  // the mirrored size, not the posted one
  const OpSummary s = ring.Finish();
  CheckArrival(s.end_ns, sent + kOwnLatency, posted_by);
  CHECK(s.bytes_received == 4096);
}

TEST_CASE("virtual recv: with PRISM_RING_WAITS_FOR_SCHEDULE a MIRROR receive waits for its schedule",
          "[plugin][unit][arrival]") {
  Rig rig;
  rig.settings.ring_waits_for_schedule = true;
  VirtualSendComm send(rig.env, rig.session, 1, 0);
  VirtualRecvComm recv(rig.env, rig.session, 2, 0);
  OneStepRing ring(&rig, 1);
  const int64_t sent = OwnSend(&send, ring.send_tag(), 4096);
  std::vector<char> buf(8192);
  const MessageTag tag = ring.recv_tag();
  Request* r = PostReceive(&recv, &buf, &tag);
  // The engine has not seen the virtual members reach the operation.
  CHECK(StaysPending(r, 30));
  OpSchedule sched;
  sched.mode = OpSchedule::Mode::kMirror;
  sched.ready_ns = sent - 10'000'000;  // they were there before this rank: the own send decides
  rig.book.Put(OpKey::Of(ring.send_tag().op->info()), sched);
  const int64_t posted_by = WallNowNs();
  CHECK(WaitDone(r) == 4096);
  const OpSummary s = ring.Finish();
  CheckArrival(s.end_ns, sent + kOwnLatency, posted_by);
}

TEST_CASE("virtual recv: a MIRROR receive under prismd's hold waits until the members' schedule replaces it",
          "[plugin][unit][arrival]") {
  Rig rig;
  VirtualSendComm send(rig.env, rig.session, 1, 0);
  VirtualRecvComm recv(rig.env, rig.session, 2, 0);
  OneStepRing ring(&rig, 1);
  const OpKey key = OpKey::Of(ring.send_tag().op->info());
  OpSchedule hold;
  hold.mode = OpSchedule::Mode::kMirror;
  hold.hold = true;  // prismd: the virtual members have not reached the operation
  rig.book.Put(key, hold);
  const int64_t sent = OwnSend(&send, ring.send_tag(), 4096);
  std::vector<char> buf(8192);
  const MessageTag tag = ring.recv_tag();
  Request* r = PostReceive(&recv, &buf, &tag);
  CHECK(StaysPending(r, 30));  // without the hold it would complete at sent + latency
  OpSchedule sched;
  sched.mode = OpSchedule::Mode::kMirror;
  sched.ready_ns = sent + 20'000'000;  // they arrived 20 ms after this rank's send
  sched.link_bits_per_second = 4 * 8'000'000'000ull;
  sched.link_latency_ns = 15'000'000;
  rig.book.Put(key, sched);
  rig.book.Put(key, hold);  // a hold that comes after the schedule changes nothing
  REQUIRE_FALSE(rig.book.Get(key)->hold);
  const int64_t posted_by = WallNowNs();
  CHECK(WaitDone(r) == 4096);
  CheckArrival(ring.Finish().end_ns, sched.ready_ns + 4096 / 4 + 15'000'000, posted_by);
  CHECK(ReceiveWaitedForSchedule(rig.session.get(), 2) == std::optional<bool>(true));  // prismd's late_ns cause
}

TEST_CASE("schedule book: a forecast is made plain once, in the book, when its anchor has ended",
          "[plugin][unit][forecast]") {
  OpScheduleBook book;
  const OpKey key{7, OpKind::kAllReduce, 3, -1}, anchor{7, OpKind::kAllReduce, 2, -1};
  OpSchedule forecast;
  forecast.ready_ns = 1'000;
  forecast.has_after = true;
  forecast.after = anchor;
  forecast.after_delay_ns = 500;
  book.Put(key, forecast);
  bool pending = false;
  REQUIRE(book.GetResolved(key, &pending).has_value());
  CHECK(pending);  // the anchor has not ended here
  CHECK(book.Get(key)->has_after);
  book.Finish(anchor, 9'000);
  const std::optional<OpSchedule> s = book.GetResolved(key, &pending);
  REQUIRE(s.has_value());
  CHECK_FALSE(pending);
  CHECK(s->ready_ns == 9'500);
  // Written back: the operation's later receives find it plain (no second lookup of the anchor).
  CHECK_FALSE(book.Get(key)->has_after);
  CHECK(book.Get(key)->ready_ns == 9'500);
  bool none = true;
  CHECK_FALSE(book.GetResolved(OpKey{7, OpKind::kAllGather, 3, -1}, &none).has_value());
  CHECK_FALSE(none);
}

TEST_CASE("virtual recv: a forecast MIRROR receive waits for this rank's own end of the operation it runs from, "
          "then times from that end, with no schedule to wait for", "[plugin][unit][arrival][forecast]") {
  Rig rig;
  VirtualSendComm send(rig.env, rig.session, 1, 0);
  VirtualRecvComm recv(rig.env, rig.session, 2, 0);
  OneStepRing ring(&rig, 1);
  const OpKey key = OpKey::Of(ring.send_tag().op->info());
  const OpKey before{key.comm_hash, key.kind, 0, key.peer};  // this rank's previous all-reduce, still running
  const int64_t sent = OwnSend(&send, ring.send_tag(), 4096);
  OpSchedule forecast;
  forecast.mode = OpSchedule::Mode::kMirror;
  forecast.ready_ns = sent - 10'000'000;  // the members' own part: early
  forecast.has_after = true;
  forecast.after = before;
  forecast.after_delay_ns = 20'000'000;  // they compute 20 ms after that all-reduce ends
  forecast.link_bits_per_second = 4 * 8'000'000'000ull;
  forecast.link_latency_ns = 15'000'000;
  rig.book.Put(key, forecast);
  std::vector<char> buf(8192);
  const MessageTag tag = ring.recv_tag();
  Request* r = PostReceive(&recv, &buf, &tag);
  CHECK(StaysPending(r, 30));  // the previous all-reduce has not ended here: the members cannot be there
  const int64_t end = sent;    // it ends (as this process's relay tells the book)
  rig.book.Finish(before, end);
  const int64_t posted_by = WallNowNs();
  CHECK(WaitDone(r) == 4096);
  CheckArrival(ring.Finish().end_ns, end + 20'000'000 + 4096 / 4 + 15'000'000, posted_by);
}

// Without a schedule (PRISM_RING_WAITS_FOR_SCHEDULE=0) a MIRROR receive
// waits for this rank's own send alone, not for prismd: its late_ns is not
// prismd's (at 8192 ranks every PAT operation had 26 such receives, which
// prismd's "late receives" counted as waiting for the schedule until
// 2026-12-03).
TEST_CASE("virtual recv: MIRROR waits for the own send of the same step, and without a schedule that is not a wait "
          "for prismd", "[plugin][unit][arrival]") {
  Rig rig;
  VirtualSendComm send(rig.env, rig.session, 1, 0);
  VirtualRecvComm recv(rig.env, rig.session, 2, 0);
  OneStepRing ring(&rig, 1);
  std::vector<char> buf(8192);
  const MessageTag tag = ring.recv_tag();
  Request* r = PostReceive(&recv, &buf, &tag);
  CHECK(StaysPending(r, 30));  // longer than the latency: it is waiting for the send (no schedule there)
  const int64_t sent = OwnSend(&send, ring.send_tag(), 2048);
  CHECK(WaitDone(r) == 2048);
  CHECK(ring.Finish().end_ns == sent + kOwnLatency);
  CHECK(ReceiveWaitedForSchedule(rig.session.get(), 2) == std::optional<bool>(false));
}

TEST_CASE("virtual recv: MIRROR with a late ready time: ready + bytes/B + L on the schedule's link",
          "[plugin][unit][arrival]") {
  Rig rig;
  VirtualSendComm send(rig.env, rig.session, 1, 0);
  VirtualRecvComm recv(rig.env, rig.session, 2, 0);
  OneStepRing ring(&rig, 1);
  const MessageTag send_tag = ring.send_tag();
  const int64_t sent = OwnSend(&send, send_tag, 4096);
  OpSchedule sched;
  sched.mode = OpSchedule::Mode::kMirror;
  sched.ready_ns = sent + 5'000'000;                // the virtual members arrive 5 ms later
  sched.link_bits_per_second = 4 * 8'000'000'000ull;  // 4 bytes/ns
  sched.link_latency_ns = 15'000'000;
  rig.book.Put(OpKey::Of(send_tag.op->info()), sched);
  std::vector<char> buf(8192);
  const MessageTag tag = ring.recv_tag();
  Request* r = PostReceive(&recv, &buf, &tag);
  const int64_t posted_by = WallNowNs();
  CHECK(WaitDone(r) == 4096);
  CheckArrival(ring.Finish().end_ns, std::max(sent + 15'000'000, sched.ready_ns + 4096 / 4 + 15'000'000),
               posted_by);
  // Its schedule was there: it did not wait for prismd (any lateness is NCCL's test()).
  CHECK(ReceiveWaitedForSchedule(rig.session.get(), 2) == std::optional<bool>(false));
}

// An LL ring all-reduce of 4 steps on one channel whose own empty steps all
// leave at once; each receive k must wait for the ring's lockstep,
// first send + k (L + c) + L and the model's wire per step (RingFloor: one
// element, a nanosecond of wire a step at 1 byte/ns), with c = 2 ms from
// the schedule (or, without one, from prismd's Welcome).
void CheckLockstep(bool with_schedule) {
  Rig rig;
  VirtualSendComm send(rig.env, rig.session, 1, 0);
  VirtualRecvComm recv(rig.env, rig.session, 2, 0);
  std::vector<void*> tasks = LlAllReduceTask(&rig, 1);
  constexpr int kSteps = 4;
  constexpr int64_t kStepCost = 2'000'000;  // far above the own sends' pace
  FakeSub sub_send = rig.nccl.Sub(tasks[0], 0, 2, kSteps, 1, true);
  FakeSub sub_recv = rig.nccl.Sub(tasks[0], 0, 0, kSteps, 1, false);
  for (FakeSub* s : {&sub_send, &sub_recv}) rig.nccl.StartProxyOp(s);
  int64_t first_sent = 0;
  for (int k = 0; k < kSteps; ++k) {
    rig.nccl.StartStep(&sub_send, k);
    const int64_t sent = OwnSend(&send, FakeNccl::Transfer(&sub_send, k), 16);
    if (k == 0) first_sent = sent;
  }
  const std::shared_ptr<prism::plugin::OpRecord> op = FakeNccl::Transfer(&sub_send, 0).op;
  const int64_t first_posted = op->FirstSendPostedNs();
  CHECK(first_posted > 0);
  CHECK(first_posted <= first_sent);
  if (with_schedule) {
    OpSchedule sched;
    sched.mode = OpSchedule::Mode::kMirror;
    sched.ready_ns = first_posted - 1'000'000;  // the virtual members were there first
    sched.step_cost_ns = kStepCost;
    rig.book.Put(OpKey::Of(op->info()), sched);
  } else {
    rig.book.SetRingStepCost(Nanoseconds(kStepCost));
  }
  std::vector<char> buf(4096);
  for (int k = 0; k < kSteps; ++k) {
    rig.nccl.StartStep(&sub_recv, k);
    const MessageTag tag = FakeNccl::Transfer(&sub_recv, k);
    Request* r = PostReceive(&recv, &buf, &tag);
    CHECK(WaitDone(r) == 16);
    CHECK(WallNowNs() >= first_posted + k * (kOwnLatency + kStepCost) + kOwnLatency);
  }
  const prism::plugin::OpInfo& info = op->info();
  const Nanoseconds step_wire = prism::plugin::RingStepWireOf(true, info.bytes, info.comm_size,
                                                              prism::BitsPerSecond(kOwnBits));
  CHECK(step_wire > Nanoseconds(0));
  for (FakeSub* s : {&sub_send, &sub_recv}) {
    rig.nccl.StopStep(s, 0);
    rig.nccl.StopProxyOp(s);
  }
  REQUIRE(rig.listener.count > 0);
  const Nanoseconds floor =
      prism::RingStepsTime(step_wire, Nanoseconds(kOwnLatency + kStepCost), kSteps, prism::kNcclRingSlicesPerStep) -
      Nanoseconds(kStepCost);
  CHECK(rig.listener.last.end_ns == first_posted + floor.count());
  CHECK(floor.count() >= (kSteps - 1) * (kOwnLatency + kStepCost) + kOwnLatency + step_wire.count() / 2);
}

TEST_CASE("virtual recv: a scheduled LL ring receive of step s waits for the ring's lockstep, not only the own send",
          "[plugin][unit][arrival]") {
  CheckLockstep(true);
}

TEST_CASE("virtual recv: without a schedule the ring's lockstep takes the step cost prismd's Welcome gave",
          "[plugin][unit][arrival]") {
  CheckLockstep(false);
}

// A Simple ring all-reduce of 8 MiB over 2 members on one channel, in
// transfers of 1 MiB: NCCL's chunk is 2 slices, a loop of 2 chunks covers
// 4 MiB, so NCCL runs the ring's 2 steps twice (4 steps, 8 transfers), each
// step moving half a model step (4 MiB). The lockstep floor of the last
// transfer is the model's ring time with each step's wire halved; charged
// the whole model step per NCCL step (before 2026-12-02) the floor grew with
// the loops: the tied-embedding all-reduce of train_gpt.py (32 MiB, 2
// members, 4 loops) ended 60.6 ms after its first send against the model's
// 26.9 ms.
TEST_CASE("virtual recv: a Simple ring NCCL runs in several loops: each step's floor carries its share of the model's step",
          "[plugin][unit][arrival]") {
  Rig rig(2, 1);
  VirtualSendComm send(rig.env, rig.session, 1, 0);
  VirtualRecvComm recv(rig.env, rig.session, 2, 0);
  FakeColl c;
  c.seq = 1;
  c.count = 2 * 1024 * 1024;  // 8 MiB of floats
  std::vector<void*> tasks = rig.nccl.StartTasks({c}, {});
  rig.nccl.StopTasks(tasks);
  constexpr int kTransfers = 8;
  constexpr size_t kMessage = 1024 * 1024;
  constexpr int64_t kStepCost = 2'000'000;
  FakeSub sub_send = rig.nccl.Sub(tasks[0], 0, 0, kTransfers, 1, true);
  FakeSub sub_recv = rig.nccl.Sub(tasks[0], 0, 0, kTransfers, 1, false);
  for (FakeSub* s : {&sub_send, &sub_recv}) rig.nccl.StartProxyOp(s);
  for (int k = 0; k < kTransfers; ++k) {
    rig.nccl.StartStep(&sub_send, k);
    OwnSend(&send, FakeNccl::Transfer(&sub_send, k), kMessage);
  }
  const std::shared_ptr<prism::plugin::OpRecord> op = FakeNccl::Transfer(&sub_send, 0).op;
  const int64_t first_posted = op->FirstSendPostedNs();
  REQUIRE(first_posted > 0);
  OpSchedule sched;
  sched.mode = OpSchedule::Mode::kMirror;
  sched.ready_ns = first_posted - 1'000'000;  // the virtual member was there first
  sched.step_cost_ns = kStepCost;
  rig.book.Put(OpKey::Of(op->info()), sched);
  // NCCL keeps its receives posted ahead (the two of a step complete together).
  std::vector<std::vector<char>> bufs(kTransfers, std::vector<char>(kMessage));
  std::vector<MessageTag> tags(kTransfers);
  std::vector<Request*> posted;
  for (int k = 0; k < kTransfers; ++k) {
    rig.nccl.StartStep(&sub_recv, k);
    tags[k] = FakeNccl::Transfer(&sub_recv, k);
    posted.push_back(PostReceive(&recv, &bufs[k], &tags[k]));
  }
  for (Request* r : posted) CHECK(WaitDone(r) == static_cast<int>(kMessage));
  for (FakeSub* s : {&sub_send, &sub_recv}) {
    rig.nccl.StopStep(s, 0);
    rig.nccl.StopProxyOp(s);
  }
  REQUIRE(rig.listener.count > 0);
  const prism::plugin::OpInfo& info = op->info();
  CHECK(info.bytes == 8u * 1024 * 1024);
  CHECK(prism::plugin::RingLoopsOf(true, info.bytes, 2, 1, prism::plugin::kRingSlicesPerSimpleStep, kMessage) == 2);
  const Nanoseconds model_step = prism::plugin::RingStepWireOf(true, info.bytes, 2, prism::BitsPerSecond(kOwnBits));
  const Nanoseconds floor = prism::RingStepsTime(Nanoseconds(model_step.count() / 2), Nanoseconds(kOwnLatency + kStepCost),
                                                 kTransfers / 2, prism::kNcclRingSlicesPerStep) -
                            Nanoseconds(kStepCost);
  CHECK(rig.listener.last.end_ns == first_posted + floor.count());
}

TEST_CASE("virtual recv: a ring op is mirrored even when prismd expected STREAM", "[plugin][unit][arrival]") {
  Rig rig;
  VirtualSendComm send(rig.env, rig.session, 1, 0);
  VirtualRecvComm recv(rig.env, rig.session, 2, 0);
  OneStepRing ring(&rig, 1);
  const MessageTag send_tag = ring.send_tag();
  const int64_t sent = OwnSend(&send, send_tag, 4096);
  OpSchedule sched;
  sched.mode = OpSchedule::Mode::kStream;  // the form follows what NCCL ran: ring all-reduce
  sched.ready_ns = sent - 10'000'000;      // on time: the own send decides
  sched.link_latency_ns = 15'000'000;
  rig.book.Put(OpKey::Of(send_tag.op->info()), sched);
  std::vector<char> buf(8192);
  const MessageTag tag = ring.recv_tag();
  Request* r = PostReceive(&recv, &buf, &tag);
  const int64_t posted_by = WallNowNs();
  CHECK(WaitDone(r) == 4096);
  // STREAM would give ready + 4096/B + L, 10 ms earlier.
  CheckArrival(ring.Finish().end_ns, sent + 15'000'000, posted_by);
}

TEST_CASE("virtual recv: an explicit per-message schedule wins over MIRROR", "[plugin][unit][arrival]") {
  Rig rig;
  VirtualSendComm send(rig.env, rig.session, 1, 0);
  VirtualRecvComm recv(rig.env, rig.session, 2, 0);
  OneStepRing ring(&rig, 1);
  OwnSend(&send, ring.send_tag(), 4096);
  Schedule explicit_schedule;
  explicit_schedule.bytes = 100;
  explicit_schedule.earliest_ns = WallNowNs() + 20'000'000;
  rig.session->Conn(2)->PutSchedule(0, explicit_schedule);  // receive seq 0 of connection 2
  std::vector<char> buf(8192);
  const MessageTag tag = ring.recv_tag();
  Request* r = PostReceive(&recv, &buf, &tag);
  const int64_t posted_by = WallNowNs();
  CHECK(WaitDone(r) == 100);
  const OpSummary s = ring.Finish();
  CheckArrival(s.end_ns, explicit_schedule.earliest_ns, posted_by);
  CHECK(s.bytes_received == 100);
}

namespace {

// A p2p receive of `bytes` from peer 0 over two steps of one channel, as
// NCCL's proxy starts it: its op and both steps started, their tags in
// `tags`. Stop() ends the steps and the op.
struct TwoStepP2pRecv {
  TwoStepP2pRecv(Rig* rig, size_t bytes) : rig(rig) {
    std::vector<void*> tasks = rig->nccl.StartTasks({}, {FakeP2p{"Recv", bytes, "ncclInt8", 0, 1}});
    rig->nccl.StopTasks(tasks);
    sub = rig->nccl.Sub(tasks[0], 0, 0, 2, 1, false);
    rig->nccl.StartProxyOp(&sub);
    for (int k = 0; k < 2; ++k) {
      rig->nccl.StartStep(&sub, k);
      tags[k] = FakeNccl::Transfer(&sub, k);
    }
  }
  TwoStepP2pRecv(const TwoStepP2pRecv&) = delete;
  TwoStepP2pRecv& operator=(const TwoStepP2pRecv&) = delete;
  void Stop() {
    for (int k = 0; k < 2; ++k) rig->nccl.StopStep(&sub, k);
    rig->nccl.StopProxyOp(&sub);
  }
  Rig* rig;
  FakeSub sub;
  MessageTag tags[2];
};

}  // namespace

TEST_CASE("virtual recv: STREAM p2p receive waits for its schedule, then streams from ready",
          "[plugin][unit][arrival]") {
  Rig rig;
  VirtualRecvComm recv(rig.env, rig.session, 2, 0);
  TwoStepP2pRecv op(&rig, 3 * 4096);
  std::vector<char> buf(8192);
  const MessageTag tag0 = op.tags[0], tag1 = op.tags[1];
  REQUIRE(tag0.valid());
  Request* r0 = PostReceive(&recv, &buf, &tag0);
  Request* r1 = PostReceive(&recv, &buf, &tag1);
  CHECK(StaysPending(r0, 30));  // prismd's engine has not timed the sender yet

  OpSchedule sched;
  sched.mode = OpSchedule::Mode::kStream;
  sched.ready_ns = WallNowNs() + 3'000'000;
  sched.link_bits_per_second = 2 * 8'000'000'000ull;  // 2 bytes/ns
  sched.link_latency_ns = 4'000'000;
  rig.book.Put(OpKey{kHash, OpKind::kRecv, 0, 0}, sched);
  // The op's 12288 bytes: 8192 (the posted size), then the 4096 left.
  CHECK(WaitDone(r0) == 8192);
  CHECK(WaitDone(r1) == 4096);
  op.Stop();
  REQUIRE(rig.listener.count == 1);
  CHECK(rig.listener.last.end_ns == sched.ready_ns + (8192 + 4096) / 2 + 4'000'000);
  CHECK(rig.listener.last.bytes_received == 8192 + 4096);
}

// NCCL's proxy tests a connection's receives in order: the second receive of
// a STREAM operation whose schedule came after its time is first tested once
// the first is done, finds the schedule, and is late by the schedule's delay.
// It waited for prismd as the first did (the late-receive line's cause);
// before 2026-12-03 only the first said so, and the rest of a pipeline
// receive's messages counted as late by NCCL's test().
TEST_CASE("virtual recv: every receive of a STREAM operation whose schedule came late waited for prismd",
          "[plugin][unit][arrival]") {
  Rig rig;
  VirtualRecvComm recv(rig.env, rig.session, 2, 0);
  TwoStepP2pRecv op(&rig, 2 * 4096);
  std::vector<char> buf(4096);
  const MessageTag tag0 = op.tags[0], tag1 = op.tags[1];
  Request* r0 = PostReceive(&recv, &buf, &tag0);
  Request* r1 = PostReceive(&recv, &buf, &tag1);
  CHECK(StaysPending(r0, 10));  // only the first is tested, as NCCL's proxy does
  OpSchedule sched;
  sched.mode = OpSchedule::Mode::kStream;
  sched.ready_ns = WallNowNs() - 5'000'000;  // the virtual sender sent 5 ms ago
  sched.link_bits_per_second = 8'000'000'000ull;  // 1 byte/ns: 4 us a message
  sched.link_latency_ns = 1'000;
  rig.book.Put(OpKey{kHash, OpKind::kRecv, 0, 0}, sched);
  CHECK(WaitDone(r0) == 4096);
  CHECK(ReceiveWaitedForSchedule(rig.session.get(), 2) == std::optional<bool>(true));
  CHECK(WaitDone(r1) == 4096);
  CHECK(ReceiveWaitedForSchedule(rig.session.get(), 2) == std::optional<bool>(true));
  op.Stop();
}

// A STREAM schedule that came before the receive's time: no wait for prismd.
TEST_CASE("virtual recv: a STREAM receive whose schedule came in time did not wait for prismd",
          "[plugin][unit][arrival]") {
  Rig rig;
  VirtualRecvComm recv(rig.env, rig.session, 2, 0);
  FakeP2p p2p{"Recv", 4096, "ncclInt8", 0, 1};
  std::vector<void*> tasks = rig.nccl.StartTasks({}, {p2p});
  rig.nccl.StopTasks(tasks);
  FakeSub sub = rig.nccl.Sub(tasks[0], 0, 0, 1, 1, false);
  rig.nccl.StartProxyOp(&sub);
  rig.nccl.StartStep(&sub, 0);
  const MessageTag tag0 = FakeNccl::Transfer(&sub, 0);
  OpSchedule sched;
  sched.mode = OpSchedule::Mode::kStream;
  sched.ready_ns = WallNowNs() + 20'000'000;
  sched.link_bits_per_second = 8'000'000'000ull;
  sched.link_latency_ns = 1'000;
  rig.book.Put(OpKey{kHash, OpKind::kRecv, 0, 0}, sched);
  std::vector<char> buf(4096);
  Request* r0 = PostReceive(&recv, &buf, &tag0);
  CHECK(WaitDone(r0) == 4096);
  CHECK(ReceiveWaitedForSchedule(rig.session.get(), 2) == std::optional<bool>(false));
  rig.nccl.StopStep(&sub, 0);
  rig.nccl.StopProxyOp(&sub);
}

// The virtual sender's channels leave through one NIC: an operation
// streamed over two connections takes as long as over one.
TEST_CASE("virtual recv: STREAM over two channels shares the virtual sender's link", "[plugin][unit][arrival]") {
  Rig rig;
  VirtualRecvComm recv0(rig.env, rig.session, 2, 0);
  VirtualRecvComm recv1(rig.env, rig.session, 3, 0);
  FakeP2p p2p{"Recv", 2 * 8192, "ncclInt8", 0, 2};
  std::vector<void*> tasks = rig.nccl.StartTasks({}, {p2p});
  rig.nccl.StopTasks(tasks);
  FakeSub sub0 = rig.nccl.Sub(tasks[0], 0, 0, 1, 1, false);
  FakeSub sub1 = rig.nccl.Sub(tasks[0], 1, 0, 1, 1, false);
  for (FakeSub* s : {&sub0, &sub1}) {
    rig.nccl.StartProxyOp(s);
    rig.nccl.StartStep(s, 0);
  }
  const MessageTag tag0 = FakeNccl::Transfer(&sub0, 0);
  const MessageTag tag1 = FakeNccl::Transfer(&sub1, 0);
  OpSchedule sched;
  sched.mode = OpSchedule::Mode::kStream;
  sched.ready_ns = WallNowNs() + 3'000'000;
  sched.link_bits_per_second = 2 * 8'000'000'000ull;  // 2 bytes/ns
  sched.link_latency_ns = 4'000'000;
  rig.book.Put(OpKey{kHash, OpKind::kRecv, 0, 0}, sched);
  std::vector<char> buf0(8192), buf1(8192);
  Request* r0 = PostReceive(&recv0, &buf0, &tag0);
  Request* r1 = PostReceive(&recv1, &buf1, &tag1);
  CHECK(WaitDone(r0) == 8192);
  CHECK(WaitDone(r1) == 8192);
  for (FakeSub* s : {&sub0, &sub1}) {
    rig.nccl.StopStep(s, 0);
    rig.nccl.StopProxyOp(s);
  }
  REQUIRE(rig.listener.count == 1);
  // 16384 bytes at 2 bytes/ns from ready, whichever channel carried them;
  // each channel on a link of its own would end at ready + 8192 / 2 + L.
  CHECK(rig.listener.last.end_ns == sched.ready_ns + 16384 / 2 + 4'000'000);
}

TEST_CASE("virtual recv: a receive tied to no operation is a plain link from its posting",
          "[plugin][unit][arrival]") {
  Rig rig;
  VirtualRecvComm recv(rig.env, rig.session, 2, 0);
  std::vector<char> buf(4096);
  const int64_t before = WallNowNs();
  Request* r = PostReceive(&recv, &buf, nullptr);
  int done = 0;
  int size = 0;
  REQUIRE(r->Test(&done, &size) == prism_ncclSuccess);
  if (WallNowNs() < before + 4096 + kOwnLatency) CHECK(done == 0);  // not before posted + bytes/B + L
  CHECK(WaitDone(r) == 4096);
  CHECK(WallNowNs() >= before + 4096 + kOwnLatency);
}

}  // namespace

TEST_CASE("virtual recv: an LL ring receive's flag lines appear when it arrives, only the message's",
          "[plugin][unit][arrival][ll]") {
  Rig rig;
  VirtualSendComm send(rig.env, rig.session, 1, 0);
  VirtualRecvComm recv(rig.env, rig.session, 2, 0);
  OneStepRing ring(&rig, 1, "LL");
  const int64_t sent = OwnSend(&send, ring.send_tag(), 4096);
  std::vector<char> buf(65536, 'x');  // the posted LL step buffer
  const MessageTag tag = ring.recv_tag();
  Request* r = PostReceive(&recv, &buf, &tag);
  // Arrival is own send + 20 ms: NCCL's kernel polls the buffer, so nothing
  // may be there before.
  int done = 0, size = 0;
  REQUIRE(r->Test(&done, &size) == prism_ncclSuccess);
  if (WallNowNs() < sent + kOwnLatency) {
    CHECK_FALSE(done);
    CHECK(buf[4] == 'x');
  }
  CHECK(WaitDone(r) == 4096);
  // 4096 bytes = 256 LL lines {0, flag, 0, flag}, flag = step 0 + 1; the rest untouched.
  uint32_t words[4];
  for (size_t line = 0; line < 256; ++line) {
    std::memcpy(words, buf.data() + 16 * line, 16);
    CHECK(words[0] == 0);
    CHECK(words[1] == 1);
    CHECK(words[2] == 0);
    CHECK(words[3] == 1);
  }
  CHECK(buf[4096] == 'x');
  ring.Finish();
}

// Rank 0 of `nranks` in a ring all-reduce of `count` elements of `datatype`
// under `proto`: its own send of step 0 is `own_bytes` on the wire; the
// LL/LL128 step buffer of its receive of step 0 once that receive is done.
std::vector<char> AllReduceStepZeroReceive(const char* proto, size_t count, size_t own_bytes, size_t buffer_bytes,
                                           int nranks = 8, const char* datatype = "ncclFloat32") {
  Rig rig(nranks, 0);
  VirtualSendComm send(rig.env, rig.session, 1, 0);
  VirtualRecvComm recv(rig.env, rig.session, 2, 0);
  OneStepRing ring(&rig, 1, proto, "AllReduce", count, datatype);
  OwnSend(&send, ring.send_tag(), own_bytes);
  std::vector<char> buf(buffer_bytes, 'x');
  const MessageTag tag = ring.recv_tag();
  Request* r = PostReceive(&recv, &buf, &tag);
  CHECK(WaitDone(r) == static_cast<int>(own_bytes));  // timed and sized like the own send (MIRROR)
  ring.Finish();
  return buf;
}

// NCCL's ring all-reduce cuts 57 floats over 8 ranks into chunks of 8 and a
// last chunk of 1 (all_reduce.h, runRing). At step 0 rank 0 sends that last
// chunk (1 element: one 16-byte LL line) and receives chunk 6 from rank 7
// (8 elements: four lines). Lines of the own send's size alone left three of
// the four without flags: NCCL's kernel would poll them for ever and never
// send step 1, the stall TorchTitan's first step showed at 8 ranks on the GPU
// host on 2026-12-02 ("receive ... step 1 ... has waited 2000 ms for this
// rank's own send of the same ring step"; its all-reduce's size unrecorded:
// the gradient-norm all-reduce, and 57 is one norm per parameter of the
// Llama 3 debug model, 6 layers of 9 and 3 more, if torch reduces them
// stacked). An empty own chunk: the next test.
TEST_CASE("virtual recv: an LL ring all-reduce receive carries the predecessor's longer chunk, not the own send's size",
          "[plugin][unit][arrival][ll]") {
  const std::vector<char> buf = AllReduceStepZeroReceive("LL", 57, 16, 65536);
  uint32_t words[4];
  for (size_t line = 0; line < 4; ++line) {  // the four lines the kernel reads at step 0
    INFO("line " << line);
    std::memcpy(words, buf.data() + 16 * line, 16);
    CHECK(words[1] == 1);
    CHECK(words[3] == 1);
  }
  // ceil(228 / 8) + 8 = 37 bytes, rounded to 48: six lines, not the whole 64 KiB step.
  CHECK(buf[6 * 16 - 1] != 'x');
  CHECK(buf[6 * 16] == 'x');
}

// Where rank 0's own chunk of a step is empty (a 4-byte all-reduce over 8192
// ranks: every chunk but chunk 0), its receive gets the operation's bound in
// lines, not the whole step buffer (64 KiB LL, 600 KiB LL128: 6 us and
// 212 us per step on the proxy thread, bench/ll_fill_bench.cc). Safe because
// NCCL's kernel reads a step's receive in the primitive that sends the
// received chunk on (all_reduce.h runRing), divUp(nelem, per line) LL lines
// or LL128 slices (prims_ll.h, prims_ll128.h; none for nelem <= 0), and no
// chunk of any loop or channel is longer than the last loop's chunk over
// the whole operation: alignUp(divUp(count, n), 16 / size), at most count.
TEST_CASE("virtual recv: an empty own send of an LL/LL128 ring all-reduce step gets the operation's bound, not the whole buffer",
          "[plugin][unit][arrival][ll]") {
  struct Proto {
    const char* name;
    size_t line, buffer, wire_per_unit, data_per_unit;  // kernel reads: units of data_per_unit bytes
  };
  const Proto protos[] = {{"LL", 16, 65536, 16, 8}, {"LL128", 128, 600 * 1024, 2048, 1920}};
  const std::pair<const char*, size_t> types[] = {{"ncclFloat32", 4}, {"ncclBfloat16", 2}};
  for (const Proto& p : protos) {
    for (int n : {2, 8, 1024, 8192}) {
      for (const auto& [type, size] : types) {
        for (size_t count : {1, 2, 4, 57}) {
          INFO(p.name << " n " << n << " " << type << " count " << count);
          const std::vector<char> buf = AllReduceStepZeroReceive(p.name, count, 0, p.buffer, n, type);
          const size_t filled = static_cast<size_t>(std::find(buf.begin(), buf.end(), 'x') - buf.begin());
          const int64_t chunk = static_cast<int64_t>(((count + n - 1) / n + 16 / size - 1) / (16 / size) * (16 / size));
          size_t longest = 0;
          for (int c = 0; c < n; ++c) {  // every chunk of the operation's (last) loop
            const int64_t nelem = std::max<int64_t>(0, std::min<int64_t>(chunk, static_cast<int64_t>(count) - c * chunk));
            const size_t reads = (static_cast<size_t>(nelem) * size + p.data_per_unit - 1) / p.data_per_unit * p.wire_per_unit;
            longest = std::max(longest, reads);
          }
          CHECK(filled >= longest);
          CHECK(filled <= longest + 2 * p.wire_per_unit);  // a few lines, not the whole buffer
          CHECK(filled % p.line == 0);
          for (size_t off = 0; off < filled; off += p.line) {  // every line carries step 0's flag
            uint32_t ll[4];
            uint64_t ll128 = 0;
            if (p.line == 16) {
              std::memcpy(ll, buf.data() + off, 16);
              CHECK((ll[1] == 1 && ll[3] == 1));
            } else {
              std::memcpy(&ll128, buf.data() + off + 120, 8);
              CHECK(ll128 == 1);
            }
          }
        }
      }
    }
  }
}

// LL128: 3612 floats over 8 ranks are chunks of 452 (1808 bytes: two 2048-byte
// slices on the wire) and a last one of 448 (1792 bytes: one slice).
TEST_CASE("virtual recv: an LL128 ring all-reduce receive covers the predecessor's extra slice",
          "[plugin][unit][arrival][ll]") {
  const std::vector<char> buf = AllReduceStepZeroReceive("LL128", 3612, 2048, 600 * 1024);
  uint64_t flag = 0;
  for (size_t line = 0; line < 32; ++line) {  // two slices of sixteen 128-byte lines
    INFO("line " << line);
    std::memcpy(&flag, buf.data() + 128 * line + 120, 8);
    CHECK(flag == 1);
  }
  CHECK(buf[4096] == 'x');  // ceil(3612 * 4 / 8) + 8 = 1814 bytes, rounded to 1824: two slices
}

TEST_CASE("ll lines: a ring all-reduce step's wire bound covers every chunk NCCL cuts",
          "[plugin][unit][ll]") {
  using prism::plugin::LineProtocol;
  using prism::plugin::RingAllReduceStepWireBound;
  // NCCL's last-loop chunk of a ring all-reduce of `count` elements of
  // `size` bytes over n ranks: alignUp(divUp(count, n), 16 / size) elements.
  for (int n : {2, 3, 8, 24, 1024}) {
    for (uint64_t size : {1, 2, 4, 8}) {
      for (uint64_t count : {1ull, 2ull, 7ull, 57ull, 1000ull, 3612ull, 123457ull}) {
        INFO("n " << n << " size " << size << " count " << count);
        const uint64_t align = 16 / size;
        const uint64_t chunk = ((count + n - 1) / n + align - 1) / align * align * size;  // bytes
        const uint64_t ll = (chunk + 7) / 8 * 16;
        const uint64_t ll128 = (chunk + 1791) / 1792 * 2048;
        CHECK(RingAllReduceStepWireBound(LineProtocol::kLL, count * size, n) >= ll);
        CHECK(RingAllReduceStepWireBound(LineProtocol::kLL128, count * size, n) >= ll128);
        // and not much more: at most one 16-byte unit of data beyond the chunk (two LL lines, one LL128 slice)
        CHECK(RingAllReduceStepWireBound(LineProtocol::kLL, count * size, n) <= ll + 32);
        CHECK(RingAllReduceStepWireBound(LineProtocol::kLL128, count * size, n) <= ll128 + 2048);
      }
    }
  }
  CHECK(RingAllReduceStepWireBound(LineProtocol::kSimple, 1 << 20, 8) == 0);
}

// PRISM_RECV_FILL=own, one ring step of `func` under `proto`: this rank
// sends `mine` to its virtual successor, then receives from its virtual
// predecessor into a buffer of `buffer_bytes` bytes of 'x'; the buffer once
// the receive is done (it must report `mine.size()` bytes).
std::vector<char> OwnFillRingReceive(const char* proto, const char* func, const std::vector<char>& mine,
                                     size_t buffer_bytes) {
  Rig rig;
  rig.settings.recv_fill = prism::plugin::RecvFill::kOwn;
  VirtualSendComm send(rig.env, rig.session, 1, 0);
  VirtualRecvComm recv(rig.env, rig.session, 2, 0);
  OneStepRing ring(&rig, 1, proto, func);
  void* sreq = nullptr;
  REQUIRE(send.Isend(const_cast<char*>(mine.data()), mine.size(), 0, nullptr, ring.send_tag(), &sreq) ==
          prism_ncclSuccess);
  std::vector<char> buf(buffer_bytes, 'x');
  const MessageTag tag = ring.recv_tag();
  Request* r = PostReceive(&recv, &buf, &tag);
  CHECK(WaitDone(r) == static_cast<int>(mine.size()));
  ring.Finish();
  return buf;
}

// PRISM_RECV_FILL=own: a virtual peer of an all-gather sends what this rank
// sends (as if every rank had this rank's data: what DDP's start-up checks,
// an all-gather of each rank's parameter count, need to pass).
TEST_CASE("virtual recv: an all-gather's ring receive carries this rank's own send of the step (Simple)",
          "[plugin][unit][arrival][own]") {
  std::vector<char> mine(4096);
  for (size_t k = 0; k < mine.size(); ++k) mine[k] = static_cast<char>(k * 7 + 3);
  const std::vector<char> buf = OwnFillRingReceive("SIMPLE", "AllGather", mine, 8192);
  CHECK(std::equal(mine.begin(), mine.end(), buf.begin()));
}

// A broadcast through a virtual peer carries the fill policy's bytes, not the
// root's: the user is told once per process (DDP's start-up check stops on it).
TEST_CASE("virtual recv: a broadcast through a virtual peer tells the user once that its bytes are not the root's",
          "[plugin][unit][arrival][own]") {
  Rig rig;
  std::atomic<bool> told{false};
  rig.env.told_virtual_broadcast = &told;
  VirtualRecvComm recv(rig.env, rig.session, 2, 0);
  {
    OneStepRing ring(&rig, 1, "SIMPLE", "AllGather");
    std::vector<char> buf(4096, 'x');
    const MessageTag tag = ring.recv_tag();
    PostReceive(&recv, &buf, &tag);
    CHECK_FALSE(told.load());  // an all-gather's virtual peers send this rank's own bytes
    ring.Finish();
  }
  OneStepRing ring(&rig, 2, "SIMPLE", "Broadcast");
  std::vector<char> buf(4096, 'x');
  const MessageTag tag = ring.recv_tag();
  PostReceive(&recv, &buf, &tag);
  CHECK(told.load());
  ring.Finish();
}

TEST_CASE("virtual recv: an all-reduce's virtual peers still send zeros under PRISM_RECV_FILL=own",
          "[plugin][unit][arrival][own]") {
  const std::vector<char> buf = OwnFillRingReceive("SIMPLE", "AllReduce", std::vector<char>(4096, 5), 8192);
  CHECK(std::all_of(buf.begin(), buf.begin() + 4096, [](char c) { return c == 0; }));
}

TEST_CASE("virtual recv: an LL all-gather's ring receive carries this rank's own lines with its own flags",
          "[plugin][unit][arrival][own][ll]") {
  // This rank's LL lines as its kernel wrote them: data words i and ~i, the
  // flags of its own send connection's step (9 here: another step count).
  std::vector<char> mine(4096);
  for (uint32_t i = 0; i < 256; ++i) {
    const uint32_t line[4] = {i, 9, ~i, 9};
    std::memcpy(mine.data() + 16 * i, line, 16);
  }
  const std::vector<char> buf = OwnFillRingReceive("LL", "AllGather", mine, 65536);
  uint32_t words[4];
  for (uint32_t i = 0; i < 256; ++i) {
    std::memcpy(words, buf.data() + 16 * i, 16);
    CHECK(words[0] == i);
    CHECK(words[1] == 1);  // this receive's step 0 + 1
    CHECK(words[2] == ~i);
    CHECK(words[3] == 1);
  }
  CHECK(buf[4096] == 'x');
}
