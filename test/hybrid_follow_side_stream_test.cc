// A follow capture of a program that makes collectives on side CUDA streams
// (FSDP2's all-gather and reduce-scatter streams, async_op False) beside
// collectives the torch trace cannot see (TP's functional collectives): the
// side-stream calls overlap the compute stream, and the compute stream waits
// for an all-gather where it was seen to (docs/capture.md, "Streams,
// dependencies and memory"). Before 2026-12-02 every operation of such a
// rank was on one stream: TorchTitan FSDP2+TP at 1024 ranks then played the
// FSDP rings after the TP collectives they overlap, and its hybrid run came
// out 24% over --simulate.
#include <catch2/catch.hpp>

#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "daemon/hybrid/follow_capture.h"
#include "daemon/hybrid/session_replay.h"
#include "daemon/hybrid/torch_trace.h"
#include "graphgen/extrapolate.h"
#include "test/hybrid_harness.h"

namespace {

namespace g = prism::graph;
using prism::daemon::RecordedLine;

constexpr int kIterations = 5;
constexpr int64_t kUs = 1000;

// One NCCL operation of rank 0 per iteration, as its plugin reports it.
struct Step {
  uint64_t hash;  // the communicator's
  prism::rpc::OpKind kind;
  int32_t rank, size;
  uint64_t bytes;                // the graph's convention
  int64_t at, first_send, end;   // us into the iteration: enqueued, first send, end
};

// Rank 0 of 8 (TP4 FSDP2; tp {0,1,2,3}, fsdp {0,4}), an iteration every
// 10 ms, enqueued ahead of the GPU as a training loop's host does: the
// forward's FSDP all-gather, the TP all-gather that waited for it (50 us
// after its end) and a TP reduce-scatter; the backward's prefetch all-gather
// overlapping a TP all-gather, a gradient reduce-scatter queued behind it on
// the FSDP group's stream, the TP reduce-scatter that waited for the
// prefetch (60 us), a TP all-gather that started 40 us after the
// reduce-scatter's end without waiting for it (540 us of compute after the
// TP reduce-scatter), the last reduce-scatter and the world all-reduce that
// waited for it.
const std::vector<Step>& Iteration() {
  static const std::vector<Step> steps = {
      {105, prism::rpc::OP_ALL_GATHER, 0, 2, 2 << 20, 100, 200, 1200},        // a: fsdp, side stream
      {101, prism::rpc::OP_ALL_GATHER, 0, 4, 4 << 20, 150, 1250, 2000},       // b: tp
      {101, prism::rpc::OP_REDUCE_SCATTER, 0, 4, 4 << 20, 160, 2500, 3000},   // c: tp
      {105, prism::rpc::OP_ALL_GATHER, 0, 2, 2 << 20, 3050, 3100, 4000},      // d: fsdp prefetch
      {101, prism::rpc::OP_ALL_GATHER, 0, 4, 4 << 20, 3150, 3200, 3900},      // e: tp
      {105, prism::rpc::OP_REDUCE_SCATTER, 0, 2, 2 << 20, 3950, 4010, 5000},  // f: fsdp grads
      {101, prism::rpc::OP_REDUCE_SCATTER, 0, 4, 4 << 20, 4020, 4060, 4500},  // g: tp
      {101, prism::rpc::OP_ALL_GATHER, 0, 4, 4 << 20, 4030, 5040, 5500},      // h: tp
      {105, prism::rpc::OP_REDUCE_SCATTER, 0, 2, 2 << 20, 4040, 5600, 6000},  // i: fsdp grads, the last
      {100, prism::rpc::OP_ALL_REDUCE, 0, 8, 4, 4050, 6050, 6100},            // j: world
  };
  return steps;
}

// prismd --follow's recording of rank 0 (world, tp new_group #1, fsdp #3)
// running `steps` every 10 ms.
// `fsdp_comm`: the graph communicator the FSDP group's line names (2 in the
// follow run's graph; 3 in the captured graph, after the TP family).
prism::daemon::Recording Sessions(const std::vector<Step>& steps = Iteration(), int64_t fsdp_comm = 2) {
  prism::daemon::Recording rec;
  rec.real_ranks = {0};
  rec.graph = "follow:w";
  prism::testing::RecordCommunicator(&rec, 100, 0, "world", {0, 1, 2, 3, 4, 5, 6, 7});
  prism::testing::RecordCommunicator(&rec, 101, 1, "group1[0]", {0, 1, 2, 3});
  prism::testing::RecordCommunicator(&rec, 105, fsdp_comm, "group3[0]", {0, 4});
  std::map<std::pair<uint64_t, int>, uint64_t> seq;
  uint64_t id = 0;
  for (int it = 0; it < kIterations; ++it)
    for (const Step& s : steps) {
      const int64_t base = 1'000'000'000 + it * 10'000 * kUs;
      prism::rpc::EventBatch b;
      prism::testing::AddStarted(&b, ++id, prism::testing::Key(s.hash, s.kind, seq[{s.hash, s.kind}]++), s.rank,
                                 s.size, s.bytes / static_cast<uint64_t>(s.kind == prism::rpc::OP_ALL_REDUCE ? 1 : s.size),
                                 base + s.at * kUs);
      prism::testing::AddFinished(&b, id, base + s.first_send * kUs, base + s.end * kUs);
      RecordedLine l;
      l.kind = RecordedLine::kEvents;
      l.session = 1;
      l.events = b;
      rec.lines.push_back(l);
    }
  return rec;
}

// The torch trace: only the FSDP calls (the TP and world collectives are
// functional collectives, made from C++), each on its side stream.
std::string TorchTrace(const std::vector<std::string>& fns = {"all_gather_into_tensor", "all_gather_into_tensor",
                                                               "reduce_scatter_tensor", "reduce_scatter_tensor"}) {
  std::string t = R"({"format":"prism-torch-trace/1","rank":0,"torch":"2.11.0"}
{"group":0,"ranks":[0,4],"backend":"nccl","name":"3"}
)";
  uint64_t n = 0;
  const auto call = [&](const std::string& fn, int64_t stream) {
    absl::StrAppend(&t, R"({"op":)", n++, R"(,"fn":")", fn, R"(","group":0,"async":false,"bytes":)", 2 << 20,
                    R"(,"dtype":"torch.bfloat16","t":1,"stream":)", stream, "}\n");
  };
  for (int it = 0; it < kIterations; ++it)
    for (const std::string& fn : fns) call(fn, fn == "reduce_scatter_tensor" ? 222 : 111);
  return t;
}

