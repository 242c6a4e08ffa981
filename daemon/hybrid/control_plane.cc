#include "daemon/hybrid/control_plane.h"

#include <chrono>
#include <cstdio>
#include <optional>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "daemon/bootstrap/bootstrap_plan.h"
#include "daemon/bootstrap/wire_profile.h"
#include "prometheus/counter.h"
#include "prometheus/gauge.h"

namespace prism::daemon {
namespace {

// Counters of BootstrapStats exported as prism_bootstrap_<name>_total.
struct BootstrapCounter {
  const char* name;
  const char* help;
  uint64_t bootstrap::BootstrapStats::*field;
};

constexpr BootstrapCounter kBootstrapCounters[] = {
    {"jobs_started", "NCCL jobs whose bootstrap began", &bootstrap::BootstrapStats::jobs_started},
    {"jobs_completed", "NCCL jobs whose communicators were all destroyed cleanly",
     &bootstrap::BootstrapStats::jobs_completed},
    {"jobs_failed", "NCCL jobs abandoned (a real rank died or diverged)", &bootstrap::BootstrapStats::jobs_failed},
    {"comms_initialized", "communicators initialised or split with virtual ranks",
     &bootstrap::BootstrapStats::comms_initialized},
    {"comms_destroyed", "communicators destroyed", &bootstrap::BootstrapStats::comms_destroyed},
    {"allgathers", "bootstrap all-gathers completed", &bootstrap::BootstrapStats::allgathers_completed},
    {"p2p_messages_in", "bootstrap point-to-point messages from real ranks",
     &bootstrap::BootstrapStats::p2p_messages_in},
    {"p2p_messages_out", "bootstrap point-to-point messages to real ranks",
     &bootstrap::BootstrapStats::p2p_messages_out},
    {"transport_setups", "NET transport setup exchanges answered", &bootstrap::BootstrapStats::p2p_setups},
    {"barriers", "bootstrap barriers completed", &bootstrap::BootstrapStats::barriers},
    {"divergences", "real-rank actions the graph or wire profile did not predict",
     &bootstrap::BootstrapStats::divergences},
    {"real_rank_failures", "real ranks that closed their sockets mid-protocol",
     &bootstrap::BootstrapStats::real_rank_failures},
    {"broker_errors", "virtual connections that could not be handed to a plugin session",
     &bootstrap::BootstrapStats::broker_errors},
};

// GlooReports counters exported as prism_gloo_events_total{kind=<name>}.
struct GlooCounter {
  const char* name;
  uint64_t (*value)(const gloo::GlooReports&);
};

constexpr GlooCounter kGlooCounters[] = {
    {"records_published", [](const gloo::GlooReports& r) { return r.records_published; }},
    {"pairs_opened", [](const gloo::GlooReports& r) { return r.pairs_opened; }},
    {"pairs_failed", [](const gloo::GlooReports& r) { return r.pairs_failed; }},
    {"messages_in", [](const gloo::GlooReports& r) { return r.traffic.messages_in; }},
    {"messages_out", [](const gloo::GlooReports& r) { return r.traffic.messages_out; }},
    {"payload_bytes_in", [](const gloo::GlooReports& r) { return r.traffic.payload_in; }},
    {"payload_bytes_out", [](const gloo::GlooReports& r) { return r.traffic.payload_out; }},
};

// Adds to `counters` what `now` has more than `last` (the services keep
// plain totals; the poller owns the deltas).
void AddDeltas(const std::vector<uint64_t>& now, std::vector<uint64_t>* last,
               const std::vector<prometheus::Counter*>& counters) {
  for (size_t i = 0; i < counters.size(); ++i) {
    if (now[i] > (*last)[i]) counters[i]->Increment(static_cast<double>(now[i] - (*last)[i]));
    (*last)[i] = now[i];
  }
}

PluginSessionService::Options SessionOptions(const ControlPlaneOptions& options, NcclVersionGate* gate) {
  server::StatusBoard* status = options.status;
  PluginSessionService::Options o;
  o.daemon_version = options.version;
  o.ring_step_cost = options.ring_step_cost;
  o.same_node = options.same_node;
  o.nccl_gate = gate;
  // A real rank's plugin announcing itself is the rank connecting (/status).
  if (status != nullptr)
    o.on_announce = [status](const rpc::Hello& hello) {
      if (hello.rank() >= 0)
        status->UpdateRealRank(static_cast<uint32_t>(hello.rank()), true,
                               absl::StrCat("connected: NCCL ", hello.nccl_version(), " loaded the plugin"));
    };
  return o;
}

}  // namespace

absl::StatusOr<std::unique_ptr<ControlPlane>> ControlPlane::Create(const graph::Graph& graph,
                                                                   ControlPlaneOptions options,
                                                                   server::Metrics* metrics,
                                                                   ScheduleSource* schedules) {
  std::unique_ptr<ControlPlane> cp(new ControlPlane(std::move(options), metrics, schedules));
  const ControlPlaneOptions& o = cp->options_;
  if (o.real_ranks.empty()) return cp;
  if (o.nccl_comm_id.empty() && o.torch_store.empty()) {
    return absl::InvalidArgumentError(
        "with --real-ranks, prismd needs the NCCL ids: host PyTorch's store (--torch-store host:port, the "
        "ranks' MASTER_ADDR:MASTER_PORT; prism run does this) or give the NCCL_COMM_ID the ranks use "
        "(--nccl-comm-id)");
  }
  auto plan = bootstrap::PlanFromGraph(graph, o.real_ranks);
  if (!plan.ok()) return plan.status();
  cp->plan_ = *plan;
  bootstrap::BootstrapConfig config;
  config.nccl_version = o.nccl_version;
  config.allow_unverified_profile = o.allow_unverified_profile;
  config.comm_id = o.nccl_comm_id;
  config.bootstrap_port = o.bootstrap_port;
  config.record_wire_dir = o.record_wire_dir;
  config.follow_real_ranks = o.follow_real_ranks;
  config.env.runtime_connect = o.runtime_connect;
  config.env.register_ag = o.register_allgather;
  if (!o.bootstrap_routable_host.empty()) {
    config.address_mode = bootstrap::AddressMode::kPortPerEndpoint;
    config.advertise_host = o.bootstrap_routable_host;
  }
  config.allowed_peers = o.bootstrap_allow;
  cp->bootstrap_ = std::make_unique<bootstrap::BootstrapService>(std::move(config), std::move(*plan),
                                                                 &cp->sessions_.broker());
  return cp;
}

ControlPlane::ControlPlane(ControlPlaneOptions options, server::Metrics* metrics, ScheduleSource* schedules)
    : options_(std::move(options)),
      metrics_(metrics),
      nccl_gate_(options_.nccl_version, [this](int code) { return ChooseNcclVersion(code); }),
      sessions_(SessionOptions(options_, &nccl_gate_), schedules) {}

absl::Status ControlPlane::ChooseNcclVersion(int code) {
  absl::Status chosen = absl::OkStatus();
  if (bootstrap_) chosen = bootstrap_->SetNcclVersion(code);
  else if (!options_.real_ranks.empty())
    chosen = bootstrap::SelectWireProfile(code, options_.allow_unverified_profile).status();
  if (chosen.ok()) WarnIfUntimed(code);
  return chosen;
}

// Before 2.27 Prism cannot tie a real rank's messages to NCCL operations
// (docs/nccl-releases.md, "Profiler ABI"): say what that costs, once.
void ControlPlane::WarnIfUntimed(int code) {
  if (code <= 0 || code >= 22700) return;
  std::fprintf(stderr,
               "prismd: warning: NCCL %s has no profiler API Prism can use (2.27+): receives from virtual peers are "
               "timed by the plain link model, not by operation, and prismd cannot follow the real ranks' "
               "progress (docs/nccl-releases.md)\n",
               bootstrap::VersionCodeName(code).c_str());
}

ControlPlane::~ControlPlane() { Stop(); }

// PyTorch's store on torch_store, watched by the rendezvous.
absl::Status ControlPlane::StartStore() {
  const std::string& at = options_.torch_store;
  const size_t colon = at.rfind(':');
  int port = 0;
  if (colon == std::string::npos || !absl::SimpleAtoi(at.substr(colon + 1), &port) || port <= 0 || port > 65535) {
    return absl::InvalidArgumentError(absl::StrCat("--torch-store '", at, "' is not host:port (e.g. 127.0.0.1:29500)"));
  }
  roots_ = std::make_unique<rendezvous::BootstrapRoots>(bootstrap_.get());
  rendezvous::RendezvousOptions ro;
  ro.store_address = at;
  ro.follow_real_ranks = options_.follow_real_ranks;
  rendezvous_ = std::make_unique<rendezvous::TorchRendezvous>(plan_, roots_.get(), ro);
  gloo::GlooOptions go;
  go.loopback_only = options_.bootstrap_routable_host.empty();
  auto gloo = gloo::GlooRanks::Start(plan_, go);
  if (!gloo.ok()) return gloo.status();
  gloo_ = std::move(*gloo);
  store_observers_ = std::make_unique<store::ObserverFanout>(
      std::vector<store::StoreObserver*>{rendezvous_.get(), gloo_.get()});
  store::StoreServerOptions so;
  so.host = at.substr(0, colon);
  so.port = static_cast<uint16_t>(port);
  auto server = store::StoreServer::Start(so, store_observers_.get());
  if (!server.ok()) return server.status();
  store_ = std::move(*server);
  rendezvous_->SetStore(store_.get());
  gloo_->SetStore(store_.get());
  return absl::OkStatus();
}

absl::Status ControlPlane::Start() {
  WarnIfUntimed(options_.nccl_version);  // --wire-profile; a learnt release warns when chosen
  if (bootstrap_) {
    if (auto s = bootstrap_->Start(); !s.ok()) return s;
    if (!options_.torch_store.empty()) {
      if (auto s = StartStore(); !s.ok()) return s;
    }
    const std::string ids = options_.nccl_comm_id.empty()
                                ? absl::StrCat("NCCL ids from PyTorch's store on ", options_.torch_store,
                                               " (MASTER_ADDR:MASTER_PORT)")
                                : absl::StrCat("NCCL_COMM_ID ", options_.nccl_comm_id);
    std::fprintf(stderr, "prismd: NCCL bootstrap for %zu real rank(s), %s, virtual ranks on port %u\n",
                 options_.real_ranks.size(), ids.c_str(), bootstrap_->port());
  }
  poller_ = std::thread([this] { PollMetrics(); });
  return absl::OkStatus();
}

void ControlPlane::Stop() {
  {
    std::lock_guard<std::mutex> lock(stop_mu_);
    if (stop_) return;
    stop_ = true;
  }
  stop_cv_.notify_all();
  if (poller_.joinable()) poller_.join();
  if (store_) store_->Stop();
  if (gloo_) gloo_->Stop();
  if (bootstrap_) bootstrap_->Stop();
}

// Bootstrap and store waits, and start-up errors, to /status (and the log).
void ControlPlane::PublishWaits() {
  std::vector<server::StatusWait> waits;
  std::vector<std::string> errors;
  auto add = [&](const char* source, const bootstrap::WaitReport& w) {
    waits.push_back({source, w.communicator, w.ranks, w.waits_for, w.seconds});
  };
  std::optional<bootstrap::BootstrapStats> stats;
  if (bootstrap_) {
    stats = bootstrap_->Stats();
    for (const auto& w : stats->waiting) add("bootstrap", w);
  }
  if (rendezvous_) {
    rendezvous_->Tick();
    rendezvous::RendezvousReports r = rendezvous_->Reports();
    for (const auto& w : r.waiting) add("store", w);
    errors = std::move(r.errors);
  }
  if (gloo_) {
    gloo_->Tick();
    gloo::GlooReports g = gloo_->Reports();
    for (const auto& w : g.waiting) add("gloo", w);
    for (std::string& e : g.errors) errors.push_back(std::move(e));
  }
  ReportDivergences(stats ? &*stats : nullptr, errors);
  if (options_.status != nullptr) options_.status->SetWaiting(std::move(waits), std::move(errors));
}

void ControlPlane::ReportDivergences(const bootstrap::BootstrapStats* stats, const std::vector<std::string>& errors) {
  if (options_.divergences == nullptr) return;
  if (stats != nullptr && stats->divergences > divergences_seen_) {
    // recent_divergences keeps the last 32 messages: report the new ones it still has.
    const uint64_t fresh = stats->divergences - divergences_seen_;
    const size_t kept = stats->recent_divergences.size();
    const size_t from = fresh >= kept ? 0 : kept - static_cast<size_t>(fresh);
    for (size_t i = from; i < kept; ++i)
      options_.divergences->Report(DivergenceSource::kBootstrap, stats->recent_divergences[i]);
    if (kept == 0) options_.divergences->Report(DivergenceSource::kBootstrap, "a divergence (see prismd's log)");
    divergences_seen_ = stats->divergences;
  }
  for (const std::string& e : errors) {
    if (errors_seen_.insert(e).second) options_.divergences->Report(DivergenceSource::kStore, e);
  }
}

// Copies the sessions' and the bootstrap's counters into Prometheus metrics
// twice a second (the services keep plain counters; this thread owns the
// deltas).
void ControlPlane::PollMetrics() {
  auto& family = prometheus::BuildCounter()
                     .Name("prism_bootstrap_events_total")
                     .Help("NCCL bootstrap emulation events, by kind (see docs/metrics.md)")
                     .Register(*metrics_->registry());
  auto& gloo_family = prometheus::BuildCounter()
                          .Name("prism_gloo_events_total")
                          .Help("virtual ranks in the real ranks' Gloo groups, by kind (see docs/metrics.md)")
                          .Register(*metrics_->registry());
  std::vector<prometheus::Counter*> counters, gloo_counters;
  for (const auto& c : kBootstrapCounters) counters.push_back(&family.Add({{"kind", c.name}}));
  for (const auto& c : kGlooCounters) gloo_counters.push_back(&gloo_family.Add({{"kind", c.name}}));
  std::vector<uint64_t> last(counters.size(), 0), gloo_last(gloo_counters.size(), 0);
  std::unique_lock<std::mutex> lock(stop_mu_);
  while (!stop_) {
    lock.unlock();
    metrics_->SetPluginSessions(sessions_.connected_sessions());
    if (bootstrap_) {
      const bootstrap::BootstrapStats stats = bootstrap_->Stats();
      std::vector<uint64_t> now;
      for (const auto& c : kBootstrapCounters) now.push_back(stats.*(c.field));
      AddDeltas(now, &last, counters);
    }
    if (gloo_) {
      const gloo::GlooReports reports = gloo_->Reports();
      std::vector<uint64_t> now;
      for (const auto& c : kGlooCounters) now.push_back(c.value(reports));
      AddDeltas(now, &gloo_last, gloo_counters);
    }
    PublishWaits();
    lock.lock();
    stop_cv_.wait_for(lock, std::chrono::milliseconds(500), [this] { return stop_; });
  }
}

}  // namespace prism::daemon
