#include "daemon/hybrid/hybrid_scheduler.h"

#include <time.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace prism::daemon {
namespace {

bool MirrorKind(const rpc::OpStarted& s) {
  const rpc::OpKind k = s.key().kind();
  return s.algorithm() == rpc::OP_ALGO_RING &&
         (k == rpc::OP_ALL_REDUCE || k == rpc::OP_ALL_GATHER || k == rpc::OP_REDUCE_SCATTER);
}

// NCCL's PAT all-gather or reduce-scatter: the plugin times its receives
// from virtual peers by this rank's own sends per dimension (kPatMirror)
// from the members' arrival (PAT's floor), so, as a ring, one the real rank
// starts before the engine has seen its virtual members arrive is held
// until their schedule: without it the plugin would count them on time.
bool PatKind(const rpc::OpStarted& s) {
  const rpc::OpKind k = s.key().kind();
  return s.algo_name() == "PAT" && (k == rpc::OP_ALL_GATHER || k == rpc::OP_REDUCE_SCATTER);
}

bool IsPointToPoint(rpc::OpKind k) { return k == rpc::OP_SEND || k == rpc::OP_RECV; }

std::string Describe(const rpc::OpStarted& s, const std::string& comm) {
  const std::string kind = rpc::OpKind_Name(s.key().kind());
  if (IsPointToPoint(s.key().kind()))
    return absl::StrCat(kind.substr(3), " #", s.key().seq(), " with comm rank ", s.key().peer(), " on ", comm, ", ",
                        s.bytes(), " B");
  return absl::StrCat(kind.substr(3), " #", s.key().seq(), " on ", comm, ", ", s.bytes(), " B, ", s.algo_name(), "/",
                      s.proto_name(), ", ", s.channels(), " channels");
}

// The graph gives all-gather and reduce-scatter their full buffer; NCCL's
// profiler the per-rank count.
uint64_t GraphBytes(const rpc::OpStarted& s) {
  const rpc::OpKind k = s.key().kind();
  if (k == rpc::OP_ALL_GATHER || k == rpc::OP_REDUCE_SCATTER)
    return s.bytes() * static_cast<uint64_t>(std::max(s.comm_size(), 1));
  return s.bytes();
}

prometheus::Histogram::BucketBoundaries LeadBuckets() {
  return {0, 1e-5, 5e-5, 1e-4, 5e-4, 1e-3, 5e-3, 1e-2, 5e-2, 1e-1, 1};
}

}  // namespace

int64_t HybridScheduler::RealtimeNowNs() {
  timespec ts{};
  clock_gettime(CLOCK_REALTIME, &ts);
  return int64_t{ts.tv_sec} * 1000000000 + ts.tv_nsec;
}

HybridScheduler::HybridScheduler(RealRankPrograms programs, engine::EngineInbox* inbox,
                                 const engine::WallClockPacer* pacer, server::StatusBoard* status,
                                 server::Metrics* metrics, HybridSchedulerOptions options)
    : programs_(std::move(programs)), inbox_(inbox), pacer_(pacer), status_(status), options_(options),
      late_receives_(metrics) {
  if (metrics != nullptr) {
    auto& ops = prometheus::BuildCounter()
                    .Name("prism_hybrid_ops_total")
                    .Help("Real ranks' NCCL operations matched (or not) with their programs in the graph")
                    .Register(*metrics->registry());
    matched_metric_ = &ops.Add({{"result", "matched"}});
    unmatched_metric_ = &ops.Add({{"result", "unmatched"}});
    pushed_metric_ = &prometheus::BuildCounter()
                          .Name("prism_hybrid_schedules_total")
                          .Help("Operation schedules sent to the plugins")
                          .Register(*metrics->registry())
                          .Add({});
    lead_metric_ = &prometheus::BuildHistogram()
                        .Name("prism_hybrid_schedule_lead_seconds")
                        .Help("How far ahead of the time it gives a schedule was sent (0: late)")
                        .Register(*metrics->registry())
                        .Add({}, LeadBuckets());
  }
  pusher_ = std::thread([this] { PusherMain(); });
}

HybridScheduler::~HybridScheduler() { StopPushing(); }

void HybridScheduler::StopPushing() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  outbox_cv_.notify_all();
  flushed_cv_.notify_all();
  if (pusher_.joinable()) pusher_.join();
}

HybridScheduler::Counters HybridScheduler::counters() const {
  std::lock_guard<std::mutex> lock(mu_);
  return counters_;
}

