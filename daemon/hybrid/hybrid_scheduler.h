// The engine-backed schedule source of prismd's hybrid mode: the path
//   plugin -> session -> engine -> session -> plugin
// reads here (docs/timing.md).
//
//  * Plugin sessions report the real ranks' NCCL operations (OpStarted /
//    OpFinished, from the plugin's profiler role). Each is matched with the
//    real rank's program (RealRankPrograms) and posted to the engine's inbox:
//    RankReachedOp when it starts, RankCompletedOp when its transfers ended.
//    An operation the graph does not have is a named divergence: its
//    virtual peers get a default schedule (never a hang).
//  * The engine replays the virtual ranks and tells this observer when the
//    virtual members of a collective with real members have all arrived
//    (OnVirtualMembersArrived) and when a virtual rank starts a send to a
//    real rank (OnVirtualSendToReal). Those times become OpSchedules for the
//    real rank's matching operation, pushed as soon as both the engine's time
//    and the operation's NCCL identity are known (the plugin decides each
//    completion locally from them; ring collectives need none to proceed).
//  * Communicators come from the bootstrap (OnCommunicator): NCCL commHash
//    -> the graph's communicator and its members (communicator_binding.h,
//    which also binds those whose members are all real ranks).
//
// Threads: session stream threads call the ScheduleSource methods, the
// bootstrap thread OnCommunicator, the engine thread the EngineObserver
// methods; one mutex guards all state. Pushes from the engine thread go
// through an outbox served by one pusher thread (started by the
// constructor, joined by the destructor), so the engine never blocks on a
// gRPC write. Every `*` argument must outlive the object; a sink given to
// OnSessionOpened must outlive StopPushing() (or the destructor, which
// calls it).
#ifndef PRISM_DAEMON_HYBRID_HYBRID_SCHEDULER_H_
#define PRISM_DAEMON_HYBRID_HYBRID_SCHEDULER_H_

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <map>
#include <set>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <tuple>
#include <unordered_map>
#include <utility>
#include <vector>

#include "daemon/engine/realtime.h"
#include "daemon/engine/replay_engine.h"
#include "daemon/engine/tree_pipeline.h"
#include "daemon/hybrid/communicator_binding.h"
#include "daemon/hybrid/divergence_watch.h"
#include "daemon/hybrid/late_receives.h"
#include "daemon/hybrid/real_rank_programs.h"
#include "daemon/hybrid/ring_answers.h"
#include "daemon/hybrid/session_recorder.h"
#include "daemon/server/metrics.h"
#include "daemon/server/status.h"
#include "daemon/session/schedule_source.h"
#include "prometheus/counter.h"
#include "prometheus/histogram.h"