std::string Describe(const g::Op& op) {
  std::string s = absl::StrCat("s", op.stream(), " ");
  if (op.has_compute()) absl::StrAppend(&s, "compute ", op.compute().duration_ns() / kUs, "us");
  if (op.has_collective())
    absl::StrAppend(&s, g::CollectiveKind_Name(op.collective().kind()), " c", op.collective().comm_slot());
  for (uint32_t d : op.deps()) absl::StrAppend(&s, " <", d);
  return s;
}

prism::daemon::FollowCapture CaptureOf(const std::vector<Step>& steps, const std::vector<std::string>& fns) {
  std::string dir = (std::filesystem::temp_directory_path() / "prism-side-stream-XXXXXX").string();
  REQUIRE(mkdtemp(dir.data()) != nullptr);
  {
    std::ofstream(dir + "/torch-rank-0.jsonl") << TorchTrace(fns);
  }
  auto traces = prism::daemon::ReadTorchTraces(dir);
  std::filesystem::remove_all(dir);
  REQUIRE(traces.ok());
  auto capture = prism::daemon::CaptureFromFollow(Sessions(steps), 1, &*traces);
  REQUIRE(capture.ok());
  REQUIRE(capture->recordings.size() == 1);
  return *std::move(capture);
}

std::vector<std::string> Captured(const std::vector<Step>& steps, const std::vector<std::string>& fns,
                                  std::string* summary) {
  const prism::daemon::FollowCapture capture = CaptureOf(steps, fns);
  *summary = capture.summary[0];
  std::vector<std::string> ops;
  for (const g::Op& op : capture.recordings[0].ops) ops.push_back(Describe(op));
  return ops;
}

}  // namespace

