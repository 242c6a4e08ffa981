// NicCalendar: the engine's reservations of one NIC direction
// (daemon/engine/nic_calendar.h).
#include <catch2/catch.hpp>

#include <vector>

#include "daemon/engine/nic_calendar.h"

using prism::engine::EarliestCommonStart;
using prism::engine::NicCalendar;

namespace {
constexpr prism::Nanoseconds N(int64_t ns) { return prism::Nanoseconds(ns); }
}  // namespace

TEST_CASE("nic calendar: a transfer takes the first gap that holds it", "[engine][nic]") {
  NicCalendar c;
  CHECK(c.NextFree(N(100), N(50)) == N(100));
  c.Reserve(N(200), N(300), N(0));
  CHECK(c.NextFree(N(100), N(100)) == N(100));  // [100, 200) fits before it
  CHECK(c.NextFree(N(100), N(101)) == N(300));  // one more nanosecond does not
  CHECK(c.NextFree(N(250), N(10)) == N(300));
  CHECK(c.NextFree(N(300), N(10)) == N(300));
  c.Reserve(N(320), N(400), N(0));
  CHECK(c.NextFree(N(290), N(20)) == N(300));   // [300, 320) holds 20
  CHECK(c.NextFree(N(290), N(21)) == N(400));
  CHECK(c.LatestEnd() == N(400));
}

TEST_CASE("nic calendar: touching reservations merge and ended ones are dropped", "[engine][nic]") {
  NicCalendar c;
  c.Reserve(N(100), N(200), N(0));
  c.Reserve(N(300), N(400), N(0));
  CHECK(c.size() == 2);
  c.Reserve(N(200), N(300), N(0));  // fills the gap exactly
  CHECK(c.size() == 1);
  CHECK(c.NextFree(N(100), N(1)) == N(400));
  c.Reserve(N(150), N(250), N(0));  // inside: nothing changes
  CHECK(c.size() == 1);
  c.Reserve(N(500), N(600), /*now=*/N(450));  // [100, 400) ended before now
  CHECK(c.size() == 1);
  CHECK(c.NextFree(N(0), N(600)) == N(600));
  c.Reserve(N(700), N(700), N(0));  // empty
  CHECK(c.size() == 1);
  CHECK(c.LatestEnd() == N(600));
}

TEST_CASE("nic calendar: a common start is free on every calendar", "[engine][nic]") {
  NicCalendar a, b;
  a.Reserve(N(100), N(200), N(0));
  b.Reserve(N(250), N(300), N(0));
  // [0, 100) is free on both.
  CHECK(EarliestCommonStart({&a, &b}, N(0), N(100)) == N(0));
  // 120 long: a pushes to 200, b's [250, 300) then pushes to 300.
  CHECK(EarliestCommonStart({&a, &b}, N(0), N(120)) == N(300));
  // 50 long: [200, 250) is free on both.
  CHECK(EarliestCommonStart({&a, &b}, N(150), N(50)) == N(200));
  std::vector<const NicCalendar*> none;
  CHECK(EarliestCommonStart(none, N(42), N(10)) == N(42));
  CHECK(EarliestCommonStart({&a}, N(150), N(0)) == N(150));
}

// NicScheduler (daemon/engine/nic_scheduler.h): the batch of one instant and
// the model switch, on a hand-built world of three actors on three nodes.
#include "daemon/engine/nic_scheduler.h"

namespace {

prism::engine::EngineWorld ThreeNodes() {
  prism::engine::EngineWorld w;
  w.programs.resize(1);
  w.actors.resize(3);
  prism::engine::EngineComm all;
  all.members = {0, 1, 2};
  all.shape = prism::engine::CommShape{3, 3, 1, 1};
  w.comms.push_back(all);
  return w;
}

}  // namespace