namespace prism::daemon {

// Iterations a hybrid run replays when prismd's --iterations does not say
// (the graph's own count is --simulate's): the real ranks' program decides
// how many it runs, so enough for any training run a hybrid session serves.
inline constexpr uint64_t kHybridIterations = 1000;

struct HybridSchedulerOptions {
  // The link real ranks' operations are timed on, as the engine times its
  // virtual ranks: the per-GPU share of the node's NICs and the NIC latency
  // (docs/network-model.md, "NIC bandwidth: per GPU"). Bandwidth 0: the
  // plugin's own setting.
  BitsPerSecond link_bandwidth;
  Nanoseconds link_latency;
  // A communicator whose members all sit on one node is timed on the
  // node's GPU-to-GPU link instead, as the engine times it (bandwidth 0:
  // never).
  SameNodeLink same_node;
  int max_divergence_logs = 20;       // lines on stderr; all are counted and on /status
  int matched_logs = 8;               // the first matched operations are logged (algorithm, channels)
  Nanoseconds step_cost{0};           // NCCL's cost per ring step (MIRROR schedules carry it)
  SessionRecorder* recorder = nullptr;  // nullable; --record-sessions
  DivergenceWatch* divergences = nullptr;  // nullable; told every divergence (--on-divergence)
  // False with prismd --follow: the graph has no program of the real ranks,
  // so an operation it lacks is expected (timed on time, not a divergence).
  bool unmatched_ops_diverge = true;
  // A ring collective (MIRROR), or a PAT all-gather or reduce-scatter
  // (NCCL's "PAT"), the real rank starts before the engine has
  // seen its virtual members reach it gets a hold (OpSchedule.hold) in the
  // reply: the plugin keeps its receives from virtual peers until the
  // members' schedule comes. False: such receives take the virtual members
  // to be on time (what a hybrid run did before 2026-12-02; prismd
  // --ring-hold off).
  bool hold_early_rings = true;
  // How long a session thread waits for the engine to apply its reports
  // before it answers such a ring (ring_answers.h): the members' schedule
  // if they arrived by the ring's start, else the hold. The wait starts once
  // none of the rank's earlier operations is in flight. 0: the hold at once
  // (unpaced replays of recordings, where the engine runs after the input).
  Nanoseconds ring_answer_wait = FromMilliseconds(2);
  // A collective whose virtual members only compute between the real rank's
  // previous collective and it gets its schedule ahead, as a function of the
  // rank's own end of that one (OpSchedule.after; EngineObserver::
  // OnVirtualMembersForecast). False: it waits for the members' arrival
  // (prismd --ring-forecast off; what a hybrid run did before 2026-12-02).
  bool forecast = true;
  // Iterations the engine replays (0: no bound). A real rank's operation of
  // a later iteration can never get its virtual peers (the replay is over):
  // a divergence naming prismd's --iterations, timed as if on time.
  uint64_t iterations = 0;

  // The graph came from a capture (prism-graphgen extrapolate), which keeps
  // a program's repeating iteration and its start-up collectives but not
  // the start-up's sends and receives (nor, before 2026-12-03, its
  // collectives): a divergence of a real rank that has matched no operation
  // yet says so and names --on-divergence follow.
  bool graph_leaves_out_startup = false;

  // The link figures of `cluster`, read the engine's way
  // (engine::NetworkModel::LinkFiguresFromCluster); the other fields default.
  static HybridSchedulerOptions ForCluster(const graph::Cluster& cluster);
  // ForCluster of the graph's cluster, and what the graph's generator says
  // (graph_leaves_out_startup).
  static HybridSchedulerOptions ForGraph(const graph::Graph& graph);
};

class HybridScheduler final : public ScheduleSource, public engine::EngineObserver {
 public:
  HybridScheduler(RealRankPrograms programs, engine::EngineInbox* inbox, const engine::WallClockPacer* pacer,
                  server::StatusBoard* status, server::Metrics* metrics, HybridSchedulerOptions options);
  ~HybridScheduler() override;
  HybridScheduler(const HybridScheduler&) = delete;
  HybridScheduler& operator=(const HybridScheduler&) = delete;

  // ScheduleSource (session threads; OnCommunicator: bootstrap thread).
  void OnSessionOpened(SessionId id, const rpc::Hello& hello, ScheduleSink* sink) override;
  void OnEvents(SessionId id, const rpc::EventBatch& batch, rpc::ScheduleBatch* reply) override;
  void OnSessionClosed(SessionId id) override;
  void OnCommunicator(const CommDescription& c) override;

  // EngineObserver (engine thread).
  void OnWorld(const engine::EngineWorld& world) override;
  void OnVirtualMembersArrived(uint32_t comm, uint64_t call, Nanoseconds arrived) override;
  void OnVirtualMembersForecast(uint32_t comm, uint64_t call, uint32_t after_comm, uint64_t after_call,
                                Nanoseconds floor, Nanoseconds after_end) override;
  void OnVirtualSendToReal(uint32_t comm, uint32_t send_rank, uint32_t recv_rank, uint64_t index,
                           Nanoseconds ready, Bytes bytes) override;
  void OnVirtualSendToRealForecast(uint32_t comm, uint32_t send_rank, uint32_t recv_rank, uint64_t index,
                                   Nanoseconds ready, Bytes bytes) override;
  void OnAwaitingRealRanks(const std::vector<engine::RealRankPosition>& positions) override;
  void OnIteration(uint64_t index, Nanoseconds duration) override;

