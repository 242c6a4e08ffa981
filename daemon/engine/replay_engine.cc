#include "daemon/engine/replay_engine.h"

#include <algorithm>
#include <chrono>
#include <limits>
#include <optional>

namespace prism::engine {
namespace {

static_assert(NicScheduler::kCheckGenerations == kFlowGenerationMask + 1,
              "a NIC wake-up's generation fits kFlowFlag's bits");

bool IsComm(OpKind k) { return k == OpKind::kCollective || k == OpKind::kSend || k == OpKind::kRecv; }

EngineOptions FixOptions(EngineOptions o) {
  if (o.iterations == 0) o.iterations = 1;
  if (o.late != nullptr && o.late->empty()) o.late = nullptr;  // Issue asks only when there are some
  return o;
}

}  // namespace

ReplayEngine::ReplayEngine(const EngineWorld& world, const NetworkModel& model, EngineOptions options)
    : world_(world), model_(model), options_(FixOptions(options)),
      has_real_(std::any_of(world.actors.begin(), world.actors.end(), [](const Actor& a) { return a.real; })),
      launch_in_order_(model.nccl().launch_in_order),
      nics_(world, model, options.nic_model), launch_order_(world.programs), p2p_(world, model, nics_, queue_),
      accounting_(world, options_.iterations),
      mixed_(world, nics_, queue_, stats_, model.nccl()) {
  state_.resize(world_.actors.size());
  real_.resize(world_.actors.size());
  uint64_t ops = 0;
  uint32_t streams = 0;
  for (size_t a = 0; a < world_.actors.size(); ++a) {
    const Actor& actor = world_.actors[a];
    const ProgramInfo& p = world_.programs[actor.program];
    state_[a] = ActorState{&p, ops, streams, static_cast<uint32_t>(slots_.size()), p.streams, actor.real};
    ops += p.ops.size(), streams += p.streams;
    const uint32_t slot_base = static_cast<uint32_t>(slots_.size());
    for (size_t slot = 0; slot < actor.slot_comm.size(); ++slot)
      slots_.push_back(SlotState{actor.slot_comm[slot], slot_base + actor.slot_canonical[slot], 0});
    if (actor.real) real_[a] = std::make_unique<RealRankOps>(p.ops.size());
  }
  streams_.resize(streams);
  done_.assign(ops, 0);
  if (has_real_) {  // WaitsForLaterCompletion's and real ranks' stream state, hybrid runs only
    done_at_.assign(ops, Nanoseconds(0));
    stream_waits_.resize(streams);
  }
  comm_state_.resize(world_.comms.size());
  for (size_t c = 0; c < world_.comms.size(); ++c) {
    comm_state_[c].members = static_cast<uint32_t>(world_.comms[c].members.size());
    for (uint32_t m : world_.comms[c].members) comm_state_[c].real_members += world_.actors[m].real ? 1 : 0;
  }
}

inline bool ReplayEngine::Ready(uint32_t actor, const OpInfo& op, uint32_t k, StreamState& st) {
  const ActorState& s = state_[actor];
  // A real rank's communication ops start when it says it reached them (its
  // own dependencies are real and already met then); its compute ops run
  // until it moves on.
  if (s.real) return !IsComm(op.kind) || real_[actor]->reached(k) > st.iteration;
  const ProgramInfo& p = *s.program;
  const uint32_t* done = done_.data() + s.done_base;
  for (uint32_t i = op.deps_begin; i < op.deps_end; ++i) {
    if (done[p.deps[i]] <= st.iteration) {
      st.blocked_on = p.deps[i];  // nothing changes for it until that count grows
      return false;
    }
  }
  return true;
}

bool ReplayEngine::AdvanceStream(uint32_t actor, uint32_t stream) {
  StreamState& st = Stream(actor, stream);
  return st.Movable(options_.iterations) && MoveStream(actor, stream, st);
}

bool ReplayEngine::MoveStream(uint32_t actor, uint32_t stream, StreamState& st) {
  const ActorState& s = state_[actor];
  const ProgramInfo& p = *s.program;
  const std::vector<uint32_t>& ops = p.stream_ops[stream];
  const uint64_t len = ops.size();
  if (len == 0) return false;
  bool stepped = false;  // issued or counted an op
  while (st.iteration < options_.iterations) {
    if (!st.in_group && st.inflight > 0) return stepped;
    const uint32_t k = ops[st.index];
    const OpInfo& op = p.ops[k];
    if (st.in_group && op.kind == OpKind::kGroupEnd) {
      if (st.inflight > 0) return stepped;
      if (now_ < horizon_ && WaitsForLaterCompletion(actor, stream, op)) return stepped;
      st.in_group = false;
      st.Step(len);
      stepped = true;
      CountDone(actor, k);  // a group's start or end: done at once
      continue;
    }
    if (!Ready(actor, op, k, st)) return stepped;
    if (now_ < horizon_ && WaitsForLaterCompletion(actor, stream, op)) return stepped;
    if (launch_in_order_ && LaunchWaits(actor, stream, k, st.iteration)) {
      if (st.reached < Nanoseconds(0)) st.reached = now_;
      return stepped;
    }
    reached_ = st.reached < Nanoseconds(0) ? now_ : st.reached;
    st.reached = Nanoseconds(-1);
    const uint64_t iteration = st.iteration;  // the op's, before Step moves on
    st.Step(len);
    stepped = true;
    if (op.kind == OpKind::kGroupStart) {
      st.in_group = true;
      CountDone(actor, k);  // a group's start or end: done at once
    } else if (op.kind == OpKind::kGroupEnd) {
      CountDone(actor, k);  // stray end: nothing to wait for
    } else {
      ++st.inflight;
      Issue(actor, s, op, k, iteration);
      if (!st.in_group) return true;  // waits for it
    }
  }
  return stepped;
}

// NCCL's launch order (launch_order.h): a virtual rank's communication op
// waits while another of its streams has not issued an earlier one; a send
// or receive also while a collective issued before it is in flight.
bool ReplayEngine::LaunchWaits(uint32_t actor, uint32_t stream, uint32_t k, uint64_t iteration) const {
  const ActorState& s = state_[actor];
  const OpKind kind = s.program->ops[k].kind;
  if (s.real || s.streams < 2 || !IsComm(kind)) return false;
  const bool p2p = kind != OpKind::kCollective;
  const auto program = static_cast<uint32_t>(s.program - world_.programs.data());
  const LaunchOrder::Position mine{iteration, k};
  for (uint32_t t = 0; t < s.streams; ++t) {
    if (t == stream) continue;
    const StreamState& other = streams_[s.stream_base + t];
    const auto next = launch_order_.NextComm(program, t, other.iteration, other.index, options_.iterations);
    if (next && *next < mine) return true;
    if (p2p && other.inflight > 0) {
      const auto last = launch_order_.LastIssued(program, t, other.iteration, other.index);
      if (last && s.program->ops[last->op].kind == OpKind::kCollective && *last < mine) return true;
    }
  }
  return false;
}

uint32_t ReplayEngine::CommHeldByDeps(uint32_t actor, uint32_t stream) const {
  const ActorState& s = state_[actor];
  const ProgramInfo& p = *s.program;
  const uint32_t* done = done_.data() + s.done_base;
  uint32_t held = 0;
  for (uint32_t t = 0; t < s.streams; ++t) {
    const StreamState& st = streams_[s.stream_base + t];
    if (t == stream || st.inflight != 1 || st.in_group) continue;
    const std::vector<uint32_t>& ops = p.stream_ops[t];
    const uint64_t pos = st.Pos(ops.size()) - 1;  // Step moved past the op in flight
    const uint64_t iteration = pos / ops.size();
    const OpInfo& op = p.ops[ops[pos % ops.size()]];
    if (!IsComm(op.kind)) continue;
    for (uint32_t i = op.deps_begin; i < op.deps_end; ++i) {
      if (done[p.deps[i]] <= iteration) {
        ++held;
        break;
      }
    }
  }
  return held;
}

bool ReplayEngine::WaitsForLaterCompletion(uint32_t actor, uint32_t stream, const OpInfo& op) {
  // Handling at the furthest time yet (always, but for a paced run's late
  // reports), no completion handled so far lies later.
  if (now_ >= horizon_) return false;
  const ActorState& s = state_[actor];
  if (s.real) return false;  // a real rank's ops start when it says
  StreamState& st = Stream(actor, stream);
  Nanoseconds gate = stream_waits_[s.stream_base + stream].last_done;
  const ProgramInfo& p = *s.program;
  for (uint32_t i = op.deps_begin; i < op.deps_end; ++i) gate = Max(gate, done_at_[s.done_base + p.deps[i]]);
  if (gate <= now_) return false;
  if (!st.wake_pending) {
    st.wake_pending = true;
    queue_.Push(gate, actor, stream | kWakeFlag, gate);
  }
  return true;
}

inline void ReplayEngine::Advance(uint32_t actor, uint32_t done) {
  const ActorState& a = state_[actor];
  StreamState* const st = streams_.data() + a.stream_base;  // streams_ never grows
  bool moved = false;
  for (uint32_t s = 0; s < a.streams; ++s) {
    // CountDone's pass, folded in: no stream before s reads st[s].blocked_on.
    if (st[s].blocked_on == done) st[s].blocked_on = StreamState::kNotBlocked;
    if (st[s].Movable(options_.iterations)) moved |= MoveStream(actor, s, st[s]);
  }
  // Launch order: an op issued on one stream may let another stream's go,
  // and an op counted done (a group's end) one that depends on it; pass
  // again until no stream moves.
  while (launch_in_order_ && moved && a.streams > 1) [[unlikely]] {
    moved = false;
    for (uint32_t s = 0; s < a.streams; ++s)
      if (st[s].Movable(options_.iterations)) moved |= MoveStream(actor, s, st[s]);
  }
}

// Inlined into MoveStream (its one caller): the call cost a fifth of Issue.
[[gnu::always_inline]] inline void ReplayEngine::Issue(uint32_t actor, const ActorState& s, const OpInfo& op, uint32_t k,
                                                      uint64_t iteration) {
  accounting_.Started(actor, op, reached_);
  switch (op.kind) {
    case OpKind::kCompute:
      if (!s.real) {
        Nanoseconds took = op.duration;
        if (options_.late != nullptr) [[unlikely]] took += options_.late->Extra(actor, iteration, k);
        queue_.Push(SatAdd(now_, took), actor, k, now_);
      } else if (NextCommReached(actor, op.stream)) {
        queue_.Push(now_, actor, k, now_);  // the rank already moved past it
      } else {
        StreamWait& w = stream_waits_[s.stream_base + op.stream];
        w.pending_compute = k, w.pending_issued = now_;
      }
      break;
    case OpKind::kCollective:
      Arrive(actor, k);
      break;
    case OpKind::kSend:
    case OpKind::kRecv:
      if (s.real) real_[actor]->IssueP2P(k, now_);
      p2p_.Post(actor, k, op.kind == OpKind::kSend, now_, reached_);
      break;
    default:
      break;
  }
  // Its report came before the engine got here: complete it now (at the
  // reported time, or now if that is in the engine's past for this op).
  if (s.real && IsComm(op.kind)) [[unlikely]] {
    if (const auto early = real_[actor]->TakeEarly(k))
      queue_.Push(Max(early->at, now_), actor, k | kCompleteFlag, early->started);
  }
}

inline void ReplayEngine::CountDone(uint32_t actor, uint32_t k) {
  const ActorState& s = state_[actor];
  for (uint32_t i = 0; i < s.streams; ++i)  // a stream waiting for k may go on now
    if (StreamState& st = streams_[s.stream_base + i]; st.blocked_on == k) st.blocked_on = StreamState::kNotBlocked;
  Tally(actor, k);
}

inline void ReplayEngine::Tally(uint32_t actor, uint32_t k) {
  const ActorState& s = state_[actor];
  const uint32_t iteration = done_[s.done_base + k]++;
  if (accounting_.CountDone(actor, iteration, now_) && observer_)
    observer_->OnIteration(iteration, accounting_.IterationTime(iteration));
}

// Inlined into Run, which calls it for most events (about 20 instructions
// per event less; callgrind, engine_rate_bench).
[[gnu::always_inline]] inline void ReplayEngine::Complete(uint32_t actor, uint32_t k, Nanoseconds issued) {
  const ActorState& s = state_[actor];
  const OpInfo& op = s.program->ops[k];
  accounting_.Ended(actor, op, issued, now_);
  if (has_real_ || trace_ != nullptr) [[unlikely]] NoteCompletion(actor, k, issued);
  --streams_[s.stream_base + op.stream].inflight;
  Tally(actor, k);
  Advance(actor, k);  // CountDone's pass over the streams, in Advance's
}

void ReplayEngine::NoteCompletion(uint32_t actor, uint32_t k, Nanoseconds issued) {
  const ActorState& s = state_[actor];
  const OpInfo& op = s.program->ops[k];
  if (s.real && IsComm(op.kind) && observer_)
    observer_->OnRealRankOpComplete(world_.actors[actor].rep_rank, k, now_);
  if (trace_ && trace_->Traces(actor)) trace_->RecordOp(actor, k, issued, now_);
  if (has_real_) {  // only a real rank's report is handled at a past time (WaitsForLaterCompletion)
    done_at_[s.done_base + k] = Max(done_at_[s.done_base + k], now_);
    Nanoseconds& last = stream_waits_[s.stream_base + op.stream].last_done;
    last = Max(last, now_);
  }
}

// Inlined into MoveStream (through Issue) as Complete into Run.
[[gnu::always_inline]] inline void ReplayEngine::Arrive(uint32_t actor, uint32_t k) {
  const ActorState& s = state_[actor];
  const OpInfo& op = s.program->ops[k];
  const SlotState& slot = slots_[s.slot_base + op.slot];
  const uint32_t comm = slot.comm;
  const uint64_t call = slots_[slot.canonical].calls++;
  CommState& cs = comm_state_[comm];
  const uint64_t index = call - cs.base;
  while (cs.pending.size() <= index) {
    cs.pending.emplace_back();
    cs.pending.back().real_left = cs.real_members;
  }
  Instance& in = cs.pending[index];
  if (in.arrived == 0) {
    in.first_actor = actor, in.first_op = k;
    if (in.waiters.capacity() == 0 && !spare_waiters_.empty()) {
      in.waiters = std::move(spare_waiters_.back());
      spare_waiters_.pop_back();
    }
    in.waiters.reserve(cs.members);
  }
  ++in.arrived;
  in.last = Max(in.last, now_);
  in.waiters.push_back({actor, k, reached_});
  if (cs.real_members > 0) {
    // MoveStream stepped past op k already: a wrap to index 0 means k ended its iteration.
    const StreamState& st = streams_[s.stream_base + op.stream];
    if (st.iteration == 0 || (st.iteration == 1 && st.index == 0)) in.startup = true;
  }
  if (s.real) {
    real_[actor]->IssueCollective(k, {comm, call, now_});
  } else if (cs.real_members > 0) {
    in.last_virtual = Max(in.last_virtual, now_);
    const uint32_t virtual_members = cs.members - cs.real_members;
    if (++in.virtual_arrived == virtual_members && observer_)
      observer_->OnVirtualMembersArrived(comm, call, in.last_virtual);
  }
  // The j-th instance completes only after every earlier one (members call in order).
  while (!cs.pending.empty() && cs.pending.front().arrived >= cs.members) {
    ResolveCollective(comm, cs.base, cs.pending.front());
    Recycle(cs.pending.front().waiters);
    cs.pending.pop_front();
    ++cs.base;
  }
}

void ReplayEngine::ResolveCollective(uint32_t comm, uint64_t call, Instance& in) {
  const EngineComm& c = world_.comms[comm];
  const OpInfo& op = world_.programs[world_.actors[in.first_actor].program].ops[in.first_op];
  if (comm_state_[comm].real_members > 0) {
    // Real members finish it for real: virtual members finish when they do.
    // Until the real end is known, the virtual members' NICs are busy until
    // the model's end for it, as in an all-virtual instance (other traffic of
    // theirs queues behind it); MixedCollectives extends that to the real end.
    in.model = ModelTime(comm, op);
    if (c.shape.SpansNodes())  // granted with the other requests of this instant
      nics_.HoldCollective(comm, op, in.last, in.model);
    if (observer_ != nullptr) ForecastNextArrival(comm, call, in);
    mixed_.AllArrived(comm, call, std::move(in), now_, horizon_);
    return;
  }
  Nanoseconds took = ModelTime(comm, op);
  if (const auto measured = mixed_.Calibrated(op, c.shape, took)) took = *measured;
  // A collective across nodes sends and receives on every member's NIC share:
  // granted with the other requests of this instant.
  if (c.shape.SpansNodes()) {
    const Nanoseconds ready = in.last;
    nics_.RequestCollective(Park(comm, std::move(in)), comm, op, ready, took);
    return;
  }
  const Nanoseconds end = SatAdd(in.last, took);
  for (const Waiter& w : in.waiters) queue_.Push(end, w.actor, w.op, w.issued);
  if (has_real_ && observer_ != nullptr)
    for (const Waiter& w : in.waiters) ForecastSendToReal(w.actor, w.op, end);
  if (observer_) observer_->OnCollective(op.collective, c.kind, end - in.last, op.bytes);
}

void ReplayEngine::Recycle(std::vector<Waiter>& waiters) {
  if (waiters.capacity() == 0) return;  // moved on (a transfer, a mixed instance) or never used
  waiters.clear();
  spare_waiters_.push_back(std::move(waiters));
}

Nanoseconds ReplayEngine::ModelTime(uint32_t comm, const OpInfo& op) {
  ModelMemo& m = comm_state_[comm].memo;
  if (!m.valid || m.kind != op.collective || m.algorithm != op.algorithm || m.bytes != op.bytes) {
    const CommShape& shape = world_.comms[comm].shape;
    m = ModelMemo{op.collective, op.algorithm, op.bytes, model_.CollectiveTime(op.collective, op.algorithm, op.bytes, shape),
                  true, model_.LatencyBoundRing(op.collective, op.bytes, shape)};
  }
  return m.paced ? std::max(m.took, op.duration) : m.took;  // a captured ring's own pace (graph.proto measured_ns)
}

uint32_t ReplayEngine::Park(uint32_t comm, Instance in) {
  if (free_tickets_.empty())
    free_tickets_.push_back(static_cast<uint32_t>(transfers_.size())), transfers_.emplace_back();
  const uint32_t ticket = free_tickets_.back();
  free_tickets_.pop_back();
  transfers_[ticket] = {comm, std::move(in)};
  return ticket;
}

void ReplayEngine::GrantNics() {
  grants_.clear();
  checks_.clear();
  nics_.Grant(now_, horizon_, &grants_, &checks_);
  FinishGrants();
}

void ReplayEngine::FinishGrants() {
  for (const NicGrant& g : grants_) {
    if (P2PTransfers::IsTicket(g.ticket)) {
      p2p_.Finish(g, now_);
      continue;
    }
    CollectiveTransfer& t = transfers_[g.ticket];
    FinishCollectiveTransfer(t.comm, t.instance, g.end);
    Recycle(t.instance.waiters);
    free_tickets_.push_back(g.ticket);
  }
  for (const NicCheck& c : checks_) queue_.Push(c.at, kNoActor, kFlowFlag | c.generation, c.at);
}

void ReplayEngine::FinishCollectiveTransfer(uint32_t comm, const Instance& in, Nanoseconds end) {
  const OpInfo& op = world_.programs[world_.actors[in.first_actor].program].ops[in.first_op];
  for (const Waiter& w : in.waiters) queue_.Push(end, w.actor, w.op, w.issued);
  if (observer_) observer_->OnCollective(op.collective, world_.comms[comm].kind, end - in.last, op.bytes);
}

void ReplayEngine::RealCollectiveDone(uint32_t actor, uint32_t k, Nanoseconds at, Nanoseconds started) {
  const auto open = real_[actor]->CollectiveDone(k, {at, started});
  if (!open) return;  // reported before the engine issued it: applied at issue
  CommState& cs = comm_state_[open->comm];
  Instance* arriving = open->call >= cs.base ? &cs.pending[open->call - cs.base] : nullptr;  // a member is missing
  // Other communication of this rank in flight now, or ended after this
  // one's first send: its duration is not this collective's alone.
  const uint32_t held =
      model_.nccl().own_hold_unclean ? 0 : CommHeldByDeps(actor, state_[actor].program->ops[k].stream);
  const bool alone = accounting_.CommunicatedAlone(actor, started, held);
  mixed_.RealMemberDone(open->comm, open->call, arriving, at, started, alone, now_, horizon_);
  Complete(actor, k, open->issued);  // now_ == at: this handler runs the report's event
}

void ReplayEngine::RealP2PDone(uint32_t actor, uint32_t k, Nanoseconds at) {
  const auto issued = real_[actor]->P2PDone(k, {at, Nanoseconds(0)});
  if (!issued) return;  // reported before the engine issued it: applied at issue
  p2p_.RealOpDone(actor, k, at);
  Complete(actor, k, *issued);  // now_ == at: this handler runs the report's event
}

// NicModel::kShared: the scheduler's wake-up; the transfers done by now_
// complete as the calendar model's grants would have at their end.
void ReplayEngine::FinishSharedTransfers(uint32_t generation) {
  grants_.clear();
  checks_.clear();
  nics_.FinishBy(now_, generation, &grants_, &checks_);
  FinishGrants();
}

absl::Status ReplayEngine::ApplyInbox(EngineInbox* inbox) {
  const absl::Status s = DrainInjected(world_, *inbox, &injected_);
  stop_ |= injected_.stop;
  input_ended_ |= injected_.ended;
  stats_.real_reports += injected_.reports;
  for (const Event& e : injected_.events) queue_.Push(e.time, e.actor, e.op, e.issued);
  return s;
}

// Whether a real actor already reached the next communication op after the
// stream's current position (its compute ops up to there are over).
bool ReplayEngine::NextCommReached(uint32_t actor, uint32_t stream) const {
  const ProgramInfo& p = *state_[actor].program;
  const std::vector<uint32_t>& ops = p.stream_ops[stream];
  const uint64_t len = ops.size(), total = len * options_.iterations;
  for (uint64_t pos = streams_[state_[actor].stream_base + stream].Pos(len); pos < total; ++pos) {
    const uint32_t j = ops[pos % len];
    if (IsComm(p.ops[j].kind)) return real_[actor]->reached(j) > pos / len;
  }
  return false;
}

// A real rank reached communication op k (or the end of an iteration): the
// compute ops it ran meanwhile on that stream end now.
void ReplayEngine::ReachOp(uint32_t actor, uint32_t k) {
  const ActorState& s = state_[actor];
  const ProgramInfo& p = *s.program;
  const bool end_of_iteration = k == p.ops.size();
  const uint64_t iteration = end_of_iteration ? 0 : real_[actor]->Reach(k);  // one instance of op k per iteration
  for (uint32_t st = 0; st < s.streams; ++st) {
    const bool same_stream = end_of_iteration || st == p.ops[k].stream;
    const uint64_t len = p.stream_ops[st].size();
    // Consecutive compute ops before k all end here: complete one, let the
    // stream issue the next, repeat. On the other streams, compute ops of
    // earlier iterations end too: the rank has moved on to the next
    // iteration (its trailing optimizer step ends when the next iteration's
    // first operation starts, whichever stream that is on).
    StreamWait& w = stream_waits_[s.stream_base + st];
    for (int guard = 0; w.pending_compute >= 0 && guard < 1 << 20; ++guard) {
      const uint64_t pos = streams_[s.stream_base + st].Pos(len);
      if (!same_stream && (len == 0 || pos == 0 || (pos - 1) / len >= iteration)) break;
      const uint32_t done = static_cast<uint32_t>(w.pending_compute);
      w.pending_compute = -1;
      Complete(actor, done, w.pending_issued);
    }
  }
  Advance(actor);
}

void ReplayEngine::Progress(WallClockPacer* pacer) {
  if (observer_)
    observer_->OnProgress(EngineProgress{horizon_, events_, accounting_.iterations_done(),
                                         pacer ? pacer->lag() : Nanoseconds(0), accounting_.ops_done(),
                                         accounting_.ops_total()});
}

absl::Status ReplayEngine::Run(WallClockPacer* pacer, EngineInbox* inbox) {
  queue_.SetPacer(pacer);
  if (pacer) WallClockPacer::TightenTimers();
  if (observer_) observer_->OnWorld(world_);
  for (uint32_t a = 0; a < state_.size(); ++a) Advance(a);
  uint64_t until_progress = options_.progress_every_events;
  const auto run_start = std::chrono::steady_clock::now();
  // Waiting for the real ranks with nothing to play: when the observer was last told (or the wait began);
  // a plain time point and a flag (GCC 12 took an optional's for "may be used uninitialized").
  std::chrono::steady_clock::time_point awaiting_told{};
  bool awaiting = false;
  while (!stop_) {
    // Leaving the current instant: grant the NIC requests made at it together.
    if (nics_.HasRequests() && (queue_.empty() || queue_.top().time != now_)) {
      GrantNics();
      if (pacer) pacer->StepDone(EngineStep::kGrants);  // what a late event waited for (RecordLag)
      continue;
    }
    if (inbox && inbox->HasPending()) {
      awaiting = false;
      if (auto s = ApplyInbox(inbox); !s.ok()) return s;
      if (pacer) pacer->StepDone(EngineStep::kReports);
      continue;
    }
    if (queue_.empty()) {
      if (accounting_.Finished()) break;
      if (input_ended_) {  // a replay of recorded sessions that ends before the job does
        stop_ = true;
        break;
      }
      if (has_real_ && inbox) {
        const auto now = std::chrono::steady_clock::now();
        if (!awaiting) awaiting_told = now, awaiting = true;
        if (observer_ && now - awaiting_told >= kAwaitReportAfter) {
          observer_->OnAwaitingRealRanks(RealRankPositions());
          awaiting_told = now;
        }
        inbox->MarkCaughtUp(Nanoseconds::Max());  // all handled: only the real ranks can move it
        inbox->WaitUntil(now + std::chrono::milliseconds(100));
        if (pacer) pacer->StepDone(EngineStep::kWaiting);
        continue;
      }
      return StallError();
    }
    if (pacer) {
      const Event& top = queue_.top();
      if ((top.op & (kReachFlag | kCompleteFlag)) == 0) {  // reports carry their own (real, past) times: no waiting, no lag
        if (!pacer->WaitUntilDue(top.time, inbox)) continue;
        if (auto s = pacer->RecordLag(Max(top.time, queue_.KnownAt(top))); !s.ok()) return s;
      }
    }
    const Event e = queue_.Pop();
    now_ = e.time;
    horizon_ = Max(horizon_, now_);
    ++events_;
    stats_.pending_sum += queue_.size();
    if ((e.op & (kReachFlag | kCompleteFlag | kWakeFlag | kFlowFlag)) == 0) [[likely]] {
      Complete(e.actor, e.op, e.issued);  // an op's end: most events
    } else {
      HandleFlagged(e);
    }
    if (pacer) pacer->StepDone(EngineStep::kEvents);
    if (--until_progress == 0) {
      until_progress = options_.progress_every_events;
      Progress(pacer);
    }
  }
  stats_.events = events_;
  stats_.end = horizon_;
  stats_.run_wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - run_start).count();
  accounting_.Close();
  Progress(pacer);
  if (stop_) return absl::CancelledError("replay stopped on request");
  return absl::OkStatus();
}