TEST_CASE("follow: side-stream calls of the torch trace overlap the compute stream, which waits where it was seen to",
          "[hybrid][follow][capture][torch]") {
  std::string dir = (std::filesystem::temp_directory_path() / "prism-side-stream-XXXXXX").string();
  REQUIRE(mkdtemp(dir.data()) != nullptr);
  {
    std::ofstream(dir + "/torch-rank-0.jsonl") << TorchTrace();
  }
  auto traces = prism::daemon::ReadTorchTraces(dir);
  std::filesystem::remove_all(dir);
  REQUIRE(traces.ok());
  REQUIRE(traces->at(0).calls.size() == 4 * kIterations);
  CHECK(traces->at(0).calls[0].side_stream == 111);
  auto capture = prism::daemon::CaptureFromFollow(Sessions(), 1, &*traces);
  REQUIRE(capture.ok());
  REQUIRE(capture->recordings.size() == 1);
  INFO(capture->summary[0]);
  CHECK(capture->summary[0].find("torch trace: 20 of 50 operations matched to calls, 2 stream(s), 7 dependencies") !=
        std::string::npos);
  std::vector<std::string> ops;
  for (const g::Op& op : capture->recordings[0].ops) ops.push_back(Describe(op));
  // The FSDP group's operations on stream 1 after the stream-0 op before
  // each (the second all-gather's stream-0 op came before the first's: no
  // dependency). The compute stream waits for the forward's all-gather (b,
  // 50 us after it), the prefetch (g, 60 us) and the last reduce-scatter (j,
  // 50 us), not for the reduce-scatter h started 40 us after: h's compute is
  // the 540 us after g.
  CHECK(ops == std::vector<std::string>{
                   "s0 compute 4100us",         "s1 ALLGATHER c3 <0",
                   "s0 compute 50us <1",        "s0 ALLGATHER c1",
                   "s0 compute 500us",          "s0 REDUCESCATTER c1",
                   "s0 compute 100us",          "s1 ALLGATHER c3 <6",
                   "s0 compute 100us",          "s0 ALLGATHER c1",
                   "s1 REDUCESCATTER c3 <9",    "s0 compute 60us <7",
                   "s0 REDUCESCATTER c1",       "s0 compute 540us",
                   "s0 ALLGATHER c1",           "s0 compute 100us",
                   "s1 REDUCESCATTER c3 <15",   "s0 compute 50us <16",
                   "s0 ALLREDUCE c0"});
}

TEST_CASE("follow: a side-stream call after another of its stream waits for the compute that waited for that one",
          "[hybrid][follow][capture][torch]") {
  // FSDP2 alone (every collective on one group, a side stream): the world
  // all-reduce, then layer k's all-gather 480 us after layer k-1's ended
  // (the compute stream waited for it, computed, then made the call), a
  // reduce-scatter queued behind the last all-gather (30 us after it) and the
  // world all-reduce that waited for it (50 us after its end).
  std::vector<Step> steps = {
      {100, prism::rpc::OP_ALL_REDUCE, 0, 8, 4, 100, 200, 300},
      {105, prism::rpc::OP_ALL_GATHER, 0, 2, 2 << 20, 150, 350, 1350},
      {105, prism::rpc::OP_ALL_GATHER, 0, 2, 2 << 20, 160, 1830, 2830},
      {105, prism::rpc::OP_REDUCE_SCATTER, 0, 2, 2 << 20, 170, 2860, 3860},
      {100, prism::rpc::OP_ALL_REDUCE, 0, 8, 4, 180, 3910, 4000},
  };
  std::string summary;
  const auto ops = Captured(steps, {"all_gather_into_tensor", "all_gather_into_tensor", "reduce_scatter_tensor"},
                            &summary);
  INFO(summary);
  CHECK(summary.find("15 of 25 operations matched to calls, 2 stream(s), 4 dependencies") != std::string::npos);
  // The first all-gather after the all-reduce (50 us of compute); the
  // second after 480 us of compute that waited for the first (not the
  // 1480 us since the first started); the reduce-scatter queued.
  CHECK(ops == std::vector<std::string>{"s0 compute 6200us",   "s0 ALLREDUCE c0",     "s0 compute 50us",
                                        "s1 ALLGATHER c3 <2",  "s0 compute 480us <3", "s1 ALLGATHER c3 <4",
                                        "s1 REDUCESCATTER c3", "s0 compute 50us <6",  "s0 ALLREDUCE c0"});
}

