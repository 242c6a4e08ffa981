// A follow capture with the real rank's torch trace (docs/capture.md,
// "Streams, dependencies and memory"): the program's call order, streams and
// the dependencies of work.wait(), batches as groups, dtypes and memory.
#include <catch2/catch.hpp>

#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "daemon/hybrid/follow_capture.h"
#include "daemon/hybrid/session_capture.h"
#include "daemon/hybrid/torch_trace.h"
#include "graphgen/capture_recording.h"
#include "test/hybrid_harness.h"

namespace g = prism::graph;
using prism::daemon::RecordedLine;
using prism::rpc::OpKind;

namespace {

constexpr int64_t kUs = 1000;
constexpr int kIterations = 4;

struct Step {
  uint64_t hash;       // 0: a Gloo call (no NCCL operation)
  OpKind kind;
  int32_t rank, size, peer;
  uint64_t bytes;
  int64_t at, first_send, end;  // us into the iteration (first_send 0: none)
};

// Rank 0 of 8 (TP2 DP4; tp {0,1} is new_group #1, dp {0,2,4,6} #5), one
// iteration every 10 ms: a synchronous tp all-reduce; a batch of a send and
// a receive with tp rank 1, waited at once (the plugin reports the receive
// first); a Gloo all-reduce; an async dp reduce-scatter, waited before the
// world all-reduce; a tp all-reduce meanwhile; two async dp all-gathers,
// waited at the iteration's end (the second held by the first on its stream).
const std::vector<Step>& Iteration() {
  static const std::vector<Step> steps = {
      {101, prism::rpc::OP_ALL_REDUCE, 0, 2, -1, 1 << 20, 900, 1000, 1200},
      {101, prism::rpc::OP_RECV, 0, 2, 1, 1 << 18, 1400, 0, 1700},
      {101, prism::rpc::OP_SEND, 0, 2, 1, 1 << 18, 1450, 1500, 1700},
      {105, prism::rpc::OP_REDUCE_SCATTER, 0, 4, -1, 4 << 20, 1900, 2000, 3000},
      {101, prism::rpc::OP_ALL_REDUCE, 0, 2, -1, 1 << 20, 2400, 2500, 2700},
      {100, prism::rpc::OP_ALL_REDUCE, 0, 8, -1, 4, 3000, 3100, 3200},
      {105, prism::rpc::OP_ALL_GATHER, 0, 4, -1, 2 << 20, 3500, 3600, 4000},
      {105, prism::rpc::OP_ALL_GATHER, 0, 4, -1, 2 << 20, 3510, 4010, 4400},
  };
  return steps;
}

prism::daemon::Recording Sessions() {
  prism::daemon::Recording rec;
  rec.graph = "follow:w";
  rec.real_ranks = {0};
  const auto comm = [&](uint64_t hash, int64_t id, std::string name, std::vector<uint32_t> members) {
    prism::testing::RecordCommunicator(&rec, hash, id, std::move(name), std::move(members));
  };
  comm(100, 0, "world", {0, 1, 2, 3, 4, 5, 6, 7});
  comm(101, 1, "group1[0]", {0, 1});
  comm(105, 2, "group5[0]", {0, 2, 4, 6});
  std::map<std::pair<uint64_t, int>, uint64_t> seq;
  uint64_t id = 0;
  const auto report = [&](const Step& s, int64_t base) {
    prism::rpc::EventBatch b;
    prism::testing::AddStarted(&b, ++id, prism::testing::Key(s.hash, s.kind, seq[{s.hash, s.kind}]++, s.peer), s.rank,
                               s.size, s.bytes, base + s.at * kUs);
    prism::testing::AddFinished(&b, id, s.first_send == 0 ? 0 : base + s.first_send * kUs, base + s.end * kUs);
    RecordedLine l{RecordedLine::kEvents};
    l.session = 1;
    l.events = b;
    rec.lines.push_back(l);
  };
  report({100, prism::rpc::OP_ALL_REDUCE, 0, 8, -1, 8, 100, 200, 300}, 1'000'000'000);  // warm-up
  for (int it = 0; it < kIterations; ++it)
    for (const Step& s : Iteration()) report(s, 1'000'000'000 + (it + 1) * 10'000 * kUs);
  return rec;
}

// The torch trace scripts/prism_torch writes for that program (allocated
// bytes at each call as below, constant over iterations).
std::string TorchTrace() {
  std::string t = R"({"format":"prism-torch-trace/1","rank":0,"torch":"2.11.0"}
{"group":0,"ranks":[0,1,2,3,4,5,6,7],"backend":"nccl","name":"0"}
{"op":0,"fn":"all_reduce","group":0,"async":false,"bytes":8,"dtype":"torch.float32","t":1,"mem":900,"peak":5000}
{"group":1,"ranks":[0,1],"backend":"nccl","name":"1"}
{"group":2,"ranks":[0,2,4,6],"backend":"nccl","name":"5"}
{"group":3,"ranks":[0,1,2,3,4,5,6,7],"backend":"gloo","name":"7"}
)";
  uint64_t n = 1;
  for (int it = 0; it < kIterations; ++it) {
    const uint64_t b = n;  // this iteration's first call
    const auto call = [&](const std::string& fn, int group, bool async, uint64_t bytes, const std::string& dtype,
                          int64_t mem, const std::string& extra = "") {
      absl::StrAppend(&t, R"({"op":)", n++, R"(,"fn":")", fn, R"(","group":)", group, R"(,"async":)",
                      async ? "true" : "false", R"(,"bytes":)", bytes, R"(,"dtype":")", dtype, "\"", extra,
                      R"(,"t":1,"mem":)", mem, R"(,"peak":5000})", "\n");
    };
    call("all_reduce", 1, false, 1 << 20, "torch.bfloat16", 1000);
    call("isend", 1, true, 1 << 18, "torch.bfloat16", 1200, R"(,"peer":1,"batch":)" + std::to_string(it));
    call("irecv", 1, true, 1 << 18, "torch.bfloat16", 1200, R"(,"peer":1,"batch":)" + std::to_string(it));
    absl::StrAppend(&t, R"({"wait":[)", b + 1, ",", b + 2, R"(],"t":1})", "\n");
    call("all_reduce", 3, false, 64, "torch.float32", 1200);  // Gloo: no NCCL operation
    call("reduce_scatter_tensor", 2, true, 4 << 20, "torch.float32", 1500);
    call("all_reduce", 1, false, 1 << 20, "torch.bfloat16", 1600);
    absl::StrAppend(&t, R"({"wait":[)", b + 4, R"(],"t":1})", "\n");
    call("all_reduce", 0, false, 4, "torch.float32", 1600);
    call("all_gather_into_tensor", 2, true, 2 << 20, "torch.bfloat16", 1100);
    call("all_gather_into_tensor", 2, true, 2 << 20, "torch.bfloat16", 1100);
    absl::StrAppend(&t, R"({"wait":[)", b + 7, ",", b + 8, R"(],"t":1})", "\n");
  }
  return t;
}