void HybridScheduler::OnSessionOpened(SessionId id, const rpc::Hello& hello, ScheduleSink* sink) {
  std::lock_guard<std::mutex> lock(mu_);
  sink_ = sink;  // one session service: the same sink for every session
  session_rank_[id] = hello.rank();
}

void HybridScheduler::OnSessionClosed(SessionId id) {
  std::lock_guard<std::mutex> lock(mu_);
  for (auto& [rank, r] : ranks_)
    if (r.session == id) {
      r.session = 0;
      if (status_ != nullptr) status_->UpdateRealRank(rank, false, "session closed");
    }
  for (auto it = started_.begin(); it != started_.end();) {
    if (it->first.first != id) {
      ++it;
      continue;
    }
    ring_answers_.Finished(it->second.rank, it->second.order, Nanoseconds(0));  // its report never comes
    it = started_.erase(it);
  }
  session_rank_.erase(id);
}

void HybridScheduler::OnCommunicator(const CommDescription& c) {
  std::lock_guard<std::mutex> lock(mu_);
  RegisterCommunicator(c);
  // Operations that a real rank reported on it before it was known (an
  // all-real communicator whose id reached its members before prismd's
  // store handler told the scheduler) wait no longer for the others.
  if (std::optional<ParkedOps> parked = comms_.TakeParked(c.comm_hash)) HandleParked(*parked, 0, nullptr);
}

void HybridScheduler::RegisterCommunicator(const CommDescription& c) {
  if (options_.recorder != nullptr) options_.recorder->Communicator(RealtimeNowNs(), c);
  comms_.Bind(c);
  if (options_.same_node.OneNode(c.members)) one_node_comms_.insert(c.comm_hash);
}

void HybridScheduler::HandleParked(const ParkedOps& ops, SessionId id, rpc::ScheduleBatch* reply) {
  for (const auto& [sid, st] : ops.started) HandleStarted(sid, st, sid == id ? reply : nullptr);
  for (const auto& [sid, f] : ops.finished) HandleFinished(sid, f);
}

bool HybridScheduler::ParkOnAllRealComm(SessionId id, const rpc::OpStarted& s, rpc::ScheduleBatch* reply) {
  const auto me = session_rank_.find(id);
  CommunicatorBinding::Parking p = comms_.Park(id, me == session_rank_.end() ? -1 : me->second, s);
  if (!p.parked || !p.complete) return p.parked;  // false: a divergence; true: the other members will report too
  if (!p.divergence.empty()) Diverge(p.divergence);
  RegisterCommunicator(*p.complete);
  HandleParked(p.ops, id, reply);
  return true;
}

void HybridScheduler::OnWorld(const engine::EngineWorld& world) {
  std::lock_guard<std::mutex> lock(mu_);
  comms_.BindWorld(world);
}

rpc::OpSchedule HybridScheduler::Schedule(const rpc::OpKey& key, rpc::OpSchedule::Mode mode, int64_t ready_emulated,
                                          const engine::StreamShape& stream) {
  rpc::OpSchedule s;
  *s.mutable_key() = key;
  s.set_mode(mode);
  const int64_t ready = mode == rpc::OpSchedule::STREAM ? ready_emulated + stream.ready_offset.count() : ready_emulated;
  if (pacer_ != nullptr) s.set_ready_ns(pacer_->RealtimeFromEmulated(Nanoseconds(ready)));
  s.set_link_bits_per_second(stream.rate.count());
  s.set_link_latency_ns(static_cast<uint64_t>(LinkOf(key.comm_hash()).latency.count()));
  if (mode == rpc::OpSchedule::MIRROR) s.set_step_cost_ns(static_cast<uint64_t>(options_.step_cost.count()));
  return s;
}

// Sends `s` to the rank's session: in `reply` when the session's own thread
// is answering, else through the outbox (or queued until the session is known).
// Recorded (--record-sessions) where the file write holds no lock the engine
// thread waits on: replies at the end of OnEvents, pushes in the pusher.
void HybridScheduler::Deliver(uint32_t rank, rpc::OpSchedule s, rpc::ScheduleBatch* reply) {
  ++counters_.schedules_pushed;
  if (pushed_metric_ != nullptr) pushed_metric_->Increment();
  const double lead = (static_cast<double>(s.ready_ns()) - static_cast<double>(RealtimeNowNs())) * 1e-9;
  const bool forecast = s.has_after();  // its time runs from the rank's own end of `after`: never late
  if (lead < 0 && !forecast) ++counters_.schedules_late;
  if (lead_metric_ != nullptr && s.ready_ns() > 0 && !forecast) lead_metric_->Observe(std::max(0.0, lead));
  if (reply != nullptr) {
    *reply->add_ops() = std::move(s);
    return;
  }
  RealRank& r = ranks_[rank];
  if (r.session == 0) {
    r.queued.push_back(std::move(s));
    return;
  }
  outbox_.push_back(Push{r.session, std::move(s)});
  outbox_cv_.notify_one();
}