TEST_CASE("follow: an untraced operation on a side stream's communicator goes on that stream, so a replay pairs it "
          "as NCCL ran it", "[hybrid][follow][capture][torch]") {
  // FSDP2+TP's end of an iteration (TorchTitan at 1024, 2026-12-02): two
  // gradient reduce-scatters on the FSDP group's side stream, the second
  // queued behind the first (which runs until 4000 us), a TP all-gather
  // beside them, then the loss all-reduce on the FSDP communicator (a
  // functional collective: no call in the trace), enqueued at 2080 us but
  // run by NCCL after the second reduce-scatter, and the world all-reduce.
  const std::vector<Step> steps = {
      {105, prism::rpc::OP_ALL_GATHER, 0, 2, 2 << 20, 100, 200, 1200},        // fsdp, side stream
      {101, prism::rpc::OP_ALL_GATHER, 0, 4, 4 << 20, 150, 1250, 2000},       // tp, waited for it
      {105, prism::rpc::OP_REDUCE_SCATTER, 0, 2, 2 << 20, 2050, 2100, 4000},  // fsdp grads
      {105, prism::rpc::OP_REDUCE_SCATTER, 0, 2, 2 << 20, 2060, 4010, 4500},  // fsdp grads, queued
      {101, prism::rpc::OP_ALL_GATHER, 0, 4, 4 << 20, 2070, 2150, 2900},      // tp, beside them
      {105, prism::rpc::OP_ALL_REDUCE, 0, 2, 4, 2080, 4550, 4600},            // loss, fsdp communicator
      {100, prism::rpc::OP_ALL_REDUCE, 0, 8, 4, 2090, 4650, 4700},            // world
  };
  const auto capture =
      CaptureOf(steps, {"all_gather_into_tensor", "reduce_scatter_tensor", "reduce_scatter_tensor"});
  INFO(capture.summary[0]);
  std::vector<std::string> ops;
  for (const g::Op& op : capture.recordings[0].ops) ops.push_back(Describe(op));
  // The loss all-reduce is on the FSDP stream, after the reduce-scatters
  // (its compute, as measured, waits for the last one); the world
  // all-reduce's compute waits for it. Before, it was on stream 0.
  CHECK(ops == std::vector<std::string>{"s0 compute 5500us",      "s1 ALLGATHER c3 <0",
                                        "s0 compute 50us <1",     "s0 ALLGATHER c1",
                                        "s0 compute 100us",       "s1 REDUCESCATTER c3 <4",
                                        "s1 REDUCESCATTER c3",    "s0 compute 50us",
                                        "s0 ALLGATHER c1",        "s0 compute 50us <6",
                                        "s1 ALLREDUCE c3 <9",     "s0 compute 50us <10",
                                        "s0 ALLREDUCE c0"});
  // Every rank's program from rank 0's, against the real rank's reports of
  // iterations 0 and 1 up to where it stood when the GPU host's refine
  // round stalled: in the loss all-reduce (reported, not finished; the world
  // all-reduce enqueued behind it). Virtual rank 4, its FSDP peer, must have
  // finished both reduce-scatters of iteration 1 with it. Before, the engine
  // called the real rank's all-reduce (reported at 2080 us; its stream-0
  // work done at 2900 us, while the first reduce-scatter ran to 4000 us)
  // before its second reduce-scatter and paired it with rank 4's: that
  // reduce-scatter waited for the all-reduce's end, and the all-reduce (live)
  // for its peers, which never came.
  std::vector<prism::graphgen::Recording> parsed;
  for (const auto& r : capture.recordings) {
    auto p = prism::graphgen::ParseRecording(prism::graphgen::EncodeRecording(r), "test");
    REQUIRE(p.ok());
    parsed.push_back(*p);
  }
  auto x = prism::graphgen::Extrapolate(parsed, prism::graphgen::ExtrapolationOptions{});
  REQUIRE(x.ok());
  prism::daemon::Recording sessions = Sessions(steps, 3);
  sessions.iterations = kIterations;
  const size_t comms = 3, stop = comms + steps.size() + 5;  // iteration 1's loss all-reduce
  sessions.lines.resize(stop + 2);
  for (size_t l = stop; l < sessions.lines.size(); ++l) sessions.lines[l].events.mutable_events()->RemoveLast();
  auto replay = prism::daemon::ReplaySessions(x->graph, sessions, {4});
  REQUIRE(replay.ok());
  CHECK(replay->divergences == 0);
  size_t reduce_scatters = 0;
  for (const auto& o : replay->trace) {
    const g::Op& op = x->graph.programs(0).ops(static_cast<int>(o.op));
    reduce_scatters += op.has_collective() && op.collective().kind() == g::REDUCESCATTER;
  }
  CHECK(reduce_scatters == 4);
}