  // A stall: the engine has nothing left to play and waits for the real
  // ranks, while every real rank is inside a matched NCCL operation that
  // waits for the engine's time of its virtual peers (an operation whose
  // schedule was sent is not: its end is the real rank's, however long its
  // stream holds it; a rank that has not started an operation yet may still
  // be starting up and unblock the others), and no report came for
  // `quiet_for`: neither side can move.
  // Says what each side waits for: per real rank, the operation it is in
  // (NCCL's name, communicator, peer, the graph op and iteration it was
  // matched to) and where the engine has that rank's program (the op it
  // waits for the rank to start, or has started and waits on). nullopt: no
  // stall (a real rank outside NCCL may yet start what the engine waits for).
  std::optional<std::string> StallReport(Nanoseconds quiet_for) const;

  // Real ranks' receives that have waited longer than `older_than` for
  // the engine to time their virtual sender: one line each (for /status and
  // the log; never a silent wait).
  std::vector<std::string> StuckReceives(Nanoseconds older_than) const;

  // Blocks until every schedule in the outbox has been handed to the sink
  // (the end of a replay of recorded sessions; tests). Any thread but the
  // sink's own PushSchedules.
  void Flush();

  // Joins the pusher thread: once it returns no sink is called again (a
  // push in progress ends first; schedules still in the outbox, and any
  // later ones, are dropped). Call it before the sinks go (prismd: before
  // its session service is torn down), after the engine thread is joined.
  // Idempotent; from one thread at a time (prismd's main thread, then the
  // destructor), never from the sink's own PushSchedules.
  void StopPushing();

  struct Counters {
    uint64_t ops_matched = 0, ops_unmatched = 0, ops_finished = 0;
    uint64_t ops_startup = 0;  // the program's start-up collectives (Program.startup_ops), let through on time
    uint64_t schedules_pushed = 0, schedules_late = 0;  // late: pushed after the time they give
    uint64_t divergences = 0;
    uint64_t holds = 0;  // ring collectives the real rank reached before their virtual members
    uint64_t forecasts = 0;        // schedules sent ahead, relative to the rank's own end of an earlier op
    uint64_t forecast_misses = 0;  // the members (a sender) then arrived (sent) at another time than forecast
    uint64_t send_forecasts = 0;   // receives from a virtual sender timed before the engine played the send
  };
  Counters counters() const;
  // The real ranks' late receives so far, by cause, start-up apart (late_receives.h).
  LateReceives::Totals late_receives() const { return late_receives_.totals(); }
  // The engine's lag since its first iteration ended (the steady
  // iterations); nullopt before that, or without a pacer.
  std::optional<engine::WallClockPacer::LagHistogram> SteadyLags() const;

 private:
  // Where an engine time for a real rank's operation waits for the other half.
  using Slot = std::pair<uint32_t, uint64_t>;  // (graph comm, call)
  using P2PSlot = std::tuple<uint32_t, uint32_t, uint64_t>;  // (graph comm, peer rank, message index)
  struct Started {
    rpc::OpKey key;
    int64_t since_ns = 0;  // CLOCK_REALTIME of the report
    std::string what;
    bool mirror = false;   // a ring all-reduce/all-gather/reduce-scatter (MIRROR schedule)
    engine::StreamShape stream;    // how the virtual senders stream it (StreamShapeOf)
    ProgramOp op;          // the graph op it was matched to (a stall report names it)
  };
  // The engine's forecast (OnVirtualMembersForecast) of a collective's
  // virtual arrival: max(floor, end of the rank's `after` + after_end), emulated.
  struct Forecast {
    int64_t floor = 0, after_end = 0;
    Slot after;
  };
  // A collective of the rank that can anchor a forecast: its key, and its
  // end once reported (CLOCK_REALTIME; 0: in flight).
  struct Anchor {
    rpc::OpKey key;
    int64_t end_ns = 0;
  };
  struct RealRank {
    SessionId session = 0;                          // its operations' session (0: none yet)
    std::map<Slot, Forecast> collective_forecast;   // engine: forecast, the plugin has not reported the op yet
    // Forecast sent; the members' own schedule follows at their arrival.
    std::map<Slot, std::pair<Started, Forecast>> forecast_sent;
    std::map<Slot, Anchor> anchors;                 // its latest collectives (kMaxAnchors)
    std::deque<Slot> anchor_order;
    std::vector<rpc::OpSchedule> queued;            // ready before the session was known
    std::map<Slot, int64_t> collective_ready;       // engine: virtual members arrived (emulated ns)
    std::map<Slot, Started> collective_started;     // plugin: operation started, no engine time yet
    std::map<P2PSlot, int64_t> recv_ready;          // engine: the virtual sender's first byte
    std::map<P2PSlot, Started> recv_started;        // the plugin's receive waits for these
    std::map<P2PSlot, int64_t> recv_forecast;       // engine: the sender's first byte, forecast (send_forecast.cc)
    bool matched_any = false;                       // an operation of it matched the graph
  };
  struct StartedOp {
    uint32_t rank = 0;
    uint32_t op = 0;
    std::string what;  // for /status
    uint64_t order = 0;  // RingAnswers::Started
    std::optional<Slot> slot;  // a collective: its slot (anchors)
  };
  // The engine's last OnAwaitingRealRanks: when, and the real ranks' positions.
  struct EngineAwaiting {
    int64_t at_ns = 0;
    std::vector<engine::RealRankPosition> positions;
  };
  struct Push {
    SessionId session;
    rpc::OpSchedule schedule;
  };