void HybridScheduler::Hold(const rpc::OpKey& key, rpc::ScheduleBatch* reply) const {
  rpc::OpSchedule* h = reply->add_ops();
  *h->mutable_key() = key;
  h->set_mode(rpc::OpSchedule::MIRROR);
  h->set_hold(true);
}

void HybridScheduler::Diverge(const std::string& text) {
  ++counters_.divergences;
  if (counters_.divergences <= static_cast<uint64_t>(options_.max_divergence_logs))
    std::fprintf(stderr, "prismd: divergence: %s%s\n", text.c_str(),
                 counters_.divergences == static_cast<uint64_t>(options_.max_divergence_logs)
                     ? " (further divergences are counted on /status and /metrics only)"
                     : "");
  if (status_ != nullptr) status_->AddDivergence(text);
  if (options_.divergences != nullptr) options_.divergences->Report(DivergenceSource::kOperations, text);
}

// Said of a divergence before a real rank's first matched operation on a
// captured graph (HybridSchedulerOptions::graph_leaves_out_startup).
constexpr char kStartupLeftOut[] =
    " (this graph was captured from the program, prism capture, and lacks part of its start-up: sends and receives "
    "before its first iteration, or, in a graph captured before 2026-12-03, its start-up collectives such as DDP's "
    "parameter checks and broadcasts; capture it again, or let them through with prism run --on-divergence follow)";

void HybridScheduler::Unmatched(SessionId session, const rpc::OpStarted& s, uint32_t rank, const std::string& why,
                                rpc::ScheduleBatch* reply) {
  ++counters_.ops_unmatched;
  if (unmatched_metric_ != nullptr) unmatched_metric_->Increment();
  if (options_.unmatched_ops_diverge) {
    const bool before_first = options_.graph_leaves_out_startup && !ranks_[rank].matched_any;
    Diverge(absl::StrCat("real rank ", rank, ": ", why, "; its virtual peers are timed as if on time",
                         before_first ? kStartupLeftOut : ""));
  }
  Deliver(rank, OnTimeSchedule(s), reply);
}

bool HybridScheduler::PastReplay(SessionId session, const rpc::OpStarted& s, uint32_t rank, const ProgramOp& op,
                                 const std::string& what, rpc::ScheduleBatch* reply) {
  if (options_.iterations == 0 || op.iteration < options_.iterations) return false;
  Unmatched(session, s, rank,
            absl::StrCat(what, " is op ", op.op, " (", programs_.OpName(rank, op.op), ") of iteration ", op.iteration,
                         ", but prismd replays only ", options_.iterations, " iteration",
                         options_.iterations == 1 ? "" : "s", " of the graph (its virtual peers are done): give prismd "
                         "--iterations N with N at least the program's iterations (prism run "
                         "--prismd-arg=--iterations=N), or leave --iterations out (a hybrid run then replays ",
                         kHybridIterations, ")"),
            reply);
  return true;
}

// The schedule of an operation prismd cannot time: its virtual peers are
// there when the real rank is (the plugin waits for a schedule of every
// operation with virtual peers, so one must come).
rpc::OpSchedule HybridScheduler::OnTimeSchedule(const rpc::OpStarted& s) const {
  rpc::OpSchedule d;
  *d.mutable_key() = s.key();
  d.set_mode(MirrorKind(s) ? rpc::OpSchedule::MIRROR : rpc::OpSchedule::STREAM);
  const engine::StreamShape stream = StreamShapeOf(s);
  const int64_t ready = static_cast<int64_t>(s.at_ns()) + stream.ready_offset.count();
  d.set_ready_ns(static_cast<uint64_t>(std::max<int64_t>(0, ready)));
  d.set_link_bits_per_second(stream.rate.count());
  d.set_link_latency_ns(static_cast<uint64_t>(LinkOf(s.key().comm_hash()).latency.count()));
  if (d.mode() == rpc::OpSchedule::MIRROR) d.set_step_cost_ns(static_cast<uint64_t>(options_.step_cost.count()));
  d.set_unmatched(true);
  return d;
}

