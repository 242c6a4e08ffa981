// Compute measured from recorded GPU-host sessions (daemon/hybrid/session_capture.h)
// and the capture recordings it makes, extrapolated (docs/capture.md). The
// recordings are test/fixtures/hybrid/'s: the synthetic step of
// bench/fidelity (fwd 1.5 ms, bwd 3 ms per layer and microbatch on the GPU),
// TP2 PP2 DP2, run on the GPU host with real ranks among virtual ones.
#include <catch2/catch.hpp>
#include <functional>
#include <string>

#include "daemon/hybrid/session_capture.h"
#include "graphgen/capture_recording.h"
#include "graphgen/extrapolate.h"
#include "graphgen/fidelity_graph.h"
#include "graphgen/job_graph.h"
#include "graphgen/job_spec.h"
#include "proto/graph_file.h"

namespace {

namespace pg = prism::graph;
const std::string kFixtures = PRISM_HYBRID_FIXTURES;

pg::Graph SpecGraph(const std::string& spec) {
  auto s = prism::graphgen::ParseFidelitySpecFile(kFixtures + "/" + spec);
  REQUIRE(s.ok());
  auto g = prism::graphgen::GenerateFidelityGraph(*s);
  REQUIRE(g.ok());
  return *g;
}

std::vector<prism::daemon::MeasuredRank> Measure(const pg::Graph& g, const std::string& rec) {
  auto recording = prism::daemon::ReadRecording(kFixtures + "/" + rec);
  REQUIRE(recording.ok());
  auto measured = prism::daemon::MeasureCompute(g, *recording, 1);
  INFO(measured.status().message());
  REQUIRE(measured.ok());
  return *measured;
}

const pg::Program& ProgramOf(const pg::Graph& g, uint32_t rank) {
  return g.programs(static_cast<int>(g.ranks(static_cast<int>(rank)).program()));
}

}  // namespace

TEST_CASE("session capture: a real rank's compute between its NCCL operations, from a GPU-host recording") {
  const pg::Graph g = SpecGraph("step-n8.yaml");
  const auto measured = Measure(g, "step-n8-hybrid1-causal.rec");
  REQUIRE(measured.size() == 1);
  const prism::daemon::MeasuredRank& m = measured[0];
  CHECK(m.rank == 0);
  CHECK(m.iterations == 30);
  CHECK(m.matched_ops == 840);
  CHECK(m.unmatched_ops == 0);
  const pg::Program& p = ProgramOf(g, 0);
  size_t measured_ops = 0;
  for (int i = 0; i < p.ops_size(); ++i) {
    if (!p.ops(i).has_compute() || !m.compute_ns[static_cast<size_t>(i)]) continue;
    ++measured_ops;
    const uint64_t graph_ns = p.ops(i).compute().duration_ns(), got = *m.compute_ns[static_cast<size_t>(i)];
    INFO(p.ops(i).compute().label() << ": measured " << got << " ns, the spec " << graph_ns);
    // the GPU-side compute the spec asks for, plus what the launch and the
    // kernels around it add (at most 10%)
    CHECK(got >= graph_ns);
    CHECK(got <= graph_ns + graph_ns / 10);
  }
  // of 18: the zero-length start, the optimizer, and what follows a send
  // alone keep the graph's; what follows a grouped send and receive is
  // measured from the receive's end (12 before that, 2026-12-03)
  CHECK(measured_ops == 15);
  for (int i = 0; i < p.ops_size(); ++i)
    if (p.ops(i).has_compute() && p.ops(i).compute().label() == "optimizer")
      CHECK(!m.compute_ns[static_cast<size_t>(i)]);
}

