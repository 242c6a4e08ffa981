// prismd --follow (docs/capture.md): no program of the real ranks, so every
// operation a real rank issues with virtual peers gets an on-time schedule,
// and none is a divergence.
#include <catch2/catch.hpp>

#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "daemon/bootstrap/bootstrap_plan.h"
#include "daemon/bootstrap/split_source.h"
#include "daemon/hybrid/follow_capture.h"
#include "daemon/hybrid/follow_graph.h"
#include "proto/graph_validate.h"
#include "graphgen/capture_recording.h"
#include "graphgen/extrapolate.h"
#include "test/graphgen_test_util.h"
#include "graphgen/fidelity_graph.h"
#include "graphgen/split_color.h"
#include "test/hybrid_harness.h"

namespace g = prism::graph;
using prism::testing::AddStarted;
using prism::testing::HybridHarness;
using prism::testing::Key;
using prism::testing::RealtimeNow;

namespace {

g::Graph WorldOf(uint32_t world) {
  prism::graphgen::FidelitySpec s;
  s.name = "w";
  s.kind = "sweep";
  s.world = world;
  s.ops = {"allreduce"};
  s.sizes = {1 << 20};
  s.iterations = 1;
  s.warmup = 0;
  s.link_gbps = 10;
  s.link_latency_us = 10;
  return *prism::graphgen::GenerateFidelityGraph(s);
}

}  // namespace

TEST_CASE("follow: the graph keeps only the world and the cluster", "[hybrid][follow]") {
  const g::Graph full = WorldOf(8);
  auto f = prism::daemon::FollowGraph(full);
  REQUIRE(f.ok());
  CHECK(f->ranks_size() == 8);
  CHECK(f->communicators_size() == 1);
  CHECK(f->programs_size() == 1);
  CHECK(f->cluster().nic().bandwidth_bps() == full.cluster().nic().bandwidth_bps());
  g::Graph no_world = full;
  no_world.mutable_communicators(0)->mutable_members()->RemoveLast();
  auto refused = prism::daemon::FollowGraph(no_world);
  REQUIRE_FALSE(refused.ok());
  CHECK(std::string(refused.status().message()).find("must be the world") != std::string::npos);
}

TEST_CASE("follow: every operation with virtual peers is on time, none a divergence", "[hybrid][follow]") {
  HybridHarness h(*prism::daemon::FollowGraph(WorldOf(8)), {0}, prism::FromMilliseconds(20), prism::Nanoseconds(0),
                  /*follow=*/true);
  constexpr uint64_t kWorld = 0xabc, kTp = 0xdef;
  h.Communicator(kWorld, 0, {0, 1, 2, 3, 4, 5, 6, 7});
  h.Communicator(kTp, 1, {0, 1, 2, 3});  // a group the bootstrap followed (no graph communicator)
  prism::rpc::EventBatch b;
  const int64_t t = RealtimeNow();
  AddStarted(&b, 1, Key(kTp, prism::rpc::OP_ALL_REDUCE, 0), 0, 4, 1 << 20, t);
  AddStarted(&b, 2, Key(kWorld, prism::rpc::OP_ALL_GATHER, 0), 0, 8, 8 << 20, t);
  AddStarted(&b, 3, Key(kWorld, prism::rpc::OP_RECV, 0, 4), 0, 8, 1 << 20, t, false);
  h.Feed(1, b);
  for (const auto& key : {Key(kTp, prism::rpc::OP_ALL_REDUCE, 0), Key(kWorld, prism::rpc::OP_ALL_GATHER, 0),
                          Key(kWorld, prism::rpc::OP_RECV, 0, 4)}) {
    auto s = h.WaitSchedule(key, std::chrono::seconds(5));
    REQUIRE(s.has_value());
    CHECK(s->unmatched());
    CHECK(static_cast<int64_t>(s->ready_ns()) >= t);
  }
  auto r = h.Stop();
  CHECK(h.scheduler().counters().ops_unmatched == 3);
  CHECK(h.scheduler().counters().divergences == 0);
}