void HybridScheduler::HandleStarted(SessionId id, const rpc::OpStarted& s, rpc::ScheduleBatch* reply) {
  const CommDescription* comm = comms_.Find(s.key().comm_hash());
  if (comm == nullptr && ParkOnAllRealComm(id, s, reply)) return;
  if (comm == nullptr || s.comm_rank() < 0 || static_cast<size_t>(s.comm_rank()) >= comm->members.size()) {
    ++counters_.ops_unmatched;
    if (unmatched_metric_ != nullptr) unmatched_metric_->Increment();
    Diverge(absl::StrCat("an operation on communicator ", s.key().comm_hash(),
                         ", which prismd's bootstrap never created (", rpc::OpKind_Name(s.key().kind()),
                         " #", s.key().seq(), "); its virtual peers are timed as if on time"));
    if (reply != nullptr) Deliver(/*rank: unused with a reply*/ 0, OnTimeSchedule(s), reply);
    return;
  }
  const CommDescription& c = *comm;
  const uint32_t rank = c.members[static_cast<size_t>(s.comm_rank())];
  RealRank& rr = ranks_[rank];
  if (rr.session != id) {
    rr.session = id;
    for (rpc::OpSchedule& q : rr.queued) outbox_.push_back(Push{id, std::move(q)});
    rr.queued.clear();
    outbox_cv_.notify_one();
  }
  const rpc::OpKey& key = s.key();
  std::optional<ProgramOp> op;
  std::optional<Slot> defer_ring;
  if (IsPointToPoint(key.kind())) {
    if (key.peer() < 0 || static_cast<size_t>(key.peer()) >= c.members.size()) {
      Unmatched(id, s, rank, absl::StrCat("send/recv with comm rank ", key.peer(), " of ", c.name), reply);
      return;
    }
    const uint32_t peer = c.members[static_cast<size_t>(key.peer())];
    if (c.graph_comm < 0) {
      Unmatched(id, s, rank, absl::StrCat(Describe(s, c.name), ": a send/recv on a communicator the graph lacks"), reply);
      return;
    }
    const uint32_t graph_comm = static_cast<uint32_t>(c.graph_comm);
    op = programs_.PointToPoint(rank, graph_comm, peer, key.kind() == rpc::OP_SEND, key.seq());
    if (!op) {
      Unmatched(id, s, rank, absl::StrCat(Describe(s, c.name), " (global rank ", peer, "): the graph has no ",
                                      key.kind() == rpc::OP_SEND ? "send to" : "receive from", " that rank"), reply);
      return;
    }
    if (PastReplay(id, s, rank, *op, absl::StrCat(Describe(s, c.name), " (global rank ", peer, ")"), reply)) return;
    if (key.kind() == rpc::OP_RECV && !programs_.IsReal(peer)) {  // a real sender needs no schedule
      const P2PSlot slot{graph_comm, peer, op->call};
      if (auto ready = rr.recv_ready.find(slot); ready != rr.recv_ready.end()) {
        Deliver(rank, Schedule(key, rpc::OpSchedule::STREAM, ready->second, StreamShapeOf(s)), reply);
        rr.recv_ready.erase(ready);
      } else {
        rr.recv_started[slot] = Started{key, RealtimeNowNs(), absl::StrCat(Describe(s, c.name), " from global rank ", peer),
                                        false, StreamShapeOf(s), *op};
      }
    }
  } else {
    if (c.graph_comm < 0) {
      Unmatched(id, s, rank, absl::StrCat(Describe(s, c.name), ": a collective on a communicator the graph lacks"), reply);
      return;
    }
    op = programs_.Collective(rank, static_cast<uint32_t>(c.graph_comm), key.kind(), key.seq());
    if (op && op->startup) {  // the program's start-up: not replayed, its virtual peers on time
      ++counters_.ops_startup;
      rpc::OpSchedule on_time = OnTimeSchedule(s);
      on_time.set_unmatched(false);  // the graph has it: no divergence
      Deliver(rank, std::move(on_time), reply);
      return;
    }
    if (!op) {
      Unmatched(id, s, rank, absl::StrCat(Describe(s, c.name), ": the graph has no such collective for this rank there"),
                reply);
      return;
    }
    if (PastReplay(id, s, rank, *op, Describe(s, c.name), reply)) return;
    const Slot slot{static_cast<uint32_t>(c.graph_comm), op->call};
    const bool all_real = comms_.AllReal(c.comm_hash);
    if (!all_real) RememberAnchor(rr, slot, key);  // a forecast of its next collective may run from its end
    const auto forecast = rr.collective_forecast.find(slot);
    if (all_real) {
      // No virtual member: nothing to schedule, the engine only follows it.
    } else if (forecast != rr.collective_forecast.end() &&
               DeliverForecast(rank, rr, slot, Started{key, RealtimeNowNs(), Describe(s, c.name), MirrorKind(s),
                                                       StreamShapeOf(s), *op}, forecast->second, reply)) {
      rr.collective_forecast.erase(forecast);
    } else if (auto ready = rr.collective_ready.find(slot); ready != rr.collective_ready.end()) {
      Deliver(rank,
              Schedule(key, MirrorKind(s) ? rpc::OpSchedule::MIRROR : rpc::OpSchedule::STREAM, ready->second,
                       StreamShapeOf(s)),
              reply);
      rr.collective_ready.erase(ready);
    } else {
      rr.collective_started[slot] =
          Started{key, RealtimeNowNs(), Describe(s, c.name), MirrorKind(s), StreamShapeOf(s), *op};
      if ((MirrorKind(s) || PatKind(s)) && options_.hold_early_rings && reply != nullptr) {
        if (options_.ring_answer_wait > Nanoseconds(0) && pacer_ != nullptr) {
          defer_ring = slot;  // answered once the engine knows (AnswerRings)
        } else {
          Hold(key, reply);
          ++counters_.holds;
        }
      }
    }
  }
  const uint64_t graph_bytes = programs_.Bytes(rank, op->op);
  if (graph_bytes != GraphBytes(s))
    Diverge(absl::StrCat("real rank ", rank, ": ", Describe(s, c.name), " is op ", op->op, " (",
                         programs_.OpName(rank, op->op), ") of iteration ", op->iteration, ", which the graph gives ",
                         graph_bytes, " B"));
  ++counters_.ops_matched;
  rr.matched_any = true;
  if (matched_metric_ != nullptr) matched_metric_->Increment();
  const std::string what = Describe(s, c.name);
  if (counters_.ops_matched <= static_cast<uint64_t>(options_.matched_logs))
    std::fprintf(stderr, "prismd: real rank %u: %s is op %u (%s) of iteration %llu\n", rank, what.c_str(), op->op,
                 programs_.OpName(rank, op->op).c_str(), static_cast<unsigned long long>(op->iteration));
  const uint64_t order = ring_answers_.Started(
      rank, key.kind() != rpc::OP_ALL_REDUCE || !RingAnswers::AllReduceEndLagsKernel(s.bytes(), s.comm_size()));
  started_[{id, s.op_id()}] = StartedOp{rank, op->op, what, order,
                                        IsPointToPoint(key.kind()) || c.graph_comm < 0
                                            ? std::nullopt
                                            : std::optional<Slot>(Slot{static_cast<uint32_t>(c.graph_comm), op->call})};
  const Nanoseconds at = pacer_ ? pacer_->EmulatedFromRealtime(s.at_ns()) : Nanoseconds(0);
  if (defer_ring) ring_answers_.Defer(rank, order, *defer_ring, at);
  last_posted_ = inbox_->Post(engine::RankReachedOp{rank, op->op, at});
  if (status_ != nullptr) {
    status_->UpdateRealRank(rank, true, absl::StrCat(what, " (op ", op->op, ", iteration ", op->iteration, ")"));
    status_->CountRealRankOp(rank);
  }
}