std::string TempFolder() {
  std::string d = (std::filesystem::temp_directory_path() / "prism-torch-trace-XXXXXX").string();
  REQUIRE(mkdtemp(d.data()) != nullptr);
  return d;
}

std::string Describe(const g::Op& op) {
  std::string s = absl::StrCat("s", op.stream(), " ");
  if (op.has_compute())
    absl::StrAppend(&s, "compute ", op.compute().duration_ns() / kUs, "us mem ", op.compute().memory_delta_bytes());
  if (op.has_collective())
    absl::StrAppend(&s, g::CollectiveKind_Name(op.collective().kind()), " c", op.collective().comm_slot(), " ",
                    g::DType_Name(op.collective().dtype()));
  if (op.has_send()) absl::StrAppend(&s, "send c", op.send().comm_slot(), " p", op.send().peer());
  if (op.has_recv()) absl::StrAppend(&s, "recv c", op.recv().comm_slot(), " p", op.recv().peer());
  if (op.has_group_start()) s += "group_start";
  if (op.has_group_end()) s += "group_end";
  for (uint32_t d : op.deps()) absl::StrAppend(&s, " <", d);
  return s;
}

}  // namespace

TEST_CASE("follow: the torch trace gives a capture the program's order, streams, waits, groups and memory",
          "[hybrid][follow][capture][torch]") {
  const std::string dir = TempFolder();
  {
    std::ofstream(dir + "/torch-rank-0.jsonl") << TorchTrace();
  }
  auto traces = prism::daemon::ReadTorchTraces(dir);
  REQUIRE(traces.ok());
  REQUIRE(traces->count(0) == 1);
  auto capture = prism::daemon::CaptureFromFollow(Sessions(), 1, &*traces);
  REQUIRE(capture.ok());
  REQUIRE(capture->recordings.size() == 1);
  INFO(capture->summary[0]);
  CHECK(capture->summary[0].find("; steady iteration 0.01 s;") != std::string::npos);  // an iteration every 10 ms
  CHECK(capture->summary[0].find("torch trace: 33 of 33 operations matched to calls, 2 stream(s), 5 dependencies, "
                                 "memory static 1100 B, peak 5000 B") != std::string::npos);
  const auto& r = capture->recordings[0];
  std::vector<std::string> ops;
  for (const g::Op& op : r.ops) ops.push_back(Describe(op));
  // Compute: before the first op, from the end of the all-gathers the
  // previous iteration waited for at its end (4400 us; the graph's 0 us op
  // waits for them) to 11000 us, so that the graph's iteration is the
  // program's 10 ms (from the first all-gather's start, 3600 us, as before
  // 2026-12-02, it charged the all-gathers twice: 10.8 ms); the send first, as
  // the program called it; the reduce-scatter's compute cut at its start;
  // the world all-reduce's from the reduce-scatter's end (it waited); none
  // before the second all-gather (its stream held it). The all-gathers,
  // waited for at the iteration's end, hold the next iteration: a 0 us op on
  // stream 0 waits for them.
  CHECK(ops == std::vector<std::string>{
                   "s0 compute 6600us mem -100", "s0 ALLREDUCE c1 BF16",
                   "s0 compute 300us mem 200",   "s0 group_start", "s0 send c1 p1", "s0 recv c1 p1", "s0 group_end",
                   "s0 compute 300us mem 300",   "s1 REDUCESCATTER c5 FP32 <7",
                   "s0 compute 500us mem 100",   "s0 ALLREDUCE c1 BF16",
                   "s0 compute 100us mem 0 <8",  "s0 ALLREDUCE c0 FP32",
                   "s0 compute 400us mem -500",  "s1 ALLGATHER c5 BF16 <13", "s1 ALLGATHER c5 BF16",
                   "s0 compute 0us mem 0 <14 <15"});
  CHECK(r.header.static_memory_bytes() == 1100);
  CHECK(r.header.peak_memory_bytes() == 5000);
  // The recording is valid: written and read back (dependencies on earlier ops, communicators known).
  auto parsed = prism::graphgen::ParseRecording(prism::graphgen::EncodeRecording(r), "test");
  REQUIRE(parsed.ok());
  CHECK(parsed->ops.size() == r.ops.size());

  // Without the trace: one stream in enqueue order (the receive first), no memory.
  auto plain = prism::daemon::CaptureFromFollow(Sessions(), 1);
  REQUIRE(plain.ok());
  for (const g::Op& op : plain->recordings[0].ops) CHECK(op.stream() == 0);
  CHECK(plain->recordings[0].header.static_memory_bytes() == 0);
  std::filesystem::remove_all(dir);
}