TEST_CASE("nic scheduler: requests of one instant go shortest first, whatever the order made", "[engine][nic]") {
  using prism::Nanoseconds;
  const prism::engine::EngineWorld w = ThreeNodes();
  const prism::engine::NetworkModel model(prism::engine::LinkFigures{});
  for (const auto nic : {prism::engine::NicModel::kQueues, prism::engine::NicModel::kCalendar}) {
    prism::engine::NicScheduler s(w, model, nic);
    s.RequestPointToPoint(7, 0, 1, Nanoseconds(0), Nanoseconds(500));  // long, made first
    s.RequestPointToPoint(8, 0, 2, Nanoseconds(0), Nanoseconds(100));  // short, same transmit side
    CHECK(s.HasRequests());
    std::vector<prism::engine::NicGrant> done;
    std::vector<prism::engine::NicCheck> checks;
    s.Grant(Nanoseconds(0), Nanoseconds(0), &done, &checks);
    CHECK_FALSE(s.HasRequests());
    REQUIRE(done.size() == 2);
    CHECK(done[0].ticket == 8);
    CHECK(done[0].start == Nanoseconds(0));
    CHECK(done[0].end == Nanoseconds(100));
    CHECK(done[1].ticket == 7);
    CHECK(done[1].start == Nanoseconds(100));  // behind the short one on actor 0's transmit side
    CHECK(done[1].end == Nanoseconds(600));
    CHECK(checks.empty());
  }
}

TEST_CASE("nic scheduler: shared NICs report ends only as time passes", "[engine][nic]") {
  using prism::Nanoseconds;
  const prism::engine::EngineWorld w = ThreeNodes();
  const prism::engine::NetworkModel model(prism::engine::LinkFigures{});
  prism::engine::NicScheduler s(w, model, prism::engine::NicModel::kShared);
  s.RequestPointToPoint(1, 0, 1, Nanoseconds(0), Nanoseconds(100));
  s.RequestPointToPoint(2, 0, 2, Nanoseconds(0), Nanoseconds(100));
  std::vector<prism::engine::NicGrant> done;
  std::vector<prism::engine::NicCheck> checks;
  s.Grant(Nanoseconds(0), Nanoseconds(0), &done, &checks);
  CHECK(done.empty());
  REQUIRE(checks.size() == 2);                    // one wake-up per transfer started, the latest counts
  CHECK(checks.back().at == Nanoseconds(200));    // two share actor 0's transmit side: both take twice as long
  const prism::engine::NicCheck stale = checks.front(), latest = checks.back();
  CHECK(stale.generation != latest.generation);
  checks.clear();
  s.FinishBy(Nanoseconds(200), stale.generation, &done, &checks);  // replaced by the latest: nothing
  CHECK(done.empty());
  CHECK(checks.empty());
  s.FinishBy(Nanoseconds(200), latest.generation, &done, &checks);
  REQUIRE(done.size() == 2);
  CHECK(done[0].ticket == 1);
  CHECK(done[0].start == Nanoseconds(0));
  CHECK(done[0].end == Nanoseconds(200));
  CHECK(checks.empty());                          // nothing left in flight: no next wake-up
}

