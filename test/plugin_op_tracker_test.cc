// OpTracker, driven by FakeNccl exactly as NCCL 2.28.9 drives the profiler
// plugin: which operation, channel and step every network transfer belongs
// to, when an operation ends, the own-send stamps the MIRROR schedule reads,
// and that NULL, foreign and stale handles do no harm.
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstdint>
#include <cstring>
#include <utility>
#include <vector>

#include "plugin/op_schedules.h"
#include "plugin/op_tracker.h"
#include "test/plugin_fake_nccl.h"

namespace {

using prism::plugin::MessageTag;
using prism::plugin::OpAlgo;
using prism::plugin::OpInfo;
using prism::plugin::OpKey;
using prism::plugin::OpKind;
using prism::plugin::OpListener;
using prism::plugin::OpRecord;
using prism::plugin::OpSummary;
using prism::plugin::OpTracker;
using prism::test::FakeColl;
using prism::test::FakeNccl;
using prism::test::FakeP2p;
using prism::test::FakeSub;

constexpr uint64_t kCommHash = 0xC0FFEE0012345678ull;
constexpr int kRanks = 4;
constexpr int kRank = 1;
constexpr int kPrev = 0;  // ring predecessor of kRank
constexpr int kNext = 2;  // ring successor of kRank

class RecordingListener final : public OpListener {
 public:
  void OnOpStarted(const OpInfo& info) override { started.push_back(info); }
  void OnOpFinished(const OpInfo& info, const OpSummary& summary) override {
    finished.emplace_back(info, summary);
  }
  std::vector<OpInfo> started;
  std::vector<std::pair<OpInfo, OpSummary>> finished;
};

// Closed-form stamps the test's "net side" gives its own sends and receives.
int64_t PostedAt(int channel, int step) { return 1'000'000 + channel * 10'000 + step * 1'000; }
int64_t WireDoneAt(int channel, int step) { return PostedAt(channel, step) + 700 + channel; }
int64_t ReceivedAt(int channel, int step) { return PostedAt(channel, step) + 5'000; }
constexpr uint64_t kMsgBytes = 1 << 19;

// A ring all-reduce of 2 channels on rank 1 of 4: per channel one send proxy
// op to the successor and one receive proxy op from the predecessor, 6
// network steps each (12 NCCL steps of sliceSteps 2).
struct RingAllReduce {
  static constexpr int kChannels = 2;
  static constexpr int kSliceSteps = 2;
  static constexpr int kNcclStepsPerOp = 12;
  static constexpr int kNetSteps = 6;

  explicit RingAllReduce(FakeNccl* nccl, uint64_t seq = 7) : nccl(nccl) {
    FakeColl c;
    c.seq = seq;
    c.func = "AllReduce";
    c.count = 1 << 20;
    c.datatype = "ncclFloat32";
    c.channels = kChannels;
    tasks = nccl->StartTasks({c}, {});
    REQUIRE(tasks.size() == 1);
    REQUIRE(tasks[0] != nullptr);
    // hostStreamPlanTask: the proxy ops are posted, then the task event stops,
    // before the proxy thread starts the ProxyOps that name it.
    nccl->StopTasks(tasks);
    for (int ch = 0; ch < kChannels; ++ch) {
      subs.push_back(nccl->Sub(tasks[0], ch, kNext, kNcclStepsPerOp, kSliceSteps, /*is_send=*/true));
      subs.push_back(nccl->Sub(tasks[0], ch, kPrev, kNcclStepsPerOp, kSliceSteps, /*is_send=*/false));
    }
  }
  void StartProxyOps() {
    for (FakeSub& s : subs) nccl->StartProxyOp(&s);
  }

  FakeNccl* nccl;
  std::vector<void*> tasks;
  std::vector<FakeSub> subs;  // [2 * channel + (is_send ? 0 : 1)]
};

TEST_CASE("op tracker: init asks for the whole chain and keeps the other mask bits", "[plugin][unit][ops]") {
  OpTracker tracker(nullptr);
  void* ctx = nullptr;
  int mask = kPrismProfileKernelCh;
  REQUIRE(tracker.Init(&ctx, kCommHash, &mask, kRanks, kRank) == prism_ncclSuccess);
  CHECK(ctx != nullptr);
  const int chain = kPrismProfileColl | kPrismProfileP2p | kPrismProfileProxyOp | kPrismProfileProxyStep |
                    kPrismProfileNetPlugin;
  CHECK((mask & chain) == chain);
  CHECK((mask & kPrismProfileKernelCh) != 0);
  CHECK(tracker.Finalize(ctx) == prism_ncclSuccess);
  void* ctx2 = nullptr;
  CHECK(tracker.Init(&ctx2, kCommHash, nullptr, kRanks, kRank) == prism_ncclSuccess);
  CHECK(tracker.Finalize(ctx2) == prism_ncclSuccess);
}

TEST_CASE("op tracker: ring all-reduce on 2 channels tags every transfer with its op, channel and step",
          "[plugin][unit][ops]") {
  RecordingListener listener;
  OpTracker tracker(&listener);
  FakeNccl nccl(&tracker, kCommHash, kRanks, kRank);
  RingAllReduce ar(&nccl);

  REQUIRE(listener.started.size() == 1);
  const OpInfo& started = listener.started[0];
  CHECK(started.id >= 1);
  CHECK(started.comm_hash == kCommHash);
  CHECK(started.comm_rank == kRank);
  CHECK(started.comm_size == kRanks);
  CHECK(started.kind == OpKind::kAllReduce);
  CHECK(started.seq == 7);
  CHECK(started.peer == -1);
  CHECK(started.bytes == (1u << 20) * 4u);
  CHECK(started.algo == OpAlgo::kRing);
  CHECK(started.algo_name == "RING");
  CHECK(started.proto_name == "SIMPLE");
  CHECK(started.channels == 2);
  CHECK(started.mirror_kind());
  CHECK(tracker.ops_started() == 1);

  ar.StartProxyOps();
  std::shared_ptr<OpRecord> op;
  // The proxy thread: each step is started, its isend/irecv resolves its
  // tag, and it stops 3 steps later (several steps in flight per sub).
  constexpr int kInFlight = 3;
  for (int k = 0; k < RingAllReduce::kNetSteps + kInFlight; ++k) {
    for (FakeSub& sub : ar.subs) {
      const int step_id = k * RingAllReduce::kSliceSteps;
      if (k < RingAllReduce::kNetSteps) {
        nccl.StartStep(&sub, step_id);
        const MessageTag tag = FakeNccl::Transfer(&sub, step_id);
        INFO("channel " << int(sub.channelId) << " send " << sub.isSend << " step " << k);
        REQUIRE(tag.valid());
        if (!op) op = tag.op;
        CHECK(tag.op == op);
        CHECK(tag.channel == sub.channelId);
        CHECK(tag.step == k);
        CHECK(tag.steps == RingAllReduce::kNetSteps);
        CHECK(tag.is_send == sub.isSend);
        if (tag.is_send) {
          tag.op->RecordSend(tag.channel, tag.step, PostedAt(tag.channel, k), WireDoneAt(tag.channel, k),
                             kMsgBytes);
        } else {
          tag.op->RecordReceive(ReceivedAt(tag.channel, k), kMsgBytes);
        }
      }
      if (k >= kInFlight) nccl.StopStep(&sub, (k - kInFlight) * RingAllReduce::kSliceSteps);
    }
  }
  REQUIRE(op);
  CHECK(op->info().id == started.id);
  CHECK(OpKey::Of(op->info()) == OpKey{kCommHash, OpKind::kAllReduce, 7, -1});

  // The mirror reads the own sends per (channel, step).
  for (int ch = 0; ch < RingAllReduce::kChannels; ++ch) {
    for (int k = 0; k < RingAllReduce::kNetSteps; ++k) {
      int64_t done = 0;
      uint64_t bytes = 0;
      REQUIRE(op->SendOf(ch, k, &done, &bytes));
      CHECK(done == WireDoneAt(ch, k));
      CHECK(bytes == kMsgBytes);
    }
  }
  int64_t done = 0;
  uint64_t bytes = 0;
  CHECK_FALSE(op->SendOf(0, RingAllReduce::kNetSteps, &done, &bytes));  // never sent
  CHECK_FALSE(op->SendOf(5, 0, &done, &bytes));                          // no such channel
  CHECK_FALSE(op->SendOf(0, -1, &done, &bytes));

  // Finished exactly when the last of the 4 ProxyOps stops.
  for (size_t i = 0; i < ar.subs.size(); ++i) {
    CHECK(listener.finished.empty());
    nccl.StopProxyOp(&ar.subs[i]);
  }
  REQUIRE(listener.finished.size() == 1);
  const auto& [info, summary] = listener.finished[0];
  CHECK(info.id == started.id);
  const int n = RingAllReduce::kChannels * RingAllReduce::kNetSteps;
  CHECK(summary.first_send_ns == PostedAt(0, 0));
  CHECK(summary.end_ns == std::max(WireDoneAt(1, 5), ReceivedAt(1, 5)));
  CHECK(summary.bytes_sent == n * kMsgBytes);
  CHECK(summary.bytes_received == n * kMsgBytes);
  CHECK(summary.messages == 2u * n);
  // The stamps are dropped with the operation; a late one is ignored.
  CHECK_FALSE(op->SendOf(0, 0, &done, &bytes));
  op->RecordSend(0, 0, 1, 2, 3);
  CHECK_FALSE(op->SendOf(0, 0, &done, &bytes));
}

TEST_CASE("op tracker: the next collective's proxy ops start before the previous one ends",
          "[plugin][unit][ops]") {
  RecordingListener listener;
  OpTracker tracker(&listener);
  FakeNccl nccl(&tracker, kCommHash, kRanks, kRank);
  RingAllReduce first(&nccl, /*seq=*/7);
  RingAllReduce second(&nccl, /*seq=*/8);
  first.StartProxyOps();
  second.StartProxyOps();  // appended while the first still progresses

  nccl.StartStep(&first.subs[0], 0);
  nccl.StartStep(&second.subs[0], 0);
  const MessageTag a = FakeNccl::Transfer(&first.subs[0], 0);
  const MessageTag b = FakeNccl::Transfer(&second.subs[0], 0);
  REQUIRE(a.valid());
  REQUIRE(b.valid());
  CHECK(a.op->info().seq == 7);
  CHECK(b.op->info().seq == 8);
  CHECK(a.op->info().id != b.op->info().id);
  nccl.StopStep(&first.subs[0], 0);
  nccl.StopStep(&second.subs[0], 0);

  for (FakeSub& s : first.subs) nccl.StopProxyOp(&s);
  REQUIRE(listener.finished.size() == 1);
  CHECK(listener.finished[0].first.seq == 7);
  for (FakeSub& s : second.subs) nccl.StopProxyOp(&s);
  REQUIRE(listener.finished.size() == 2);
  CHECK(listener.finished[1].first.seq == 8);
  CHECK(tracker.ops_started() == 2);
}

TEST_CASE("op tracker: p2p sends and receives are numbered per peer and direction", "[plugin][unit][ops]") {
  RecordingListener listener;
  OpTracker tracker(&listener);
  FakeNccl nccl(&tracker, kCommHash, kRanks, kRank);

  FakeP2p send3{"Send", 1000, "ncclFloat16", 3, 2};
  FakeP2p recv3{"Recv", 1000, "ncclFloat16", 3, 2};
  FakeP2p send0{"Send", 64, "ncclInt8", 0, 1};
  // Two plans: {send 3, recv 3, send 0}, then {send 3}.
  std::vector<void*> plan1 = nccl.StartTasks({}, {send3, recv3, send0});
  nccl.StopTasks(plan1);
  std::vector<void*> plan2 = nccl.StartTasks({}, {send3});
  nccl.StopTasks(plan2);
  REQUIRE(listener.started.size() == 4);
  const std::vector<OpKey> keys = {
      {kCommHash, OpKind::kSend, 0, 3},
      {kCommHash, OpKind::kRecv, 0, 3},
      {kCommHash, OpKind::kSend, 0, 0},
      {kCommHash, OpKind::kSend, 1, 3},
  };
  for (size_t i = 0; i < keys.size(); ++i) {
    INFO("p2p op " << i);
    CHECK(OpKey::Of(listener.started[i]) == keys[i]);
    CHECK_FALSE(listener.started[i].mirror_kind());
  }
  CHECK(listener.started[0].bytes == 2000);
  CHECK(listener.started[0].channels == 2);
  CHECK(listener.started[2].bytes == 64);

  // The second send to peer 3 goes over 2 channels, 1 network step each
  // (p2p: sliceSteps 1); its transfers carry its key.
  FakeSub subs[2] = {nccl.Sub(plan2[0], 0, 3, 1, 1, true), nccl.Sub(plan2[0], 1, 3, 1, 1, true)};
  for (FakeSub& s : subs) nccl.StartProxyOp(&s);
  for (FakeSub& s : subs) {
    nccl.StartStep(&s, 0);
    const MessageTag tag = FakeNccl::Transfer(&s, 0);
    REQUIRE(tag.valid());
    CHECK(OpKey::Of(tag.op->info()) == keys[3]);
    CHECK(tag.channel == s.channelId);
    CHECK(tag.step == 0);
    CHECK(tag.steps == 1);
    CHECK(tag.is_send);
    nccl.StopStep(&s, 0);
  }
  nccl.StopProxyOp(&subs[0]);
  CHECK(listener.finished.empty());
  nccl.StopProxyOp(&subs[1]);
  REQUIRE(listener.finished.size() == 1);
  CHECK(OpKey::Of(listener.finished[0].first) == keys[3]);
}

TEST_CASE("op tracker: each communicator has its own hash and p2p numbering", "[plugin][unit][ops]") {
  RecordingListener listener;
  OpTracker tracker(&listener);
  FakeNccl a(&tracker, 0xAAAA, 2, 0);
  FakeNccl b(&tracker, 0xBBBB, 8, 5);
  FakeP2p send1{"Send", 8, "ncclInt8", 1, 1};
  a.StopTasks(a.StartTasks({}, {send1}));
  b.StopTasks(b.StartTasks({}, {send1}));
  a.StopTasks(a.StartTasks({}, {send1}));
  REQUIRE(listener.started.size() == 3);
  CHECK(OpKey::Of(listener.started[0]) == OpKey{0xAAAA, OpKind::kSend, 0, 1});
  CHECK(OpKey::Of(listener.started[1]) == OpKey{0xBBBB, OpKind::kSend, 0, 1});
  CHECK(listener.started[1].comm_rank == 5);
  CHECK(listener.started[1].comm_size == 8);
  CHECK(OpKey::Of(listener.started[2]) == OpKey{0xAAAA, OpKind::kSend, 1, 1});
}

TEST_CASE("op tracker: step slots are reused after NCCL_STEPS and retried starts keep the step",
          "[plugin][unit][ops]") {
  OpTracker tracker(nullptr);
  FakeNccl nccl(&tracker, kCommHash, kRanks, kRank);
  FakeColl c;
  c.func = "AllGather";
  c.count = 10 << 20;
  c.datatype = "ncclInt8";
  std::vector<void*> tasks = nccl.StartTasks({c}, {});
  nccl.StopTasks(tasks);
  FakeSub recv = nccl.Sub(tasks[0], 0, kPrev, 12, 1, false);
  nccl.StartProxyOp(&recv);
  for (int k = 0; k < 12; ++k) {
    if (k >= prism::test::kNcclSteps) nccl.StopStep(&recv, k - prism::test::kNcclSteps);
    nccl.StartStep(&recv, k);
    if (k % 3 == 0) nccl.StartStep(&recv, k);  // recvProxyProgress re-issues the start on a retry
    const MessageTag tag = FakeNccl::Transfer(&recv, k);
    REQUIRE(tag.valid());
    CHECK(tag.step == k);
    CHECK(tag.steps == 12);
    CHECK_FALSE(tag.is_send);
    CHECK(tag.op->info().kind == OpKind::kAllGather);
    CHECK(tag.op->info().bytes == (10u << 20));  // AllGather counts arrive in bytes
  }
  for (int k = 4; k < 12; ++k) nccl.StopStep(&recv, k);
  nccl.StopProxyOp(&recv);
}

TEST_CASE("op tracker: a proxy op of another process (PXN) is not tracked and does not hold the op",
          "[plugin][unit][ops]") {
  RecordingListener listener;
  OpTracker tracker(&listener);
  FakeNccl nccl(&tracker, kCommHash, kRanks, kRank);
  RingAllReduce ar(&nccl);
  FakeSub foreign = ar.subs[0];
  foreign.pid = getpid() + 1;
  nccl.StartProxyOp(&foreign);
  CHECK(foreign.opEventHandle == nullptr);
  nccl.StartStep(&foreign, 0);
  CHECK(foreign.pHandles[0].stepEventHandle == nullptr);
  CHECK_FALSE(FakeNccl::Transfer(&foreign, 0).valid());

  FakeSub& own = ar.subs[1];
  nccl.StartProxyOp(&own);
  nccl.StopProxyOp(&foreign);  // NULL handle: NCCL does not call stopEvent
  CHECK(listener.finished.empty());
  nccl.StopProxyOp(&own);
  CHECK(listener.finished.size() == 1);
}

TEST_CASE("op tracker: NULL, foreign and wrong-kind handles are harmless", "[plugin][unit][ops]") {
  RecordingListener listener;
  OpTracker tracker(&listener);
  FakeNccl nccl(&tracker, kCommHash, kRanks, kRank);
  uint64_t garbage[32];
  std::memset(garbage, 0xAB, sizeof(garbage));
  void* const foreign = garbage;

  // Stop and finalize of NULL and foreign pointers.
  CHECK(tracker.StopEvent(nullptr) == prism_ncclSuccess);
  CHECK(tracker.StopEvent(foreign) == prism_ncclSuccess);
  CHECK(tracker.Finalize(nullptr) == prism_ncclSuccess);
  CHECK(tracker.Finalize(foreign) == prism_ncclSuccess);

  // Start with NULL arguments, and a collective under a foreign or NULL context.
  prism_ncclProfilerEventDescr_v5_t coll{};
  coll.type = kPrismProfileColl;
  coll.coll.func = "AllReduce";
  coll.coll.algo = "RING";
  CHECK(tracker.StartEvent(nccl.context(), nullptr, &coll) == prism_ncclSuccess);
  void* h = foreign;
  CHECK(tracker.StartEvent(nccl.context(), &h, nullptr) == prism_ncclSuccess);
  CHECK(tracker.StartEvent(nullptr, &h, &coll) == prism_ncclSuccess);
  CHECK(h == nullptr);
  h = foreign;
  CHECK(tracker.StartEvent(foreign, &h, &coll) == prism_ncclSuccess);
  CHECK(h == nullptr);
  CHECK(listener.started.empty());

  // A group gets the one group handle, which stopping leaves alone.
  {
    prism_ncclProfilerEventDescr_v5_t d{};
    d.type = kPrismProfileGroup;
    h = nullptr;
    CHECK(tracker.StartEvent(nccl.context(), &h, &d) == prism_ncclSuccess);
    CHECK(h != nullptr);
    CHECK(tracker.StopEvent(h) == prism_ncclSuccess);
    CHECK(tracker.StopEvent(h) == prism_ncclSuccess);
  }
  // Events the tracker does not keep.
  for (uint64_t type : {uint64_t{kPrismProfileProxyCtrl},
                        uint64_t{kPrismProfileKernelCh}, uint64_t{1} << 11, uint64_t{1} << 20}) {
    prism_ncclProfilerEventDescr_v5_t d{};
    d.type = type;
    h = foreign;
    CHECK(tracker.StartEvent(nccl.context(), &h, &d) == prism_ncclSuccess);
    CHECK(h == nullptr);
  }

  // A real operation, to offer its handles in the wrong places.
  RingAllReduce ar(&nccl);
  ar.StartProxyOps();
  FakeSub& sub = ar.subs[0];
  nccl.StartStep(&sub, 0);
  void* const step = sub.pHandles[0].stepEventHandle;
  REQUIRE(step != nullptr);

  // ProxyOp under NULL, foreign, a context, a ProxyOp or a step: not tracked.
  for (void* parent : {static_cast<void*>(nullptr), foreign, nccl.context(), sub.opEventHandle, step}) {
    FakeSub bad = sub;
    bad.opEventHandle = nullptr;
    bad.taskEventHandle = parent;
    nccl.StartProxyOp(&bad);
    CHECK(bad.opEventHandle == nullptr);
  }
  // ProxyStep under NULL, foreign, an op or a step: not tracked.
  for (void* parent : {static_cast<void*>(nullptr), foreign, ar.tasks[0], step}) {
    prism_ncclProfilerEventDescr_v5_t d{};
    d.type = kPrismProfileProxyStep;
    d.parentObj = parent;
    d.proxyStep.step = 1;
    h = foreign;
    CHECK(tracker.StartEvent(nccl.context(), &h, &d) == prism_ncclSuccess);
    CHECK(h == nullptr);
  }
  // NetPlugin under a NULL, foreign or non-step parent, with another plugin
  // id, or with no data: the tag stays empty.
  MessageTag tag;
  for (void* parent : {static_cast<void*>(nullptr), foreign, ar.tasks[0], sub.opEventHandle}) {
    prism_ncclProfilerEventDescr_v5_t d{};
    d.type = kPrismProfileNetPlugin;
    d.parentObj = parent;
    d.netPlugin.id = OpTracker::kNetPluginId;
    d.netPlugin.data = &tag;
    CHECK(tracker.StartEvent(nccl.context(), &h, &d) == prism_ncclSuccess);
    CHECK_FALSE(tag.valid());
  }
  prism_ncclProfilerEventDescr_v5_t net{};
  net.type = kPrismProfileNetPlugin;
  net.parentObj = step;
  net.netPlugin.id = (0x7 << 16) | 1;  // an IB plugin's event, say
  net.netPlugin.data = &tag;
  CHECK(tracker.StartEvent(nccl.context(), &h, &net) == prism_ncclSuccess);
  CHECK_FALSE(tag.valid());
  net.netPlugin.id = OpTracker::kNetPluginId;
  net.netPlugin.data = nullptr;
  CHECK(tracker.StartEvent(nccl.context(), &h, &net) == prism_ncclSuccess);
  net.netPlugin.data = &tag;
  CHECK(tracker.StartEvent(nccl.context(), &h, &net) == prism_ncclSuccess);
  CHECK(h == nullptr);  // nothing for the net side to stop
  CHECK(tag.valid());   // the right parent and id do resolve

  // Resolve: no callback, or a NULL phandle (NCCL's bootstrap): NCCL's
  // callback must not even be called (it dereferences the phandle).
  MessageTag none;
  OpTracker::Resolve(nullptr, FakeNccl::PHandle(&sub, 0), &none);
  CHECK_FALSE(none.valid());
  static int calls = 0;
  calls = 0;
  auto counting = [](void**, int, void*, int64_t, void*) -> prism_ncclResult_t {
    ++calls;
    return prism_ncclSuccess;
  };
  OpTracker::Resolve(counting, nullptr, &none);
  CHECK(calls == 0);
  CHECK_FALSE(none.valid());

  // Stopping a step (kept inside its ProxyOp) changes nothing.
  nccl.StopStep(&sub, 0);
  CHECK(tracker.StopEvent(step) == prism_ncclSuccess);
  CHECK(listener.finished.empty());
  for (FakeSub& s : ar.subs) nccl.StopProxyOp(&s);
  CHECK(listener.finished.size() == 1);
  CHECK(listener.started.size() == 1);
}

TEST_CASE("op tracker: NCCL names map to Prism's kinds, algorithms and sizes", "[plugin][unit][ops]") {
  using prism::plugin::DatatypeBytes;
  using prism::plugin::OpAlgoFromNccl;
  using prism::plugin::OpKindFromNccl;
  CHECK(OpKindFromNccl("AllReduce") == OpKind::kAllReduce);
  CHECK(OpKindFromNccl("AllGather") == OpKind::kAllGather);
  CHECK(OpKindFromNccl("ReduceScatter") == OpKind::kReduceScatter);
  CHECK(OpKindFromNccl("Broadcast") == OpKind::kBroadcast);
  CHECK(OpKindFromNccl("Reduce") == OpKind::kReduce);
  CHECK(OpKindFromNccl("AlltoAll") == OpKind::kAllToAll);  // NCCL's spelling
  CHECK(OpKindFromNccl("Send") == OpKind::kSend);
  CHECK(OpKindFromNccl("Recv") == OpKind::kRecv);
  CHECK(OpKindFromNccl("Gather") == OpKind::kOtherCollective);
  CHECK(OpKindFromNccl(nullptr) == OpKind::kUnknown);
  CHECK(OpAlgoFromNccl("RING") == OpAlgo::kRing);
  CHECK(OpAlgoFromNccl("TREE") == OpAlgo::kTree);
  CHECK(OpAlgoFromNccl("PAT") == OpAlgo::kOther);
  CHECK(OpAlgoFromNccl(nullptr) == OpAlgo::kUnknown);
  CHECK(DatatypeBytes("ncclBfloat16") == 2);
  CHECK(DatatypeBytes("ncclFloat32") == 4);
  CHECK(DatatypeBytes("ncclUint64") == 8);
  CHECK(DatatypeBytes("Unknown") == 1);

  // Only symmetric ring collectives are mirrored.
  OpInfo info;
  info.algo = OpAlgo::kRing;
  for (OpKind k : {OpKind::kAllReduce, OpKind::kAllGather, OpKind::kReduceScatter}) {
    info.kind = k;
    CHECK(info.mirror_kind());
  }
  for (OpKind k : {OpKind::kBroadcast, OpKind::kReduce, OpKind::kSend, OpKind::kRecv}) {
    info.kind = k;
    CHECK_FALSE(info.mirror_kind());
  }
  info.kind = OpKind::kAllReduce;
  info.algo = OpAlgo::kTree;
  CHECK_FALSE(info.mirror_kind());
}

}  // namespace

// NCCL 2.27's profiler ABI (v4): a one-byte type in an 8-byte slot whose
// padding NCCL may leave as it was, members where v5 has them.
TEST_CASE("op tracker: a v4 descriptor reads as the v5 one it stands for", "[plugin][unit][ops]") {
  prism_ncclProfilerEventDescr_v4_t v4;
  std::memset(&v4, 0xab, sizeof(v4));
  v4.type = kPrismProfileColl;
  int parent = 0;
  v4.parentObj = &parent;
  v4.rank = 3;
  prism_ncclProfilerEventDescr_v5_t coll{};
  coll.coll.seqNumber = 41;
  coll.coll.func = "AllReduce";
  coll.coll.count = 1 << 20;
  coll.coll.datatype = "ncclFloat32";
  coll.coll.nChannels = 2;
  coll.coll.algo = "RING";
  coll.coll.proto = "SIMPLE";
  std::memcpy(v4.members, reinterpret_cast<const unsigned char*>(&coll) + 24, sizeof(v4.members));
  const prism_ncclProfilerEventDescr_v5_t c = DescrFromV4(v4);
  CHECK(c.type == kPrismProfileColl);  // not 0xababab..02
  CHECK(c.parentObj == &parent);
  CHECK(c.rank == 3);
  CHECK(c.coll.seqNumber == 41);
  CHECK(std::string(c.coll.func) == "AllReduce");
  CHECK(c.coll.count == (1u << 20));
  CHECK(c.coll.nChannels == 2);
  CHECK(std::string(c.coll.algo) == "RING");
  CHECK(std::string(c.coll.proto) == "SIMPLE");
  CHECK(c.coll.parentGroup == nullptr);

  prism_ncclProfilerEventDescr_v5_t p2p{};
  p2p.p2p.func = "Send";
  p2p.p2p.count = 4096;
  p2p.p2p.peer = 5;
  p2p.p2p.nChannels = 4;
  std::memset(v4.members, 0xcd, sizeof(v4.members));  // bytes past v4's p2p are not its
  std::memcpy(v4.members, reinterpret_cast<const unsigned char*>(&p2p) + 24, 40);  // func .. nChannels
  v4.type = kPrismProfileP2p;
  const prism_ncclProfilerEventDescr_v5_t p = DescrFromV4(v4);
  CHECK(p.type == kPrismProfileP2p);
  CHECK(std::string(p.p2p.func) == "Send");
  CHECK(p.p2p.peer == 5);
  CHECK(p.p2p.nChannels == 4);
  CHECK(p.p2p.parentGroup == nullptr);
}
