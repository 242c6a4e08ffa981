// RealRankPrograms: which program op a real rank's reported NCCL operation is.
#include <catch2/catch.hpp>

#include "daemon/hybrid/real_rank_programs.h"

namespace g = prism::graph;
using prism::daemon::RealRankPrograms;

namespace {

// Two ranks, the world and a second communicator over the same two ranks;
// rank 0 sends to rank 1 on world, on the pair, on world again.
g::Graph TwoCommunicators() {
  g::Graph graph;
  graph.mutable_job()->set_name("two-comms");
  graph.mutable_cluster()->set_nodes(2);
  graph.mutable_cluster()->set_gpus_per_node(1);
  for (uint32_t c = 0; c < 2; ++c) {
    g::Communicator* comm = graph.add_communicators();
    comm->set_id(c);
    comm->set_kind(c == 0 ? g::COMM_KIND_WORLD : g::COMM_KIND_PP);
    comm->set_name(c == 0 ? "world" : "pair");
    comm->add_members(0);
    comm->add_members(1);
  }
  for (uint32_t p = 0; p < 2; ++p) {
    g::Program* prog = graph.add_programs();
    prog->set_id(p);
    prog->set_streams(1);
    prog->add_comm_slot_names("world");
    prog->add_comm_slot_names("pair");
    for (uint32_t slot : {0u, 1u, 0u}) {
      g::Op* op = prog->add_ops();
      if (p == 0) {
        op->mutable_send()->set_comm_slot(slot);
        op->mutable_send()->set_peer(1);
        op->mutable_send()->set_bytes(1024);
      } else {
        op->mutable_recv()->set_comm_slot(slot);
        op->mutable_recv()->set_peer(0);
        op->mutable_recv()->set_bytes(1024);
      }
    }
  }
  for (uint32_t r = 0; r < 2; ++r) {
    g::Rank* rank = graph.add_ranks();
    rank->set_rank(r);
    rank->set_program(r);
    rank->set_node(r);
    rank->add_comm_slots(0);
    rank->add_comm_slots(1);
  }
  return graph;
}

}  // namespace

TEST_CASE("send/recv are numbered per communicator, peer and direction, as NCCL numbers them", "[hybrid]") {
  auto programs = RealRankPrograms::Build(TwoCommunicators(), {0, 1});
  REQUIRE(programs.ok());
  // rank 0's sends on world: ops 0 and 2; on the pair: op 1.
  CHECK(programs->PointToPoint(0, 0, 1, true, 0)->op == 0);
  CHECK(programs->PointToPoint(0, 0, 1, true, 1)->op == 2);
  CHECK(programs->PointToPoint(0, 1, 1, true, 0)->op == 1);
  const auto next = programs->PointToPoint(0, 0, 1, true, 2);  // world's third send: next iteration's op 0
  REQUIRE(next.has_value());
  CHECK(next->op == 0);
  CHECK(next->iteration == 1);
  CHECK(programs->PointToPoint(0, 1, 1, true, 1)->iteration == 1);
  // rank 1 receives the same way; it has no sends.
  CHECK(programs->PointToPoint(1, 1, 0, false, 0)->op == 1);
  CHECK_FALSE(programs->PointToPoint(1, 0, 0, true, 0).has_value());
}

TEST_CASE("a real rank whose program puts one communicator's operations on two streams is refused, naming them",
          "[hybrid]") {
  // NCCL runs rank 0's two sends on world in the order it issued them; on
  // streams 0 and 1 the engine could call the second first for a real rank
  // (TorchTitan FSDP2+TP's captured graph stalled its refine round so,
  // 2026-12-02). Rank 1 (its own program, one stream) may still be real.
  g::Graph graph = TwoCommunicators();
  graph.mutable_programs(0)->set_streams(2);
  graph.mutable_programs(0)->mutable_ops(2)->set_stream(1);
  const auto refused = RealRankPrograms::Build(graph, {0});
  REQUIRE_FALSE(refused.ok());
  CHECK(refused.status().code() == absl::StatusCode::kInvalidArgument);
  CHECK(std::string(refused.status().message()).find("real rank 0: program 0 () op 2 (send, stream 1) follows op 0 "
                                                     "(send, stream 0) on comm slot 0 (world)") == 0);
  CHECK(RealRankPrograms::Build(graph, {1}).ok());
  // The ops of one communicator all on stream 1: in order again.
  graph.mutable_programs(0)->mutable_ops(0)->set_stream(1);
  CHECK(RealRankPrograms::Build(graph, {0}).ok());
}

// A captured program's start-up collectives (Program.startup_ops: DDP's
// parameter check and broadcasts before its first iteration) come first in
// NCCL's numbering per communicator and function; the iterations' are
// numbered after them, both ways.
TEST_CASE("start-up collectives come first in NCCL's numbering, the iterations' after them", "[hybrid]") {
  g::Graph graph = TwoCommunicators();
  for (int p = 0; p < 2; ++p) {
    g::Program* prog = graph.mutable_programs(p);
    prog->clear_ops();
    g::Op* it = prog->add_ops();  // the iteration: one all-reduce on world
    it->mutable_collective()->set_kind(g::ALLREDUCE);
    it->mutable_collective()->set_bytes(84);
    for (g::CollectiveKind kind : {g::ALLGATHER, g::BROADCAST, g::ALLREDUCE}) {  // the start-up, on world
      g::Op* s = prog->add_startup_ops();
      s->mutable_collective()->set_kind(kind);
      s->mutable_collective()->set_bytes(8);
    }
  }
  auto programs = RealRankPrograms::Build(graph, {0});
  REQUIRE(programs.ok());
  for (auto kind : {prism::rpc::OP_ALL_GATHER, prism::rpc::OP_BROADCAST, prism::rpc::OP_ALL_REDUCE}) {
    const auto startup = programs->Collective(0, 0, kind, 0);
    REQUIRE(startup.has_value());
    CHECK(startup->startup);
  }
  // The all-reduce NCCL numbers 1 is iteration 0's, 2 iteration 1's.
  const auto first = programs->Collective(0, 0, prism::rpc::OP_ALL_REDUCE, 1);
  REQUIRE(first.has_value());
  CHECK_FALSE(first->startup);
  CHECK(first->op == 0);
  CHECK(first->iteration == 0);
  CHECK(programs->Collective(0, 0, prism::rpc::OP_ALL_REDUCE, 2)->iteration == 1);
  // A second all-gather is none the program has: the iterations have none.
  CHECK_FALSE(programs->Collective(0, 0, prism::rpc::OP_ALL_GATHER, 1).has_value());
  // The engine's call 0 on world is NCCL's ALL_REDUCE #1, call 1 #2.
  CHECK(programs->CallToNccl(0, 0, 0) == std::make_pair(prism::rpc::OP_ALL_REDUCE, uint64_t{1}));
  CHECK(programs->CallToNccl(0, 0, 1) == std::make_pair(prism::rpc::OP_ALL_REDUCE, uint64_t{2}));
}