TEST_CASE("session capture: two real ranks, one per stage, give recordings that extrapolate to the step's graph") {
  const pg::Graph g = SpecGraph("step-n8-2g5.yaml");
  const auto measured = Measure(g, "step-n8-2g5-hybrid2-shim.rec");
  REQUIRE(measured.size() == 2);
  std::vector<prism::graphgen::Recording> recordings;
  for (const prism::daemon::MeasuredRank& m : measured) {
    auto rec = prism::graphgen::RecordingFromGraph(g, m.rank);
    REQUIRE(rec.ok());
    for (size_t i = 0; i < rec->ops.size(); ++i)
      if (m.compute_ns[i]) rec->ops[i].mutable_compute()->set_duration_ns(*m.compute_ns[i]);
    recordings.push_back(*rec);
  }
  auto x = prism::graphgen::Extrapolate(recordings, {});
  INFO(x.status().message());
  REQUIRE(x.ok());
  REQUIRE(pg::ValidateGraph(x->graph).ok());
  CHECK(x->graph.programs_size() == 2);
  for (uint32_t r = 0; r < 8; ++r) {
    const pg::Program& a = ProgramOf(g, r);
    const pg::Program& b = ProgramOf(x->graph, r);
    REQUIRE(a.ops_size() == b.ops_size());
    const auto& m = measured[r < 4 ? 0 : 1];
    for (int i = 0; i < a.ops_size(); ++i) {
      if (!a.ops(i).has_compute()) {
        CHECK(a.ops(i).SerializeAsString() == b.ops(i).SerializeAsString());
        continue;
      }
      const auto want = m.compute_ns[static_cast<size_t>(i)];
      CHECK(b.ops(i).compute().duration_ns() == want.value_or(a.ops(i).compute().duration_ns()));
    }
  }
}

TEST_CASE("session capture: a recording of another graph is refused") {
  const pg::Graph other = SpecGraph("step-n8-2g5.yaml");
  auto recording = prism::daemon::ReadRecording(kFixtures + "/step-n8-hybrid1-causal.rec");
  REQUIRE(recording.ok());
  auto measured = prism::daemon::MeasureCompute(other, *recording, 1);
  REQUIRE(!measured.ok());
  CHECK(std::string(measured.status().message()).find("give the graph the run used") != std::string::npos);
  pg::Graph renamed = SpecGraph("step-n8.yaml");
  renamed.mutable_communicators(1)->set_name("not-tp");
  measured = prism::daemon::MeasureCompute(renamed, *recording, 1);
  REQUIRE(!measured.ok());
  CHECK(std::string(measured.status().message()).find("is not communicator 1 of the graph") != std::string::npos);
}

// With NCCL ids from PyTorch's store, prismd names a communicator with its
// PyTorch group ("tp[0] (PyTorch group 2321)"): the recording of Megatron-core
// at 1024 ranks on the GPU host (scripts/gpu/run-mcore.sh) is of the job graph.
TEST_CASE("session capture: a Megatron-core run's recording, its communicators named with their PyTorch group") {
  auto spec = prism::graphgen::ParseJobSpecFile(std::string(PRISM_EXAMPLES_DIR) + "/megatron/gpt-1024.yaml");
  REQUIRE(spec.ok());
  auto g = prism::graphgen::GenerateJobGraph(*spec);
  REQUIRE(g.ok());
  const std::vector<prism::daemon::MeasuredRank> measured = Measure(*g, "mcore-1024-r0-lazy.rec");
  REQUIRE(measured.size() == 1);
  CHECK(measured[0].rank == 0);
  CHECK(measured[0].iterations == 12);
  CHECK(measured[0].matched_ops == 924);
  CHECK(measured[0].unmatched_ops == 0);
}

