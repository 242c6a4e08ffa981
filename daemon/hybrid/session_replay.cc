#include "daemon/hybrid/session_replay.h"

#include <algorithm>
#include <chrono>
#include <thread>
#include <time.h>
#include <map>
#include <tuple>
#include <mutex>
#include <set>
#include <utility>

#include "absl/strings/str_cat.h"
#include "daemon/engine/simulation.h"
#include "daemon/engine/trace_writer.h"
#include "daemon/hybrid/hybrid_scheduler.h"
#include "daemon/hybrid/real_rank_programs.h"

namespace prism::daemon {
namespace {

// Collects what the scheduler pushes (the session service's role).
// `stamp`: whether each schedule keeps the CLOCK_REALTIME it came at (paced).
class CollectingSink final : public ScheduleSink {
 public:
  explicit CollectingSink(bool stamp = false) : stamp_(stamp) {}
  bool PushSchedules(SessionId id, rpc::ScheduleBatch batch) override {
    const int64_t now = Now();
    std::lock_guard<std::mutex> lock(mu_);
    for (auto& s : *batch.mutable_ops())  // holds apart: they are not recorded either; forecasts apart
      Of(s).push_back(SessionSchedule{id, std::move(s), now});
    return true;
  }
  void Add(SessionId id, const rpc::ScheduleBatch& reply) {
    const int64_t now = Now();
    std::lock_guard<std::mutex> lock(mu_);
    for (const auto& s : reply.ops()) Of(s).push_back(SessionSchedule{id, s, now});
  }
  std::vector<SessionSchedule> Take() {
    std::lock_guard<std::mutex> lock(mu_);
    return std::move(out_);
  }
  std::vector<SessionSchedule> TakeHolds() {
    std::lock_guard<std::mutex> lock(mu_);
    return std::move(holds_);
  }
  std::vector<SessionSchedule> TakeForecasts() {
    std::lock_guard<std::mutex> lock(mu_);
    return std::move(forecasts_);
  }

 private:
  std::vector<SessionSchedule>& Of(const rpc::OpSchedule& s) {
    return s.hold() ? holds_ : s.has_after() ? forecasts_ : out_;
  }
  int64_t Now() const {
    if (!stamp_) return 0;
    timespec ts{};
    clock_gettime(CLOCK_REALTIME, &ts);
    return static_cast<int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
  }

