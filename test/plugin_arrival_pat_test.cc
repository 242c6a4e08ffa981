// When receives of PAT operations from virtual peers complete: VirtualRecvComm
// end to end with PAT's proxy ops from FakeNccl (the PAT stand-in gives NCCL's
// order of sends and receives), the arrival rule's PAT floor, and the warnings
// a long wait prints. The fixture is test/arrival_fixture.h.

#include <sys/socket.h>
#include <unistd.h>

#include <catch2/catch.hpp>

#include <string>
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <thread>
#include <vector>

#include "plugin/arrival.h"
#include "plugin/clock.h"
#include "plugin/daemon_session.h"
#include "plugin/op_schedules.h"
#include "plugin/op_tracker.h"
#include "plugin/real_comms.h"
#include "plugin/virtual_comms.h"
#include "test/plugin_log_capture.h"
#include "test/pat_stand_in.h"
#include "test/arrival_fixture.h"
#include "test/plugin_fake_nccl.h"

namespace {

using namespace prism::test::arrival;  // NOLINT(build/namespaces): the fixture, test code

}  // namespace

TEST_CASE("virtual recv: a PAT all-gather's receive repeats this rank's own chunk (its first send)",
          "[plugin][unit][arrival][own]") {
  Rig rig;
  rig.settings.recv_fill = prism::plugin::RecvFill::kOwn;
  VirtualSendComm send(rig.env, rig.session, 1, 0);
  VirtualRecvComm recv(rig.env, rig.session, 2, 0);
  FakeColl c;
  c.func = "AllGather";
  c.algo = "PAT";
  c.count = 8;  // bytes per rank (ncclInt8... NCCL counts all-gathers per rank)
  c.datatype = "ncclInt8";
  c.seq = 4;
  std::vector<void*> tasks = rig.nccl.StartTasks({c}, {});
  rig.nccl.StopTasks(tasks);
  FakeSub ssub = rig.nccl.Sub(tasks[0], 0, 2, 1, 1, true);
  FakeSub rsub = rig.nccl.Sub(tasks[0], 0, 0, 1, 1, false);
  for (FakeSub* s : {&ssub, &rsub}) {
    rig.nccl.StartProxyOp(s);
    rig.nccl.StartStep(s, 0);
  }
  const char mine[8] = {1, 2, 3, 4, 5, 6, 7, 8};
  void* sreq = nullptr;
  REQUIRE(send.Isend(const_cast<char*>(mine), 8, 0, nullptr, FakeNccl::Transfer(&ssub, 0), &sreq) ==
          prism_ncclSuccess);
  OpSchedule sched;
  sched.mode = OpSchedule::Mode::kStream;
  sched.ready_ns = WallNowNs();
  sched.link_bits_per_second = kOwnBits;
  sched.link_latency_ns = 1'000'000;
  rig.book.Put(OpKey{kHash, OpKind::kAllGather, 4, -1}, sched);
  std::vector<char> buf(64, 'x');
  const MessageTag tag = FakeNccl::Transfer(&rsub, 0);
  Request* r = PostReceive(&recv, &buf, &tag);
  // The other three ranks' chunks (NCCL counts all-gathers per rank), each
  // this rank's own.
  CHECK(WaitDone(r) == 24);
  for (int k = 0; k < 3; ++k) CHECK(std::equal(mine, mine + 8, buf.begin() + 8 * k));
  CHECK(buf[24] == 'x');
  for (FakeSub* s : {&ssub, &rsub}) {
    rig.nccl.StopStep(s, 0);
    rig.nccl.StopProxyOp(s);
  }
}

namespace {

// The task of a PAT all-gather of `count` bytes per rank over `channels`
// (FakeNccl: started and stopped, as NCCL does before its proxy starts).
std::vector<void*> PatAllGatherTask(Rig* rig, uint64_t seq, size_t count, uint8_t channels = 1) {
  FakeColl c;
  c.func = "AllGather";
  c.algo = "PAT";
  c.count = count;
  c.datatype = "ncclInt8";
  c.channels = channels;
  c.seq = seq;
  std::vector<void*> tasks = rig->nccl.StartTasks({c}, {});
  rig->nccl.StopTasks(tasks);
  return tasks;
}

}  // namespace