namespace {

// Two ranks; rank 0's program: compute A, all-reduce, compute B, all-reduce,
// compute C, send to rank 1, compute D, all-reduce (rank 1 receives instead
// of sending). Graph durations 1000 ns each. `grouped`: a pipeline's grouped
// send and receive instead of the send (group start, send, receive, group
// end; rank 1 receives, then sends).
pg::Graph TinyGraph(bool grouped = false) {
  pg::Graph g;
  g.mutable_job()->set_name("tiny");
  pg::Communicator* world = g.add_communicators();
  world->set_name("world");
  world->add_members(0);
  world->add_members(1);
  world->mutable_init();
  for (int r = 0; r < 2; ++r) {
    pg::Program* p = g.add_programs();
    p->set_id(r);
    p->set_streams(1);
    p->add_comm_slot_names("world");
    auto compute = [&](const char* label) {
      p->add_ops()->mutable_compute()->set_duration_ns(1000);
      p->mutable_ops(p->ops_size() - 1)->mutable_compute()->set_label(label);
    };
    auto allreduce = [&] {
      pg::CollectiveOp* c = p->add_ops()->mutable_collective();
      c->set_kind(pg::ALLREDUCE);
      c->set_bytes(1 << 20);
    };
    compute("A"), allreduce(), compute("B"), allreduce(), compute("C");
    if (grouped) {
      p->add_ops()->mutable_group_start();
      if (r == 0) p->add_ops()->mutable_send()->set_peer(1), p->add_ops()->mutable_recv()->set_peer(1);
      else p->add_ops()->mutable_recv()->set_peer(0), p->add_ops()->mutable_send()->set_peer(0);
      p->add_ops()->mutable_group_end();
    } else if (r == 0) {
      p->add_ops()->mutable_send()->set_peer(1);
    } else {
      p->add_ops()->mutable_recv()->set_peer(0);
    }
    compute("D"), allreduce();
    pg::Rank* rank = g.add_ranks();
    rank->set_rank(r);
    rank->set_program(r);
    rank->add_comm_slots(0);
  }
  return g;
}

void AddStartedAt(prism::rpc::EventBatch& b, uint64_t id, prism::rpc::OpKind kind, uint64_t seq, int32_t peer) {
  prism::rpc::OpStarted* s = b.add_events()->mutable_op_started();
  s->set_op_id(id);
  s->mutable_key()->set_comm_hash(77);
  s->mutable_key()->set_kind(kind);
  s->mutable_key()->set_seq(seq);
  s->mutable_key()->set_peer(peer);
  s->set_comm_rank(0);
  s->set_comm_size(2);
}

void AddFinishedAt(prism::rpc::EventBatch& b, uint64_t id, uint64_t first_send, uint64_t end) {
  prism::rpc::OpFinished* f = b.add_events()->mutable_op_finished();
  f->set_op_id(id);
  f->set_first_send_ns(first_send);
  f->set_end_ns(end);
}

// A recording of TinyGraph's world communicator (ranks 0 and 1, hash 77)
// with `real` the run's real ranks; the caller adds the events.
prism::daemon::Recording TinyRecording(std::vector<uint32_t> real) {
  prism::daemon::Recording rec;
  rec.graph = "tiny";
  rec.real_ranks = std::move(real);
  prism::daemon::RecordedLine comm{prism::daemon::RecordedLine::kCommunicator};
  comm.comm.comm_hash = 77;
  comm.comm.graph_comm = 0;
  comm.comm.name = "world";
  comm.comm.members = {0, 1};
  rec.lines.push_back(comm);
  return rec;
}

// Four iterations of TinyGraph's timeline in session 1, from 1 ms: A 1500
// ns, all-reduce 100, B 2500, all-reduce 100, C 700, then `p2p(batch, id,
// t, iteration)` (the point-to-point part: adds its ops, numbered from
// ++id, and moves t on to D's all-reduce), then that all-reduce (100 ns).
// The all-reduces' first sends are at their starts.
prism::daemon::RecordedLine TinyTimeline(
    const std::function<void(prism::rpc::EventBatch&, uint64_t& id, uint64_t& t, uint64_t it)>& p2p) {
  prism::daemon::RecordedLine events{prism::daemon::RecordedLine::kEvents};
  events.session = 1;
  uint64_t t = 1'000'000, id = 0;
  auto allreduce = [&](uint64_t seq) {
    AddStartedAt(events.events, ++id, prism::rpc::OP_ALL_REDUCE, seq, -1);
    AddFinishedAt(events.events, id, t, t + 100);
    t += 100;
  };
  for (uint64_t it = 0; it < 4; ++it) {
    t += 1500;
    allreduce(3 * it);
    t += 2500;
    allreduce(3 * it + 1);
    t += 700;
    p2p(events.events, id, t, it);
    allreduce(3 * it + 2);
  }
  return events;
}

}  // namespace