  static int64_t RealtimeNowNs();  // CLOCK_REALTIME, ns since the epoch
  void HandleStarted(SessionId id, const rpc::OpStarted& s, rpc::ScheduleBatch* reply);
  void HandleFinished(SessionId id, const rpc::OpFinished& f);
  // Locked helpers. True when `s` waits for (or completed) an all-real
  // communicator's membership (CommunicatorBinding::Park); false: it cannot
  // be one (a divergence).
  bool ParkOnAllRealComm(SessionId id, const rpc::OpStarted& s, rpc::ScheduleBatch* reply);
  void RegisterCommunicator(const CommDescription& c);  // recorded, then bound
  // Handles parked reports again (`reply` for session `id`'s, if any).
  void HandleParked(const ParkedOps& ops, SessionId id, rpc::ScheduleBatch* reply);
  // Locked helpers.
  rpc::OpSchedule OnTimeSchedule(const rpc::OpStarted& s) const;
  void Unmatched(SessionId session, const rpc::OpStarted& s, uint32_t rank, const std::string& why,
                 rpc::ScheduleBatch* reply);
  // True (and Unmatched) when `op` lies past the iterations the engine replays.
  bool PastReplay(SessionId session, const rpc::OpStarted& s, uint32_t rank, const ProgramOp& op,
                  const std::string& what, rpc::ScheduleBatch* reply);
  // A STREAM schedule's ready time is `ready_emulated` + the shape's offset.
  rpc::OpSchedule Schedule(const rpc::OpKey& key, rpc::OpSchedule::Mode mode, int64_t ready_emulated,
                           const engine::StreamShape& stream);
  // How the virtual senders stream this operation to the real rank: the
  // modelled link from the virtual side's ready time, except a tree
  // all-reduce (Simple), whose arrivals come from playing NCCL's double
  // binary tree chunk by chunk (tree_pipeline.h): from the first arrival to
  // the last at their mean rate. Other tree all-reduces, and trees too large
  // to play, stream at half the link (in the double binary tree every rank
  // is interior in one tree and a leaf in the other, so its NIC sends the
  // data twice). Locked helper (the cache); plays at most
  // kMaxPlayedTreeTransfers (tree_pipeline.h).
  engine::StreamShape StreamShapeOf(const rpc::OpStarted& s) const;
  // The link the virtual members of communicator `comm_hash` are timed on:
  // the node's link when all its members share one node, else the NIC
  // share (options_). Locked helper.
  struct Link {
    BitsPerSecond bandwidth;
    Nanoseconds latency;
  };
  Link LinkOf(uint64_t comm_hash) const;
  void Deliver(uint32_t rank, rpc::OpSchedule s, rpc::ScheduleBatch* reply);
  // The forecast schedule of the rank's started collective `st`; nullopt
  // when its anchor is unknown (never reported, or long gone).
  std::optional<rpc::OpSchedule> ForecastSchedule(const RealRank& rr, const Started& st, const Forecast& f);
  // Sends it (reply or push) and remembers it until the members arrive;
  // false when there is none.
  bool DeliverForecast(uint32_t rank, RealRank& rr, const Slot& slot, const Started& st, const Forecast& f,
                       rpc::ScheduleBatch* reply);
  void RememberAnchor(RealRank& rr, const Slot& slot, const rpc::OpKey& key);
  void EndAnchor(RealRank& rr, const Slot& slot, int64_t end_ns);
  // The receive `slot` of real rank `recv_rank`: its virtual sender's first
  // byte leaves at `ready` (emulated ns); sent now, or when it is reported.
  void DeliverRecvReady(uint32_t recv_rank, RealRank& rr, const P2PSlot& slot, int64_t ready);
  // The members of `slot` arrived at `arrived`: if its forecast went out,
  // checks it (forecast_misses), sends the plain schedule and returns true.
  bool ForecastArrived(uint32_t rank, RealRank& rr, const Slot& slot, Nanoseconds arrived);
  // A MIRROR hold for `key` into `reply` (not counted as a schedule).
  void Hold(const rpc::OpKey& key, rpc::ScheduleBatch* reply) const;
  // Answers the rings RingAnswers has due: waits (mu_ released) up to
  // ring_answer_wait for the engine to catch up with them, then holds those
  // whose members have still not arrived (in `reply` when session `id`
  // is theirs, else pushed).
  void AnswerRings(std::unique_lock<std::mutex>* lock, SessionId id, rpc::ScheduleBatch* reply);
  void Diverge(const std::string& text);
  void PusherMain();

