// What a virtual peer's receive leaves in the buffer NCCL's kernel reads
// (PRISM_RECV_FILL), and that a zero fill writes a collective's Simple host
// buffer only where the plugin has not zeroed it since its last other
// write (plugin/zeroed_ranges.h, PRISM_RECV_ZERO_ONCE). VirtualRecvComm is
// driven on the CPU with FakeNccl's tags; ring receives complete by MIRROR.
#include <catch2/catch.hpp>

#include <chrono>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "plugin/clock.h"
#include "plugin/cuda_copy.h"
#include "plugin/ll_lines.h"
#include "plugin/virtual_comms.h"
#include "plugin/zeroed_ranges.h"
#include "test/fake_cudart.h"
#include "test/virtual_recv_rig.h"

namespace {

using prism::plugin::MemRegion;
using prism::plugin::MessageTag;
using prism::plugin::ProtocolBuffers;
using prism::plugin::RecvFill;
using prism::plugin::Request;
using prism::plugin::Settings;
using prism::plugin::VirtualRecvComm;
using prism::plugin::VirtualSendComm;
using prism::plugin::WallNowNs;
using prism::plugin::ZeroedRanges;
using prism::test::FakeColl;
using prism::test::FakeNccl;
using prism::test::FakeSub;
using prism::test::VirtualRecvRig;

TEST_CASE("zeroed ranges: a zero fill writes only bytes not known to be zero, a write forgets them",
          "[plugin][unit][fill]") {
  std::vector<char> buf(1000, 'x');
  char* p = buf.data();
  ZeroedRanges z;
  CHECK(z.Zero(p + 100, 100) == 100);
  CHECK(buf[99] == 'x');
  CHECK(buf[100] == 0);
  CHECK(buf[199] == 0);
  CHECK(buf[200] == 'x');
  CHECK(z.Covers(p + 100, 100));
  CHECK_FALSE(z.Covers(p + 99, 2));
  buf[150] = 'y';  // nobody but the plugin writes these bytes: it does not look again
  CHECK(z.Zero(p + 120, 50) == 0);
  CHECK(buf[150] == 'y');
  buf[150] = 0;
  CHECK(z.Zero(p + 50, 300) == 50 + 150);  // the two gaps around [100, 200)
  CHECK(z.ranges() == 1);
  CHECK(z.Covers(p + 50, 300));
  for (int k = 50; k < 350; ++k) REQUIRE(buf[k] == 0);
  z.Written(p + 140, 20);  // another write in the middle splits the range
  CHECK(z.ranges() == 2);
  CHECK_FALSE(z.Covers(p + 150, 1));
  CHECK(z.Covers(p + 50, 90));
  CHECK(z.Covers(p + 160, 190));
  CHECK(z.Zero(p + 50, 300) == 20);
  CHECK(z.ranges() == 1);
  z.Zero(p + 400, 10);  // disjoint, then one that bridges the gap
  CHECK(z.ranges() == 2);
  CHECK(z.Zero(p + 340, 80) == 50 + 10);  // [350, 400) and [410, 420)
  CHECK(z.ranges() == 1);
  z.Written(p, 1000);
  CHECK(z.ranges() == 0);
  CHECK(z.Zero(p + 340, 80) == 80);
  z.Written(p + 340, 10);  // the start of a range
  CHECK(z.Covers(p + 350, 70));
  CHECK_FALSE(z.Covers(p + 349, 1));
}

// Rank 0 of 2; a fast link, so that a MIRROR receive completes a
// microsecond after this rank's own send of the step.
Settings FillSettings(RecvFill fill) {
  Settings s;
  s.link_bits_per_second = 8'000'000'000'000ull;
  s.link_latency_ns = 1'000;
  s.daemon_timeout_ms = 600'000;
  s.ring_lockstep = false;
  s.recv_fill = fill;
  return s;
}

// One ring collective of one step on channel 0 as NCCL's proxy runs it:
// this rank's own send of `payload`, then the virtual predecessor's
// receive into `data` (registered as `mr`); the size it completed with, or
// -1 (an error, or 5 s passed).
int RingStep(VirtualRecvRig* rig, VirtualSendComm* send, VirtualRecvComm* recv, uint64_t seq, const char* func,
             const std::vector<char>& payload, char* data, size_t size, const MemRegion* mr) {
  FakeColl c;
  c.func = func;
  c.seq = seq;
  c.count = payload.size();
  c.datatype = "ncclInt8";
  std::vector<void*> tasks = rig->nccl.StartTasks({c}, {});
  rig->nccl.StopTasks(tasks);
  FakeSub ssub = rig->nccl.Sub(tasks[0], 0, 1, 1, 1, true);
  FakeSub rsub = rig->nccl.Sub(tasks[0], 0, 1, 1, 1, false);
  for (FakeSub* s : {&ssub, &rsub}) {
    rig->nccl.StartProxyOp(s);
    rig->nccl.StartStep(s, 0);
  }
  void* request = nullptr;
  const MessageTag stag = FakeNccl::Transfer(&ssub, 0);
  if (send->Isend(const_cast<char*>(payload.data()), payload.size(), 0, nullptr, stag, &request) !=
          prism_ncclSuccess || request == nullptr)
    return -1;
  int done = 0, size_done = -1;
  while (!done && static_cast<Request*>(request)->Test(&done, &size_done) == prism_ncclSuccess) {}
  const MessageTag rtag = FakeNccl::Transfer(&rsub, 0);
  void* d = data;
  const int tag = 0;
  request = nullptr;
  if (recv->Irecv(1, &d, &size, &tag, &mr, &rtag, &request) != prism_ncclSuccess || request == nullptr) return -1;
  const int64_t deadline = WallNowNs() + 5'000'000'000;
  done = 0;
  size_done = -1;
  while (!done && WallNowNs() < deadline) {
    if (static_cast<Request*>(request)->Test(&done, &size_done) != prism_ncclSuccess) return -1;
    if (!done) std::this_thread::sleep_for(std::chrono::microseconds(50));
  }
  for (FakeSub* s : {&ssub, &rsub}) {
    rig->nccl.StopStep(s, 0);
    rig->nccl.StopProxyOp(s);
  }
  return done ? size_done : -1;
}

// The first `n` bytes of `p` all equal `c`.
bool All(const char* p, size_t n, char c) {
  for (size_t k = 0; k < n; ++k)
    if (p[k] != c) return false;
  return true;
}

constexpr size_t kMessage = 4096;  // kept whole for PRISM_RECV_FILL=own

// A Simple protocol buffer of NCCL's size for a collective's connection,
// registered on the receive comm, and its step slot 3.
struct SimpleBuffer {
  explicit SimpleBuffer(size_t bytes) : bytes(bytes, 'x'), mr(this->bytes.data(), bytes, kPrismPtrHost) {}
  char* slot() { return bytes.data() + 3 * (bytes.size() / prism::plugin::kNcclSteps); }
  size_t slot_size() const { return bytes.size() / prism::plugin::kNcclSteps; }
  std::vector<char> bytes;
  MemRegion mr;
};

}  // namespace

