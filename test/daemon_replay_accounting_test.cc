// The replay accounting's sums over op ends (ReplayStats::compute_ns, by_op,
// by_comm) are 128-bit: weighted by the ranks an actor stands for, they pass
// 2^64 at scale. They are kept as two 64-bit words while the run goes
// (replay_accounting.h): the low word's carry and the weighted products must
// reach the high word.
#include <catch2/catch.hpp>

#include <cstdint>

#include "daemon/engine/replay_accounting.h"

namespace {

using prism::Bytes;
using prism::Nanoseconds;
using prism::engine::OpInfo;
using prism::engine::OpKind;

constexpr __int128 kTwo64 = static_cast<__int128>(1) << 64;

// One program (a compute op and a send on comm slot 0) played by two actors:
// actor 0 stands for one rank, actor 1 for 2^40.
prism::engine::EngineWorld TwoActors() {
  prism::engine::EngineWorld w;
  prism::engine::ProgramInfo p;
  p.streams = 1;
  OpInfo compute;
  OpInfo send;
  send.kind = OpKind::kSend;
  send.bytes = Bytes(uint64_t{1} << 63);
  p.ops = {compute, send};
  p.stream_ops = {{0, 1}};
  w.programs.push_back(p);
  prism::engine::EngineComm comm;
  comm.members = {0, 1};
  comm.kind = prism::graph::COMM_KIND_DP;
  w.comms.push_back(comm);
  for (uint64_t weight : {uint64_t{1}, uint64_t{1} << 40}) {
    prism::engine::Actor a;
    a.weight = weight;
    a.slot_comm = {0};
    a.slot_canonical = {0};
    w.actors.push_back(a);
  }
  return w;
}

}  // namespace

TEST_CASE("the accounting's 128-bit sums carry past 2^64, one rank and weighted", "[daemon][engine]") {
  const prism::engine::EngineWorld world = TwoActors();
  const OpInfo& compute = world.programs[0].ops[0];
  const OpInfo& send = world.programs[0].ops[1];
  prism::engine::ReplayAccounting acc(world, 1);
  const Nanoseconds start(0), long_end((int64_t{1} << 62) - 1);
  // Five compute ops of 2^62 - 1 ns on the one-rank actor: past 2^64 in the low word.
  for (int i = 0; i < 5; ++i) {
    acc.Started(0, compute, start);
    acc.Ended(0, compute, start, long_end);
  }
  // One of 2^30 ns on the 2^40-rank actor: 2^70, a weighted product.
  acc.Started(1, compute, start);
  acc.Ended(1, compute, start, Nanoseconds(int64_t{1} << 30));
  // Two sends of 2^63 bytes on the one-rank actor: 2^64 bytes.
  for (int i = 0; i < 2; ++i) {
    acc.Started(0, send, start);
    acc.Ended(0, send, start, Nanoseconds(10));
  }
  const prism::engine::ReplayStats& stats = acc.Close();
  CHECK(stats.compute_ns == 5 * static_cast<__int128>((int64_t{1} << 62) - 1) + (static_cast<__int128>(1) << 70));
  const prism::engine::KindTotals& sends = stats.by_op[prism::engine::kOpKindSend];
  CHECK(sends.bytes == kTwo64);
  CHECK(sends.ops == 2);
  CHECK(sends.time_ns == 20);
  CHECK(stats.by_comm[prism::graph::COMM_KIND_DP].bytes == kTwo64);
}