// An injected report, a wake-up, a shared NIC check (or an op's end whose
// index has a flag's bit).
void ReplayEngine::HandleFlagged(const Event& e) {
  queue_.SetHandlingReport(true);
  if (e.actor == kNoActor && (e.op & kFlowFlag)) {
    queue_.SetHandlingReport(false);
    FinishSharedTransfers(e.op & kFlowGenerationMask);
  } else if (e.op & kReachFlag) {
    ReachOp(e.actor, e.op & ~kReachFlag);
  } else if (e.op & kCompleteFlag) {
    const uint32_t k = e.op & ~kCompleteFlag;
    const OpKind kind = world_.programs[world_.actors[e.actor].program].ops[k].kind;
    if (kind == OpKind::kCollective) RealCollectiveDone(e.actor, k, e.time, e.issued);
    else RealP2PDone(e.actor, k, e.time);
  } else if (e.op & kWakeFlag) {
    queue_.SetHandlingReport(false);
    const uint32_t stream = e.op & ~kWakeFlag;
    Stream(e.actor, stream).wake_pending = false;
    if (AdvanceStream(e.actor, stream) && launch_in_order_) Advance(e.actor);
  } else {
    queue_.SetHandlingReport(false);
    Complete(e.actor, e.op, e.issued);
  }
  queue_.SetHandlingReport(false);
}

}  // namespace prism::engine
