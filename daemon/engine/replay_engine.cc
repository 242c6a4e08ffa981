#include "daemon/engine/replay_engine.h"

#include <algorithm>
#include <chrono>
#include <variant>

#include "absl/strings/str_cat.h"

namespace prism::engine {
namespace {

bool IsComm(OpKind k) { return k == OpKind::kCollective || k == OpKind::kSend || k == OpKind::kRecv; }

int64_t AddTime(int64_t a, int64_t b) { return SatAdd(Nanoseconds(a), Nanoseconds(b)).count(); }

}  // namespace

ReplayEngine::ReplayEngine(const EngineWorld& world, const NetworkModel& model, EngineOptions options)
    : world_(world), model_(model), options_(options) {
  if (options_.iterations == 0) options_.iterations = 1;
  state_.resize(world_.actors.size());
  for (size_t a = 0; a < world_.actors.size(); ++a) {
    const Actor& actor = world_.actors[a];
    const ProgramInfo& p = world_.programs[actor.program];
    ActorState& s = state_[a];
    s.streams.resize(p.streams);
    s.done.assign(p.ops.size(), 0);
    if (actor.real) s.reached.assign(p.ops.size(), 0);
    s.calls.assign(actor.slot_comm.size(), 0);
    s.iteration_left.assign(options_.iterations, static_cast<uint32_t>(p.ops.size()));
  }
  comm_state_.resize(world_.comms.size());
  // Dense ids for the (communicator, src, dst) FIFO queues that send/recv use.
  absl::flat_hash_map<std::tuple<uint32_t, uint32_t, uint32_t>, uint32_t> queue_ids;
  p2p_queue_of_.resize(world_.actors.size());
  for (uint32_t a = 0; a < world_.actors.size(); ++a) {
    const Actor& actor = world_.actors[a];
    for (size_t d = 0; d < world_.programs[actor.program].p2p.size(); ++d) {
      const P2PDesc& desc = world_.programs[actor.program].p2p[d];
      const uint32_t comm = actor.slot_comm[desc.slot], peer = actor.peer_actor[d];
      const auto key = desc.is_send ? std::make_tuple(comm, a, peer) : std::make_tuple(comm, peer, a);
      auto [it, fresh] = queue_ids.try_emplace(key, static_cast<uint32_t>(queue_ids.size()));
      p2p_queue_of_[a].push_back(it->second);
    }
  }
  p2p_.resize(queue_ids.size());
  iteration_actors_left_.assign(options_.iterations, world_.actors.size());
  stats_.iteration_end.assign(options_.iterations, Nanoseconds(0));
  stats_.actor_exposed_ns.assign(world_.actors.size(), 0);
  stats_.actor_peak_memory.assign(world_.actors.size(), 0);
  queue_.Reserve(world_.actors.size() * 4);
}

void ReplayEngine::Push(int64_t time, uint32_t actor, uint32_t op, int64_t issued) {
  queue_.Push(Event{time, actor, op, issued});
}

// Exposed communication: time with a communication op in flight and no compute.
void ReplayEngine::Account(ActorState& s) {
  if (s.communicating > 0 && s.computing == 0) s.exposed += now_ - s.last_change;
  s.last_change = now_;
}

bool ReplayEngine::Ready(uint32_t actor, const OpInfo& op, uint32_t k, uint64_t iteration) const {
  const ActorState& s = state_[actor];
  const ProgramInfo& p = world_.programs[world_.actors[actor].program];
  for (uint32_t i = op.deps_begin; i < op.deps_end; ++i)
    if (s.done[p.deps[i]] <= iteration) return false;
  const bool marker = op.kind == OpKind::kGroupStart || op.kind == OpKind::kGroupEnd;
  if (world_.actors[actor].real && !marker && s.reached[k] <= iteration) return false;
  return true;
}

void ReplayEngine::AdvanceStream(uint32_t actor, uint32_t stream) {
  const ProgramInfo& p = world_.programs[world_.actors[actor].program];
  const std::vector<uint32_t>& ops = p.stream_ops[stream];
  const uint64_t len = ops.size();
  if (len == 0) return;
  const uint64_t total = len * options_.iterations;
  StreamState& st = state_[actor].streams[stream];
  while (st.pos < total) {
    const uint32_t k = ops[st.pos % len];
    const OpInfo& op = p.ops[k];
    if (st.in_group) {
      if (op.kind == OpKind::kGroupEnd) {
        if (st.inflight > 0) return;
        st.in_group = false;
        ++st.pos;
        FinishInstant(actor, k);
        continue;
      }
    } else if (st.inflight > 0) {
      return;
    }
    if (!Ready(actor, op, k, st.pos / len)) return;
    ++st.pos;
    if (op.kind == OpKind::kGroupStart) {
      st.in_group = true;
      FinishInstant(actor, k);
    } else if (op.kind == OpKind::kGroupEnd) {
      FinishInstant(actor, k);  // stray end: nothing to wait for
    } else {
      ++st.inflight;
      Issue(actor, k);
    }
  }
}

void ReplayEngine::Advance(uint32_t actor) {
  const uint32_t streams = static_cast<uint32_t>(state_[actor].streams.size());
  for (uint32_t s = 0; s < streams; ++s) AdvanceStream(actor, s);
}

void ReplayEngine::Issue(uint32_t actor, uint32_t k) {
  const Actor& a = world_.actors[actor];
  const OpInfo& op = world_.programs[a.program].ops[k];
  ActorState& s = state_[actor];
  Account(s);
  switch (op.kind) {
    case OpKind::kCompute:
      ++s.computing;
      s.memory += op.memory_delta;
      s.memory_peak = std::max(s.memory_peak, s.memory);
      if (a.real) s.streams[op.stream].pending_compute = k, s.streams[op.stream].pending_issued = now_;
      else Push(AddTime(now_, op.duration.count()), actor, k, now_);
      break;
    case OpKind::kCollective:
      ++s.communicating;
      Arrive(actor, k);
      break;
    case OpKind::kSend:
    case OpKind::kRecv:
      ++s.communicating;
      PostP2P(actor, k, op.kind == OpKind::kSend);
      break;
    default:
      break;
  }
}

void ReplayEngine::CountDone(uint32_t actor, uint32_t k) {
  ActorState& s = state_[actor];
  const uint32_t iteration = s.done[k]++;
  if (iteration >= options_.iterations) return;
  if (--s.iteration_left[iteration] != 0) return;
  ++s.iterations_done;
  stats_.iteration_end[iteration] = Max(stats_.iteration_end[iteration], Nanoseconds(now_));
  if (--iteration_actors_left_[iteration] == 0) {
    ++iterations_done_;
    const Nanoseconds prev = iteration == 0 ? Nanoseconds(0) : stats_.iteration_end[iteration - 1];
    if (observer_) observer_->OnIteration(iteration, stats_.iteration_end[iteration] - prev);
  }
}

void ReplayEngine::FinishInstant(uint32_t actor, uint32_t k) { CountDone(actor, k); }

void ReplayEngine::Complete(uint32_t actor, uint32_t k, int64_t issued) {
  const Actor& a = world_.actors[actor];
  const OpInfo& op = world_.programs[a.program].ops[k];
  ActorState& s = state_[actor];
  Account(s);
  const __int128 w = a.weight;
  const int64_t took = now_ - issued;
  if (op.kind == OpKind::kCompute) {
    --s.computing;
    stats_.compute_ns += w * took;
  } else if (IsComm(op.kind)) {
    --s.communicating;
    const int kind = op.kind == OpKind::kSend ? kOpKindSend
                     : op.kind == OpKind::kRecv ? kOpKindRecv
                                                : std::clamp<int>(op.collective, 0, kOpKindSend - 1);
    const int comm = std::clamp<int>(world_.comms[a.slot_comm[op.slot]].kind, 0, kCommKinds - 1);
    for (KindTotals* t : {&stats_.by_op[kind], &stats_.by_comm[comm]}) {
      t->time_ns += w * took;
      t->ops += w;
      t->bytes += w * op.bytes.count();
    }
    if (a.real && observer_) observer_->OnRealRankOpComplete(a.rep_rank, k, Nanoseconds(now_));
  }
  if (trace_ && trace_->Traces(actor)) trace_->RecordOp(actor, k, Nanoseconds(issued), Nanoseconds(now_));
  --s.streams[op.stream].inflight;
  CountDone(actor, k);
  Advance(actor);
}

void ReplayEngine::Arrive(uint32_t actor, uint32_t k) {
  const Actor& a = world_.actors[actor];
  const OpInfo& op = world_.programs[a.program].ops[k];
  const uint32_t comm = a.slot_comm[op.slot];
  const uint64_t call = state_[actor].calls[a.slot_canonical[op.slot]]++;
  CommState& cs = comm_state_[comm];
  const uint64_t index = call - cs.base;
  while (cs.pending.size() <= index) cs.pending.emplace_back();
  Instance& in = cs.pending[index];
  if (in.arrived == 0) {
    in.first_actor = actor, in.first_op = k;
    in.waiters.reserve(world_.comms[comm].members.size());
  }
  ++in.arrived;
  in.last = std::max(in.last, now_);
  in.waiters.push_back({actor, k, now_});
  // The j-th instance completes only after every earlier one (members call in order).
  while (!cs.pending.empty() && cs.pending.front().arrived >= world_.comms[comm].members.size()) {
    ResolveCollective(comm, cs.pending.front());
    cs.pending.pop_front();
    ++cs.base;
  }
}

void ReplayEngine::ResolveCollective(uint32_t comm, Instance& in) {
  const EngineComm& c = world_.comms[comm];
  const OpInfo& op = world_.programs[world_.actors[in.first_actor].program].ops[in.first_op];
  int64_t start = in.last;
  const bool spans = c.shape.SpansNodes();
  if (spans)  // a collective across nodes sends and receives on every member's NIC share
    for (uint32_t m : c.members) start = std::max({start, state_[m].nic_tx_busy, state_[m].nic_rx_busy});
  const Nanoseconds took = model_.CollectiveTime(op.collective, op.algorithm, op.bytes, c.shape);
  const int64_t end = AddTime(start, took.count());
  if (spans)
    for (uint32_t m : c.members) state_[m].nic_tx_busy = state_[m].nic_rx_busy = end;
  for (const Waiter& w : in.waiters) Push(end, w.actor, w.op, w.issued);
  if (observer_) observer_->OnCollective(op.collective, c.kind, Nanoseconds(end - in.last), op.bytes);
}

void ReplayEngine::PostP2P(uint32_t actor, uint32_t k, bool is_send) {
  const Actor& a = world_.actors[actor];
  const OpInfo& op = world_.programs[a.program].ops[k];
  const bool same_node = a.peer_same_node[op.p2p_desc] != 0;
  P2PQueue& q = p2p_[p2p_queue_of_[actor][op.p2p_desc]];
  const PendingP2P mine{actor, k, now_};
  auto& others = is_send ? q.recvs : q.sends;
  if (others.empty()) {
    (is_send ? q.sends : q.recvs).push_back(mine);
    return;
  }
  const PendingP2P other = others.front();
  others.pop_front();
  if (is_send) MatchP2P(mine, other, same_node);
  else MatchP2P(other, mine, same_node);
}

void ReplayEngine::MatchP2P(const PendingP2P& send, const PendingP2P& recv, bool same_node) {
  const OpInfo& op = world_.programs[world_.actors[send.actor].program].ops[send.op];
  int64_t start = now_;
  // Between nodes: the sender's transmit and the receiver's receive direction.
  if (!same_node) start = std::max({start, state_[send.actor].nic_tx_busy, state_[recv.actor].nic_rx_busy});
  const int64_t end = AddTime(start, model_.PointToPointTime(op.bytes, same_node).count());
  if (!same_node) state_[send.actor].nic_tx_busy = state_[recv.actor].nic_rx_busy = end;
  Push(end, send.actor, send.op, send.posted);
  Push(end, recv.actor, recv.op, recv.posted);
  if (observer_) observer_->OnPointToPoint(Nanoseconds(end - start), op.bytes);
  if (trace_ && (trace_->Traces(send.actor) || trace_->Traces(recv.actor)))
    trace_->RecordFlow(send.actor, send.op, recv.actor, recv.op, Nanoseconds(send.posted), Nanoseconds(recv.posted),
                       Nanoseconds(end));
}

absl::Status ReplayEngine::ApplyInbox(EngineInbox* inbox) {
  std::vector<InboxEvent> events;
  inbox->Drain(&events);
  for (const InboxEvent& e : events) {
    if (std::holds_alternative<StopRequest>(e)) {
      stop_ = true;
      continue;
    }
    const RankReachedOp& r = std::get<RankReachedOp>(e);
    if (r.rank >= world_.actor_of_rank.size())
      return absl::InvalidArgumentError(absl::StrCat("injected event names rank ", r.rank, " outside the world"));
    const uint32_t actor = world_.actor_of_rank[r.rank];
    if (!world_.actors[actor].real)
      return absl::InvalidArgumentError(absl::StrCat("injected event for rank ", r.rank, ", which is not real"));
    if (r.op > world_.programs[world_.actors[actor].program].ops.size())
      return absl::InvalidArgumentError(absl::StrCat("injected event names op ", r.op, " of rank ", r.rank,
                                                     ", beyond its program"));
    Push(std::max(now_, r.at.count()), actor, r.op | kReachFlag, 0);
  }
  return absl::OkStatus();
}

bool ReplayEngine::Finished() const {
  for (const ActorState& s : state_)
    if (s.iterations_done < options_.iterations) return false;
  return true;
}

absl::Status ReplayEngine::StallError() const {
  for (size_t a = 0; a < state_.size(); ++a) {
    const ProgramInfo& p = world_.programs[world_.actors[a].program];
    for (size_t st = 0; st < state_[a].streams.size(); ++st) {
      const StreamState& ss = state_[a].streams[st];
      const uint64_t len = p.stream_ops[st].size();
      if (len == 0 || (ss.pos >= len * options_.iterations && ss.inflight == 0)) continue;
      const uint64_t pos = ss.inflight > 0 && ss.pos > 0 ? ss.pos - 1 : ss.pos;
      const uint32_t k = p.stream_ops[st][std::min(pos, len * options_.iterations - 1) % len];
      return absl::FailedPreconditionError(absl::StrCat(
          "replay stalled at ", now_, " ns: rank ", world_.actors[a].rep_rank, " (", p.name, ") waits at op ", k,
          " on stream ", st, ", iteration ", pos / len,
          ": a collective that not every member reaches, a send without its receive, or dependencies that "
          "wait on each other; check the graph (prism-graphgen) for this op"));
    }
  }
  return absl::FailedPreconditionError("replay stalled with no runnable op");
}

void ReplayEngine::Progress(WallClockPacer* pacer) {
  if (observer_)
    observer_->OnProgress(EngineProgress{Nanoseconds(now_), events_, iterations_done_,
                                         Nanoseconds(pacer ? pacer->lag_ns() : 0)});
}

absl::Status ReplayEngine::Run(WallClockPacer* pacer, EngineInbox* inbox) {
  bool has_real = false;
  for (const Actor& a : world_.actors) has_real |= a.real;
  for (uint32_t a = 0; a < state_.size(); ++a) {
    if (world_.programs[world_.actors[a].program].ops.empty()) {
      state_[a].iterations_done = options_.iterations;
      for (uint64_t i = 0; i < options_.iterations; ++i) --iteration_actors_left_[i];
    }
    Advance(a);
  }
  uint64_t until_progress = options_.progress_every_events;
  const auto run_start = std::chrono::steady_clock::now();
  while (!stop_) {
    if (inbox && inbox->HasPending()) {
      if (auto s = ApplyInbox(inbox); !s.ok()) return s;
      continue;
    }
    if (queue_.empty()) {
      if (Finished()) break;
      if (has_real && inbox) {
        inbox->WaitUntil(std::chrono::steady_clock::now() + std::chrono::milliseconds(100));
        continue;
      }
      return StallError();
    }
    if (pacer) {
      if (!pacer->WaitUntilDue(Nanoseconds(queue_.top().time), inbox)) continue;
      if (auto s = pacer->RecordLag(Nanoseconds(queue_.top().time)); !s.ok()) return s;
    }
    const Event e = queue_.BeginPop();  // EndPop() below: follow-ups may reuse its slot
    now_ = e.time;
    ++events_;
    if (e.op & kReachFlag) {
      const uint32_t k = e.op & ~kReachFlag;
      ActorState& s = state_[e.actor];
      for (StreamState& st : s.streams)  // the rank moved on: its compute in flight is over
        if (st.pending_compute >= 0 &&
            (k == world_.programs[world_.actors[e.actor].program].ops.size() ||
             &st == &s.streams[world_.programs[world_.actors[e.actor].program].ops[k].stream])) {
          const uint32_t done = static_cast<uint32_t>(st.pending_compute);
          st.pending_compute = -1;
          Complete(e.actor, done, st.pending_issued);
        }
      if (k < s.reached.size()) ++s.reached[k];
      Advance(e.actor);
    } else {
      Complete(e.actor, e.op, e.issued);
    }
    queue_.EndPop();
    if (--until_progress == 0) {
      until_progress = options_.progress_every_events;
      Progress(pacer);
    }
  }
  stats_.events = events_;
  stats_.end = Nanoseconds(now_);
  stats_.run_wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - run_start).count();
  for (size_t a = 0; a < state_.size(); ++a) {
    stats_.actor_exposed_ns[a] = state_[a].exposed;
    stats_.actor_peak_memory[a] = state_[a].memory_peak;
  }
  Progress(pacer);
  if (stop_) return absl::CancelledError("replay stopped on request");
  return absl::OkStatus();
}

}  // namespace prism::engine
