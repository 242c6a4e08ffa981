#include "daemon/hybrid/follow_graph.h"

#include "absl/strings/str_cat.h"

namespace prism::daemon {

absl::StatusOr<graph::Graph> FollowGraph(const graph::Graph& g) {
  const int world = g.ranks_size();
  if (g.communicators_size() == 0 || g.communicators(0).members_size() != world ||
      g.communicators(0).has_split()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--follow: the graph's first communicator must be the world (", world, " ranks); give a graph of the "
        "job's world size, e.g. prism-graphgen collective --op allreduce --bytes 1K --ranks ", world,
        " --gpus-per-node 8 -o world.graph"));
  }
  graph::Graph f;
  *f.mutable_job() = g.job();
  f.mutable_job()->set_name(absl::StrCat("follow:", g.job().name()));
  *f.mutable_cluster() = g.cluster();
  *f.add_communicators() = g.communicators(0);
  graph::Program* p = f.add_programs();
  p->set_id(0);
  p->set_name("follow");
  p->set_streams(1);
  p->add_comm_slot_names("world");
  p->add_ops()->mutable_compute()->set_label("follow: the real ranks' program is not known");
  for (const graph::Rank& r : g.ranks()) {
    graph::Rank* fr = f.add_ranks();
    fr->set_rank(r.rank());
    fr->set_program(0);
    fr->set_node(r.node());
    fr->set_local_gpu(r.local_gpu());
    fr->add_comm_slots(0);
  }
  return f;
}

}  // namespace prism::daemon