TEST_CASE("arrival: a PAT receive mirrors this rank's own send of its dimension", "[plugin][unit][arrival][pat]") {
  using prism::plugin::PatDimension;
  // 8 ranks, rank 5. All-gather: receives from 5 + 2^d (6, 7, 1), sends to 5 - 2^d (4, 3, 1).
  CHECK(PatDimension(true, false, 5, 8, 6) == 0);
  CHECK(PatDimension(true, false, 5, 8, 7) == 1);
  CHECK(PatDimension(true, false, 5, 8, 1) == 2);
  CHECK(PatDimension(true, true, 5, 8, 4) == 0);
  CHECK(PatDimension(true, true, 5, 8, 3) == 1);
  CHECK(PatDimension(true, true, 5, 8, 1) == 2);
  // Reduce-scatter: the other way round.
  CHECK(PatDimension(false, false, 5, 8, 4) == 0);
  CHECK(PatDimension(false, false, 5, 8, 3) == 1);
  CHECK(PatDimension(false, true, 5, 8, 6) == 0);
  CHECK(PatDimension(false, true, 5, 8, 7) == 1);
  // 6 ranks (not a power of two): rank 0 receives (all-gather) from 1, 2, 4.
  CHECK(PatDimension(true, false, 0, 6, 4) == 2);
  CHECK(PatDimension(true, false, 0, 6, 3) == -1);  // distance 3: no PAT connection
  CHECK(PatDimension(true, false, 0, 6, 0) == -1);
  CHECK(PatDimension(true, false, 0, 1, 0) == -1);
  CHECK(PatDimension(true, false, 0, 6, 6) == -1);
  // Timed as a ring receive: the own send of the dimension's step plus L; a
  // late virtual sender streams from its ready time.
  for (int64_t k = 0; k < 3; ++k) {
    const int64_t own = 1'000'000 + k * 40'000;
    const Arrival pat = Resolve(Input(ArrivalForm::kPatMirror, 0, 4096, 900'000, own), 0);
    const Arrival ring = Resolve(Input(ArrivalForm::kMirror, 0, 4096, 900'000, own), 0);
    CHECK(pat.done.count() == own + kL);
    CHECK(pat.done == ring.done);
    CHECK(pat.wire_end == ring.wire_end);
  }
  const Arrival late = Resolve(Input(ArrivalForm::kPatMirror, 0, 4096, 2'000'000, 1'000'000), 0);
  CHECK(late.done.count() == 2'000'000 + 4096 / kB + kL);
}

TEST_CASE("virtual recv: a PAT receive closes on this rank's own send of its dimension",
          "[plugin][unit][arrival][pat]") {
  // Rank 1 of 4, a PAT all-gather: dimension 0 sends to rank 0, dimension 1
  // to rank 3; the receive from rank 3 (1 + 2) is dimension 1's.
  Rig rig;
  VirtualSendComm send(rig.env, rig.session, 1, 0);
  VirtualRecvComm recv(rig.env, rig.session, 2, 0);
  std::vector<void*> tasks = PatAllGatherTask(&rig, 6, 4096);
  FakeSub to3 = rig.nccl.Sub(tasks[0], 0, 3, 1, 1, true);
  FakeSub to0 = rig.nccl.Sub(tasks[0], 0, 0, 1, 1, true);
  FakeSub from3 = rig.nccl.Sub(tasks[0], 0, 3, 1, 1, false);
  for (FakeSub* s : {&to3, &to0, &from3}) {
    rig.nccl.StartProxyOp(s);
    rig.nccl.StartStep(s, 0);
  }
  const MessageTag dim1 = FakeNccl::Transfer(&to3, 0);
  const MessageTag dim0 = FakeNccl::Transfer(&to0, 0);
  CHECK(prism::plugin::PatDimensionOf(dim1) == 1);
  CHECK(prism::plugin::PatDimensionOf(dim0) == 0);
  // Dimension 1's send first, dimension 0's after it (later on the NIC): the
  // receive closes on dimension 1's, not on the channel's latest send.
  const int64_t sent1 = OwnSend(&send, dim1, 4096);
  OwnSend(&send, dim0, 4096);
  int64_t pat_sent = 0;
  uint64_t pat_bytes = 0;
  REQUIRE(prism::plugin::MirrorSendOf(dim1, &pat_sent, &pat_bytes));
  CHECK(pat_sent == sent1);
  OpSchedule sched;
  sched.mode = OpSchedule::Mode::kStream;  // prismd's expectation; the form follows NCCL's PAT
  sched.ready_ns = sent1 - 10'000'000;     // on time: the own send decides
  sched.link_latency_ns = 15'000'000;
  rig.book.Put(OpKey::Of(dim1.op->info()), sched);
  std::vector<char> buf(8192);
  const MessageTag tag = FakeNccl::Transfer(&from3, 0);
  CHECK(prism::plugin::PatDimensionOf(tag) == 1);
  Request* r = PostReceive(&recv, &buf, &tag);
  const int64_t posted_by = WallNowNs();
  CHECK(WaitDone(r) == 4096);
  for (FakeSub* s : {&to3, &to0, &from3}) {
    rig.nccl.StopStep(s, 0);
    rig.nccl.StopProxyOp(s);
  }
  REQUIRE(rig.listener.count > 0);
  CheckArrival(rig.listener.last.end_ns, sent1 + 15'000'000, posted_by);
}

// ---- PAT all-gather end to end, NCCL's own order (issue 22) ----

namespace {

using prism::plugin::ProgressEnginePool;
using prism::plugin::RealSendComm;

// One (channel 0, peer, direction) of a PAT all-gather: its proxy op, with
// every step started (NCCL_STEPS covers them all here).
struct PatConn {
  FakeSub sub;
  std::vector<Request*> receives;  // receives only: step k's request
};

// The moment `r` must be done by (its mirror's own send + L): sleep until
// then, then one test() must report it done. A receive held past its
// arrival answers "not done" here (a machine that stalls past the hold
// only hides it; it cannot fail a correct plugin).
void CheckDoneOnArrival(Request* r, int64_t arrival) {
  while (WallNowNs() <= arrival) std::this_thread::sleep_for(std::chrono::microseconds(200));
  int done = 0;
  int size = -1;
  REQUIRE(r->Test(&done, &size) == prism_ncclSuccess);
  CHECK(done == 1);
  if (!done) REQUIRE(WaitDone(r) >= 0);
}

// When the own send that a PAT receive on `tag` mirrors left the wire.
int64_t MirrorOf(const MessageTag& tag) {
  int64_t sent = 0;
  uint64_t bytes = 0;
  REQUIRE(prism::plugin::MirrorSendOf(tag, &sent, &bytes));
  return sent;
}

// Rank 0 of 8's PAT all-gather on channel 0 of `task`: dimension d sends to
// 0 - 2^d (7, 6, 4) and receives from 0 + 2^d (1, 2, 4), kSteps[d] proxy
// steps each way (proxy.cc's count at 8 ranks, one piece per message), every
// step started and every receive of `piece` bytes posted (the proxy posts
// them ahead); connection ids from `first_conn`.
struct PatAllGather8 {
  static constexpr int kSteps[3] = {4, 2, 1};
  PatAllGather8(Rig* rig, void* task, size_t piece, uint64_t first_conn) : rig_(rig), piece_(piece), mine(piece) {
    buffers.reserve(7);
    for (int d = 0; d < 3; ++d) {
      to[d].sub = rig->nccl.Sub(task, 0, 8 - (1 << d), kSteps[d], 1, true);
      from[d].sub = rig->nccl.Sub(task, 0, 1 << d, kSteps[d], 1, false);
      send_comms.push_back(std::make_unique<VirtualSendComm>(rig->env, rig->session, first_conn + d, 0));
      recv_comms.push_back(std::make_unique<VirtualRecvComm>(rig->env, rig->session, first_conn + 10 + d, 0));
      for (FakeSub* s : {&to[d].sub, &from[d].sub}) {
        rig->nccl.StartProxyOp(s);
        for (int k = 0; k < kSteps[d]; ++k) rig->nccl.StartStep(s, k);
      }
      for (int k = 0; k < kSteps[d]; ++k) {
        buffers.emplace_back(piece, 'x');
        const MessageTag tag = FakeNccl::Transfer(&from[d].sub, k);
        REQUIRE(prism::plugin::PatDimensionOf(tag) == d);
        from[d].receives.push_back(PostReceive(recv_comms[d].get(), &buffers.back(), &tag));
      }
    }
  }
  // This rank's next send on dimension d (its piece `mine`).
  void Send(int d) {
    void* request = nullptr;
    REQUIRE(send_comms[d]->Isend(mine.data(), piece_, 0, nullptr, FakeNccl::Transfer(&to[d].sub, sent[d]++),
                                 &request) == prism_ncclSuccess);
    REQUIRE(request != nullptr);
  }
  // NCCL's proxy ends every step and the operation.
  void Stop() {
    for (int d = 0; d < 3; ++d) {
      for (FakeSub* s : {&to[d].sub, &from[d].sub}) {
        for (int k = 0; k < kSteps[d]; ++k) rig_->nccl.StopStep(s, k);
        rig_->nccl.StopProxyOp(s);
      }
    }
  }
  Rig* rig_;
  size_t piece_;
  std::vector<char> mine;
  std::vector<std::unique_ptr<VirtualSendComm>> send_comms;
  std::vector<std::unique_ptr<VirtualRecvComm>> recv_comms;
  PatConn to[3], from[3];
  std::vector<std::vector<char>> buffers;
  int sent[3] = {0, 0, 0};
};

}  // namespace

// Rank 0 of 8, a PAT all-gather of 64 KiB per rank and channel (1 MiB over
// 2 channels; one channel played), NCCL 2.28.9's kernel order for it
// (PatAGAlgorithm, parallelFactor 1): send own on dimensions 2 and 1; wait
// for dimension 2's message, forward it on dimension 1; own on 0; then
// dimension 1's first, dimension 2's, dimension 1's second forwarded on 0;
// then the four receives of dimension 0. Proxy steps per dimension 1, 2, 4
// each way (proxy.cc's count). Every receive completes when its mirror's
// message arrives (own send of its dimension and step + L), the real rank
// sends the moment its input arrived, under PRISM_RECV_FILL=own (the
// default): it used to hold every receive of more than 4 KiB 2 ms past its
// arrival, waiting for an own chunk it never kept (+542% at 1 MiB on the
// GPU host).
TEST_CASE("virtual recv: a PAT all-gather at 8 ranks, NCCL's order: each receive completes on its arrival",
          "[plugin][unit][arrival][pat]") {
  Rig rig(8, 0);
  rig.settings.recv_fill = prism::plugin::RecvFill::kOwn;
  // The mirror alone: one channel of two is played, so this rank's NIC is
  // twice as fast as the model's shared one, and PAT's floor would win.
  rig.settings.ring_lockstep = false;
  constexpr size_t kPiece = 64 * 1024;
  std::vector<void*> tasks = PatAllGatherTask(&rig, 9, 2 * kPiece, 2);  // bytes per rank, 2 channels
  PatAllGather8 pat(&rig, tasks[0], kPiece, 10);
  for (size_t i = 0; i < pat.mine.size(); ++i) pat.mine[i] = static_cast<char>(i * 7 + 3);
  auto send = [&](int d) { pat.Send(d); };
  auto receive = [&](int d, int k) {
    CheckDoneOnArrival(pat.from[d].receives[k], MirrorOf(FakeNccl::Transfer(&pat.from[d].sub, k)) + kOwnLatency);
  };
  send(2);
  send(1);
  receive(2, 0);
  send(1);
  send(0);
  receive(1, 0);
  send(0);
  send(0);
  receive(1, 1);
  send(0);
  for (int k = 0; k < 4; ++k) receive(0, k);
  // Every virtual peer sent this rank's own chunk (homogeneous ranks): the
  // first 4 KiB of its first send, whatever that send's size.
  for (const std::vector<char>& b : pat.buffers)
    CHECK(std::equal(pat.mine.begin(), pat.mine.begin() + 4096, b.begin()));
  const int64_t last_send = MirrorOf(FakeNccl::Transfer(&pat.to[0].sub, 3));
  pat.Stop();
  REQUIRE(rig.listener.count > 0);
  // The operation ends with dimension 0's last message: the mirror of this
  // rank's last send, plus L.
  CHECK(rig.listener.last.end_ns == last_send + kOwnLatency);
}

// Two real ranks, rank 1 of 8: its all-gather sends on dimension 0 go to
// rank 0, a real peer (RealSendComm); its receive from rank 2 (virtual,
// dimension 0) mirrors them all the same. (The real path did not record
// its sends per dimension: that receive waited for ever.)
TEST_CASE("virtual recv: a PAT receive mirrors an own send that went to a real peer",
          "[plugin][unit][arrival][pat]") {
  Rig rig(8, 1);
  rig.settings.min_chunk_bytes = 262144;  // one socket, one chunk
  // The mirror alone: the message NCCL aggregates (4 pieces) is sent here
  // without the receives it waits for, so PAT's floor would win.
  rig.settings.ring_lockstep = false;
  VirtualRecvComm recv(rig.env, rig.session, 2, 0);
  int fds[2];
  REQUIRE(socketpair(AF_UNIX, SOCK_STREAM, 0, fds) == 0);
  auto pool = std::make_shared<ProgressEnginePool>(prism::plugin::kInlineProgress, 1000);
  RealSendComm to_rank0(rig.env, pool, std::vector<int>{fds[0]}, "rank 0", 0);
  std::vector<void*> tasks = PatAllGatherTask(&rig, 3, 4096);
  FakeSub to0 = rig.nccl.Sub(tasks[0], 0, 0, 1, 1, true);
  FakeSub from2 = rig.nccl.Sub(tasks[0], 0, 2, 1, 1, false);
  for (FakeSub* s : {&to0, &from2}) {
    rig.nccl.StartProxyOp(s);
    rig.nccl.StartStep(s, 0);
  }
  const MessageTag tag = FakeNccl::Transfer(&from2, 0);
  REQUIRE(prism::plugin::PatDimensionOf(tag) == 0);
  std::vector<char> buf(4096);
  Request* r = PostReceive(&recv, &buf, &tag);
  CHECK(StaysPending(r, 5));  // no own send of dimension 0 yet
  std::vector<char> payload(4096, 'p');
  void* sreq = nullptr;
  REQUIRE(to_rank0.Isend(payload.data(), payload.size(), 0, nullptr, FakeNccl::Transfer(&to0, 0), &sreq) ==
          prism_ncclSuccess);
  REQUIRE(sreq != nullptr);
  CHECK(WaitDone(r) == 4096);
  const int64_t mirror = MirrorOf(tag);
  int64_t own = 0;
  uint64_t own_bytes = 0;
  REQUIRE(tag.op->SendOf(0, 0, &own, &own_bytes));  // the real send's stamp
  CHECK(mirror == own);
  for (FakeSub* s : {&to0, &from2}) {
    rig.nccl.StopStep(s, 0);
    rig.nccl.StopProxyOp(s);
  }
  REQUIRE(rig.listener.count > 0);
  CHECK(rig.listener.last.end_ns == mirror + kOwnLatency);
  close(fds[1]);
}

namespace {

using prism::plugin::testing::LogCapture;

// Routes `rig`'s warnings to LogCapture, starting from none.
void CaptureWarnings(Rig* rig) { LogCapture::Capture(&rig->logger); }

}  // namespace

// A PAT receive whose own send never comes (its peer a real rank on the same
// NCCL host, so the send bypassed the plugin) says what it waits for: the
// own send of its dimension, and to whom, not prismd's schedule.
TEST_CASE("virtual recv: a PAT receive that waits long names the own send of its dimension",
          "[plugin][unit][arrival][pat]") {
  Rig rig(8, 1);
  CaptureWarnings(&rig);
  VirtualRecvComm recv(rig.env, rig.session, 2, 0);
  std::vector<void*> tasks = PatAllGatherTask(&rig, 5, 4096);
  FakeSub from2 = rig.nccl.Sub(tasks[0], 0, 2, 1, 1, false);  // dimension 0; its sends go to rank 0
  rig.nccl.StartProxyOp(&from2);
  rig.nccl.StartStep(&from2, 0);
  const MessageTag tag = FakeNccl::Transfer(&from2, 0);
  std::vector<char> buf(4096);
  Request* r = PostReceive(&recv, &buf, &tag);
  CHECK(StaysPending(r, 2300));  // past the 2 s after which it warns
  {
    const std::string warned = LogCapture::Text();
    INFO(warned);
    CHECK(warned.find("own send on PAT dimension 0 (to rank 0), step 0") != std::string::npos);
    CHECK(warned.find("NCCL_HOSTID") != std::string::npos);
    CHECK(warned.find("prismd's schedule") == std::string::npos);
  }
  rig.logger.Set(nullptr);
  rig.nccl.StopStep(&from2, 0);
  rig.nccl.StopProxyOp(&from2);
}

// A ring receive whose own send of the step never comes (NCCL's kernel is
// stuck before it) says how far this rank got: the operation as NCCL ran it,
// this rank's last send of it, and the last LL receive it filled (how many
// lines, which flag): what tells a kernel polling unwritten lines from one
// waiting for something else.
TEST_CASE("virtual recv: a ring receive that waits long for its own send names the op, the last send and the last fill",
          "[plugin][unit][arrival][ll]") {
  Rig rig(8, 0);
  CaptureWarnings(&rig);
  VirtualSendComm send(rig.env, rig.session, 1, 0);
  VirtualRecvComm recv(rig.env, rig.session, 2, 0);
  std::vector<void*> tasks = LlAllReduceTask(&rig, 57);
  FakeSub sub_send = rig.nccl.Sub(tasks[0], 0, 1, 14, 1, true);
  FakeSub sub_recv = rig.nccl.Sub(tasks[0], 0, 7, 14, 1, false);
  for (FakeSub* s : {&sub_send, &sub_recv}) rig.nccl.StartProxyOp(s);
  rig.nccl.StartStep(&sub_send, 0);
  OwnSend(&send, FakeNccl::Transfer(&sub_send, 0), 16);
  std::vector<char> buf0(65536), buf1(65536);
  rig.nccl.StartStep(&sub_recv, 0);
  const MessageTag tag0 = FakeNccl::Transfer(&sub_recv, 0);
  CHECK(WaitDone(PostReceive(&recv, &buf0, &tag0)) == 16);
  rig.nccl.StartStep(&sub_recv, 1);
  const MessageTag tag1 = FakeNccl::Transfer(&sub_recv, 1);
  Request* r = PostReceive(&recv, &buf1, &tag1);
  CHECK(StaysPending(r, 2300));  // past the 2 s after which it warns
  {
    const std::string warned = LogCapture::Text();
    INFO(warned);
    CHECK(warned.find("(channel 0, step 1, peer -1; RING/LL, 228 bytes, 1 channel(s), comm rank 0 of 8)") !=
          std::string::npos);
    CHECK(warned.find("own send of the same ring step") != std::string::npos);
    CHECK(warned.find("this rank's last send of the operation on channel 0: step 0") != std::string::npos);
    CHECK(warned.find("the last LL/LL128 receive filled on this connection: receive 0 (step 0, connection step 0, "
                      "flag 1): 96 bytes of lines for an own send of 16 bytes") != std::string::npos);
  }
  rig.logger.Set(nullptr);
  for (FakeSub* s : {&sub_send, &sub_recv}) {
    rig.nccl.StopStep(s, 0);
    rig.nccl.StopProxyOp(s);
  }
}

// ---- PAT's floor (issue 22): a real rank's PAT against prismd's play ----

// The CPU stand-in (test/pat_stand_in.h): the real rank's NCCL sends as the
// play does (or in NCCL's kind of order: own_order), its receives from
// virtual peers timed by the plugin's rule. Without PAT's floor the mirror
// lets a real rank that pays less than the model's c per message pull its
// virtual peers along; virtual members that arrive late are charged by the
// stream of their link from their arrival (PatLate: a reduce-scatter's first
// messages wait for nothing, so this rank's own sends went before them).
namespace {
prism::testing::PatStandIn PatCase(bool all_gather, uint32_t ranks, uint64_t bytes, double gbps, int64_t latency_us,
                                   Nanoseconds real_c, Nanoseconds late) {
  prism::testing::PatStandIn p;
  p.model = prism::PatShape{all_gather, ranks, Bytes(bytes), 2, prism::BitsPerSecond(static_cast<uint64_t>(gbps * 1e9)),
                            Nanoseconds(latency_us * 1000 + 12'500)};
  p.link_latency = Nanoseconds(latency_us * 1000);
  p.real_step_cost = real_c;
  p.members_late = late;
  return p;
}
}  // namespace

TEST_CASE("arrival: a real rank's PAT operation with late virtual members ends at prismd's play",
          "[plugin][unit][arrival][pat]") {
  const Nanoseconds c(12'500);
  const Nanoseconds ms(1'000'000), two_ms(2'000'000);
  // Late members: the receives stream from their arrival, the end is the
  // play's (its last hop's c is the real rank's own).
  for (const prism::testing::PatStandIn& p :
       {PatCase(false, 2048, 17ull << 20, 10, 10, c, two_ms), PatCase(true, 8, 1ull << 20, 2.5, 10, c, ms),
        PatCase(false, 8192, 64ull << 20, 100, 5, c, ms), PatCase(false, 8, 1ull << 20, 2.5, 10, c, ms)}) {
    CAPTURE(p.model.all_gather, p.model.ranks, p.model.bytes.count());
    const auto r = prism::testing::PlayPatStandIn(p);
    REQUIRE(r.has_value());
    CHECK(r->end == r->model_end);
  }
}

// A real rank faster per message than the model (c = 0): the floor keeps
// its virtual peers at the model's chain of hops (within 1% of the play
// at 8192 ranks, 2% without).
TEST_CASE("arrival: PAT's floor keeps a real rank faster than the model near prismd's play",
          "[plugin][unit][arrival][pat]") {
  prism::testing::PatStandIn p = PatCase(true, 8192, 64ull << 20, 100, 5, Nanoseconds(0), Nanoseconds(0));
  p.floor = false;
  const auto open = prism::testing::PlayPatStandIn(p);
  p.floor = true;
  const auto floored = prism::testing::PlayPatStandIn(p);
  REQUIRE(open.has_value());
  REQUIRE(floored.has_value());
  CHECK(open->end < floored->end);
  CHECK(static_cast<double>(floored->end.count()) > 0.99 * static_cast<double>(floored->model_end.count()));
  CHECK(floored->end <= floored->model_end);
}

// NCCL's kernel takes its steps in its own order, not the play's: on the GPU
// host (2026-12-02) a reduce-scatter over 8192 ranks sent 8 messages on
// dimension 0, then 8 on dimension 1, ..., and its receives on dimension 1
// were held to the play's time for them (after all 32 of dimension 0): 2.5
// times the model. The floor holds no order: with the real rank paying the
// model's c per message, the operation ends within 2% of the play.
TEST_CASE("arrival: PAT's floor does not hold a real rank that sends in NCCL's order to the play's order",
          "[plugin][unit][arrival][pat]") {
  for (const bool all_gather : {false, true}) {
    for (const Nanoseconds late : {Nanoseconds(0), Nanoseconds(1'000'000)}) {
      prism::testing::PatStandIn p = PatCase(all_gather, 8192, 64ull << 20, 100, 5, Nanoseconds(12'500), late);
      p.own_order = true;
      CAPTURE(all_gather, late.count());
      const auto r = prism::testing::PlayPatStandIn(p);
      REQUIRE(r.has_value());
      CHECK(static_cast<double>(r->end.count()) < 1.02 * static_cast<double>(r->model_end.count()));
      CHECK(r->end >= r->model_end - Nanoseconds(12'500));
    }
  }
}

// Through the plugin's receive path (VirtualRecvComm): rank 0 of 8, a PAT
// all-gather of 64 KiB per rank and channel over 2 channels (one played),
// prismd's schedule giving the virtual members' arrival and a step cost of
// 50 ms. Dimension 1's second message (the piece rank 2 received from rank
// 6 on dimension 2 and forwards) reaches this rank, in the model, two hops
// after the members arrived: start + 2w + 2L + c (the play's earliest[1][1] + L).
// This rank forwards its own the moment its receive completes (c = 0 here),
// so the mirror alone completes it 50 ms earlier.
TEST_CASE("virtual recv: a PAT receive completes no earlier than prismd's play of its message",
          "[plugin][unit][arrival][pat]") {
  Rig rig(8, 0);
  constexpr size_t kPiece = 64 * 1024;
  constexpr int64_t kStepCost = 50'000'000;
  std::vector<void*> tasks = PatAllGatherTask(&rig, 11, 2 * kPiece, 2);
  PatAllGather8 pat(&rig, tasks[0], kPiece, 30);
  const MessageTag first = FakeNccl::Transfer(&pat.to[2].sub, 0);
  OpSchedule sched;
  sched.mode = OpSchedule::Mode::kStream;  // prismd's schedule for a PAT operation
  sched.ready_ns = WallNowNs() + 2'000'000;
  sched.link_bits_per_second = kOwnBits;
  sched.link_latency_ns = kOwnLatency;
  sched.step_cost_ns = kStepCost;
  rig.book.Put(OpKey::Of(first.op->info()), sched);
  pat.Send(2);
  pat.Send(1);
  REQUIRE(WaitDone(pat.from[2].receives[0]) == static_cast<int>(kPiece));
  pat.Send(1);  // forwards dimension 2's piece at once
  REQUIRE(WaitDone(pat.from[1].receives[0]) == static_cast<int>(kPiece));
  REQUIRE(WaitDone(pat.from[1].receives[1]) == static_cast<int>(kPiece));
  const int64_t completed = WallNowNs();
  const std::optional<prism::PatPlay> play = prism::PlayPatSchedule(
      prism::PatShape{true, 8, Bytes(2 * kPiece * 8), 2, prism::BitsPerSecond(kOwnBits),
                      Nanoseconds(kOwnLatency + kStepCost)});
  REQUIRE(play.has_value());
  REQUIRE(play->earliest[1].size() == 2);
  const int64_t w = static_cast<int64_t>(2 * kPiece * 8 / (kOwnBits / 1'000'000'000));  // both channels on the NIC
  CHECK(play->earliest[1][1].count() == 2 * w + kOwnLatency + kStepCost);
  CHECK(completed >= sched.ready_ns + play->earliest[1][1].count() + kOwnLatency);
  pat.Stop();
}