  const bool stamp_;
  std::mutex mu_;
  std::vector<SessionSchedule> out_, holds_, forecasts_;
};

std::string KeyText(uint64_t session, const rpc::OpKey& k) {
  return absl::StrCat("session ", session, " ", rpc::OpKind_Name(k.kind()), " #", k.seq(), " comm ", k.comm_hash(),
                      k.peer() >= 0 ? absl::StrCat(" peer ", k.peer()) : std::string());
}

// (key text, occurrence) -> schedule: a key scheduled twice is compared in order.
std::map<std::pair<std::string, int>, const rpc::OpSchedule*> Index(const std::vector<SessionSchedule>& list) {
  std::map<std::pair<std::string, int>, const rpc::OpSchedule*> out;
  std::map<std::string, int> seen;
  for (const SessionSchedule& s : list) {
    const std::string k = KeyText(s.session, s.schedule.key());
    out[{k, seen[k]++}] = &s.schedule;
  }
  return out;
}

std::string Difference(const rpc::OpSchedule& e, const rpc::OpSchedule& a, int64_t tolerance_ns) {
  if (e.mode() != a.mode())
    return absl::StrCat("mode ", rpc::OpSchedule::Mode_Name(e.mode()), " became ", rpc::OpSchedule::Mode_Name(a.mode()));
  if (e.unmatched() != a.unmatched()) return absl::StrCat("unmatched ", e.unmatched(), " became ", a.unmatched());
  if (e.link_bits_per_second() != a.link_bits_per_second() || e.link_latency_ns() != a.link_latency_ns())
    return absl::StrCat("link ", e.link_bits_per_second(), " b/s + ", e.link_latency_ns(), " ns became ",
                        a.link_bits_per_second(), " b/s + ", a.link_latency_ns(), " ns");
  const int64_t d = static_cast<int64_t>(a.ready_ns()) - static_cast<int64_t>(e.ready_ns());
  if (d > tolerance_ns || -d > tolerance_ns)
    return absl::StrCat("ready moved by ", d, " ns (", e.ready_ns(), " -> ", a.ready_ns(), ")");
  return "";
}

}  // namespace

namespace {

// The live run's scheduler, bounded by the iterations its engine replayed
// when the recording says.
HybridSchedulerOptions ReplaySchedulerOptions(const graph::Graph& graph, const Recording& recording) {
  HybridSchedulerOptions so = HybridSchedulerOptions::ForGraph(graph);
  so.max_divergence_logs = 3;
  so.matched_logs = 0;
  so.iterations = recording.iterations;
  so.ring_answer_wait = Nanoseconds(0);  // the unpaced engine runs after the input; paced replays set it
  return so;
}

// The session threads' part for one recorded line.
void FeedLine(const RecordedLine& line, HybridScheduler* scheduler, CollectingSink* sink,
              std::set<uint64_t>* opened) {
  if (line.kind == RecordedLine::kCommunicator) {
    scheduler->OnCommunicator(line.comm);
  } else if (line.kind == RecordedLine::kEvents) {
    if (opened->insert(line.session).second) {
      rpc::Hello hello;
      hello.set_rank(-1);  // recordings do not keep it; their communicators are all recorded
      scheduler->OnSessionOpened(line.session, hello, sink);
    }
    rpc::ScheduleBatch reply;
    scheduler->OnEvents(line.session, line.events, &reply);
    sink->Add(line.session, reply);
  }
}

engine::SimulationOptions ReplayEngineOptions(const Recording& recording, engine::EngineInbox* inbox,
                                              HybridScheduler* scheduler, const std::vector<uint32_t>& trace_ranks,
                                              const engine::NcclBehaviour& nccl, engine::NicModel nic_model,
                                              const std::vector<engine::LateRank>& late) {
  engine::SimulationOptions o;
  o.nccl = nccl;
  o.nic_model = nic_model;
  o.late = late;
  o.real_ranks = recording.real_ranks;
  o.iterations = recording.iterations;  // 0: the graph's
  o.inbox = inbox;
  o.observer = scheduler;
  o.report_when_stopped = true;
  if (!trace_ranks.empty()) {
    o.trace_ranks = trace_ranks;
    o.use_classes = false;
  }
  return o;
}

SessionReplayResult Collect(const engine::SimulationResult& result, HybridScheduler* scheduler,
                            CollectingSink* sink) {
  scheduler->Flush();
  SessionReplayResult out;
  out.schedules = sink->Take();
  out.holds = sink->TakeHolds();
  out.forecasts = sink->TakeForecasts();
  const HybridScheduler::Counters c = scheduler->counters();
  out.ops_matched = c.ops_matched;
  out.ops_unmatched = c.ops_unmatched;
  out.divergences = c.divergences;
  out.schedules_late = c.schedules_late;
  out.forecast_misses = c.forecast_misses;
  out.send_forecasts = c.send_forecasts;
  out.engine_finished = !result.report.stopped;
  out.iteration_times = result.report.iteration_times;
  // Emulated time 0 is the recording's start (moved to now in a paced replay).
  if (result.trace != nullptr) out.trace = result.trace->ops();
  if (result.world != nullptr) out.actor_of_rank = result.world->actor_of_rank;
  return out;
}

int64_t WallRealtimeNs() {
  timespec ts{};
  clock_gettime(CLOCK_REALTIME, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

void Shift(uint64_t* stamp, int64_t by) {
  if (*stamp > 0) *stamp = static_cast<uint64_t>(static_cast<int64_t>(*stamp) + by);
}

// Moves every CLOCK_REALTIME stamp of `out` the scheduler reads by `by`.
void Shift(Recording* out, int64_t by) {
  out->start_realtime_ns += by;
  for (RecordedLine& line : out->lines) {
    line.at += by;
    for (rpc::Event& e : *line.events.mutable_events()) {
      uint64_t t = 0;
      if (e.has_op_started()) {
        t = e.op_started().at_ns(), Shift(&t, by), e.mutable_op_started()->set_at_ns(t);
      } else if (e.has_op_finished()) {
        t = e.op_finished().first_send_ns(), Shift(&t, by), e.mutable_op_finished()->set_first_send_ns(t);
        t = e.op_finished().end_ns(), Shift(&t, by), e.mutable_op_finished()->set_end_ns(t);
      } else if (e.has_posted()) {
        t = e.posted().at_ns(), Shift(&t, by), e.mutable_posted()->set_at_ns(t);
      } else if (e.has_completed()) {
        t = e.completed().at_ns(), Shift(&t, by), e.mutable_completed()->set_at_ns(t);
      }
    }
  }
}

}  // namespace

absl::StatusOr<SessionReplayResult> ReplaySessions(const graph::Graph& graph, const Recording& recording,
                                                   const std::vector<uint32_t>& trace_ranks,
                                                   const engine::NcclBehaviour& nccl, engine::NicModel nic_model,
                                                   const std::vector<engine::LateRank>& late) {
  auto programs = RealRankPrograms::Build(graph, recording.real_ranks);
  if (!programs.ok()) return programs.status();
  engine::EngineInbox inbox;
  engine::WallClockPacer clock(engine::RealtimeOptions{});  // time conversions only: the engine is unpaced
  clock.StartAtRealtime(Nanoseconds(recording.start_realtime_ns));
  CollectingSink sink;
  HybridScheduler scheduler(std::move(*programs), &inbox, &clock, nullptr, nullptr, ReplaySchedulerOptions(graph, recording));
  std::set<uint64_t> opened;
  // Every report goes into the inbox before the engine starts; the engine
  // then applies each at its own time.
  for (const RecordedLine& line : recording.lines) FeedLine(line, &scheduler, &sink, &opened);
  inbox.Post(engine::EndOfInput{});
  auto result = engine::Simulate(graph, ReplayEngineOptions(recording, &inbox, &scheduler, trace_ranks, nccl, nic_model, late));
  if (!result.ok()) return result.status();
  return Collect(*result, &scheduler, &sink);
}

absl::StatusOr<SessionReplayResult> ReplaySessionsPaced(const graph::Graph& graph, const Recording& recording,
                                                        const PacedReplayOptions& options) {
  auto programs = RealRankPrograms::Build(graph, recording.real_ranks);
  if (!programs.ok()) return programs.status();
  // The copy first: a large recording takes a while to copy, and the replay
  // starts 100 ms after it (the engine builds its world meanwhile).
  Recording live = recording;
  const int64_t shift = WallRealtimeNs() + 100'000'000 - recording.start_realtime_ns;
  Shift(&live, shift);
  engine::EngineInbox inbox;
  engine::RealtimeOptions rt;
  rt.lookahead = options.lookahead.value_or(Nanoseconds(recording.lookahead_ns));
  rt.spin = options.spin.value_or(rt.spin);
  engine::WallClockPacer pacer(rt);
  pacer.StartAtRealtime(Nanoseconds(live.start_realtime_ns));
  CollectingSink sink(/*stamp=*/true);
  HybridSchedulerOptions so = ReplaySchedulerOptions(graph, recording);
  so.step_cost = options.nccl.step_cost;  // as prismd's (hybrid_run.cc)
  so.ring_answer_wait = options.ring_answer_wait.value_or(HybridSchedulerOptions().ring_answer_wait);
  so.forecast = options.forecast;
  so.recorder = options.recorder;
  HybridScheduler scheduler(std::move(*programs), &inbox, &pacer, nullptr, nullptr, so);
  std::thread feeder([&] {  // each line when its time comes
    std::set<uint64_t> opened;
    for (const RecordedLine& line : live.lines) {
      const int64_t wait = line.at - WallRealtimeNs();
      if (wait > 0) std::this_thread::sleep_for(std::chrono::nanoseconds(wait));
      FeedLine(line, &scheduler, &sink, &opened);
    }
    inbox.Post(engine::EndOfInput{});
  });
  engine::SimulationOptions o = ReplayEngineOptions(recording, &inbox, &scheduler, options.trace_ranks, options.nccl,
                                                    options.nic_model, options.late);
  o.pacer = &pacer;
  auto result = engine::Simulate(graph, o);
  feeder.join();
  if (!result.ok()) return result.status();
  SessionReplayResult out = Collect(*result, &scheduler, &sink);
  out.lags = pacer.Lags();
  out.steady_lags = scheduler.SteadyLags();
  out.max_lag = pacer.max_lag();
  for (std::vector<SessionSchedule>* list : {&out.schedules, &out.forecasts})
    for (SessionSchedule& s : *list) {  // back to the recording's clock
      uint64_t t = s.schedule.ready_ns();
      Shift(&t, -shift);
      s.schedule.set_ready_ns(t);
      s.sent_ns -= shift;
    }
  for (SessionSchedule& s : out.holds) s.sent_ns -= shift;
  return out;
}

std::vector<SessionSchedule> RecordedSchedules(const Recording& recording) {
  std::vector<SessionSchedule> out;
  for (const RecordedLine& line : recording.lines)
    if (line.kind == RecordedLine::kSchedule && !line.schedule.has_after())  // forecasts apart, as replayed
      out.push_back(SessionSchedule{line.session, line.schedule});
  return out;
}

std::vector<std::string> CompareSchedules(const std::vector<SessionSchedule>& expected,
                                          const std::vector<SessionSchedule>& actual, int64_t tolerance_ns,
                                          size_t max_lines) {
  const auto e = Index(expected), a = Index(actual);
  std::vector<std::string> out;
  size_t total = 0;
  auto add = [&](std::string line) {
    if (++total <= max_lines) out.push_back(std::move(line));
  };
  for (const auto& [key, sched] : e) {
    const auto it = a.find(key);
    if (it == a.end()) {
      add(absl::StrCat(key.first, ": recorded, not replayed"));
      continue;
    }
    if (std::string d = Difference(*sched, *it->second, tolerance_ns); !d.empty()) add(key.first + ": " + d);
  }
  for (const auto& [key, sched] : a)
    if (e.find(key) == e.end()) add(absl::StrCat(key.first, ": replayed, not recorded"));
  if (total > max_lines) out.push_back(absl::StrCat("... and ", total - max_lines, " more"));
  return out;
}

Recording KeepOperationEvents(const Recording& recording) {
  Recording out = recording;
  out.lines.clear();
  for (const RecordedLine& line : recording.lines) {
    if (line.kind != RecordedLine::kEvents) {
      out.lines.push_back(line);
      continue;
    }
    RecordedLine kept = line;
    kept.events.clear_events();
    for (const rpc::Event& e : line.events.events())
      if (e.has_op_started() || e.has_op_finished()) *kept.events.add_events() = e;
    if (kept.events.events_size() > 0) out.lines.push_back(std::move(kept));
  }
  return out;
}

namespace {

// What ModelRecording knows of one real rank while it walks the model's trace.
class ModelRankWriter {
 public:
  ModelRankWriter(const graph::Graph& graph, uint32_t rank) : graph_(graph), rank_(rank) {
    const graph::Rank& r = graph.ranks(static_cast<int>(rank));
    program_ = &graph.programs(static_cast<int>(r.program()));
    slots_.assign(r.comm_slots().begin(), r.comm_slots().end());
  }

  static uint64_t HashOf(uint32_t graph_comm) { return 0x5052000000000000ull + graph_comm; }  // "PR" + id

  // Appends (time, is_finish, event) for op `k` if it is a communication op.
  // `played`: the algorithm the model played for a collective (what the real
  // rank's NCCL would report), else the graph's.
  void Add(uint32_t k, int64_t start, int64_t end, uint64_t* next_op_id,
           std::vector<std::tuple<int64_t, int, uint32_t, rpc::Event>>* out,
           graph::Algorithm played = graph::ALGORITHM_DEFAULT) {
    const graph::Op& op = program_->ops(static_cast<int>(k));
    rpc::OpStarted s;
    uint32_t comm = 0;
    if (op.has_collective()) {
      comm = slots_[op.collective().comm_slot()];
      const rpc::OpKind kind = RealRankPrograms::NcclKind(op.collective().kind());
      const uint32_t size = Members(comm).size();
      s.mutable_key()->set_kind(kind);
      s.mutable_key()->set_seq(collective_seq_[{comm, kind}]++);
      s.mutable_key()->set_peer(-1);
      const bool per_rank = kind == rpc::OP_ALL_GATHER || kind == rpc::OP_REDUCE_SCATTER;
      s.set_bytes(per_rank ? op.collective().bytes() / std::max(size, 1u) : op.collective().bytes());
      const graph::Algorithm a = played != graph::ALGORITHM_DEFAULT ? played : op.collective().algorithm();
      s.set_algorithm(a == graph::ALGORITHM_TREE  ? rpc::OP_ALGO_TREE
                      : a == graph::ALGORITHM_PAT ? rpc::OP_ALGO_OTHER  // what the plugin reports for PAT
                                                  : rpc::OP_ALGO_RING);
      if (a == graph::ALGORITHM_PAT) s.set_algo_name("PAT");  // and NCCL's name, as the plugin passes it on
    } else if (op.has_send() || op.has_recv()) {
      const bool send = op.has_send();
      comm = slots_[send ? op.send().comm_slot() : op.recv().comm_slot()];
      const uint32_t peer_field = send ? op.send().peer() : op.recv().peer();
      const bool relative = send ? op.send().peer_relative() : op.recv().peer_relative();
      const std::vector<uint32_t>& m = Members(comm);
      const uint32_t me = CommRank(comm);
      const uint32_t peer = relative ? (me + peer_field) % m.size() : peer_field;
      s.mutable_key()->set_kind(send ? rpc::OP_SEND : rpc::OP_RECV);
      s.mutable_key()->set_seq(p2p_seq_[{comm, m[peer], send}]++);
      s.mutable_key()->set_peer(static_cast<int32_t>(peer));
      m_peer_ = m[peer];
      s.set_bytes(send ? op.send().bytes() : op.recv().bytes());
    } else {
      return;
    }
    // The plugin reports a send done when its last byte has left; `end` is,
    // for a send, when it arrived (the caller's flow end): one hop's latency
    // apart.
    if (op.has_send()) end -= HopLatency(m_peer_);
    const uint64_t id = (*next_op_id)++;
    s.mutable_key()->set_comm_hash(HashOf(comm));
    s.set_op_id(id);
    s.set_comm_rank(static_cast<int32_t>(CommRank(comm)));
    s.set_comm_size(static_cast<int32_t>(Members(comm).size()));
    s.set_channels(2);
    s.set_at_ns(static_cast<uint64_t>(start));
    rpc::Event started, finished;
    *started.mutable_op_started() = s;
    finished.mutable_op_finished()->set_op_id(id);
    finished.mutable_op_finished()->set_first_send_ns(static_cast<uint64_t>(start));
    finished.mutable_op_finished()->set_end_ns(static_cast<uint64_t>(end));
    out->emplace_back(start, 0, rank_, std::move(started));
    out->emplace_back(end, 1, rank_, std::move(finished));
  }

 private:
  int64_t HopLatency(uint32_t peer) const {
    const bool same_node = graph_.ranks(static_cast<int>(peer)).node() == graph_.ranks(static_cast<int>(rank_)).node();
    return static_cast<int64_t>(same_node ? graph_.cluster().intra_node().latency_ns()
                                          : graph_.cluster().nic().latency_ns());
  }

  const std::vector<uint32_t>& Members(uint32_t comm) {
    auto it = members_.find(comm);
    if (it == members_.end()) {
      const graph::Communicator& c = graph_.communicators(static_cast<int>(comm));
      it = members_.emplace(comm, std::vector<uint32_t>(c.members().begin(), c.members().end())).first;
    }
    return it->second;
  }
  uint32_t CommRank(uint32_t comm) {
    const std::vector<uint32_t>& m = Members(comm);
    return static_cast<uint32_t>(std::find(m.begin(), m.end(), rank_) - m.begin());
  }

  const graph::Graph& graph_;
  uint32_t rank_;
  const graph::Program* program_ = nullptr;
  std::vector<uint32_t> slots_;
  uint32_t m_peer_ = 0;  // the global peer of the send/recv being added
  std::map<uint32_t, std::vector<uint32_t>> members_;
  std::map<std::pair<uint32_t, rpc::OpKind>, uint64_t> collective_seq_;
  std::map<std::tuple<uint32_t, uint32_t, bool>, uint64_t> p2p_seq_;  // (comm, global peer, is send)
};

// The algorithm the model plays for collective `op` of `actor` (NCCL's
// choice where the graph leaves it open, as AlgorithmChoices reports it);
// ALGORITHM_DEFAULT for other ops.
graph::Algorithm PlayedAlgorithm(const engine::EngineWorld& world, const engine::NetworkModel& model, uint32_t actor,
                                 uint32_t op) {
  const engine::Actor& a = world.actors[actor];
  const engine::OpInfo& info = world.programs[a.program].ops[op];
  if (info.kind != engine::OpKind::kCollective || info.slot >= a.slot_comm.size()) return graph::ALGORITHM_DEFAULT;
  if (info.algorithm != graph::ALGORITHM_DEFAULT) return info.algorithm;
  const engine::CommShape& shape = world.comms[a.slot_comm[info.slot]].shape;
  if (shape.ranks <= 1 || info.collective == graph::ALLTOALL) return graph::ALGORITHM_DEFAULT;
  return model.nccl().nccl_choice ? model.ChooseNccl(info.collective, info.bytes, shape).algorithm
                                  : model.Choose(info.collective, info.bytes, shape);
}

}  // namespace

absl::StatusOr<Recording> ModelRecording(const graph::Graph& graph, const std::vector<uint32_t>& real_ranks,
                                         int64_t start_realtime_ns, const engine::NcclBehaviour& nccl,
                                         engine::NicModel nic_model, const std::vector<engine::LateRank>& late) {
  engine::SimulationOptions o;
  o.use_classes = false;
  o.nccl = nccl;
  o.nic_model = nic_model;
  o.late = late;
  o.trace_ranks = real_ranks;
  auto sim = engine::Simulate(graph, o);
  if (!sim.ok()) return sim.status();
  Recording rec;
  rec.start_realtime_ns = start_realtime_ns;
  rec.real_ranks = real_ranks;
  rec.graph = graph.job().name();
  rec.iterations = engine::IterationsFor(graph, o.iterations).value_or(0);
  std::set<uint32_t> comms;
  std::vector<std::tuple<int64_t, int, uint32_t, rpc::Event>> events;  // (time, finish?, rank, event)
  uint64_t next_op_id = 1;
  // When each traced send's data arrived, by (actor, op, issue time): a send
  // op itself can end earlier, once the connection's buffers held it.
  std::map<std::tuple<uint32_t, uint32_t, int64_t>, int64_t> arrived;
  for (const auto& f : sim->trace->flows()) arrived[{f.send_actor, f.send_op, f.send_start.count()}] = f.end.count();
  const engine::NetworkModel model(engine::NetworkModel::LinkFiguresFromCluster(graph.cluster()), nccl);
  for (uint32_t rank : real_ranks) {
    const uint32_t actor = sim->world->actor_of_rank[rank];
    ModelRankWriter writer(graph, rank);
    std::vector<engine::TraceRecorder::OpRecord> ops;
    for (const auto& r : sim->trace->ops())
      if (r.actor == actor) ops.push_back(r);
    // Issue order: NCCL numbers operations in the order the rank issues them.
    std::stable_sort(ops.begin(), ops.end(), [](const auto& a, const auto& b) { return a.start < b.start; });
    for (const auto& r : ops) {
      const auto flow = arrived.find({r.actor, r.op, r.start.count()});
      const int64_t end = flow != arrived.end() ? flow->second : r.end.count();
      writer.Add(r.op, start_realtime_ns + r.start.count(), start_realtime_ns + end, &next_op_id, &events,
                 PlayedAlgorithm(*sim->world, model, actor, r.op));
    }
    for (uint32_t slot : graph.ranks(static_cast<int>(rank)).comm_slots()) comms.insert(slot);
  }
  for (uint32_t c : comms) {
    RecordedLine line;
    line.kind = RecordedLine::kCommunicator;
    line.at = start_realtime_ns;
    const graph::Communicator& gc = graph.communicators(static_cast<int>(c));
    line.comm.comm_hash = ModelRankWriter::HashOf(c);
    line.comm.graph_comm = c;
    line.comm.name = gc.name();
    line.comm.members.assign(gc.members().begin(), gc.members().end());
    rec.lines.push_back(std::move(line));
  }
  std::stable_sort(events.begin(), events.end(), [](const auto& a, const auto& b) {
    return std::make_pair(std::get<0>(a), std::get<1>(a)) < std::make_pair(std::get<0>(b), std::get<1>(b));
  });
  for (auto& [at, finish, rank, event] : events) {
    RecordedLine line;
    line.kind = RecordedLine::kEvents;
    line.at = at;
    line.session = rank + 1;
    *line.events.add_events() = std::move(event);
    rec.lines.push_back(std::move(line));
  }
  return rec;
}

absl::Status WriteRecording(const Recording& recording, const std::string& path) {
  auto writer = SessionRecorder::Open(path, recording.start_realtime_ns, recording.lookahead_ns,
                                      recording.real_ranks, recording.graph, recording.iterations);
  if (!writer.ok()) return writer.status();
  for (const RecordedLine& line : recording.lines) {
    switch (line.kind) {
      case RecordedLine::kCommunicator: (*writer)->Communicator(line.at, line.comm); break;
      case RecordedLine::kEvents: (*writer)->Events(line.at, line.session, line.events); break;
      case RecordedLine::kSchedule: (*writer)->Schedule(line.at, line.session, line.schedule); break;
    }
  }
  return absl::OkStatus();
}

}  // namespace prism::daemon