void HybridScheduler::HandleFinished(SessionId id, const rpc::OpFinished& f) {
  const auto it = started_.find({id, f.op_id()});
  if (it == started_.end()) {
    // Waiting for an all-real communicator's other members, or not matched
    // (already a divergence), or from before a restart.
    comms_.ParkFinished(id, f);
    return;
  }
  const StartedOp op = it->second;
  started_.erase(it);
  ++counters_.ops_finished;
  const Nanoseconds end = pacer_ ? pacer_->EmulatedFromRealtime(f.end_ns()) : Nanoseconds(0);
  const Nanoseconds first = f.first_send_ns() > 0 && pacer_ ? pacer_->EmulatedFromRealtime(f.first_send_ns())
                                                            : Nanoseconds(0);
  ring_answers_.Finished(op.rank, op.order, end);
  if (op.slot) EndAnchor(ranks_[op.rank], *op.slot, static_cast<int64_t>(f.end_ns()));
  last_posted_ = inbox_->Post(engine::RankCompletedOp{op.rank, op.op, end, first});
  if (status_ != nullptr) status_->UpdateRealRank(op.rank, true, absl::StrCat("finished ", op.what));
}

void HybridScheduler::OnEvents(SessionId id, const rpc::EventBatch& batch, rpc::ScheduleBatch* reply) {
  // Recorded before the lock: encoding a batch of thousands of message events
  // takes milliseconds, and the engine thread's observer calls wait on mu_
  // (with it inside, prismd's engine lag at 8192 ranks reached 70 ms).
  if (options_.recorder != nullptr) options_.recorder->Events(RealtimeNowNs(), id, batch);
  // Per-message events take no lock: the engine thread's observer calls wait
  // on mu_, and a batch holds thousands of them at 8192 ranks.
  bool operations = false;
  for (const rpc::Event& e : batch.events()) operations |= e.has_op_started() || e.has_op_finished();
  late_receives_.Add(batch);
  if (batch.events_size() > 0) last_report_ns_.store(RealtimeNowNs(), std::memory_order_relaxed);
  if (!operations) return;
  std::unique_lock<std::mutex> lock(mu_);
  for (const rpc::Event& e : batch.events()) {
    if (e.has_op_started()) HandleStarted(id, e.op_started(), reply);
    else if (e.has_op_finished()) HandleFinished(id, e.op_finished());
  }
  if (reply == nullptr) return;
  AnswerRings(&lock, id, reply);
  lock.unlock();
  if (options_.recorder != nullptr)
    for (const rpc::OpSchedule& s : reply->ops())
      if (!s.hold()) options_.recorder->Schedule(RealtimeNowNs(), id, s);
}

