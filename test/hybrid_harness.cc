#include "test/hybrid_harness.h"

#include <time.h>

#include "daemon/engine/nccl_tuning.h"
#include "daemon/hybrid/real_rank_programs.h"

namespace prism::testing {

int64_t RealtimeNow() {
  timespec ts{};
  clock_gettime(CLOCK_REALTIME, &ts);
  return int64_t{ts.tv_sec} * 1000000000 + ts.tv_nsec;
}

HybridHarness::HybridHarness(graph::Graph graph, std::vector<uint32_t> real, Nanoseconds lookahead,
                             Nanoseconds step_cost, bool follow, Nanoseconds ring_answer_wait,
                             daemon::SessionRecorder* recorder)
    : graph_(std::move(graph)), pacer_([&] {
        engine::RealtimeOptions rt;
        rt.lookahead = lookahead;
        return rt;
      }()) {
  pacer_.Start();
  auto programs = daemon::RealRankPrograms::Build(graph_, real);
  daemon::HybridSchedulerOptions so = daemon::HybridSchedulerOptions::ForGraph(graph_);
  so.max_divergence_logs = 3;
  so.matched_logs = 0;
  so.step_cost = step_cost;
  so.unmatched_ops_diverge = !follow;
  so.ring_answer_wait = ring_answer_wait;
  so.recorder = recorder;
  so.divergences = &divergences_;
  so.iterations = engine::IterationsFor(graph_, 0).value_or(1);  // the engine's, as prismd's hybrid run gives both
  scheduler_ = std::make_unique<daemon::HybridScheduler>(std::move(*programs), &inbox_, &pacer_, nullptr, nullptr, so);
  rpc::Hello hello;
  scheduler_->OnSessionOpened(1, hello, this);
  engine::SimulationOptions o;
  o.real_ranks = std::move(real);
  o.inbox = &inbox_;
  o.pacer = &pacer_;
  o.observer = scheduler_.get();
  o.report_when_stopped = true;
  o.nccl.step_cost = step_cost;
  engine_ = std::thread([this, o] { result_ = engine::Simulate(graph_, o); });
}

// The scheduler's pusher calls PushSchedules (this object's Record) until
// StopPushing: stopped before mu_, cv_ and schedules_ go, which are
// destroyed before scheduler_ (an intermittent double free in
// hybrid_tests, 2026-12-05).
HybridHarness::~HybridHarness() {
  Stop();
  scheduler_->StopPushing();
}

absl::StatusOr<engine::SimulationResult> HybridHarness::Stop() {
  if (!stopped_) {
    stopped_ = true;
    inbox_.Post(engine::StopRequest{});
    engine_.join();
  }
  return std::move(result_);
}

void HybridHarness::OpenSession(daemon::SessionId session, int32_t rank) {
  rpc::Hello hello;
  hello.set_rank(rank);
  scheduler_->OnSessionOpened(session, hello, this);
}

void HybridHarness::Communicator(uint64_t hash, int64_t graph_comm, std::vector<uint32_t> members) {
  daemon::CommDescription c;
  c.comm_hash = hash;
  c.graph_comm = graph_comm;
  c.name = "comm" + std::to_string(graph_comm);
  c.members = std::move(members);
  scheduler_->OnCommunicator(c);
}

void HybridHarness::Record(const rpc::ScheduleBatch& b) {
  std::lock_guard<std::mutex> lock(mu_);
  for (const auto& s : b.ops()) schedules_.push_back(s);
  cv_.notify_all();
}

void HybridHarness::Feed(daemon::SessionId session, const rpc::EventBatch& batch) {
  rpc::ScheduleBatch reply;
  scheduler_->OnEvents(session, batch, &reply);
  Record(reply);
}

bool HybridHarness::PushSchedules(daemon::SessionId id, rpc::ScheduleBatch batch) {
  Record(batch);
  return true;
}

std::optional<rpc::OpSchedule> HybridHarness::WaitSchedule(const rpc::OpKey& key, std::chrono::milliseconds timeout,
                                                           bool holds) {
  std::unique_lock<std::mutex> lock(mu_);
  std::optional<rpc::OpSchedule> found;
  cv_.wait_for(lock, timeout, [&] {
    for (auto it = schedules_.rbegin(); it != schedules_.rend(); ++it)
      if (it->key().comm_hash() == key.comm_hash() && it->key().kind() == key.kind() && it->key().seq() == key.seq() &&
          it->key().peer() == key.peer() && (holds || !it->hold())) {
        found = *it;
        return true;
      }
    return false;
  });
  return found;
}

std::vector<rpc::OpSchedule> HybridHarness::AllSchedules() {
  std::lock_guard<std::mutex> lock(mu_);
  return schedules_;
}

rpc::OpKey Key(uint64_t hash, rpc::OpKind kind, uint64_t seq, int32_t peer) {
  rpc::OpKey k;
  k.set_comm_hash(hash);
  k.set_kind(kind);
  k.set_seq(seq);
  k.set_peer(peer);
  return k;
}

void AddStarted(rpc::EventBatch* b, uint64_t op_id, const rpc::OpKey& key, int32_t comm_rank, int32_t comm_size,
                uint64_t bytes, int64_t at_ns, bool ring) {
  auto* s = b->add_events()->mutable_op_started();
  s->set_op_id(op_id);
  *s->mutable_key() = key;
  s->set_comm_rank(comm_rank);
  s->set_comm_size(comm_size);
  s->set_bytes(bytes);
  s->set_algorithm(ring ? rpc::OP_ALGO_RING : rpc::OP_ALGO_UNKNOWN);
  s->set_channels(2);
  s->set_at_ns(static_cast<uint64_t>(at_ns));
}

void AddFinished(rpc::EventBatch* b, uint64_t op_id, int64_t first_send_ns, int64_t end_ns) {
  auto* f = b->add_events()->mutable_op_finished();
  f->set_op_id(op_id);
  f->set_first_send_ns(static_cast<uint64_t>(first_send_ns));
  f->set_end_ns(static_cast<uint64_t>(end_ns));
}

absl::StatusOr<double> SimulatedRingSeconds(const graph::Graph& graph) {
  engine::SimulationOptions o;
  o.iterations = 4;
  const engine::StepCost cost = engine::GraphNcclStepCost(graph.cluster()).value_or(engine::DefaultNcclStepCost());
  o.nccl.step_cost = cost.cost;
  o.step_cost_source = cost.measured;
  auto algorithms = engine::ParseNcclAlgo("Ring");
  if (!algorithms.ok()) return algorithms.status();
  o.nccl.ring = algorithms->ring;
  o.nccl.tree = algorithms->tree;
  o.nccl.pat = algorithms->pat;
  o.nccl_algo = "Ring";
  auto r = engine::Simulate(graph, o);
  if (!r.ok()) return r.status();
  if (r->report.iteration_times.size() != 4) return absl::InternalError("not 4 iterations");
  double sum = 0;
  for (size_t i = 1; i < 4; ++i) sum += static_cast<double>(r->report.iteration_times[i].count()) / 1e9;
  return sum / 3;
}

void RecordCommunicator(daemon::Recording* rec, uint64_t hash, int64_t graph_comm, std::string name,
                        std::vector<uint32_t> members) {
  daemon::RecordedLine l;
  l.kind = daemon::RecordedLine::kCommunicator;
  l.comm.comm_hash = hash;
  l.comm.graph_comm = graph_comm;
  l.comm.name = std::move(name);
  l.comm.members = std::move(members);
  rec->lines.push_back(std::move(l));
}

}  // namespace prism::testing
