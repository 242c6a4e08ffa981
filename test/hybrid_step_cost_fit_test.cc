// NCCL's step cost fitted by prism capture (daemon/hybrid/step_cost_fit.h):
// synthetic recordings of a real rank's ring collectives timed with a known
// cost per step, the fit's refusals, the figure carried by the capture
// header into the extrapolated graph and back from the graph file, and
// prismd playing it (docs/capture.md, "NCCL's step cost, measured").
#include <catch2/catch.hpp>

#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "daemon/engine/nccl_tuning.h"
#include "daemon/engine/network_model.h"
#include "daemon/hybrid/step_cost_fit.h"
#include "daemon/hybrid/step_cost_watch.h"
#include "graphgen/capture_recording.h"
#include "graphgen/cli.h"
#include "graphgen/extrapolate.h"
#include "nlohmann/json.hpp"
#include "proto/graph_file.h"
#include "test/daemon_test_graphs.h"
#include "test/run_command.h"

namespace {

namespace g = prism::graph;
using prism::Bytes;
using prism::Nanoseconds;
using prism::daemon::RecordedLine;
using prism::daemon::Recording;

constexpr uint64_t kComm = 77;

// N nodes of one GPU, one 10 Gbit/s NIC of 10 us each.
g::Cluster TenGig(uint32_t nodes) {
  g::Cluster c;
  c.set_nodes(nodes);
  c.set_gpus_per_node(1);
  c.mutable_nic()->set_count(1);
  c.mutable_nic()->set_bandwidth_bps(10'000'000'000);
  c.mutable_nic()->set_latency_ns(10'000);
  c.mutable_intra_node()->set_bandwidth_bps(900'000'000'000);
  c.mutable_intra_node()->set_latency_ns(1'000);
  return c;
}

struct SyntheticOp {
  prism::rpc::OpKind kind = prism::rpc::OP_ALL_GATHER;
  std::string protocol = "SIMPLE";
  uint64_t bytes_per_member = 4096;  // NCCL's count * type size (all-gather: per member)
  int64_t c_ns = 8'000;              // the per-step cost its duration is made with
  int64_t start_ns = 0;              // first send; 0: right after the previous op plus 1 ms
  int64_t duration_ns = 0;           // 0: the model's ring time with c_ns
};

// The model's ring time of `op` with step cost c: h (W/(2h) + L + c) + W/(2h).
int64_t RingDuration(const SyntheticOp& op, uint32_t n) {
  const prism::engine::NetworkModel model(prism::engine::NetworkModel::LinkFiguresFromCluster(TenGig(n)));
  const prism::engine::CommShape shape{n, n, 1, 1};
  const auto kind = op.kind == prism::rpc::OP_ALL_REDUCE ? g::ALLREDUCE : g::ALLGATHER;
  const uint64_t bytes = op.kind == prism::rpc::OP_ALL_REDUCE ? op.bytes_per_member : op.bytes_per_member * n;
  const int64_t h = op.kind == prism::rpc::OP_ALL_REDUCE ? 2 * (n - 1) : n - 1;
  const int64_t step = model.RingWireTime(kind, Bytes(bytes), shape).count() / h;
  const int64_t slice = step / 2;  // the model's two slices per step, whatever the protocol
  return h * (slice + 10'000 + op.c_ns) + (step - slice);
}

// Rank 0's operations on a world communicator of n members, as the plugin reports them.
Recording RecordingOf(uint32_t n, const std::vector<SyntheticOp>& ops) {
  Recording rec;
  rec.graph = "follow:world";
  RecordedLine comm{RecordedLine::kCommunicator};
  comm.comm.comm_hash = kComm;
  comm.comm.graph_comm = 0;
  comm.comm.name = "world";
  for (uint32_t r = 0; r < n; ++r) comm.comm.members.push_back(r);
  rec.lines.push_back(comm);
  int64_t at = 1'000'000'000;
  uint64_t id = 0;
  for (const SyntheticOp& op : ops) {
    RecordedLine l{RecordedLine::kEvents};
    l.session = 1;
    const int64_t start = op.start_ns ? op.start_ns : at + 1'000'000;
    const int64_t duration = op.duration_ns ? op.duration_ns : RingDuration(op, n);
    auto* s = l.events.add_events()->mutable_op_started();
    s->set_op_id(++id);
    s->mutable_key()->set_comm_hash(kComm);
    s->mutable_key()->set_kind(op.kind);
    s->mutable_key()->set_seq(id);
    s->mutable_key()->set_peer(-1);
    s->set_comm_rank(0);
    s->set_comm_size(static_cast<int32_t>(n));
    s->set_bytes(op.bytes_per_member);
    s->set_algo_name("RING");
    s->set_proto_name(op.protocol);
    s->set_at_ns(static_cast<uint64_t>(start - 5'000));
    auto* f = l.events.add_events()->mutable_op_finished();
    f->set_op_id(id);
    f->set_first_send_ns(static_cast<uint64_t>(start));
    f->set_end_ns(static_cast<uint64_t>(start + duration));
    rec.lines.push_back(l);
    at = start + duration;
  }
  return rec;
}

std::vector<prism::daemon::StepCostFit> Fit(uint32_t n, const std::vector<SyntheticOp>& ops,
                                            Nanoseconds run_step_cost = Nanoseconds(0)) {
  g::Graph placement;
  *placement.mutable_cluster() = TenGig(n);
  const auto timings = prism::daemon::RingOpTimings(RecordingOf(n, ops), placement);
  REQUIRE(timings.count(0) == 1);
  return prism::daemon::FitStepCost(timings.at(0), placement.cluster(), run_step_cost);
}

// Ten all-gathers over 1024 ranks (4 KiB per member: 3.3 us of wire per
// step, latency-bound), per-step costs 7 to 9 us around 8 us, and one
// warm-up operation at 50 us.
std::vector<SyntheticOp> TenAllGathers() {
  std::vector<SyntheticOp> ops;
  for (int64_t c : {50'000, 7'000, 9'000, 7'500, 8'500, 8'000, 7'800, 8'200, 8'000, 7'900, 8'100}) {
    SyntheticOp op;
    op.c_ns = c;
    ops.push_back(op);
  }
  return ops;
}

std::string TempPath(const std::string& name) { return "/tmp/prism-step-cost-test-" + std::to_string(getpid()) + name; }

std::pair<int, std::string> Prismd(const std::string& args) {
  return prism::testing::RunCommand(std::string(PRISMD_PATH) + " " + args, TempPath(".out"));
}

// A world ring all-gather of `bytes` over `ranks` nodes of one GPU on TenGig's links.
g::Graph WorldAllGather(uint32_t ranks, uint64_t bytes) {
  prism::testing::ClusterSpec links;
  links.gpus_per_node = 1;
  links.nics_per_node = 1;
  links.nic_bps = 10'000'000'000;
  links.nic_latency_ns = 10'000;
  g::Graph gr = prism::testing::CollectiveGraph(ranks, g::ALLGATHER, bytes, g::ALGORITHM_RING, 1, 0, links);
  return gr;
}

}  // namespace

TEST_CASE("step cost: the fit gives back the per-step cost a latency-bound ring was timed with",
          "[step_cost][capture]") {
  const auto fits = Fit(1024, TenAllGathers());
  REQUIRE(fits.size() == 1);
  CHECK(fits[0].protocol == "SIMPLE");
  REQUIRE(fits[0].cost.has_value());
  CHECK(*fits[0].cost == Nanoseconds(8'000));  // the median: the warm-up outlier does not move it
  CHECK(fits[0].used_ops == 11);
  CHECK(fits[0].ring_ops == 11);
  CHECK(fits[0].p10 == Nanoseconds(7'500));
  CHECK(fits[0].p90 == Nanoseconds(9'000));
  const auto entries = prism::daemon::StepCostEntries(fits, 0);
  REQUIRE(entries.size() == 1);
  CHECK(entries[0].cost_ns() == 8'000);
  CHECK(entries[0].ops() == 11);
  CHECK(entries[0].algorithm() == g::ALGORITHM_RING);
  CHECK(entries[0].source().rfind("measured by prism capture on rank 0, 11 ops (NCCL SIMPLE ring, median of 11 "
                                  "latency-bound ring all-gathers of 11",
                                  0) == 0);
  // All-reduces (2(n-1) steps) and LL fit the same way (the model's formula), each protocol on its own.
  std::vector<SyntheticOp> mixed;
  for (int i = 0; i < 8; ++i) {
    SyntheticOp ar;
    ar.kind = prism::rpc::OP_ALL_REDUCE;
    ar.bytes_per_member = 1 << 20;
    ar.c_ns = 11'000;
    mixed.push_back(ar);
    SyntheticOp ll;
    ll.protocol = "LL";
    ll.bytes_per_member = 64;
    ll.c_ns = 3'000;
    mixed.push_back(ll);
  }
  const auto two = Fit(2048, mixed);
  REQUIRE(two.size() == 2);
  CHECK(two[0].protocol == "LL");
  REQUIRE(two[0].cost.has_value());
  CHECK(*two[0].cost == Nanoseconds(3'000));
  CHECK(two[1].protocol == "SIMPLE");
  REQUIRE(two[1].cost.has_value());
  CHECK(*two[1].cost == Nanoseconds(11'000));
  CHECK(prism::daemon::DescribeFits(two, 0).find("SIMPLE ring 11.00 us per step (median of 8 latency-bound ring "
                                                 "all-reduces of 8") != std::string::npos);
}

// Counts what the watch forwards.
struct CountingSource final : prism::daemon::ScheduleSource {
  int events = 0, communicators = 0;
  void OnEvents(prism::daemon::SessionId, const prism::rpc::EventBatch&, prism::rpc::ScheduleBatch*) override {
    ++events;
  }
  void OnCommunicator(const prism::daemon::CommDescription&) override { ++communicators; }
};

TEST_CASE("step cost: a live hybrid run's watch fits its real rank's step cost and names the --step-cost-us for "
          "--simulate",
          "[step_cost][hybrid]") {
  CountingSource next;
  prism::daemon::StepCostWatch watch(&next);
  g::Graph graph;
  *graph.mutable_cluster() = TenGig(1024);
  CHECK(prism::daemon::StepCostReport(watch.Timings(graph), graph.cluster(), Nanoseconds(5'000)).empty());  // nothing yet
  const Recording rec = RecordingOf(1024, TenAllGathers());
  for (const RecordedLine& l : rec.lines) {
    if (l.kind == RecordedLine::kCommunicator) watch.OnCommunicator(l.comm);
    if (l.kind != RecordedLine::kEvents) continue;
    prism::rpc::EventBatch batch = l.events;
    batch.add_events()->mutable_completed();  // a per-message event: forwarded, not kept
    prism::rpc::ScheduleBatch reply;
    watch.OnEvents(l.session, batch, &reply);
  }
  CHECK(next.communicators == 1);
  CHECK(next.events == 11);
  // The run played 5 us per step; its NCCL took 8 (the synthetic ops' median).
  const std::vector<std::string> lines =
      prism::daemon::StepCostReport(watch.Timings(graph), graph.cluster(), Nanoseconds(5'000));
  REQUIRE(lines.size() == 2);
  CHECK(lines[0].find("step cost, rank 0: SIMPLE ring 8.00 us per step") == 0);
  CHECK(lines[1].find("rank 0's NCCL took 8.00 us per ring step (of the fits above, the one prismd plays from a "
                      "graph) where this run played 5.00: prismd --simulate --step-cost-us 8.00") == 0);
  // ... and the job file's line that makes a graph carry it.
  CHECK(lines[1].find("'nccl_step_cost_us: 8.00' in the job file's cluster") != std::string::npos);
}

TEST_CASE("step cost: too few latency-bound operations, bandwidth-bound and overlapped ones give no figure",
          "[step_cost][capture]") {
  std::vector<SyntheticOp> seven = TenAllGathers();
  seven.resize(7);
  auto fits = Fit(1024, seven);
  REQUIRE(fits.size() == 1);
  CHECK_FALSE(fits[0].cost.has_value());
  CHECK(fits[0].detail.find("7 latency-bound ring operations of 7, fewer than the 8 a fit needs") !=
        std::string::npos);
  CHECK(prism::daemon::StepCostEntries(fits, 0).empty());

  // 1 MiB per member over 16 ranks: 839 us of wire per step, bandwidth-bound; rings of 8: too short.
  std::vector<SyntheticOp> wide(10);
  for (SyntheticOp& op : wide) op.bytes_per_member = 1 << 20;
  fits = Fit(16, wide);
  REQUIRE(fits.size() == 1);
  CHECK_FALSE(fits[0].cost.has_value());
  CHECK(fits[0].detail.find("0 on rings of under 16 members, 10 bandwidth-bound") != std::string::npos);
  fits = Fit(8, TenAllGathers());
  CHECK(fits[0].detail.find("11 on rings of under 16 members") != std::string::npos);

  // Two operations in flight together share the NIC: both left out.
  std::vector<SyntheticOp> overlapping = TenAllGathers();
  SyntheticOp extra;
  extra.start_ns = 1'000'000'000 + 1'000'000 + 100'000;  // inside the first operation
  extra.c_ns = 60'000;  // ends after the first one: the next starts after both
  overlapping.insert(overlapping.begin() + 1, extra);
  fits = Fit(1024, overlapping);
  REQUIRE(fits[0].cost.has_value());
  CHECK(fits[0].used_ops == 10);
  CHECK(fits[0].detail.find("2 overlapping another operation") != std::string::npos);

  // Steps faster than the link latency, and steps that carry no data: no figure.
  std::vector<SyntheticOp> fast(8);
  for (SyntheticOp& op : fast) op.c_ns = -6'000;
  fits = Fit(1024, fast);
  CHECK_FALSE(fits[0].cost.has_value());
  CHECK(fits[0].detail.find("8 of 8 latency-bound ring operations came out below the 0.00 us per step") !=
        std::string::npos);
  std::vector<SyntheticOp> empty(10);
  for (SyntheticOp& op : empty) op.bytes_per_member = 32;
  fits = Fit(1024, empty);
  CHECK_FALSE(fits[0].cost.has_value());
  CHECK(fits[0].detail.find("10 with under 64 bytes per step") != std::string::npos);
}

TEST_CASE("step cost: operations the run's lockstep floor may have paced only bound the figure",
          "[step_cost][capture]") {
  // A run that played 12.5 us: rings at 11 us per step came out under it: no figure, and why.
  std::vector<SyntheticOp> under(10);
  for (SyntheticOp& op : under) op.c_ns = 11'000;
  auto fits = Fit(1024, under, Nanoseconds(12'500));
  REQUIRE(fits.size() == 1);
  CHECK_FALSE(fits[0].cost.has_value());
  CHECK(fits[0].detail.find("10 of 10 latency-bound ring operations came out below the 12.50 us per step the "
                            "run played") != std::string::npos);
  CHECK(fits[0].detail.find("--step-cost-us 0") != std::string::npos);
  // Rings slower than the run's figure were paced by the real rank itself: measured.
  std::vector<SyntheticOp> over(10);
  for (SyntheticOp& op : over) op.c_ns = 14'000;
  over[0].c_ns = 12'000;  // one under: left out, not enough to refuse
  fits = Fit(1024, over, Nanoseconds(12'500));
  REQUIRE(fits[0].cost.has_value());
  CHECK(*fits[0].cost == Nanoseconds(14'000));
  CHECK(fits[0].used_ops == 9);
  CHECK(fits[0].detail.find("1 below the run's own 12.50 us") != std::string::npos);
  // Rings the floor paced: the model's ring with the run's 12.5 us from the first send, less the
  // first step's c (paid before it), plus 20 us of the real rank's own after the last receive.
  std::vector<SyntheticOp> floor(10);
  for (SyntheticOp& op : floor) {
    op.c_ns = 12'500;
    op.duration_ns = RingDuration(op, 1024) - 12'500 + 20'000;
  }
  fits = Fit(1024, floor, Nanoseconds(12'500));
  CHECK_FALSE(fits[0].cost.has_value());
  CHECK(fits[0].detail.find("10 of 10 latency-bound ring operations came out below the 12.50 us") !=
        std::string::npos);
}

TEST_CASE("step cost: the capture header's figure goes into the extrapolated graph and back from its file",
          "[step_cost][capture]") {
  // A world-ring program on 4 ranks; rank 0's recording carries its figure.
  const g::Graph job = WorldAllGather(4, 4096);
  auto rec0 = prism::graphgen::RecordingFromGraph(job, 0);
  REQUIRE(rec0.ok());
  auto rec2 = prism::graphgen::RecordingFromGraph(job, 2);
  REQUIRE(rec2.ok());
  const auto fits = Fit(1024, TenAllGathers());
  for (auto& e : prism::daemon::StepCostEntries(fits, 0)) *rec0->header.add_nccl_step_costs() = e;

  // Written and parsed back in the recording format.
  auto parsed = prism::graphgen::ParseRecording(prism::graphgen::EncodeRecording(*rec0), "rank-0");
  REQUIRE(parsed.ok());
  REQUIRE(parsed->header.nccl_step_costs_size() == 1);

  auto one = prism::graphgen::Extrapolate({*parsed, *rec2}, {});
  REQUIRE(one.ok());
  REQUIRE(one->graph.cluster().nccl_step_costs_size() == 1);
  CHECK(one->graph.cluster().nccl_step_costs(0).cost_ns() == 8'000);
  CHECK(one->graph.cluster().nccl_step_costs(0).source().rfind("measured by prism capture on rank 0, 11 ops", 0) ==
        0);
  // Two recorded ranks with figures: the mean weighted by their operations.
  g::NcclStepCost other = parsed->header.nccl_step_costs(0);
  other.set_cost_ns(12'000);
  other.set_ops(33);
  *rec2->header.add_nccl_step_costs() = other;
  auto both = prism::graphgen::Extrapolate({*parsed, *rec2}, {});
  REQUIRE(both.ok());
  REQUIRE(both->graph.cluster().nccl_step_costs_size() == 1);
  CHECK(both->graph.cluster().nccl_step_costs(0).cost_ns() == 11'000);  // (8 * 11 + 12 * 33) / 44
  CHECK(both->graph.cluster().nccl_step_costs(0).ops() == 44);
  CHECK(both->graph.cluster().nccl_step_costs(0).source().rfind("measured by prism capture on ranks 0, 2, 44 ops",
                                                                0) == 0);

  // prism-graphgen extrapolate with a graph's cluster (what prism capture passes: the world graph):
  // the recordings' figure wins over that cluster's (none here), which is kept otherwise.
  const std::string dir = TempPath("-recordings"), cluster = TempPath("-cluster.graph"), out = TempPath("-x.graph");
  std::filesystem::create_directory(dir);
  std::ofstream(dir + "/rank-0.capture.jsonl") << prism::graphgen::EncodeRecording(*parsed);
  g::Graph cluster_graph = job;
  REQUIRE(g::WriteGraphFile(cluster_graph, cluster).ok());
  std::ostringstream cli_out, cli_err;
  REQUIRE(prism::graphgen::RunGraphgenCli({"prism-graphgen", "extrapolate", dir, "--cluster", cluster, "-o", out},
                                          cli_out, cli_err) == 0);
  auto written = g::ReadGraphFile(out);
  REQUIRE(written.ok());
  REQUIRE(written->cluster().nccl_step_costs_size() == 1);
  CHECK(written->cluster().nccl_step_costs(0).cost_ns() == 8'000);
  std::remove(out.c_str());
  auto bare = *rec0;  // no figure of its own: the cluster graph's stands
  bare.header.clear_nccl_step_costs();
  std::ofstream(dir + "/rank-0.capture.jsonl") << prism::graphgen::EncodeRecording(bare);
  *cluster_graph.mutable_cluster()->add_nccl_step_costs() = other;
  const std::string cluster2 = TempPath("-cluster2.graph");
  REQUIRE(g::WriteGraphFile(cluster_graph, cluster2).ok());
  REQUIRE(prism::graphgen::RunGraphgenCli({"prism-graphgen", "extrapolate", dir, "--cluster", cluster2, "-o", out},
                                          cli_out, cli_err) == 0);
  written = g::ReadGraphFile(out);
  REQUIRE(written.ok());
  REQUIRE(written->cluster().nccl_step_costs_size() == 1);
  CHECK(written->cluster().nccl_step_costs(0).cost_ns() == 12'000);
  for (const std::string& f : {out, cluster, cluster2, dir + "/rank-0.capture.jsonl"}) std::remove(f.c_str());
  std::filesystem::remove(dir);

  // The graph file keeps it, and prismd's choice reads it.
  auto encoded = g::EncodeGraph(one->graph);
  REQUIRE(encoded.ok());
  auto decoded = g::DecodeGraph(*encoded);
  REQUIRE(decoded.ok());
  REQUIRE(decoded->cluster().nccl_step_costs_size() == 1);
  const auto chosen = prism::engine::GraphNcclStepCost(decoded->cluster());
  REQUIRE(chosen.has_value());
  CHECK(chosen->cost == Nanoseconds(8'000));
  CHECK(chosen->measured == decoded->cluster().nccl_step_costs(0).source());
  CHECK_FALSE(prism::engine::GraphNcclStepCost(job.cluster()).has_value());  // none: prismd's table
  // No Simple ring entry (every ring ran LL): the ring entry fitted from the most operations.
  g::Cluster ll = job.cluster();
  for (uint32_t ops : {5u, 40u, 7u}) {
    auto* e = ll.add_nccl_step_costs();
    e->set_protocol(ops == 7 ? "LL128" : "LL");
    e->set_algorithm(g::ALGORITHM_RING);
    e->set_cost_ns(1000 * ops);
    e->set_ops(ops);
    e->set_source("fit " + std::to_string(ops));
  }
  CHECK(prism::engine::GraphNcclStepCost(ll)->cost == Nanoseconds(40'000));
  CHECK(prism::engine::GraphNcclStepCost(ll)->measured == "fit 40");
}

TEST_CASE("step cost: prismd --simulate plays the graph's measured figure unless --step-cost-us overrides it",
          "[step_cost][capture]") {
  // A 1024-rank world ring all-gather of 4 MiB (latency-bound: 3.3 us of wire per step).
  const std::string plain = TempPath("-plain.graph"), measured = TempPath("-measured.graph");
  g::Graph gr = WorldAllGather(1024, 4ull << 20);
  REQUIRE(g::WriteGraphFile(gr, plain).ok());
  auto* e = gr.mutable_cluster()->add_nccl_step_costs();
  e->set_protocol("SIMPLE");
  e->set_algorithm(g::ALGORITHM_RING);
  e->set_cost_ns(6'000);
  e->set_ops(40);
  e->set_source("measured by prism capture on rank 0, 40 ops");
  REQUIRE(g::WriteGraphFile(gr, measured).ok());

  auto [rc1, text1] = Prismd("--graph " + plain + " --simulate --json --metrics-address none");
  REQUIRE(rc1 == 0);
  const auto j1 = nlohmann::json::parse(text1);
  CHECK(j1["nccl_step_cost_us"].get<double>() == 12.5);  // prismd's table, as before
  auto [rc2, text2] = Prismd("--graph " + measured + " --simulate --json --metrics-address none");
  REQUIRE(rc2 == 0);
  const auto j2 = nlohmann::json::parse(text2);
  CHECK(j2["nccl_step_cost_us"].get<double>() == 6.0);
  CHECK(j2["nccl_step_cost_source"] == "measured by prism capture on rank 0, 40 ops");
  // 1023 steps each 6.5 us shorter: 6.65 ms less.
  CHECK(j1["iteration_time_s"].get<double>() - j2["iteration_time_s"].get<double>() == Approx(1023 * 6.5e-6).epsilon(0.01));
  auto [rc3, text3] = Prismd("--graph " + measured + " --simulate --json --metrics-address none --step-cost-us 12.5");
  REQUIRE(rc3 == 0);
  const auto j3 = nlohmann::json::parse(text3);
  CHECK(j3["nccl_step_cost_source"] == "--step-cost-us");
  CHECK(j3["iteration_time_s"].get<double>() == j1["iteration_time_s"].get<double>());
  const std::string trace = TempPath(".json");
  auto [rc4, text4] = Prismd("--graph " + measured + " --simulate --metrics-address none --trace " + trace);
  REQUIRE(rc4 == 0);
  CHECK(text4.find("NCCL step cost: 6.00 us per ring step (measured by prism capture on rank 0, 40 ops)") !=
        std::string::npos);
  std::ifstream trace_in(trace);
  const auto tj = nlohmann::json::parse(trace_in);
  CHECK(tj["metadata"]["nccl_step_cost_source"] == "measured by prism capture on rank 0, 40 ops");
  std::remove(trace.c_str());
  std::remove(plain.c_str());
  std::remove(measured.c_str());
}
