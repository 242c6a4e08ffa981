// Graph communicators with the same members ("twins"): Megatron-core at PP=2
// makes the pipeline group {first stage, last stage} and then the embedding
// group with the same ranks. With one real rank in each, both NCCL
// communicators have real ranks only, so prismd's bootstrap plays neither;
// which graph communicator a commHash is must still be exact: PyTorch's
// group number from the store (torch_rendezvous.h), else creation order
// (RealRankPrograms::AllRealCommunicator). The GPU host's run of 2026-12-02
// (scripts/gpu/run-mcore.sh B prism:1024:0,512) bound the pipeline's
// communicator to the embedding group and stopped at the first send.
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "daemon/bootstrap/bootstrap_plan.h"
#include "daemon/hybrid/session_replay.h"
#include "daemon/rendezvous/torch_rendezvous.h"
#include "test/graphgen_test_util.h"
#include "test/hybrid_harness.h"

namespace d = prism::daemon;
namespace g = prism::graph;
namespace pt = prism::testing;

namespace {

g::Graph MegatronGraph(const std::string& job) {
  return prism::graphgen::testing::GraphOfFile(std::string(PRISM_EXAMPLES_DIR) + "/megatron/" + job);
}

uint32_t CommNamed(const g::Graph& graph, const std::string& name) {
  for (const g::Communicator& c : graph.communicators())
    if (c.name() == name) return c.id();
  FAIL("the graph has no communicator " << name);
  return 0;
}

// Bytes of `rank`'s first send (or receive) in its program.
uint64_t FirstPointToPointBytes(const g::Graph& graph, uint32_t rank, bool send) {
  const g::Program& p = graph.programs(static_cast<int>(graph.ranks(static_cast<int>(rank)).program()));
  for (const g::Op& op : p.ops()) {
    if (send && op.has_send()) return op.send().bytes();
    if (!send && op.has_recv()) return op.recv().bytes();
  }
  FAIL("rank " << rank << " has no " << (send ? "send" : "receive"));
  return 0;
}

// Real rank 0 (stage 0) sends its first activation to real rank 4 (stage 1)
// on the NCCL communicator `hash` of the two; each reports it as a plugin would.
void FeedFirstPipelineSend(pt::HybridHarness& h, const g::Graph& graph, uint64_t hash, bool receiver_too = true) {
  const int64_t t = pt::RealtimeNow();
  prism::rpc::EventBatch send;
  pt::AddStarted(&send, 1, pt::Key(hash, prism::rpc::OP_SEND, 0, 1), 0, 2, FirstPointToPointBytes(graph, 0, true), t,
                 false);
  pt::AddFinished(&send, 1, t + 10'000, t + 100'000);
  h.Feed(1, send);
  if (!receiver_too) return;
  prism::rpc::EventBatch recv;
  pt::AddStarted(&recv, 1, pt::Key(hash, prism::rpc::OP_RECV, 0, 0), 1, 2, FirstPointToPointBytes(graph, 4, false), t,
                 false);
  pt::AddFinished(&recv, 1, t + 10'000, t + 100'000);
  h.Feed(2, recv);
}

}  // namespace

TEST_CASE("twin communicators: the graph lists Megatron's pipeline and embedding groups with the same members",
          "[hybrid][twins]") {
  const g::Graph graph = MegatronGraph("gpt-8.yaml");
  const uint32_t pp = CommNamed(graph, "pp[0]"), embd = CommNamed(graph, "embd[0]");
  CHECK(pp < embd);  // creation order
  const auto& a = graph.communicators(static_cast<int>(pp)).members();
  const auto& b = graph.communicators(static_cast<int>(embd)).members();
  CHECK(std::vector<uint32_t>(a.begin(), a.end()) == std::vector<uint32_t>{0, 4});
  CHECK(std::vector<uint32_t>(b.begin(), b.end()) == std::vector<uint32_t>{0, 4});
}

// No store told prismd which group the communicator is (e.g. its id did not
// come through PyTorch's store): its members come from the two ranks'
// reports and match both groups; the first in creation order not bound yet
// is the pipeline group, which Megatron uses first.
TEST_CASE("twin communicators: learned from the real ranks' reports, the first unbound twin in creation order",
          "[hybrid][twins]") {
  const g::Graph graph = MegatronGraph("gpt-8.yaml");
  pt::HybridHarness h(graph, {0, 4});
  h.OpenSession(2, 4);
  FeedFirstPipelineSend(h, graph, 0x9917);
  const auto c = h.scheduler().counters();
  CHECK(c.ops_matched == 2);
  CHECK(c.ops_unmatched == 0);
  CHECK(c.divergences == 0);
  // A second communicator of the same two ranks is the embedding group.
  const int64_t t = pt::RealtimeNow();
  prism::rpc::EventBatch a, b;
  pt::AddStarted(&a, 2, pt::Key(0xe3bd, prism::rpc::OP_ALL_REDUCE, 0), 0, 2, 4, t);
  h.Feed(1, a);
  pt::AddStarted(&b, 2, pt::Key(0xe3bd, prism::rpc::OP_ALL_REDUCE, 0), 1, 2, 4, t);
  h.Feed(2, b);
  // gpt-8 unties its embeddings: the embedding group has no all-reduce in
  // the graph, so the communicator is bound to it and its operation is not
  // matched (a divergence per rank naming the embedding group).
  CHECK(h.scheduler().counters().divergences == 2);  // one per rank
}