// NicModel::kInterleave: a short collective of one communicator whose member
// finds its transmit side carrying a long ring share of another does not wait
// for that share's end; kQueues and kCalendar make it wait.
namespace {

// Five actors on five nodes at 8 Gbit/s (a byte a nanosecond), no latency:
// communicator 0 a ring of actors 0-3, communicator 1 the pair {0, 4}.
prism::engine::EngineWorld TwoComms() {
  prism::engine::EngineWorld w;
  w.programs.resize(1);
  w.actors.resize(5);
  prism::engine::EngineComm ring, pair;
  ring.members = {0, 1, 2, 3};
  ring.shape = prism::engine::CommShape{4, 4, 1, 1};
  pair.members = {0, 4};
  pair.shape = prism::engine::CommShape{2, 2, 1, 1};
  w.comms = {ring, pair};
  return w;
}

prism::engine::LinkFigures ByteANanosecond() {
  prism::engine::LinkFigures l;
  l.nic_bw = prism::BitsPerSecond(8'000'000'000);
  l.nic_count = 1;
  l.intra_bw = prism::BitsPerSecond(8'000'000'000);
  return l;
}

prism::engine::OpInfo AllGather(uint64_t bytes) {
  prism::engine::OpInfo op;
  op.kind = prism::engine::OpKind::kCollective;
  op.collective = prism::graph::ALLGATHER;
  op.algorithm = prism::graph::ALGORITHM_RING;
  op.bytes = prism::Bytes(bytes);
  return op;
}

// The end of a `pair_bytes` all-gather on communicator 1 ready at 0.1 ms,
// granted after a 4 MB all-gather on communicator 0 took actor 0's transmit
// side at 0 (3 ms of wire in 3 ring steps of 1 ms); then when a 1 us send
// from actor 0, ready at 0.1 ms, starts.
std::pair<int64_t, int64_t> PairAfterRing(prism::engine::NicModel nic, uint64_t pair_bytes) {
  using prism::Nanoseconds;
  const prism::engine::EngineWorld w = TwoComms();
  const prism::engine::NetworkModel model(ByteANanosecond());
  const prism::engine::OpInfo ring_op = AllGather(4'000'000), pair_op = AllGather(pair_bytes);
  REQUIRE(model.RingWireTime(prism::graph::ALLGATHER, ring_op.bytes, w.comms[0].shape) == Nanoseconds(3'000'000));
  prism::engine::NicScheduler s(w, model, nic);
  std::vector<prism::engine::NicGrant> done;
  std::vector<prism::engine::NicCheck> checks;
  s.RequestCollective(1, 0, ring_op, Nanoseconds(0), Nanoseconds(3'000'000));
  s.Grant(Nanoseconds(0), Nanoseconds(0), &done, &checks);
  REQUIRE(done.size() == 1);
  CHECK(done[0].end == Nanoseconds(3'000'000));
  const Nanoseconds wire = model.RingWireTime(prism::graph::ALLGATHER, pair_op.bytes, w.comms[1].shape);
  s.RequestCollective(2, 1, pair_op, Nanoseconds(100'000), wire);
  s.Grant(Nanoseconds(100'000), Nanoseconds(100'000), &done, &checks);
  REQUIRE(done.size() == 2);  // known at its grant, as a hybrid run needs
  CHECK(done[1].ticket == 2);
  s.RequestPointToPoint(3, 0, 4, Nanoseconds(100'000), Nanoseconds(1'000));
  s.Grant(Nanoseconds(100'000), Nanoseconds(100'000), &done, &checks);
  REQUIRE(done.size() == 3);
  return {done[1].end.count(), done[2].start.count()};
}

}  // namespace

TEST_CASE("nic scheduler, interleave: a short collective shares a NIC another communicator's ring holds",
          "[engine][nic]") {
  using prism::engine::NicModel;
  // 0.2 ms of wire (400 kB over two members). Queued whole behind the ring's
  // share (and under the calendar): it leaves at 3.2 ms.
  CHECK(PairAfterRing(NicModel::kQueues, 400'000).first == 3'200'000);
  CHECK(PairAfterRing(NicModel::kCalendar, 400'000).first == 3'200'000);
  // Interleaved: behind the ring's step in progress (it ends at 1 ms), then
  // at half the rate while the ring's 2 ms left go on: 0.4 ms, out at 1.4 ms.
  const auto [pair_end, send_start] = PairAfterRing(NicModel::kInterleave, 400'000);
  CHECK(pair_end == 1'400'000);
  // A send posted then goes between the ring's steps: behind the step in
  // progress (1 ms), then at half the rate: it starts at 1.001 ms (its 1 us
  // of wire takes 2 us shared), under the queues too; under the calendar it
  // waits for both shares.
  CHECK(send_start == 1'001'000);
  CHECK(PairAfterRing(NicModel::kQueues, 400'000).second == 1'001'000);
  CHECK(PairAfterRing(NicModel::kCalendar, 400'000).second == 3'200'000);
  // 1.5 ms of wire: 1 ms of it goes while the ring's 2 ms are shared, the
  // other 0.5 ms alone after the ring: out at 3.5 ms (queued: 4.5 ms).
  CHECK(PairAfterRing(NicModel::kQueues, 3'000'000).first == 4'500'000);
  CHECK(PairAfterRing(NicModel::kInterleave, 3'000'000).first == 3'500'000);
}

TEST_CASE("nic scheduler, turns: a short collective shares a NIC from its ready time, not after a ring step",
          "[engine][nic]") {
  using prism::engine::NicModel;
  // The same as interleave, without the ring's step in progress first: from
  // 0.1 ms at half the rate, 0.2 ms of wire out at 0.5 ms; the send starts
  // at 0.101 ms (1 us of wire, 2 us shared).
  const auto [pair_end, send_start] = PairAfterRing(NicModel::kTurns, 400'000);
  CHECK(pair_end == 500'000);
  CHECK(send_start == 101'000);
  // 1.5 ms of wire: 1.45 ms of it shares the ring's 2.9 ms left, the other
  // 0.05 ms goes alone after the ring: out at 3.05 ms.
  CHECK(PairAfterRing(NicModel::kTurns, 3'000'000).first == 3'050'000);
}

// Grants, at one instant (0), the requests `make` makes on a scheduler of
// TwoComms under `nic`, tickets 1 and 2: {ticket 2's end, ticket 1's end}.
template <typename Make>
std::pair<int64_t, int64_t> EndsAtOneInstant(prism::engine::NicModel nic, Make make) {
  const prism::engine::EngineWorld w = TwoComms();
  const prism::engine::NetworkModel model(ByteANanosecond());
  prism::engine::NicScheduler s(w, model, nic);
  std::vector<prism::engine::NicGrant> done;
  std::vector<prism::engine::NicCheck> checks;
  make(s);
  s.Grant(prism::Nanoseconds(0), prism::Nanoseconds(0), &done, &checks);
  REQUIRE(done.size() == 2);
  int64_t second_end = 0, first_end = 0;
  for (const auto& g : done) (g.ticket == 2 ? second_end : first_end) = g.end.count();
  return {second_end, first_end};
}

// A 400 kB all-gather of the pair (0.2 ms of wire) and the ring's 4 MB one
// (3 ms) made ready at one instant on actor 0's transmit side: {pair end,
// ring end}.
std::pair<int64_t, int64_t> PairBesideRing(prism::engine::NicModel nic) {
  using prism::Nanoseconds;
  const prism::engine::OpInfo ring_op = AllGather(4'000'000), pair_op = AllGather(400'000);
  return EndsAtOneInstant(nic, [&](prism::engine::NicScheduler& s) {
    s.RequestCollective(1, 0, ring_op, Nanoseconds(0), Nanoseconds(3'000'000));
    s.RequestCollective(2, 1, pair_op, Nanoseconds(0), Nanoseconds(200'000));
  });
}

TEST_CASE("nic scheduler, turns: of two transfers ready at one instant the shorter takes the NIC in turn "
          "with the longer, and the queues send it whole first",
          "[engine][nic]") {
  using prism::engine::NicModel;
  // Queues (and interleave): shortest first, the pair alone (0.2 ms), the
  // ring's share behind it on actor 0 (out at 3.2 ms).
  CHECK(PairBesideRing(NicModel::kQueues) == std::pair<int64_t, int64_t>{200'000, 3'200'000});
  CHECK(PairBesideRing(NicModel::kInterleave) == std::pair<int64_t, int64_t>{200'000, 3'200'000});
  // Turns: longest first, so the pair finds the ring's share and goes at
  // half the rate (0.4 ms); the ring keeps its 3 ms (no grant's end moves).
  CHECK(PairBesideRing(NicModel::kTurns) == std::pair<int64_t, int64_t>{400'000, 3'000'000});
}

// A 0.1 ms send from actor 0 to 4 beside (a) the ring's 4 MB all-gather,
// (b) a 1 ms send from actor 0 to 1, all made ready at 0: {the short send's
// end, the other's end}.
std::pair<int64_t, int64_t> SendBeside(prism::engine::NicModel nic, bool beside_ring) {
  using prism::Nanoseconds;
  const prism::engine::OpInfo ring_op = AllGather(4'000'000);
  return EndsAtOneInstant(nic, [&](prism::engine::NicScheduler& s) {
    if (beside_ring) {
      s.RequestCollective(1, 0, ring_op, Nanoseconds(0), Nanoseconds(3'000'000));
    } else {
      s.RequestPointToPoint(1, 0, 1, Nanoseconds(0), Nanoseconds(1'000'000));
    }
    s.RequestPointToPoint(2, 0, 4, Nanoseconds(0), Nanoseconds(100'000));
  });
}

TEST_CASE("nic scheduler, turns: a send made beside a ring share takes the NIC in turn with it, and of two "
          "sends the shorter still goes first",
          "[engine][nic]") {
  using prism::engine::NicModel;
  using Ends = std::pair<int64_t, int64_t>;
  // Beside the ring: under the queues the send goes whole first (out at 0.1
  // ms) and the ring's share after it; under turns the ring's share is
  // granted first and the send, at half the rate, is out at 0.2 ms.
  CHECK(SendBeside(NicModel::kQueues, true) == Ends{100'000, 3'100'000});
  CHECK(SendBeside(NicModel::kTurns, true) == Ends{200'000, 3'000'000});
  // Two sends (no ring share to take turns with): shortest first under
  // every model, the long one behind it.
  CHECK(SendBeside(NicModel::kQueues, false) == Ends{100'000, 1'100'000});
  CHECK(SendBeside(NicModel::kTurns, false) == Ends{100'000, 1'100'000});
}

// The dp8 ground truth's case (TP1 PP2 DP8, 2026-12-04): a pipeline send
// posted while its rank's NIC carries a DP reduce-scatter's share. Without
// per-operation CUDA events the truth ran 529.9 ms an iteration, as if the
// send went between the reduce-scatter's ring steps (the model: 526.9 ms);
// queued behind the whole share, the model gave 600.7 ms.
TEST_CASE("nic scheduler, queues and interleave: a send behind a ring share goes between its steps",
          "[engine][nic]") {
  using prism::Nanoseconds;
  using prism::engine::NicModel;
  const prism::engine::EngineWorld w = TwoComms();
  const prism::engine::NetworkModel model(ByteANanosecond());
  const prism::engine::OpInfo ring_op = AllGather(4'000'000);
  // A 0.5 ms send (and a virtual rank's send to a real one: its wire 0.5 ms,
  // delivered 20 us later) from actor 0, ready at 0.1 ms, after the ring's
  // 3 ms share took actor 0's transmit side at 0. Returns the two grants'
  // (start, end).
  auto sends = [&](NicModel nic) {
    prism::engine::NicScheduler s(w, model, nic);
    std::vector<prism::engine::NicGrant> done;
    std::vector<prism::engine::NicCheck> checks;
    s.RequestCollective(1, 0, ring_op, Nanoseconds(0), Nanoseconds(3'000'000));
    s.Grant(Nanoseconds(0), Nanoseconds(0), &done, &checks);
    s.RequestPointToPoint(2, 0, 4, Nanoseconds(100'000), Nanoseconds(500'000));
    s.Grant(Nanoseconds(100'000), Nanoseconds(100'000), &done, &checks);
    // A send forecast asks first when such a send would start: its grant's start.
    const Nanoseconds forecast = s.SendStart(0, Nanoseconds(100'000), Nanoseconds(500'000));
    s.RequestSend(3, 0, Nanoseconds(100'000), Nanoseconds(500'000), Nanoseconds(520'000));
    s.Grant(Nanoseconds(100'000), Nanoseconds(100'000), &done, &checks);
    REQUIRE(done.size() == 3);
    CHECK(forecast == done[2].start);
    return std::vector<int64_t>{done[1].start.count(), done[1].end.count(), done[2].start.count(),
                                done[2].end.count()};
  };
  // Under the calendar: after the share (3 ms), then the second after the first.
  CHECK(sends(NicModel::kCalendar) == std::vector<int64_t>{3'000'000, 3'500'000, 3'500'000, 4'020'000});
  // Queues and interleave: behind the ring's step in progress (it ends at
  // 1 ms), then at half the rate while the ring's 2 ms left go on: out at
  // 2 ms, so it counts as started at 1.5 ms. The second finds the same
  // share: the same (two transfers beside one share are not split three ways).
  CHECK(sends(NicModel::kQueues) == std::vector<int64_t>{1'500'000, 2'000'000, 1'500'000, 2'020'000});
  CHECK(sends(NicModel::kInterleave) == std::vector<int64_t>{1'500'000, 2'000'000, 1'500'000, 2'020'000});
}

TEST_CASE("nic scheduler, interleave: a collective of the same communicator still queues whole", "[engine][nic]") {
  using prism::Nanoseconds;
  const prism::engine::EngineWorld w = TwoComms();
  const prism::engine::NetworkModel model(ByteANanosecond());
  const prism::engine::OpInfo op = AllGather(4'000'000);
  prism::engine::NicScheduler s(w, model, prism::engine::NicModel::kInterleave);
  std::vector<prism::engine::NicGrant> done;
  std::vector<prism::engine::NicCheck> checks;
  s.RequestCollective(1, 0, op, Nanoseconds(0), Nanoseconds(3'000'000));
  s.Grant(Nanoseconds(0), Nanoseconds(0), &done, &checks);
  s.RequestCollective(2, 0, op, Nanoseconds(100'000), Nanoseconds(3'000'000));
  s.Grant(Nanoseconds(100'000), Nanoseconds(100'000), &done, &checks);
  REQUIRE(done.size() == 2);
  CHECK(done[1].end == Nanoseconds(6'000'000));  // NCCL runs one communicator's operations in turn
}