namespace {

using prism::daemon::RecordedLine;

// A --follow recording of a TP2 DP4 PP2 program on 16 ranks (rank = tp +
// 2*(dp + 4*pp)), real ranks 0 and 8, made the way prismd records: the
// world and the groups the bootstrap followed (named group<k>[first], k its
// new_group number: tp groups #1-8, dp #9-12, pp #13-20), then the plugins'
// reports. Each iteration: 1 ms of compute before every operation.
// `embedding`: as Megatron does, each pipeline group is followed by an
// embedding group of the same ranks (pp[i] is new_group #13+2i, embd[i]
// #14+2i), and both stages all-reduce on it once per iteration.
// A follow recording of the world of `world` ranks, with no group yet.
prism::daemon::Recording WorldRecording(uint32_t world) {
  prism::daemon::Recording rec;
  rec.graph = "follow:world";
  RecordedLine l{RecordedLine::kCommunicator};
  l.comm.comm_hash = 1000;
  l.comm.graph_comm = 0;
  l.comm.name = "world";
  for (uint32_t r = 0; r < world; ++r) l.comm.members.push_back(r);
  rec.lines.push_back(l);
  return rec;
}

// The capture's recordings through their file form, extrapolated to the world.
absl::StatusOr<prism::graphgen::Extrapolation> ExtrapolateCapture(const prism::daemon::FollowCapture& capture) {
  std::vector<prism::graphgen::Recording> parsed;
  for (const auto& r : capture.recordings) {
    auto p = prism::graphgen::ParseRecording(prism::graphgen::EncodeRecording(r), "test");
    if (!p.ok()) return p.status();
    parsed.push_back(*p);
  }
  return prism::graphgen::Extrapolate(parsed, prism::graphgen::ExtrapolationOptions{});
}

prism::daemon::Recording FollowRecording(int iterations, bool embedding = false) {
  prism::daemon::Recording rec;
  rec.graph = "follow:w";
  rec.real_ranks = {0, 8};
  const auto comm = [&](uint64_t hash, int64_t id, std::string name, std::vector<uint32_t> members) {
    prism::testing::RecordCommunicator(&rec, hash, id, std::move(name), std::move(members));
  };
  comm(100, 0, "world", {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15});
  comm(101, 1, "group1[0]", {0, 1});
  comm(102, 2, "group5[8]", {8, 9});
  comm(103, 3, "group9[0]", {0, 2, 4, 6});
  comm(104, 4, "group11[8]", {8, 10, 12, 14});
  comm(105, 5, "group13[0]", {0, 8});
  if (embedding) comm(106, 6, "group14[0]", {0, 8});
  struct Call { uint64_t hash; prism::rpc::OpKind kind; int32_t rank, size, peer; uint64_t bytes; };
  const std::vector<Call> stage0 = {{101, prism::rpc::OP_ALL_REDUCE, 0, 2, -1, 1 << 20},
                                    {105, prism::rpc::OP_SEND, 0, 2, 1, 1 << 18},
                                    {103, prism::rpc::OP_REDUCE_SCATTER, 0, 4, -1, 1 << 20},
                                    {103, prism::rpc::OP_ALL_GATHER, 0, 4, -1, 1 << 20}};
  const std::vector<Call> stage1 = {{105, prism::rpc::OP_RECV, 1, 2, 0, 1 << 18},
                                    {102, prism::rpc::OP_ALL_REDUCE, 0, 2, -1, 1 << 20},
                                    {104, prism::rpc::OP_REDUCE_SCATTER, 0, 4, -1, 1 << 20},
                                    {104, prism::rpc::OP_ALL_GATHER, 0, 4, -1, 1 << 20}};
  for (auto [session, calls] : {std::make_pair(uint64_t{1}, stage0), std::make_pair(uint64_t{2}, stage1)}) {
    if (embedding) calls.push_back({106, prism::rpc::OP_ALL_REDUCE, session == 1 ? 0 : 1, 2, -1, 1 << 16});
    int64_t t = 1'000'000'000;
    uint64_t id = 0;
    std::map<std::pair<uint64_t, int>, uint64_t> seq;
    std::vector<Call> all;
    if (session == 1) all.push_back({100, prism::rpc::OP_ALL_REDUCE, 0, 16, -1, 4});  // a warm-up barrier
    for (int it = 0; it < iterations; ++it) all.insert(all.end(), calls.begin(), calls.end());
    for (const Call& c : all) {
      t += 1'000'000;  // compute
      prism::rpc::EventBatch b;
      AddStarted(&b, ++id, Key(c.hash, c.kind, seq[{c.hash, c.kind}]++, c.peer), c.rank, c.size, c.bytes, t);
      prism::testing::AddFinished(&b, id, c.kind == prism::rpc::OP_RECV ? 0 : t, t + 200'000);
      t += 200'000;
      RecordedLine l{RecordedLine::kEvents};
      l.session = session;
      l.events = b;
      rec.lines.push_back(l);
    }
  }
  return rec;
}

std::vector<std::string> OpsOf(const g::Graph& graph, uint32_t rank, bool with_compute) {
  std::vector<std::string> out;
  const g::Rank& r = graph.ranks(static_cast<int>(rank));
  for (const g::Op& op : graph.programs(static_cast<int>(r.program())).ops()) {
    if (op.has_compute()) {
      if (with_compute) out.push_back(absl::StrCat("compute ", op.compute().duration_ns()));
    } else if (op.has_collective()) {
      const auto& c = graph.communicators(static_cast<int>(r.comm_slots(static_cast<int>(op.collective().comm_slot()))));
      out.push_back(absl::StrCat(g::CollectiveKind_Name(op.collective().kind()), " ", op.collective().bytes(), " on ",
                                 c.members_size(), " ranks incl. ",
                                 std::count(c.members().begin(), c.members().end(), rank)));
    } else if (op.has_send() || op.has_recv()) {
      out.push_back(op.has_send() ? "send" : "recv");
    }
  }
  return out;
}

}  // namespace

TEST_CASE("follow: a --follow recording becomes capture recordings that extrapolate to every rank of the world",
          "[hybrid][follow][capture]") {
  auto capture = prism::daemon::CaptureFromFollow(FollowRecording(4), 1);
  REQUIRE(capture.ok());
  REQUIRE(capture->recordings.size() == 2);
  for (const auto& line : capture->summary) UNSCOPED_INFO(line);
  const auto& r0 = capture->recordings[0];
  CHECK(r0.header.rank() == 0);
  CHECK(r0.header.world_size() == 16);
  CHECK(r0.comms.size() == 21);  // the world, 8 tp, 4 dp, 8 pp groups: completed from the real ranks' own
  CHECK(r0.ops.size() == 8);     // the warm-up barrier is left out; compute before each of 4 operations
  CHECK(r0.ops[0].compute().duration_ns() == 1'000'000);
  // ... of the iteration, and kept as the rank's start-up (a run on the graph matches it).
  REQUIRE(r0.startup_ops.size() == 1);
  CHECK(r0.startup_ops[0].collective().kind() == g::ALLREDUCE);
  CHECK(r0.startup_ops[0].collective().comm_slot() == 0);  // the world
  CHECK(r0.startup_ops[0].collective().bytes() == 4);
  CHECK(capture->recordings[1].startup_ops.empty());
  // Written and read back in the recording format, then extrapolated.
  std::vector<prism::graphgen::Recording> parsed;
  for (const auto& r : capture->recordings) {
    auto p = prism::graphgen::ParseRecording(prism::graphgen::EncodeRecording(r), "test");
    REQUIRE(p.ok());
    parsed.push_back(*p);
  }
  auto x = prism::graphgen::Extrapolate(parsed, prism::graphgen::ExtrapolationOptions{});
  REQUIRE(x.ok());
  UNSCOPED_INFO(x->Summary());
  const g::Graph& graph = x->graph;
  CHECK(graph.ranks_size() == 16);
  CHECK(graph.programs_size() == 2);
  for (uint32_t r = 0; r < 16; ++r) {
    INFO("rank " << r);
    CHECK(OpsOf(graph, r, true) == OpsOf(graph, r < 8 ? 0 : 8, true));
    CHECK(OpsOf(graph, r, false) == std::vector<std::string>(OpsOf(graph, r < 8 ? 0 : 8, false)));
  }
  CHECK(OpsOf(graph, 5, false) == std::vector<std::string>{"ALLREDUCE 1048576 on 2 ranks incl. 1", "send",
                                                           "REDUCESCATTER 4194304 on 4 ranks incl. 1",
                                                           "ALLGATHER 4194304 on 4 ranks incl. 1"});
  // Stage 0's program carries rank 0's start-up barrier, on its world slot; stage 1's recorded none.
  const g::Program& stage0 = graph.programs(static_cast<int>(graph.ranks(5).program()));
  REQUIRE(stage0.startup_ops_size() == 1);
  const uint32_t slot = stage0.startup_ops(0).collective().comm_slot();
  CHECK(graph.communicators(static_cast<int>(graph.ranks(5).comm_slots(static_cast<int>(slot)))).members_size() == 16);
  CHECK(graph.programs(static_cast<int>(graph.ranks(9).program())).startup_ops_size() == 0);
  CHECK(prism::graph::ValidateGraph(graph).ok());
}

TEST_CASE("follow: groups made interleaved (pipeline and embedding groups of the same ranks) keep their numbers",
          "[hybrid][follow][capture]") {
  auto capture = prism::daemon::CaptureFromFollow(FollowRecording(4, /*embedding=*/true), 1);
  REQUIRE(capture.ok());
  const auto& comms = capture->recordings[0].comms;
  REQUIRE(comms.size() == 29);  // the world, 8 tp, 4 dp, 8 pp and 8 embedding groups
  for (int id : {13, 14}) CHECK(std::vector<uint32_t>(comms[id].members().begin(), comms[id].members().end()) ==
                                std::vector<uint32_t>{0, 8});
  for (int id : {15, 16}) CHECK(std::vector<uint32_t>(comms[id].members().begin(), comms[id].members().end()) ==
                                std::vector<uint32_t>{1, 9});
  CHECK(capture->recordings[0].ops.back().collective().comm_slot() == 14);
}

TEST_CASE("follow: an operation that reports no end (real peers, no plugin transfer) measures no gap after it",
          "[hybrid][follow][capture]") {
  auto rec = FollowRecording(4);
  for (auto& l : rec.lines) {
    if (l.kind != RecordedLine::kEvents || l.events.events(0).op_started().key().comm_hash() != 105) continue;
    l.events.mutable_events()->RemoveLast();  // the send to real rank 8 (and 8's receive): no OpFinished
  }
  auto capture = prism::daemon::CaptureFromFollow(rec, 1);
  REQUIRE(capture.ok());
  for (const auto& r : capture->recordings) {
    INFO("rank " << r.header.rank());
    int computes = 0;
    for (const auto& op : r.ops) {
      if (!op.has_compute()) continue;
      ++computes;
      CHECK(op.compute().duration_ns() == 1'000'000);
    }
    CHECK(computes == 3);  // not after the send/receive
  }
}

TEST_CASE("follow: a capture refuses groups made out of family order, naming the group", "[hybrid][follow][capture]") {
  auto rec = FollowRecording(4);
  for (auto& l : rec.lines)
    if (l.kind == RecordedLine::kCommunicator && l.comm.name == "group9[0]") l.comm.name = "group2[0]";
  auto capture = prism::daemon::CaptureFromFollow(rec, 1);
  REQUIRE_FALSE(capture.ok());
  CHECK(std::string(capture.status().message()).find("another order") != std::string::npos);
}

TEST_CASE("follow: train_gpt.py's groups at 1024 ranks, followed on ranks 0 and 512, complete to the job file's",
          "[hybrid][follow][capture]") {
  std::ifstream in(std::string(PRISM_EXAMPLES_DIR) + "/train-gpt-1024.yaml");
  std::stringstream yaml;
  yaml << in.rdbuf();
  const g::Graph job = prism::graphgen::testing::GraphOf(yaml.str());
  // What prismd --follow records with real ranks 0 and 512: the world and
  // every group either is in, named by its new_group number (= the job
  // graph's communicator id, world first), and an operation on each.
  prism::daemon::Recording rec;
  rec.graph = "follow:world";
  struct Use { uint32_t rank; uint64_t hash; int32_t comm_rank, size; };
  std::vector<Use> uses;
  for (const g::Communicator& c : job.communicators()) {
    const bool followed = c.id() == 0 || std::count(c.members().begin(), c.members().end(), 0u) ||
                          std::count(c.members().begin(), c.members().end(), 512u);
    if (!followed) continue;
    RecordedLine l{RecordedLine::kCommunicator};
    l.comm.comm_hash = 1000 + c.id();
    l.comm.graph_comm = c.id();
    l.comm.name = c.id() == 0 ? "world" : absl::StrCat("group", c.id(), "[", c.members(0), "]");
    l.comm.members.assign(c.members().begin(), c.members().end());
    rec.lines.push_back(l);
    for (uint32_t rank : {0u, 512u}) {
      const auto at = std::find(c.members().begin(), c.members().end(), rank);
      if (at != c.members().end())
        uses.push_back({rank, 1000 + c.id(), static_cast<int32_t>(at - c.members().begin()), c.members_size()});
    }
  }
  for (int it = 0; it < 3; ++it)
    for (const Use& u : uses) {
      RecordedLine e{RecordedLine::kEvents};
      e.session = u.rank + 1;
      AddStarted(&e.events, 100 * it + u.hash, Key(u.hash, prism::rpc::OP_ALL_REDUCE, it), u.comm_rank, u.size, 4,
                 1000 + it);
      rec.lines.push_back(e);
    }
  auto capture = prism::daemon::CaptureFromFollow(rec, 1);
  INFO(capture.status().message());
  REQUIRE(capture.ok());
  const auto& comms = capture->recordings[0].comms;
  REQUIRE(comms.size() == static_cast<size_t>(job.communicators_size()));
  for (const g::Communicator& c : job.communicators()) {
    INFO("communicator " << c.id() << " (" << c.name() << ")");
    CHECK(std::vector<uint32_t>(comms[c.id()].members().begin(), comms[c.id()].members().end()) ==
          std::vector<uint32_t>(c.members().begin(), c.members().end()));
    if (c.id() > 0) CHECK(comms[c.id()].split().color() == c.split().color());
  }
}

TEST_CASE("follow: TorchTitan FSDP2+TP's DeviceMesh groups at 1024 ranks complete to every group, one role",
          "[hybrid][follow][capture]") {
  // examples/torchtitan/prism_titan.py with TP 8 at 1024 ranks: DeviceMesh makes, with one
  // new_group per group (lowest rank first), the dimensions batch (8 strided groups of 128),
  // tp (128 ranges of 8), loss (the batch sets again), fsdp (again) and tp (again): new_group
  // numbers 1-8, 9-136, 137-144, 145-152, 153-280. prismd --follow sees, on real ranks 0 and
  // 512, the groups they are in.
  constexpr uint32_t kWorld = 1024, kTp = 8;
  struct Family { int first; bool contiguous; };
  const std::vector<Family> families = {{1, false}, {9, true}, {137, false}, {145, false}, {153, true}};
  prism::daemon::Recording rec = WorldRecording(kWorld);
  struct Use { uint32_t rank; uint64_t hash; int32_t comm_rank, size; prism::rpc::OpKind kind; };
  std::vector<Use> uses;
  std::map<int, uint64_t> seen;  // new_group number -> hash
  for (uint32_t rank : {0u, 512u}) {
    for (size_t f = 0; f < families.size(); ++f) {
      std::vector<uint32_t> members;
      int number = 0;
      if (families[f].contiguous) {
        for (uint32_t m = rank / kTp * kTp; m < rank / kTp * kTp + kTp; ++m) members.push_back(m);
        number = families[f].first + static_cast<int>(rank / kTp);
      } else {
        for (uint32_t m = rank % kTp; m < kWorld; m += kTp) members.push_back(m);
        number = families[f].first + static_cast<int>(rank % kTp);
      }
      if (!seen.count(number)) {
        seen[number] = 2000 + static_cast<uint64_t>(number);
        RecordedLine l{RecordedLine::kCommunicator};
        l.comm.comm_hash = seen[number];
        l.comm.graph_comm = number;
        l.comm.name = absl::StrCat("group", number, "[", members.front(), "]");
        l.comm.members = members;
        rec.lines.push_back(l);
      }
      const auto at = std::find(members.begin(), members.end(), rank);
      const auto size = static_cast<int32_t>(members.size());
      const auto pos = static_cast<int32_t>(at - members.begin());
      // batch: token count; tp: activations; loss: three reductions; fsdp: gathers and a scatter
      const std::vector<std::vector<prism::rpc::OpKind>> kinds = {
          {prism::rpc::OP_ALL_REDUCE},
          {prism::rpc::OP_ALL_GATHER, prism::rpc::OP_REDUCE_SCATTER},
          {prism::rpc::OP_ALL_REDUCE, prism::rpc::OP_ALL_REDUCE, prism::rpc::OP_ALL_REDUCE},
          {prism::rpc::OP_ALL_GATHER, prism::rpc::OP_ALL_GATHER, prism::rpc::OP_REDUCE_SCATTER},
          {prism::rpc::OP_ALL_REDUCE}};
      for (auto kind : kinds[f]) uses.push_back({rank, seen[number], pos, size, kind});
    }
  }
  for (int it = 0; it < 3; ++it) {
    std::map<std::tuple<uint32_t, uint64_t, int>, uint64_t> seq;
    for (size_t u = 0; u < uses.size(); ++u) {
      const Use& use = uses[u];
      RecordedLine e{RecordedLine::kEvents};
      e.session = use.rank + 1;
      const uint64_t s = it * 10 + seq[{use.rank, use.hash, use.kind}]++;
      AddStarted(&e.events, 1000 * it + u + 1, Key(use.hash, use.kind, s), use.comm_rank, use.size, 1 << 20,
                 1'000'000 * it + 1000 * static_cast<int64_t>(u));
      rec.lines.push_back(e);
    }
  }
  auto capture = prism::daemon::CaptureFromFollow(rec, 1);
  INFO(capture.status().message());
  REQUIRE(capture.ok());
  for (const auto& line : capture->summary) UNSCOPED_INFO(line);
  const auto& comms = capture->recordings[0].comms;
  REQUIRE(comms.size() == 281u);
  CHECK(std::vector<uint32_t>(comms[9 + 100].members().begin(), comms[9 + 100].members().end()) ==
        std::vector<uint32_t>{800, 801, 802, 803, 804, 805, 806, 807});
  CHECK(comms[145 + 5].members(1) == 13u);
  CHECK(comms[145 + 5].split().color() == prism::graphgen::PyTorchSplitColor(std::vector<uint32_t>(
                                              comms[150].members().begin(), comms[150].members().end())));
  auto x = ExtrapolateCapture(*capture);
  INFO(x.status().message());
  REQUIRE(x.ok());
  CHECK(x->graph.programs_size() == 1);  // every rank has the same role
  CHECK(OpsOf(x->graph, 5, false) == OpsOf(x->graph, 0, false));
  CHECK(OpsOf(x->graph, 5, false).front() == "ALLREDUCE 1048576 on 128 ranks incl. 1");
}

// The same mesh made with DeviceMesh's own split_group (prism_titan.py --mesh-split-group): one split
// per dimension, every group of it from that one call, the group each real rank announced (bootstrap
// name "group<k>[<lowest>] split_group"). The capture keeps each call one: its groups one after another,
// colored by their lowest rank, SplitCreation.same_call on all but the first.
TEST_CASE("follow: DeviceMesh's split_group calls complete to every group, each call's groups together",
          "[hybrid][follow][capture]") {
  constexpr uint32_t kWorld = 1024, kTp = 8;
  const std::vector<bool> contiguous = {false, true, false, false, true};  // batch, tp, loss, fsdp, tp
  prism::daemon::Recording rec = WorldRecording(kWorld);
  struct Use { uint32_t rank; uint64_t hash; int32_t comm_rank, size; };
  std::vector<Use> uses;
  std::map<std::pair<size_t, uint32_t>, uint64_t> hashes;  // (call, lowest rank) -> hash
  for (uint32_t rank : {0u, 517u}) {
    for (size_t call = 0; call < contiguous.size(); ++call) {
      std::vector<uint32_t> members;
      if (contiguous[call]) {
        for (uint32_t m = rank / kTp * kTp; m < rank / kTp * kTp + kTp; ++m) members.push_back(m);
      } else {
        for (uint32_t m = rank % kTp; m < kWorld; m += kTp) members.push_back(m);
      }
      auto [it, added] = hashes.emplace(std::make_pair(call, members.front()), 3000 + hashes.size());
      if (added) {
        RecordedLine l{RecordedLine::kCommunicator};
        l.comm.comm_hash = it->second;
        l.comm.graph_comm = static_cast<int64_t>(100 + hashes.size());
        l.comm.name = absl::StrCat("group", call + 1, "[", members.front(), "]", prism::bootstrap::kSplitGroupSuffix);
        l.comm.members = members;
        rec.lines.push_back(l);
      }
      const auto at = std::find(members.begin(), members.end(), rank);
      uses.push_back({rank, it->second, static_cast<int32_t>(at - members.begin()),
                      static_cast<int32_t>(members.size())});
    }
  }
  for (int iteration = 0; iteration < 3; ++iteration) {
    std::map<std::pair<uint32_t, uint64_t>, uint64_t> seq;
    for (size_t u = 0; u < uses.size(); ++u) {
      const Use& use = uses[u];
      RecordedLine e{RecordedLine::kEvents};
      e.session = use.rank + 1;
      const uint64_t sq = iteration * 10 + seq[{use.rank, use.hash}]++;
      AddStarted(&e.events, 1000 * iteration + u + 1, Key(use.hash, prism::rpc::OP_ALL_REDUCE, sq), use.comm_rank,
                 use.size, 1 << 20, 1'000'000 * iteration + 1000 * static_cast<int64_t>(u));
      rec.lines.push_back(e);
    }
  }
  auto capture = prism::daemon::CaptureFromFollow(rec, 1);
  INFO(capture.status().message());
  REQUIRE(capture.ok());
  const auto& comms = capture->recordings[0].comms;
  REQUIRE(comms.size() == 1u + 8 + 128 + 8 + 8 + 128);
  // Calls in order, each call's groups together by lowest rank: batch 1-8, tp 9-136, loss 137-144,
  // fsdp 145-152, tp 153-280.
  const auto members = [&](size_t id) { return std::vector<uint32_t>(comms[id].members().begin(), comms[id].members().end()); };
  CHECK(members(9 + 64) == std::vector<uint32_t>{512, 513, 514, 515, 516, 517, 518, 519});
  CHECK(members(145 + 5).front() == 5u);
  CHECK(members(145 + 5)[1] == 13u);
  for (size_t id = 1; id < comms.size(); ++id) {
    INFO("communicator " << id);
    CHECK(comms[id].split().parent() == 0u);
    CHECK(comms[id].split().color() == static_cast<int32_t>(comms[id].members(0)));  // the lowest rank
    const bool first_of_call = id == 1 || id == 9 || id == 137 || id == 145 || id == 153;
    CHECK(comms[id].split().same_call() == !first_of_call);
  }
  // Rank 517's operations are on its own groups: tp[64] (id 73) and the strided sets of 5.
  std::set<uint32_t> used;
  for (const auto& r : capture->recordings)
    if (r.header.rank() == 517)
      for (const auto& op : r.ops)
        if (op.has_collective()) used.insert(op.collective().comm_slot());
  CHECK(used.count(73) == 1);
  CHECK(used.count(150) == 1);
  // Extrapolated, the graph's bootstrap plan has one split call per mesh dimension, as the program makes.
  auto x = ExtrapolateCapture(*capture);
  INFO(x.status().message());
  REQUIRE(x.ok());
  auto plan = prism::bootstrap::PlanFromGraph(x->graph, {5});
  INFO(plan.status().message());
  REQUIRE(plan.ok());
  std::vector<size_t> children;
  for (const auto& call : plan->split_calls) children.push_back(call.children.size());
  CHECK(children == std::vector<size_t>{8, 128, 8, 8, 128});
}

TEST_CASE("own pace: a follow capture gives each collective the real rank's mean time, not when another real "
          "rank shares it or a neighbour overlapped it",
          "[hybrid][follow][capture][own_pace]") {
  // Two real ranks (0, 8), 4 iterations of: an all-reduce on {0, 1}, a send to 8, a reduce-scatter and
  // an all-gather on {0, 2, 4, 6}, and an all-reduce on {0, 8} (both real); each op 200 us.
  prism::daemon::Recording rec = FollowRecording(4, /*embedding=*/true);
  // Rank 0's operation of `kind` in iteration `it` ends `ns` later.
  const auto stretch = [&](prism::rpc::OpKind kind, int it, int64_t ns) {
    int seen = 0;
    for (auto& l : rec.lines) {
      if (l.kind != prism::daemon::RecordedLine::kEvents || l.session != 1) continue;
      auto* e = l.events.mutable_events();
      if (e->size() < 2 || e->Get(0).op_started().key().kind() != kind || seen++ != it) continue;
      auto* f = e->Mutable(1)->mutable_op_finished();
      f->set_end_ns(f->end_ns() + static_cast<uint64_t>(ns));
    }
  };
  const auto paces = [&] {
    auto capture = prism::daemon::CaptureFromFollow(rec, 1);
    REQUIRE(capture.ok());
    std::vector<uint64_t> out;
    for (const g::Op& op : capture->recordings[0].ops)
      if (op.has_collective()) out.push_back(op.collective().measured_ns());
    return out;
  };
  // Iteration 2's all-gather takes 500 us: the mean of 200, 500 and 200.
  stretch(prism::rpc::OP_ALL_GATHER, 2, 300'000);
  CHECK(paces() == std::vector<uint64_t>{200'000, 200'000, 300'000, 0});  // the shared all-reduce: none
  // A neighbour's overlap: iteration 1's reduce-scatter ends after the all-gather's first send.
  stretch(prism::rpc::OP_REDUCE_SCATTER, 1, 2'000'000);
  CHECK(paces() == std::vector<uint64_t>{200'000, 200'000, 350'000, 0});  // iteration 1's pair left out
}