void HybridScheduler::OnIteration(uint64_t index, Nanoseconds duration) {
  late_receives_.OnIteration(index, duration, RealtimeNowNs());
  if (index != 0 || pacer_ == nullptr) return;
  std::lock_guard<std::mutex> lock(mu_);
  lags_at_steady_ = pacer_->Lags();
}

std::optional<engine::WallClockPacer::LagHistogram> HybridScheduler::SteadyLags() const {
  std::lock_guard<std::mutex> lock(mu_);
  if (!lags_at_steady_ || pacer_ == nullptr) return std::nullopt;
  return pacer_->Lags().Since(*lags_at_steady_);
}

void HybridScheduler::AnswerRings(std::unique_lock<std::mutex>* lock, SessionId id, rpc::ScheduleBatch* reply) {
  const std::vector<RingAnswers::Due> due = ring_answers_.TakeAnswerable();
  if (due.empty()) return;
  Nanoseconds through(0);
  for (const RingAnswers::Due& d : due) through = Max(through, d.through);
  const uint64_t posted = last_posted_;
  lock->unlock();  // the engine's observer calls take mu_
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::nanoseconds(options_.ring_answer_wait.count());
  while (!inbox_->CaughtUp(posted, through) && std::chrono::steady_clock::now() < deadline) std::this_thread::yield();
  lock->lock();
  for (const RingAnswers::Due& d : due) {
    RealRank& rr = ranks_[d.rank];
    const auto started = rr.collective_started.find(d.ring);
    if (started == rr.collective_started.end()) continue;  // the members' schedule went out
    if (rr.session == 0) continue;  // its session closed
    ++counters_.holds;
    if (rr.session == id) {
      Hold(started->second.key, reply);
      continue;
    }
    rpc::ScheduleBatch pushed;
    Hold(started->second.key, &pushed);
    outbox_.push_back(Push{rr.session, std::move(*pushed.mutable_ops(0))});
    outbox_cv_.notify_one();
  }
}