TEST_CASE("session capture: gaps on a made-up timeline are measured exactly, and not after a send") {
  const pg::Graph g = TinyGraph();
  prism::daemon::Recording rec = TinyRecording({0});
  // After C: send 100 (first send 5 ns in; its completion 900 ns later than
  // the stream went on), D 300.
  rec.lines.push_back(TinyTimeline([](prism::rpc::EventBatch& b, uint64_t& id, uint64_t& t, uint64_t it) {
    AddStartedAt(b, ++id, prism::rpc::OP_SEND, it, 1);
    AddFinishedAt(b, id, t + 5, t + 100 + 900);
    t += 100 + 300;
  }));
  auto measured = prism::daemon::MeasureCompute(g, rec, 1);
  INFO(measured.status().message());
  REQUIRE(measured.ok());
  REQUIRE(measured->size() == 1);
  const auto& m = (*measured)[0];
  CHECK(m.iterations == 4);
  CHECK(m.matched_ops == 16);
  // A (its gap spans the iteration boundary), B and C are measured (C up to
  // the send's first transfer, 5 ns after the send began); D follows a send.
  const std::vector<std::optional<uint64_t>> want = {1500, std::nullopt, 2500, std::nullopt, 705, std::nullopt,
                                                     std::nullopt, std::nullopt};
  std::string got;
  for (const auto& v : m.compute_ns) got += v ? std::to_string(*v) + " " : std::string("- ");
  INFO("measured: " << got);
  CHECK(m.compute_ns == want);
}

// The compute after a pipeline's grouped send and receive is measured from
// the receive's end, and from the send's too when its peer is real: a
// virtual peer's send completes at its modelled time, whenever the stream
// went on (here 1000 ns in, 500 ns after); between two real ranks the
// stream went on after the later of the two (here the send, 250 ns in).
TEST_CASE("session capture: the compute after a grouped send and receive is measured from the group's end") {
  const pg::Graph g = TinyGraph(/*grouped=*/true);
  for (const bool real_peer : {false, true}) {
    prism::daemon::Recording rec = TinyRecording(real_peer ? std::vector<uint32_t>{0, 1} : std::vector<uint32_t>{0});
    // After C, the group (send: first send 5 ns in, completed 1000 ns in, or
    // 250 with a real peer; receive: completed 200 ns in); 300 ns after the
    // group began D's all-reduce starts.
    rec.lines.push_back(TinyTimeline([&](prism::rpc::EventBatch& b, uint64_t& id, uint64_t& t, uint64_t it) {
      AddStartedAt(b, ++id, prism::rpc::OP_SEND, it, 1);
      AddFinishedAt(b, id, t + 5, t + (real_peer ? 250 : 1000));
      AddStartedAt(b, ++id, prism::rpc::OP_RECV, it, 1);
      AddFinishedAt(b, id, 0, t + 200);
      t += 200 + 300;
    }));
    auto measured = prism::daemon::MeasureCompute(g, rec, 1);
    INFO(measured.status().message());
    REQUIRE(measured.ok());
    REQUIRE(measured->size() == 1);  // rank 1 reported nothing
    const auto& m = (*measured)[0];
    CHECK(m.rank == 0);
    CHECK(m.matched_ops == 20);
    // ops: A, all-reduce, B, all-reduce, C, group start, send, receive, group end, D, all-reduce
    const std::optional<uint64_t> d = real_peer ? 250 : 300;
    const std::vector<std::optional<uint64_t>> want = {1500,         std::nullopt, 2500,         std::nullopt,
                                                       705,          std::nullopt, std::nullopt, std::nullopt,
                                                       std::nullopt, d,            std::nullopt};
    std::string got;
    for (const auto& v : m.compute_ns) got += v ? std::to_string(*v) + " " : std::string("- ");
    INFO("real peer " << real_peer << ", measured: " << got);
    CHECK(m.compute_ns == want);
  }
}
