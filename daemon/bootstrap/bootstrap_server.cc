#include "daemon/bootstrap/bootstrap_server.h"

#include <cstdio>
#include <cstdlib>
#include <future>
#include <random>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/status_macros.h"
#include "daemon/bootstrap/comm_waits.h"
#include "spdlog/spdlog.h"

namespace prism::bootstrap {
namespace {

constexpr auto kWatchdogPeriod = std::chrono::seconds(1);
constexpr auto kWaitRelog = std::chrono::seconds(30);
constexpr auto kLoopCallTimeout = std::chrono::seconds(10);

uint64_t RandomMagic() {
  std::random_device rd;
  uint64_t m = 0;
  while (m == 0 || m == kNcclMagic) m = (uint64_t{rd()} << 32) ^ rd();
  return m;
}

void WarnIfUnverified(const WireProfile& p) {
  if (p.complete) return;
  std::fprintf(stderr, "prismd: warning: NCCL %s's wire profile is not yet verified against a real rank "
               "(--allow-unverified-wire-profile); a mismatch shows as a refused or failed init\n",
               p.name.c_str());
}

}  // namespace

BootstrapServer::BootstrapServer(BootstrapConfig config, BootstrapPlan plan, daemon::VirtualConnectionBroker* broker)
    : config_(std::move(config)),
      plan_(std::move(plan)),
      conns_(loop_, reporter_, *this),
      comms_(c_),
      root_(c_),
      allgather_(c_),
      split_(c_),
      splits_(MakeSplitSource(config_.follow_real_ranks, c_, &plan_)),
      p2p_(c_) {
  c_.config = &config_;
  c_.plan = &plan_;
  c_.broker = broker;
  c_.loop = &loop_;
  c_.reporter = &reporter_;
  c_.conns = &conns_;
  c_.comms = &comms_;
  c_.starts = &upward_;
  c_.allgather = &allgather_;
  c_.splits = splits_.get();
  c_.split_events = &upward_;
  c_.p2p = &p2p_;
}

BootstrapServer::~BootstrapServer() { Stop(); }

absl::Status BootstrapServer::Configure() {
  if (config_.nccl_version != 0) {
    PRISM_ASSIGN_OR_RETURN(c_.profile, SelectWireProfile(config_.nccl_version, config_.allow_unverified_profile));
    WarnIfUnverified(*c_.profile);
    reporter_.Update([this](BootstrapStats& s) { s.nccl_version = c_.profile->version_code; });
  }
  PRISM_RETURN_IF_ERROR(ValidatePlan(plan_));
  if (!config_.comm_id.empty()) {
    auto root = ParseHostPort(config_.comm_id);
    if (!root.ok()) return absl::InvalidArgumentError(absl::StrCat("NCCL_COMM_ID: ", root.status().message()));
    if (config_.address_mode == AddressMode::kLoopbackAliases && (root->ip >> 24) != 127) {
      return absl::InvalidArgumentError(absl::StrCat(
          "NCCL_COMM_ID ", config_.comm_id, " is not a loopback address: with loopback aliases (the default) prismd "
          "accepts bootstrap connections from this host's loopback only, so every check-in there would be refused; "
          "give the ranks and prismd NCCL_COMM_ID=127.0.0.1:", root->port, " (or --bootstrap-routable HOST for ranks "
          "on other hosts)"));
    }
    c_.shared_root = *root;
    c_.shared_id = UniqueIdForCommId(*root);
  }
  ConnectionLimits limits;
  limits.loopback_only = config_.address_mode == AddressMode::kLoopbackAliases;
  for (const std::string& peer : config_.allowed_peers) {
    auto range = ParseCidr(peer);
    if (!range.ok()) return absl::InvalidArgumentError(absl::StrCat("bootstrap allowed peer ", range.status().message()));
    limits.allowed_peers.push_back(*range);
  }
  if (limits.loopback_only && !limits.allowed_peers.empty()) {
    return absl::InvalidArgumentError(
        "allowed peers need routable bootstrap addresses (port-per-endpoint mode): loopback-alias mode serves real "
        "ranks on this host only");
  }
  limits.max_unidentified = config_.max_unidentified_connections;
  limits.max_connections = config_.max_connections;
  limits.header_timeout = std::chrono::milliseconds(config_.header_timeout_ms);
  limits.accept_backoff = std::chrono::milliseconds(config_.accept_backoff_ms);
  limits.connect_timeout = std::chrono::milliseconds(config_.root_connect_timeout_ms);
  conns_.set_limits(std::move(limits));
  if (!config_.record_wire_dir.empty()) {
    PRISM_ASSIGN_OR_RETURN(recorder_, WireRecorder::Open(config_.record_wire_dir));
    conns_.set_recorder(recorder_.get());
    spdlog::info("bootstrap: recording wire traffic to {}", recorder_->path());
  }
  return absl::OkStatus();
}

absl::Status BootstrapServer::ListenShared() {
  if (config_.address_mode == AddressMode::kLoopbackAliases) {
    PRISM_ASSIGN_OR_RETURN(Ipv4Endpoint at, conns_.Listen({0, config_.bootstrap_port},
                                                          ConnectionTable::ListenerKind::kEndpoints));
    shared_port_ = at.port;
    conns_.UseAliasEndpoints(shared_port_);
    return absl::OkStatus();
  }
  PRISM_ASSIGN_OR_RETURN(Ipv4Endpoint adv, ParseHostPort(config_.advertise_host + ":1"));
  PRISM_ASSIGN_OR_RETURN(Ipv4Endpoint at, conns_.Listen({adv.ip, config_.bootstrap_port},
                                                        ConnectionTable::ListenerKind::kEndpoints));
  shared_port_ = at.port;
  conns_.UsePortPerEndpoint(adv.ip);
  return absl::OkStatus();
}

// With NCCL_COMM_ID, prismd hosts the root when the plan has an init
// communicator whose rank 0 is virtual and that has real members.
absl::Status BootstrapServer::ListenSharedRoot() {
  if (config_.comm_id.empty()) return absl::OkStatus();
  bool host_root = false;
  for (const PlanComm& pc : plan_.comms) {
    if (pc.parent || plan_.IsReal(pc.members[0])) continue;
    for (uint32_t g : pc.members) host_root |= plan_.IsReal(g);
  }
  if (!host_root) return absl::OkStatus();
  auto at = conns_.Listen(c_.shared_root, ConnectionTable::ListenerKind::kRoot);
  if (!at.ok()) {
    return absl::UnavailableError(absl::StrCat(
        "bootstrap: rank 0 is virtual, so prismd must host the NCCL root at NCCL_COMM_ID=", config_.comm_id,
        ", but: ", at.status().message(), ". Pick a free port on an address of this host."));
  }
  return absl::OkStatus();
}

absl::Status BootstrapServer::Start() {
  if (std::getenv("PRISM_BOOTSTRAP_DEBUG") != nullptr) spdlog::set_level(spdlog::level::debug);
  PRISM_RETURN_IF_ERROR(Configure());
  PRISM_RETURN_IF_ERROR(loop_.Init());
  PRISM_RETURN_IF_ERROR(ListenShared());
  PRISM_RETURN_IF_ERROR(ListenSharedRoot());
  reporter_.Update([this](BootstrapStats& s) { s.bootstrap_port = shared_port_; });
  const std::string roots = config_.comm_id.empty()
                                ? std::string("ids from PyTorch's store")
                                : absl::StrCat("root ", config_.comm_id);
  spdlog::info("bootstrap: NCCL {} profile, port {}, {}",
               c_.profile ? c_.profile->name : std::string("(the first real rank's)"), shared_port_, roots);
  awaiting_since_ = std::chrono::steady_clock::now();
  if (c_.profile != nullptr) comms_.StartJob();  // before the thread exists: no race
  else job_awaits_profile_ = true;
  loop_.AddTimer(kWatchdogPeriod, [this] { Watchdog(); });
  thread_ = std::thread([this] { loop_.Run(nullptr); });
  return absl::OkStatus();
}

void BootstrapServer::Stop() {
  if (!thread_.joinable()) return;
  loop_.Stop();
  thread_.join();
}

// ---- Connection events (loop thread).

void BootstrapServer::OnInput(Conn& c) {
  if (c_.profile == nullptr) {
    reporter_.Reject("version", absl::StrCat(
        "a real rank (", ToString(c.remote), ") started NCCL's bootstrap, but no real rank has said which NCCL it "
        "runs, so prismd cannot play its bootstrap: run the real ranks with NCCL_NET_PLUGIN=prism and PRISM_DAEMON "
        "pointing at this prismd (prism run does), or start prismd with --wire-profile CODE (e.g. 22809 for "
        "NCCL 2.28.9). Connection closed."));
    conns_.Close(&c);
    return;
  }
  if (c.comm != 0) {
    if (LiveComm* comm = comms_.Find(c.comm)) CommTable::Touch(*comm);
  }
  switch (c.role) {
    case ConnRole::kAcceptedUnknown: OnAcceptedHeader(c); break;
    case ConnRole::kRootIn: root_.OnCheckin(c); break;
    case ConnRole::kRootDeliveryIn: root_.OnDelivery(c); break;
    case ConnRole::kP2pIn: p2p_.OnInput(c); break;
    case ConnRole::kRingFromRealPrev:
    case ConnRole::kRingToRealNext:
      if (LiveComm* comm = comms_.Find(c.comm)) allgather_.Pump(*comm);
      break;
    case ConnRole::kOneShotOut: c.in_off = c.in.size(); break;
  }
}

void BootstrapServer::OnAcceptedHeader(Conn& c) {
  if (c.Available() < 12) return;
  const EndpointRef* found = conns_.FindEndpoint(c.local);
  if (found == nullptr) {
    reporter_.Reject("endpoint", absl::StrCat("from ", ToString(c.remote), " to ", ToString(c.local),
                                              ", which is no live virtual endpoint (stale communicator?)"));
    conns_.Close(&c);
    return;
  }
  const EndpointRef ep = *found;
  LiveComm* comm = comms_.Find(ep.comm);
  if (comm == nullptr) {
    conns_.Close(&c);
    return;
  }
  uint64_t magic;
  int32_t type;
  std::memcpy(&magic, c.in.data() + c.in_off, 8);
  std::memcpy(&type, c.in.data() + c.in_off + 8, 4);
  c.in_off += 12;
  const uint64_t want = ep.kind == EndpointKind::kRootDelivery || ep.kind == EndpointKind::kRootHost
                            ? UniqueIdMagic(comm->root.id)
                            : comm->magic;
  if (magic != want || type != kSocketTypeBootstrap) {
    reporter_.Reject("header", absl::StrCat(comm->name, ": connection from ", ToString(c.remote),
                                            " to virtual rank ", ep.rank, " with magic ", magic, " type ", type,
                                            " (expected ", want, ", type 1): dropped"));
    conns_.Close(&c);
    return;
  }
  conns_.Identify(&c);
  CommTable::Touch(*comm);
  c.comm = ep.comm;
  c.rank = ep.rank;
  switch (ep.kind) {
    case EndpointKind::kRootDelivery: c.role = ConnRole::kRootDeliveryIn; break;
    case EndpointKind::kP2p: c.role = ConnRole::kP2pIn; break;
    case EndpointKind::kRootHost:
      c.role = ConnRole::kRootIn;
      c.expect_magic = magic;
      break;
    case EndpointKind::kRing:
      c.role = ConnRole::kRingFromRealPrev;
      allgather_.AttachRealPrev(*comm, ep.rank, c);
      if (c.dead) return;
      break;
  }
  OnInput(c);
}

void BootstrapServer::OnEof(Conn& c) {
  LiveComm* comm = comms_.Find(c.comm);
  const ConnRole role = c.role;
  const bool leftover = c.Available() > 0;
  conns_.Close(&c);
  if (comm == nullptr) return;
  if (role == ConnRole::kRingFromRealPrev || role == ConnRole::kRingToRealNext) {
    allgather_.OnLinkClosed(*comm, c.rank, role == ConnRole::kRingFromRealPrev, leftover);
    return;
  }
  if ((role == ConnRole::kP2pIn || role == ConnRole::kRootIn || role == ConnRole::kRootDeliveryIn) && leftover) {
    reporter_.Diverge(absl::StrCat(comm->name, ": real rank closed a bootstrap connection mid-message"));
  }
}

void BootstrapServer::OnConnectFailed(Conn& c, const std::string& why, bool gave_up) {
  LiveComm* comm = gave_up ? comms_.Find(c.comm) : nullptr;
  if (comm != nullptr) {
    comms_.Fail(*comm, why);
  } else if (!gave_up) {
    reporter_.Diverge(why);
  }
}

void BootstrapServer::OnClosed(Conn& c) {
  if (!c.checkin || !comms_.job_active()) return;
  if (LiveComm* comm = comms_.Find(c.comm)) root_.OnCheckinClosed(*comm);
}

// ---- Roots from PyTorch's store (any thread -> loop thread).

absl::Status BootstrapServer::RunOnLoop(const std::function<absl::Status()>& fn) {
  if (!thread_.joinable()) return absl::FailedPreconditionError("bootstrap emulation is not running");
  auto done = std::make_shared<std::promise<absl::Status>>();
  std::future<absl::Status> result = done->get_future();
  loop_.Post([fn, done] { done->set_value(fn()); });
  if (result.wait_for(kLoopCallTimeout) != std::future_status::ready) {
    return absl::DeadlineExceededError("bootstrap loop did not answer within 10 s (stopping?)");
  }
  return result.get();
}

absl::StatusOr<PlanComm> BootstrapServer::ResolveRequest(const CommRequest& r) const {
  if (r.plan_id != CommRequest::kUnplanned) {
    if (r.plan_id >= plan_.comms.size()) {
      return absl::InvalidArgumentError(absl::StrCat("communicator ", r.plan_id, " is not in the graph (it has ",
                                                     plan_.comms.size(), ")"));
    }
    PlanComm pc = plan_.comms[r.plan_id];
    if (!r.name.empty()) pc.name = r.name;
    return pc;
  }
  if (r.members.empty()) return absl::InvalidArgumentError("a communicator needs members");
  for (uint32_t g : r.members) {
    if (g >= plan_.ranks.size()) {
      return absl::InvalidArgumentError(absl::StrCat("rank ", g, " is outside the job (world size ",
                                                     plan_.ranks.size(), ")"));
    }
  }
  PlanComm pc;
  pc.id = CommRequest::kUnplanned;  // never matches a plan entry or a split parent
  pc.name = r.name.empty() ? absl::StrCat("comm[", absl::StrJoin(r.members, ","), "]") : r.name;
  pc.members = r.members;
  return pc;
}

LiveComm* BootstrapServer::Requested(const PlanComm& pc, const std::string& key) {
  LiveComm* live = nullptr;
  if (key.empty()) {
    live = comms_.FindByPlan(pc.id);
  } else if (auto it = requested_.find(key); it != requested_.end() && it->second.first == comms_.job_gen()) {
    live = comms_.Find(it->second.second);
  }
  return live != nullptr && live->phase != CommPhase::kDone ? live : nullptr;
}

absl::StatusOr<UniqueId> BootstrapServer::HostRootOnLoop(const PlanComm& pc, const std::string& key) {
  if (plan_.IsReal(pc.members[0])) {
    return absl::FailedPreconditionError(absl::StrCat(pc.name, ": comm rank 0 is global rank ", pc.members[0],
                                                      ", a real rank: it makes the NCCL id, not prismd"));
  }
  if (LiveComm* live = Requested(pc, key); live != nullptr && live->root.host == RootHost::kDaemonOwn) {
    return live->root.id;  // already hosted (a second waiter for the same id)
  }
  const std::string unarmed_key = key.empty() ? absl::StrCat("plan:", pc.id) : key;
  if (auto it = unarmed_ids_.find(unarmed_key); it != unarmed_ids_.end()) return it->second;
  PRISM_ASSIGN_OR_RETURN(Ipv4Endpoint addr, conns_.AllocEndpoint({0, 0, EndpointKind::kRootHost}));
  // The id's layout is the same in every release (kUniqueIdAddrOffset).
  // Only the communicator (its hash) needs the wire profile.
  UniqueId id{};
  const uint64_t magic = RandomMagic();
  std::memcpy(id.data(), &magic, 8);
  const SockAddrBytes a = EncodeSockAddr(addr);
  std::copy(a.begin(), a.end(), id.begin() + kUniqueIdAddrOffset);
  if (c_.profile == nullptr) unarmed_ids_[unarmed_key] = id;
  WhenProfileKnown([this, pc, key, id, addr] { ArmHostedRoot(pc, key, id, addr); });
  return id;
}

void BootstrapServer::ArmHostedRoot(const PlanComm& pc, const std::string& key, const UniqueId& id,
                                    const Ipv4Endpoint& addr) {
  LiveComm& comm = comms_.Create(pc, pc.members, CommHashOfId(id, c_.profile->comm_hash), UniqueIdMagic(id),
                                 std::nullopt);
  conns_.Retarget(addr, {comm.live_id, 0, EndpointKind::kRootHost});
  comm.root.host = RootHost::kDaemonOwn;
  comm.root.id = id;
  comm.root.addr = addr;
  if (!key.empty()) requested_[key] = {comms_.job_gen(), comm.live_id};
  spdlog::info("bootstrap: {}: prismd plays comm rank 0 and hosts its root at {}", comm.name, ToString(addr));
  root_.Start(comm);
}

absl::Status BootstrapServer::JoinRootOnLoop(const PlanComm& pc, const std::string& key, const UniqueId& id) {
  if (!plan_.IsReal(pc.members[0])) {
    return absl::FailedPreconditionError(absl::StrCat(
        pc.name, ": a real rank made this communicator's NCCL id, but the graph's comm rank 0 is global rank ",
        pc.members[0], ", which is virtual: the program's group does not match the graph's"));
  }
  if (LiveComm* live = Requested(pc, key); live != nullptr && live->root.id == id) {
    return absl::OkStatus();  // already joined
  }
  auto root = UniqueIdRoot(id);
  if (!root.ok()) return root.status();
  if (!conns_.DialAllowed(root->ip)) {
    return absl::InvalidArgumentError(absl::StrCat(pc.name, ": the NCCL id's root ", ToString(*root),
                                                   " is not an address prismd may dial (loopback only in "
                                                   "loopback-alias mode)"));
  }
  if (c_.profile != nullptr) return ArmJoinedRoot(pc, key, id);
  const std::string unarmed_key = key.empty() ? absl::StrCat("plan:", pc.id) : key;
  if (auto it = unarmed_ids_.find(unarmed_key); it != unarmed_ids_.end() && it->second == id) {
    return absl::OkStatus();  // already waiting to join
  }
  unarmed_ids_[unarmed_key] = id;
  // The real rank 0 announces its NCCL at its init, which follows the id.
  WhenProfileKnown([this, pc, key, id] {
    if (absl::Status s = ArmJoinedRoot(pc, key, id); !s.ok()) reporter_.Diverge(std::string(s.message()));
  });
  return absl::OkStatus();
}

absl::Status BootstrapServer::ArmJoinedRoot(const PlanComm& pc, const std::string& key, const UniqueId& id) {
  PRISM_ASSIGN_OR_RETURN(Ipv4Endpoint root, UniqueIdRoot(id));
  LiveComm& comm = comms_.Create(pc, pc.members, CommHashOfId(id, c_.profile->comm_hash), UniqueIdMagic(id),
                                 std::nullopt);
  comm.root.host = RootHost::kRealRank;
  comm.root.id = id;
  comm.root.addr = root;
  if (!key.empty()) requested_[key] = {comms_.job_gen(), comm.live_id};
  spdlog::info("bootstrap: {}: real rank {} hosts its root at {}", comm.name, pc.members[0], ToString(root));
  root_.Start(comm);
  return absl::OkStatus();
}

// ---- The real ranks' NCCL release (any thread -> loop thread).

absl::Status BootstrapServer::SetNcclVersion(int version_code) {
  return RunOnLoop([this, version_code] { return ChooseProfileOnLoop(version_code); });
}

absl::Status BootstrapServer::ChooseProfileOnLoop(int version_code) {
  if (c_.profile != nullptr) {
    if (c_.profile->version_code == version_code) return absl::OkStatus();
    return absl::FailedPreconditionError(absl::StrCat("prismd already plays NCCL ", c_.profile->name,
                                                      "'s bootstrap; every real rank must run the same NCCL"));
  }
  PRISM_ASSIGN_OR_RETURN(c_.profile, SelectWireProfile(version_code, config_.allow_unverified_profile));
  WarnIfUnverified(*c_.profile);
  reporter_.Update([this](BootstrapStats& s) { s.nccl_version = c_.profile->version_code; });
  std::fprintf(stderr, "prismd: the real ranks run NCCL %s: playing its bootstrap\n", c_.profile->name.c_str());
  spdlog::info("bootstrap: NCCL {} announced by a real rank; {} action(s) waited for it", c_.profile->name,
               await_profile_.size());
  if (job_awaits_profile_) comms_.StartJob();
  job_awaits_profile_ = false;
  std::vector<std::function<void()>> work;
  work.swap(await_profile_);
  unarmed_ids_.clear();
  for (auto& fn : work) fn();
  return absl::OkStatus();
}

void BootstrapServer::WhenProfileKnown(std::function<void()> work) {
  if (c_.profile != nullptr) {
    work();
    return;
  }
  if (await_profile_.empty()) awaiting_since_ = std::chrono::steady_clock::now();
  await_profile_.push_back(std::move(work));
}

absl::StatusOr<UniqueId> BootstrapServer::HostRoot(const CommRequest& request) {
  PRISM_ASSIGN_OR_RETURN(PlanComm pc, ResolveRequest(request));
  if (!config_.comm_id.empty()) {  // every init uses the NCCL_COMM_ID id; the plan order plays it
    if (plan_.IsReal(pc.members[0])) {
      return absl::FailedPreconditionError(absl::StrCat(pc.name, ": comm rank 0 is real: it makes the NCCL id"));
    }
    return c_.shared_id;
  }
  auto id = std::make_shared<UniqueId>();  // outlives a timed-out wait
  PRISM_RETURN_IF_ERROR(RunOnLoop([this, pc, id, key = request.key]() mutable -> absl::Status {
    if (pc.id == CommRequest::kUnplanned) pc.id = static_cast<uint32_t>(plan_.comms.size()) + next_unplanned_++;
    auto got = HostRootOnLoop(pc, key);
    if (!got.ok()) return got.status();
    *id = *got;
    return absl::OkStatus();
  }));
  return *id;
}

absl::Status BootstrapServer::JoinRoot(const CommRequest& request, const UniqueId& id) {
  PRISM_ASSIGN_OR_RETURN(PlanComm pc, ResolveRequest(request));
  if (!config_.comm_id.empty()) {  // the plan order plays every init at NCCL_COMM_ID
    if (id != c_.shared_id) {
      return absl::FailedPreconditionError(absl::StrCat(
          pc.name, ": a real rank made an NCCL id that is not NCCL_COMM_ID's (", config_.comm_id,
          "): set the same NCCL_COMM_ID on every real rank, or start prismd without --nccl-comm-id"));
    }
    return absl::OkStatus();
  }
  return RunOnLoop([this, pc, id, key = request.key]() mutable -> absl::Status {
    if (pc.id == CommRequest::kUnplanned) pc.id = static_cast<uint32_t>(plan_.comms.size()) + next_unplanned_++;
    return JoinRootOnLoop(pc, key, id);
  });
}

absl::Status BootstrapServer::RealRanksOnly(const CommRequest& request, const UniqueId& id) {
  PRISM_ASSIGN_OR_RETURN(PlanComm pc, ResolveRequest(request));
  for (uint32_t g : pc.members) {
    if (!plan_.IsReal(g)) {
      return absl::FailedPreconditionError(absl::StrCat(pc.name, ": global rank ", g,
                                                        " is virtual, so prismd plays this communicator"));
    }
  }
  if (!config_.comm_id.empty() || c_.broker == nullptr) return absl::OkStatus();
  return RunOnLoop([this, pc, id]() -> absl::Status {
    WhenProfileKnown([this, pc, id] { AnnounceRealRanksOnly(pc, id); });
    return absl::OkStatus();
  });
}

absl::Status BootstrapServer::AnnounceSplitGroup(uint32_t rank, std::vector<uint32_t> members) {
  std::sort(members.begin(), members.end());
  return RunOnLoop([this, rank, members = std::move(members)]() mutable -> absl::Status {
    if (!plan_.IsReal(rank))  // on the loop thread, which owns plan_
      return absl::InvalidArgumentError(absl::StrCat("global rank ", rank, " is not a real rank of this job"));
    splits_->Announce(rank, std::move(members));
    return absl::OkStatus();
  });
}

void BootstrapServer::AnnounceRealRanksOnly(const PlanComm& pc, const UniqueId& id) {
  daemon::CommDescription d;
  d.comm_hash = CommHashOfId(id, c_.profile->comm_hash);
  d.graph_comm = pc.id < plan_.comms.size() ? static_cast<int64_t>(pc.id) : -1;
  d.name = pc.name;
  d.members = pc.members;
  spdlog::info("bootstrap: {} (commHash {:#x}): {} ranks, all real: prismd plays none of it", d.name, d.comm_hash,
               d.members.size());
  c_.broker->CommunicatorKnown(d);
}

void BootstrapServer::EndJob(const std::string& why, int grace_ms) {
  if (!thread_.joinable()) return;
  loop_.Post([this, why, grace_ms] {
    if (c_.profile == nullptr && !unarmed_ids_.empty()) {
      // The ranks went away before any said which NCCL it runs: forget the
      // ids they were given (the next job asks again). The job start stays.
      spdlog::warn("bootstrap: job ended before its NCCL version was known: {}", why);
      await_profile_.clear();
      unarmed_ids_.clear();
      return;
    }
    const uint64_t gen = comms_.job_gen();
    loop_.AddTimer(std::chrono::milliseconds(grace_ms), [this, why, gen] {
      if (gen != comms_.job_gen() || comms_.all().empty()) return;
      std::string stuck;
      for (const auto& [id, comm] : comms_.all()) {
        const bool idle_root = comm->phase == CommPhase::kRoot && !comm->real_seen;
        if (comm->phase == CommPhase::kDone || idle_root) continue;
        absl::StrAppend(&stuck, stuck.empty() ? "" : ", ", comm->name, " (", CommPhaseName(comm->phase), ")");
      }
      if (stuck.empty()) comms_.FinishJob(false, "");
      else comms_.FinishJob(true, absl::StrCat(why, "; unfinished: ", stuck));
    });
  });
}

// ---- Never a silent wait (loop thread, once a second).

std::vector<WaitReport> BootstrapServer::CollectWaits() const {
  std::vector<WaitReport> out;
  const auto now = std::chrono::steady_clock::now();
  if (c_.profile == nullptr && !unarmed_ids_.empty()) {
    const double idle = std::chrono::duration<double>(now - awaiting_since_).count();
    if (idle * 1000 >= config_.stall_report_ms) {
      WaitReport w;
      w.communicator = "(NCCL version)";
      w.waits_for = "NCCL ids were handed out, but no real rank has said which NCCL it runs (the plugin announces it "
                    "at NCCL init): are the real ranks running with NCCL_NET_PLUGIN=prism and PRISM_DAEMON set to "
                    "this prismd? Or start prismd with --wire-profile CODE";
      w.seconds = idle;
      out.push_back(std::move(w));
    }
  }
  for (const auto& [id, comm] : comms_.all()) {
    if (comm->phase == CommPhase::kDone || (comm->phase == CommPhase::kReady && !comm->ag)) continue;
    const double idle = std::chrono::duration<double>(now - comm->last_progress).count();
    if (idle * 1000 < config_.stall_report_ms) continue;
    std::optional<WaitReport> w;
    if (comm->phase == CommPhase::kRoot && !comm->parent) w = RootWait(*comm);
    if (!w && comm->ag) w = AllGatherWait(*comm);
    if (!w) continue;
    w->seconds = idle;
    out.push_back(std::move(*w));
  }
  return out;
}

void BootstrapServer::Watchdog() {
  std::vector<WaitReport> waits = CollectWaits();
  const auto now = std::chrono::steady_clock::now();
  for (const WaitReport& w : waits) {
    const std::string key = w.communicator + "|" + w.waits_for;
    auto it = waits_logged_.find(key);
    if (it != waits_logged_.end() && now - it->second < kWaitRelog) continue;
    waits_logged_[key] = now;
    spdlog::warn("bootstrap: {} waiting {:.0f} s: {}", w.communicator, w.seconds, w.waits_for);
  }
  if (waits.empty()) waits_logged_.clear();
  reporter_.SetWaiting(std::move(waits));
  loop_.AddTimer(kWatchdogPeriod, [this] { Watchdog(); });
}

}  // namespace prism::bootstrap