TEST_CASE("follow: a torch trace that is not one is refused naming the file and line", "[hybrid][follow][torch]") {
  const std::string dir = TempFolder();
  const auto refused = [&](const std::string& text) {
    {
      std::ofstream(dir + "/torch-rank-3.jsonl") << text;
    }
    auto t = prism::daemon::ReadTorchTraces(dir);
    REQUIRE_FALSE(t.ok());
    return std::string(t.status().message());
  };
  CHECK(refused("{\"op\":0}\n").find("torch-rank-3.jsonl:1: the first line is not a prism-torch-trace/1 header") !=
        std::string::npos);
  const std::string header = "{\"format\":\"prism-torch-trace/1\",\"rank\":3}\n";
  CHECK(refused(header + "{\"op\":0,\"fn\":\"all_reduce\",\"group\":0}\n").find(":2: call on group 0, not described") !=
        std::string::npos);
  CHECK(refused(header + "not json\n").find(":2: not a JSON object") != std::string::npos);
  CHECK(refused(header + "{\"wait\":[4]}\n").find("a wait for call 4, not made before") != std::string::npos);
  std::filesystem::remove_all(dir);
  CHECK(prism::daemon::ReadTorchTraces(dir).status().code() == absl::StatusCode::kNotFound);
}

TEST_CASE("capture: the steady iteration is the mean time between iteration starts after the skipped ones",
          "[hybrid][capture]") {
  CHECK(prism::daemon::SteadyIteration({{0, 100}, {1, 1100}, {2, 1300}, {3, 1500}}, 1) == 200);
  CHECK(prism::daemon::SteadyIteration({{0, 100}, {1, 1100}}, 1) == 0);   // one iteration after the skipped one
  CHECK(prism::daemon::SteadyIteration({{0, 100}, {2, 1100}, {3, 1200}}, 0) == 100);  // iteration 1 unseen
}