void HybridScheduler::OnVirtualMembersArrived(uint32_t comm, uint64_t call, Nanoseconds arrived) {
  std::lock_guard<std::mutex> lock(mu_);
  const auto* views = comms_.RealViews(comm);
  if (views == nullptr) return;
  for (const auto& [rank, graph_comm] : *views) {
    RealRank& rr = ranks_[rank];
    const Slot slot{graph_comm, call};
    const auto started = rr.collective_started.find(slot);
    if (started == rr.collective_started.end()) {
      if (ForecastArrived(rank, rr, slot, arrived)) continue;  // its forecast went out: the plain schedule now
      rr.collective_ready[slot] = arrived.count();  // the plugin has not reported the operation yet
      continue;
    }
    // The mode follows what NCCL reported (algorithm included), as when the
    // engine's time is known first (HandleStarted).
    const bool mirror = started->second.mirror;
    Deliver(rank,
            Schedule(started->second.key, mirror ? rpc::OpSchedule::MIRROR : rpc::OpSchedule::STREAM, arrived.count(),
                     started->second.stream),
            nullptr);
    rr.collective_started.erase(started);
  }
}

void HybridScheduler::OnVirtualSendToReal(uint32_t comm, uint32_t send_rank, uint32_t recv_rank, uint64_t index,
                                          Nanoseconds ready, Bytes bytes) {
  std::lock_guard<std::mutex> lock(mu_);
  // The engine's communicator -> the graph communicator it is for the receiver.
  const std::optional<uint32_t> graph_comm = comms_.GraphCommOf(comm, recv_rank);
  if (!graph_comm) return;
  RealRank& rr = ranks_[recv_rank];
  const P2PSlot slot{*graph_comm, send_rank, index};
  if (const auto f = rr.recv_forecast.find(slot); f != rr.recv_forecast.end()) {
    // Its schedule went out at the forecast (send_forecast.cc). A miss gets
    // the engine's time only while the forecast still waits for the receive
    // to start (in recv_ready); once the receive took it there is nothing
    // left to correct.
    const bool hit = f->second == ready.count();
    rr.recv_forecast.erase(f);
    if (hit) return;
    ++counters_.forecast_misses;
    if (rr.recv_ready.count(slot) == 0) return;
  }
  DeliverRecvReady(recv_rank, rr, slot, ready.count());
}

// The engine knows the sender's first byte before it plays the send: the
// receive gets its schedule now (docs/timing.md, "Forecast pipeline receives").
void HybridScheduler::OnVirtualSendToRealForecast(uint32_t comm, uint32_t send_rank, uint32_t recv_rank,
                                                  uint64_t index, Nanoseconds ready, Bytes) {
  if (!options_.forecast) return;
  std::lock_guard<std::mutex> lock(mu_);
  const std::optional<uint32_t> graph_comm = comms_.GraphCommOf(comm, recv_rank);
  if (!graph_comm) return;
  RealRank& rr = ranks_[recv_rank];
  const P2PSlot slot{*graph_comm, send_rank, index};
  if (!rr.recv_forecast.emplace(slot, ready.count()).second) return;
  ++counters_.send_forecasts;
  DeliverRecvReady(recv_rank, rr, slot, ready.count());
}

void HybridScheduler::DeliverRecvReady(uint32_t recv_rank, RealRank& rr, const P2PSlot& slot, int64_t ready) {
  const auto started = rr.recv_started.find(slot);
  if (started == rr.recv_started.end()) {
    rr.recv_ready[slot] = ready;
    return;
  }
  Deliver(recv_rank, Schedule(started->second.key, rpc::OpSchedule::STREAM, ready, started->second.stream), nullptr);
  rr.recv_started.erase(started);
}

void HybridScheduler::PusherMain() {
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    outbox_cv_.wait(lock, [this] { return stop_ || !outbox_.empty(); });
    if (stop_) return;
    std::deque<Push> batch;
    batch.swap(outbox_);
    ScheduleSink* sink = sink_;
    pushing_ = true;
    lock.unlock();
    // One message per session for this round.
    std::map<SessionId, rpc::ScheduleBatch> by_session;
    for (Push& p : batch) {
      if (options_.recorder != nullptr && !p.schedule.hold())
        options_.recorder->Schedule(RealtimeNowNs(), p.session, p.schedule);
      *by_session[p.session].add_ops() = std::move(p.schedule);
    }
    if (sink != nullptr)
      for (auto& [session, b] : by_session) sink->PushSchedules(session, std::move(b));
    lock.lock();
    pushing_ = false;
    if (outbox_.empty()) flushed_cv_.notify_all();
  }
}

void HybridScheduler::Flush() {
  std::unique_lock<std::mutex> lock(mu_);
  flushed_cv_.wait(lock, [this] { return stop_ || (outbox_.empty() && !pushing_); });
}

}  // namespace prism::daemon