// The store told prismd (a real comm rank 0 set the group's id) after one
// member had already reported an operation on it: that operation waits no
// longer for the other member's report.
TEST_CASE("twin communicators: a communicator told after a real rank's report releases the parked operation",
          "[hybrid][twins]") {
  const g::Graph graph = MegatronGraph("gpt-8.yaml");
  pt::HybridHarness h(graph, {0, 4});
  h.OpenSession(2, 4);
  constexpr uint64_t kHash = 0x9917;
  FeedFirstPipelineSend(h, graph, kHash, /*receiver_too=*/false);
  CHECK(h.scheduler().counters().ops_matched == 0);  // waits for the other member's report
  h.Communicator(kHash, CommNamed(graph, "pp[0]"), {0, 4});
  CHECK(h.scheduler().counters().ops_matched == 1);
  CHECK(h.scheduler().counters().divergences == 0);
}

namespace {

// What the rendezvous asks of the bootstrap, without one.
class RecordingRoots : public prism::rendezvous::CommRoots {
 public:
  absl::StatusOr<prism::bootstrap::UniqueId> HostRoot(const prism::bootstrap::CommRequest& r) override {
    return absl::UnimplementedError("not in this test");
  }
  absl::Status JoinRoot(const prism::bootstrap::CommRequest& r, const prism::bootstrap::UniqueId& id) override {
    return absl::OkStatus();
  }
  absl::Status RealRanksOnly(const prism::bootstrap::CommRequest& r, const prism::bootstrap::UniqueId& id) override {
    real_only.push_back(r);
    return absl::OkStatus();
  }
  absl::Status AnnounceSplitGroup(uint32_t, std::vector<uint32_t>) override { return absl::OkStatus(); }
  void EndJob(const std::string& why) override {}
  std::vector<prism::bootstrap::CommRequest> real_only;
};

d::Recording GpuRecording(const std::string& name) {
  auto rec = d::ReadRecording(std::string(PRISM_HYBRID_FIXTURES) + "/" + name);
  INFO(rec.status().message());
  REQUIRE(rec.ok());
  return *std::move(rec);
}

}  // namespace

// scripts/gpu/run-mcore.sh B prism:1024:0,512 on the GPU host (one H200,
// 2026-12-02, Megatron-LM d98e8a64dd, PyTorch 2.11, examples/megatron/
// train_mcore.py, lazy start-up, Gloo groups on): real ranks 0 (stage 0) and
// 512 (stage 1) of examples/megatron/gpt-1024.yaml. prismd then learned their
// pipeline communicator from their reports and bound it to embd[0], the last
// graph communicator with members {0, 512}: rank 0's first send and rank 512's
// first receive were two divergences and the run stopped after 27 s. Now the
// store names it: rank 0 sets the id of PyTorch group 2833, which is pp[0].
// With that binding in place of the recorded one, the recorded operations
// replay matched.
TEST_CASE("twin communicators: Megatron-core at 1024 ranks, real ranks 0 and 512, replays matched with the store's "
          "binding",
          "[hybrid][twins][replay][megatron]") {
  const g::Graph graph = MegatronGraph("gpt-1024.yaml");
  auto plan = prism::bootstrap::PlanFromGraph(graph, {0, 512});
  REQUIRE(plan.ok());
  RecordingRoots roots;
  prism::rendezvous::TorchRendezvous rendezvous(*plan, &roots, {});
  prism::store::ClientInfo rank0;
  rank0.id = 1;
  rank0.rank = 0;
  rank0.address = "127.0.0.1:1";
  rendezvous.OnConnected(rank0);
  rendezvous.OnSet(rank0, "/default_pg/0//2833//cuda//0", std::string(128, '\x5a'));  // as ProcessGroupNCCL sets it
  CHECK(rendezvous.Reports().errors.empty());
  REQUIRE(roots.real_only.size() == 1);
  const prism::bootstrap::CommRequest told = roots.real_only.front();
  CHECK(told.plan_id == CommNamed(graph, "pp[0]"));
  CHECK(told.name == "pp[0] (PyTorch group 2833)");

  const d::Recording recorded = GpuRecording("mcore-1024-r0_512-lazy.rec");
  // The recording as made: the communicator learned from the reports.
  d::Recording fixed = recorded;
  fixed.lines.clear();
  uint64_t hash = 0;
  for (const d::RecordedLine& line : recorded.lines) {
    if (line.kind == d::RecordedLine::kCommunicator && line.comm.members == std::vector<uint32_t>{0, 512}) {
      CHECK(line.comm.name == "embd[0]");
      hash = line.comm.comm_hash;
      continue;
    }
    fixed.lines.push_back(line);
  }
  REQUIRE(hash != 0);
  // What prismd tells now, when rank 0 sets the id (before its first send).
  d::RecordedLine comm;
  comm.kind = d::RecordedLine::kCommunicator;
  comm.at = recorded.lines.front().at;
  comm.comm = d::CommDescription{hash, told.plan_id, told.name, {0, 512}};
  fixed.lines.insert(fixed.lines.begin(), comm);

  auto as_made = d::ReplaySessions(graph, recorded);
  REQUIRE(as_made.ok());
  CHECK(as_made->divergences == 2);  // the live run's: SEND #0 and RECV #0 "on embd[0]"
  auto replay = d::ReplaySessions(graph, fixed);
  INFO(replay.status().message());
  REQUIRE(replay.ok());
  CHECK(replay->ops_matched == as_made->ops_matched + 2);
  CHECK(replay->ops_unmatched == 0);
  CHECK(replay->divergences == 0);
}