  RealRankPrograms programs_;
  engine::EngineInbox* inbox_;
  const engine::WallClockPacer* pacer_;
  server::StatusBoard* status_;
  HybridSchedulerOptions options_;

  mutable std::mutex mu_;  // guards everything below
  // Played tree all-reduces by (nodes, rank, bytes, channels, link bandwidth).
  mutable std::map<std::tuple<int, int, uint64_t, int, uint64_t>, engine::StreamShape> tree_shapes_;
  std::set<uint64_t> one_node_comms_;  // comm hashes whose members all share one node
  ScheduleSink* sink_ = nullptr;
  std::map<uint32_t, RealRank> ranks_;
  CommunicatorBinding comms_{&programs_};  // NCCL and engine communicators -> graph communicators
  std::map<std::pair<SessionId, uint64_t>, StartedOp> started_;
  std::map<SessionId, int32_t> session_rank_;       // Hello.rank (-1: unknown)
  RingAnswers ring_answers_;
  uint64_t last_posted_ = 0;  // the number of this scheduler's latest inbox post
  Counters counters_;
  std::optional<EngineAwaiting> awaiting_;  // the engine's last report of waiting for the real ranks
  std::atomic<int64_t> last_report_ns_{0};  // CLOCK_REALTIME of the last plugin event batch (any thread)
  std::deque<Push> outbox_;
  bool stop_ = false;
  bool pushing_ = false;                   // the pusher is handing a batch to the sink
  std::condition_variable outbox_cv_;
  std::condition_variable flushed_cv_;     // outbox empty and nothing being pushed
  std::thread pusher_;

  // Metrics (prometheus-cpp objects are thread-safe; owned by the registry).
  prometheus::Counter* matched_metric_ = nullptr;
  prometheus::Counter* unmatched_metric_ = nullptr;
  prometheus::Counter* pushed_metric_ = nullptr;
  prometheus::Histogram* lead_metric_ = nullptr;
  LateReceives late_receives_;  // prism_hybrid_receive_late_seconds
  std::optional<engine::WallClockPacer::LagHistogram> lags_at_steady_;  // the pacer's at iteration 0's end (mu_)
};

}  // namespace prism::daemon

#endif  // PRISM_DAEMON_HYBRID_HYBRID_SCHEDULER_H_