TEST_CASE("virtual recv: zeros, own, pattern, then zeros again on one slot: the kernel reads each fill's bytes, and "
          "a slot still zero is not written again", "[plugin][unit][fill]") {
  VirtualRecvRig rig(FillSettings(RecvFill::kOwn), 8'000'000'000'000ull, 1'000, 0xF111, 2, 0);
  VirtualSendComm send(rig.env, rig.session, 1, 0);
  VirtualRecvComm recv(rig.env, rig.session, 2, 0);
  SimpleBuffer buf(ProtocolBuffers::FromEnv().simple);
  char* slot = buf.slot();
  const std::vector<char> ones(kMessage, 1), own(kMessage, 'A');
  uint64_t ar = 0;
  // An all-reduce's receive under own: zeros.
  REQUIRE(RingStep(&rig, &send, &recv, ++ar, "AllReduce", ones, slot, buf.slot_size(), &buf.mr) == kMessage);
  CHECK(All(slot, kMessage, 0));
  CHECK(slot[kMessage] == 'x');  // the message's bytes only
  // The next zero fill of those bytes writes nothing: a byte planted where
  // only the plugin writes survives it.
  slot[100] = 'y';
  REQUIRE(RingStep(&rig, &send, &recv, ++ar, "AllReduce", ones, slot, buf.slot_size(), &buf.mr) == kMessage);
  CHECK(slot[100] == 'y');
  slot[100] = 0;
  // An all-gather's receive: this rank's own send of the step.
  REQUIRE(RingStep(&rig, &send, &recv, 1, "AllGather", own, slot, buf.slot_size(), &buf.mr) == kMessage);
  CHECK(All(slot, kMessage, 'A'));
  // Zeros again: the own fill's bytes are written over.
  REQUIRE(RingStep(&rig, &send, &recv, ++ar, "AllReduce", ones, slot, buf.slot_size(), &buf.mr) == kMessage);
  CHECK(All(slot, kMessage, 0));
  // Pattern (receive seq 4: byte k = (4 * 31 + k) mod 256), then zeros.
  rig.settings.recv_fill = RecvFill::kPattern;
  REQUIRE(RingStep(&rig, &send, &recv, ++ar, "AllReduce", ones, slot, buf.slot_size(), &buf.mr) == kMessage);
  bool pattern = true;
  for (size_t k = 0; k < kMessage; ++k) pattern &= static_cast<unsigned char>(slot[k]) == ((4 * 31 + k) & 0xff);
  CHECK(pattern);
  rig.settings.recv_fill = RecvFill::kZeros;
  REQUIRE(RingStep(&rig, &send, &recv, ++ar, "AllReduce", ones, slot, buf.slot_size(), &buf.mr) == kMessage);
  CHECK(All(slot, kMessage, 0));
  // A larger message over the zeroed one: only the new bytes are written.
  const std::vector<char> twice(2 * kMessage, 1);
  slot[100] = 'y';
  REQUIRE(RingStep(&rig, &send, &recv, ++ar, "AllReduce", twice, slot, buf.slot_size(), &buf.mr) == 2 * kMessage);
  CHECK(slot[100] == 'y');
  CHECK(All(slot + kMessage, kMessage, 0));
  CHECK(slot[2 * kMessage] == 'x');
}

TEST_CASE("virtual recv: a zero fill writes every time where other writers may exist or zero-once is off",
          "[plugin][unit][fill]") {
  VirtualRecvRig rig(FillSettings(RecvFill::kZeros), 8'000'000'000'000ull, 1'000, 0xF112, 2, 0);
  VirtualSendComm send(rig.env, rig.session, 1, 0);
  VirtualRecvComm recv(rig.env, rig.session, 2, 0);
  const std::vector<char> ones(kMessage, 1);
  const size_t simple = ProtocolBuffers::FromEnv().simple;
  std::string where;
  bool deregister = false;
  size_t bytes = simple;
  SECTION("PRISM_RECV_ZERO_ONCE=0") {
    rig.settings.recv_zero_once = false;
    where = "zero-once off";
  }
  SECTION("a buffer not of the Simple protocol's size (a p2p pool, a user buffer)") {
    bytes = simple + 4096;
    where = "other size";
  }
  SECTION("the region deregistered and registered again") {
    deregister = true;
    where = "deregMr";
  }
  SimpleBuffer buf(bytes);
  char* slot = buf.slot();
  REQUIRE(RingStep(&rig, &send, &recv, 1, "AllReduce", ones, slot, buf.slot_size(), &buf.mr) == kMessage);
  CHECK(All(slot, kMessage, 0));
  slot[100] = 'y';  // another writer (or memory freed and reused)
  if (deregister) recv.Deregistering(buf.mr);
  REQUIRE(RingStep(&rig, &send, &recv, 2, "AllReduce", ones, slot, buf.slot_size(), &buf.mr) == kMessage);
  INFO(where);
  CHECK(slot[100] == 0);
}

TEST_CASE("virtual recv: a p2p receive is zeroed every time (NCCL's shared p2p pool, which real peers' comms "
          "write too, may have the Simple buffer's size)", "[plugin][unit][fill]") {
  constexpr uint64_t kHash = 0xF113;
  VirtualRecvRig rig(FillSettings(RecvFill::kZeros), 8'000'000'000'000ull, 1'000, kHash, 2, 0);
  VirtualRecvComm recv(rig.env, rig.session, 2, 0);
  SimpleBuffer buf(ProtocolBuffers::FromEnv().simple);
  char* slot = buf.slot();
  for (uint64_t k = 0; k < 2; ++k) {
    std::vector<void*> tasks = rig.nccl.StartTasks({}, {prism::test::FakeP2p{"Recv", kMessage, "ncclInt8", 1, 1}});
    rig.nccl.StopTasks(tasks);
    FakeSub sub = rig.nccl.Sub(tasks[0], 0, 1, 1, 1, false);
    rig.nccl.StartProxyOp(&sub);
    rig.nccl.StartStep(&sub, 0);
    const MessageTag tag = FakeNccl::Transfer(&sub, 0);
    REQUIRE(tag.valid());
    prism::plugin::OpSchedule sched;  // prismd: the virtual sender streams it now
    sched.mode = prism::plugin::OpSchedule::Mode::kStream;
    sched.ready_ns = WallNowNs();
    sched.link_bits_per_second = 8'000'000'000'000ull;
    sched.link_latency_ns = 1'000;
    rig.book.Put(prism::plugin::OpKey{kHash, prism::plugin::OpKind::kRecv, k, 1}, sched);
    void* d = slot;
    const size_t size = buf.slot_size();
    const int nccl_tag = 0;
    const MemRegion* mr = &buf.mr;
    void* request = nullptr;
    REQUIRE(recv.Irecv(1, &d, &size, &nccl_tag, &mr, &tag, &request) == prism_ncclSuccess);
    REQUIRE(request != nullptr);
    int done = 0, got = -1;
    const int64_t deadline = WallNowNs() + 5'000'000'000;
    while (!done && WallNowNs() < deadline) REQUIRE(static_cast<Request*>(request)->Test(&done, &got) == prism_ncclSuccess);
    REQUIRE(got == static_cast<int>(kMessage));
    rig.nccl.StopStep(&sub, 0);
    rig.nccl.StopProxyOp(&sub);
    CHECK(All(slot, kMessage, 0));
    slot[100] = 'y';  // another comm's receive into the pool
  }
}

TEST_CASE("virtual recv: a GPU buffer's zero fill is written once too, through the CUDA runtime",
          "[plugin][unit][fill][cuda]") {
  VirtualRecvRig rig(FillSettings(RecvFill::kZeros), 8'000'000'000'000ull, 1'000, 0xF114, 2, 0);
  prism::plugin::CudaCopier cuda({PRISM_FAKE_LIBCUDART});
  std::string why;
  REQUIRE(cuda.Load(&why));
  rig.env.cuda = &cuda;
  prism::test::FakeCudart fake;
  VirtualSendComm send(rig.env, rig.session, 1, 0);
  VirtualRecvComm recv(rig.env, rig.session, 2, 0);
  const size_t simple = ProtocolBuffers::FromEnv().simple;
  std::vector<char> gpu(simple, 'x');  // the stand-in's "device memory" is host memory
  fake.set_device_range(gpu.data(), gpu.size(), 2);
  MemRegion mr(gpu.data(), simple, kPrismPtrCuda);
  mr.device = cuda.DeviceOf(gpu.data());  // as regMr sets it
  REQUIRE(mr.device == 2);
  char* slot = gpu.data() + 3 * (simple / prism::plugin::kNcclSteps);
  const size_t slot_size = simple / prism::plugin::kNcclSteps;
  const std::vector<char> ones(kMessage, 1), twice(2 * kMessage, 1);
  fake.reset();
  REQUIRE(RingStep(&rig, &send, &recv, 1, "AllReduce", ones, slot, slot_size, &mr) == kMessage);
  CHECK(All(slot, kMessage, 0));
  CHECK(fake.Count("cudaMemsetAsync 4096 ") == 1);
  slot[100] = 'y';  // only the plugin writes here: still zero to it, so not written again
  REQUIRE(RingStep(&rig, &send, &recv, 2, "AllReduce", ones, slot, slot_size, &mr) == kMessage);
  CHECK(slot[100] == 'y');
  CHECK(fake.Count("cudaMemsetAsync") == 1);
  // A larger message: only its new half is written.
  REQUIRE(RingStep(&rig, &send, &recv, 3, "AllReduce", twice, slot, slot_size, &mr) == 2 * kMessage);
  CHECK(slot[100] == 'y');
  CHECK(All(slot + kMessage, kMessage, 0));
  CHECK(fake.Count("cudaMemsetAsync 4096 ") == 2);
  // The pattern fill writes the slot (a copy): the next zero fill writes it all again.
  rig.settings.recv_fill = RecvFill::kPattern;
  REQUIRE(RingStep(&rig, &send, &recv, 4, "AllReduce", ones, slot, slot_size, &mr) == kMessage);
  rig.settings.recv_fill = RecvFill::kZeros;
  REQUIRE(RingStep(&rig, &send, &recv, 5, "AllReduce", ones, slot, slot_size, &mr) == kMessage);
  CHECK(All(slot, 2 * kMessage, 0));
  CHECK(fake.Count("cudaMemsetAsync 4096 ") == 3);
  CHECK(fake.Count("legacy") == 0);
  // Every write went to the region's device (set once at regMr), none to the caller's (0).
  CHECK(fake.Count(" device 2") == fake.Count("cudaMemsetAsync") + fake.Count("cudaMemcpyAsync") + 1);  // + the stream
  CHECK(fake.Count(" device 0") == 0);
}
