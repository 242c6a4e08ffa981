#include "daemon/rendezvous/torch_rendezvous.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "daemon/rendezvous/gloo_keys.h"
#include "spdlog/spdlog.h"

namespace prism::rendezvous {
namespace {

constexpr auto kRelog = std::chrono::seconds(30);
constexpr size_t kMaxErrors = 32;

std::string RankOf(const store::ClientInfo& c) {
  return c.rank ? absl::StrCat("rank ", *c.rank) : absl::StrCat("a store client at ", c.address);
}

double Seconds(std::chrono::steady_clock::duration d) { return std::chrono::duration<double>(d).count(); }

}  // namespace

TorchRendezvous::TorchRendezvous(const bootstrap::BootstrapPlan& plan, CommRoots* roots, RendezvousOptions options)
    : plan_(plan),
      groups_(MakeGroupSource(options.follow_real_ranks, plan)),
      roots_(roots),
      options_(std::move(options)) {}

void TorchRendezvous::Error(const std::string& message) {
  if (std::find(errors_.begin(), errors_.end(), message) != errors_.end()) return;
  spdlog::error("rendezvous: {}", message);
  errors_.push_back(message);
  if (errors_.size() > kMaxErrors) errors_.erase(errors_.begin());
}

void TorchRendezvous::OnConnected(const store::ClientInfo& client) {
  std::lock_guard<std::mutex> lock(mu_);
  if (!first_client_) first_client_ = Clock::now();
  clients_[client.id] = client;
  if (client.rank && plan_.IsReal(static_cast<uint32_t>(*client.rank))) {
    spdlog::info("rendezvous: real rank {} connected to PyTorch's store (pid {})", *client.rank,
                 client.pid.value_or(0));
  }
  if (client.rank && !plan_.IsReal(static_cast<uint32_t>(*client.rank))) {
    Error(absl::StrCat("rank ", *client.rank, " (pid ", client.pid.value_or(0), ") connected to PyTorch's store, ",
                       "but prismd plays it virtually (its real ranks: ",
                       absl::StrJoin(plan_.real_ranks, ","), "): start prismd with --real-ranks matching "
                       "prism run's --ranks"));
  }
}

// The communicator an id key names: a graph communicator, or a lone
// send/recv pair of one.
absl::StatusOr<ResolvedGroup> TorchRendezvous::CommunicatorOf(const NcclIdKey& key) {
  if (key.kind == NcclIdKey::Kind::kScalableRoot) {
    return absl::FailedPreconditionError(absl::StrCat(
        "key '", key.key, "': PyTorch uses one NCCL root per TORCH_NCCL_RANKS_PER_ROOT ranks (scalable init); ",
        "prismd plays one root per communicator: set TORCH_NCCL_RANKS_PER_ROOT to at least the world size ",
        "(prism run sets 1048576)"));
  }
  auto group = groups_->ResolveNccl(key.group);
  if (!group.ok()) return group.status();
  if (key.kind == NcclIdKey::Kind::kCommunicator) return group;
  const int64_t size = static_cast<int64_t>(group->members.size());
  if (key.hi >= size) {
    return absl::NotFoundError(absl::StrCat("key '", key.key, "' names ranks ", key.lo, " and ", key.hi, " of ",
                                            group->name, ", which has ", size, " ranks"));
  }
  ResolvedGroup pair;
  pair.plan_id = bootstrap::CommRequest::kUnplanned;
  pair.members = {group->members[key.lo], group->members[key.hi]};
  pair.name = absl::StrCat("p2p[", pair.members[0], ",", pair.members[1], "] of ", group->name);
  return pair;
}

bootstrap::CommRequest TorchRendezvous::RequestFor(const IdKey& k) const {
  bootstrap::CommRequest r;
  r.plan_id = k.comm->plan_id;
  if (r.plan_id == bootstrap::CommRequest::kUnplanned) r.members = k.comm->members;
  r.name = k.comm->name;
  r.key = k.key.key;
  return r;
}

void TorchRendezvous::OnWait(const store::ClientInfo& client, const std::vector<std::string>& unset) {
  for (const std::string& raw : unset) {
    auto key = ParseNcclIdKey(raw);
    if (key) OnIdWait(client, *key);
  }
}

void TorchRendezvous::OnIdWait(const store::ClientInfo& client, const NcclIdKey& key) {
  std::lock_guard<std::mutex> lock(mu_);
  auto [it, fresh] = ids_.try_emplace(key.key);
  IdKey& k = it->second;
  k.waiters.insert(client.rank.value_or(-1));
  if (!fresh) return;
  k.key = key;
  k.first_wait = Clock::now();
  auto comm = CommunicatorOf(key);
  if (!comm.ok()) {
    Error(absl::StrCat(RankOf(client), " waits for NCCL id '", key.key, "': ", comm.status().message()));
    return;
  }
  k.comm = *comm;
  if (client.rank && std::find(k.comm->members.begin(), k.comm->members.end(),
                               static_cast<uint32_t>(*client.rank)) == k.comm->members.end()) {
    Error(absl::StrCat("rank ", *client.rank, " waits for the NCCL id of ", k.comm->name, " (key '", key.key,
                       "'), but that graph communicator does not include it: the program's groups differ from "
                       "the graph's (order or members)"));
  }
  if (plan_.IsReal(k.comm->members[0])) return;  // the real comm rank 0 will set it
  auto id = roots_->HostRoot(RequestFor(k));
  if (!id.ok()) {
    Error(absl::StrCat(k.comm->name, ": cannot play comm rank 0 for '", key.key, "': ", id.status().message()));
    return;
  }
  k.hosted = true;
  spdlog::info("rendezvous: {} waits for '{}' ({}); prismd plays comm rank 0 (global rank {}) and sets the id",
               RankOf(client), key.key, k.comm->name, k.comm->members[0]);
  if (store_ != nullptr) store_->Set(key.key, std::string(id->begin(), id->end()));
}

void TorchRendezvous::OnSet(const store::ClientInfo& client, const std::string& raw, const std::string& value) {
  if (auto announced = ParseSplitGroupAnnouncement(raw, value)) {
    OnSplitGroupAnnounced(client, *announced);
    return;
  }
  auto key = ParseNcclIdKey(raw);
  if (!key) return;
  std::lock_guard<std::mutex> lock(mu_);
  IdKey& k = ids_[key->key];
  k.key = *key;
  k.set = true;
  if (value.size() != sizeof(bootstrap::UniqueId)) {
    Error(absl::StrCat(RankOf(client), " set NCCL id '", key->key, "' with ", value.size(), " bytes, not ",
                       sizeof(bootstrap::UniqueId), ": not an ncclUniqueId; a PyTorch version prismd does not know?"));
    return;
  }
  auto comm = CommunicatorOf(*key);
  if (!comm.ok()) {
    Error(absl::StrCat(RankOf(client), " set NCCL id '", key->key, "': ", comm.status().message()));
    return;
  }
  k.comm = *comm;
  if (client.rank && static_cast<uint32_t>(*client.rank) != comm->members[0]) {
    Error(absl::StrCat("rank ", *client.rank, " set the NCCL id of ", comm->name, " (key '", key->key,
                       "'), whose first rank in the graph is ", comm->members[0],
                       ": the program's groups differ from the graph's (order or members)"));
  }
  bootstrap::UniqueId id{};
  std::copy(value.begin(), value.end(), id.begin());
  const bool any_virtual = std::any_of(comm->members.begin(), comm->members.end(),
                                       [&](uint32_t g) { return !plan_.IsReal(g); });
  if (!any_virtual) {
    // Only real members: nothing to play, but the hybrid scheduler must know
    // which graph communicator it is (its members may be another's too). A
    // lone pair (lo:hi) is no graph communicator; the scheduler matches it
    // by its members.
    if (comm->plan_id == bootstrap::CommRequest::kUnplanned) return;
    if (auto s = roots_->RealRanksOnly(RequestFor(k), id); !s.ok())
      Error(absl::StrCat(comm->name, ": '", key->key, "': ", s.message()));
    return;
  }
  if (auto s = roots_->JoinRoot(RequestFor(k), id); !s.ok()) {
    Error(absl::StrCat(comm->name, ": cannot join the root of '", key->key, "': ", s.message()));
    return;
  }
  spdlog::info("rendezvous: {} set '{}' ({}); its virtual members check in to that root", RankOf(client), key->key,
               comm->name);
}

void TorchRendezvous::OnSplitGroupAnnounced(const store::ClientInfo& client,
                                            const absl::StatusOr<SplitGroupAnnouncement>& a) {
  if (!options_.follow_real_ranks) return;  // a graph has the groups
  if (!a.ok()) {
    std::lock_guard<std::mutex> lock(mu_);
    Error(absl::StrCat(RankOf(client), ": ", a.status().message()));
    return;
  }
  // Blocks until the bootstrap loop has it: the rank reads the key back before it splits.
  if (auto s = roots_->AnnounceSplitGroup(a->rank, a->members); !s.ok()) {
    std::lock_guard<std::mutex> lock(mu_);
    Error(absl::StrCat(RankOf(client), " announced a split_group call of rank ", a->rank, ": ", s.message()));
  }
}

void TorchRendezvous::OnAllClientsGone() {
  roots_->EndJob("every real rank disconnected from PyTorch's store");
  std::lock_guard<std::mutex> lock(mu_);
  ids_.clear();
  clients_.clear();
  first_client_.reset();
  errors_.clear();
  logged_.clear();
}

std::vector<bootstrap::WaitReport> TorchRendezvous::WaitsLocked(Clock::time_point now) const {
  std::vector<bootstrap::WaitReport> out;
  // Ids a real comm rank 0 owes.
  for (const auto& [name, k] : ids_) {
    if (k.set || k.hosted || !k.comm || now - k.first_wait < options_.report_after) continue;
    bootstrap::WaitReport w;
    w.communicator = k.comm->name;
    w.ranks = {k.comm->members[0]};
    std::vector<int> waiters(k.waiters.begin(), k.waiters.end());
    std::erase(waiters, -1);
    w.waits_for = absl::StrCat(
        waiters.empty() ? std::string("real ranks") : absl::StrCat("real rank(s) ", absl::StrJoin(waiters, ", ")),
        " wait in PyTorch's store for '", name, "', the NCCL id that comm rank 0 (global rank ", k.comm->members[0],
        ", real) sets when it reaches this communicator's first collective");
    w.seconds = Seconds(now - k.first_wait);
    out.push_back(std::move(w));
  }
  // Other keys nobody sets.
  if (store_ != nullptr) {
    for (const store::BlockedWait& b : store_->Snapshot().waits) {
      if (now - b.since < options_.report_after) continue;
      std::vector<std::string> plain;
      for (const std::string& key : b.keys) {
        if (!ParseNcclIdKey(key) && !ParseGlooKey(key)) plain.push_back(key);  // Gloo: daemon/gloo reports
      }
      if (plain.empty()) continue;
      bootstrap::WaitReport w;
      w.communicator = "store";
      if (b.client.rank) w.ranks = {static_cast<uint32_t>(*b.client.rank)};
      w.waits_for = absl::StrCat(RankOf(b.client), " waits in PyTorch's store for '", absl::StrJoin(plain, "', '"),
                                 "', which no real rank has set (a store barrier needs every rank: "
                                 "TORCH_DIST_INIT_BARRIER=0, no TORCH_DISTRIBUTED_DEBUG=DETAIL)");
      w.seconds = Seconds(now - b.since);
      out.push_back(std::move(w));
    }
  }
  // Real ranks that never came.
  if (first_client_ && now - *first_client_ >= options_.expect_ranks_within) {
    std::set<uint32_t> seen;
    size_t unknown = 0;
    for (const auto& [id, c] : clients_) {
      if (c.rank) seen.insert(static_cast<uint32_t>(*c.rank));
      else ++unknown;
    }
    std::vector<uint32_t> missing;
    for (uint32_t r : plan_.real_ranks) {
      if (seen.count(r) == 0) missing.push_back(r);
    }
    if (!missing.empty() && unknown < missing.size()) {
      bootstrap::WaitReport w;
      w.communicator = "store";
      w.ranks = missing;
      w.waits_for = absl::StrCat("real rank(s) ", absl::StrJoin(missing, ", "),
                                 " have not connected to PyTorch's store (prismd's, at ", options_.store_address,
                                 ") since the first real rank did: have they started? Do they use MASTER_ADDR/"
                                 "MASTER_PORT, as prism run sets them?");
      w.seconds = Seconds(now - *first_client_);
      out.push_back(std::move(w));
    }
  }
  return out;
}

RendezvousReports TorchRendezvous::Reports() const {
  std::lock_guard<std::mutex> lock(mu_);
  RendezvousReports r;
  r.waiting = WaitsLocked(Clock::now());
  r.errors = errors_;
  for (const auto& [id, c] : clients_) {
    if (c.rank && plan_.IsReal(static_cast<uint32_t>(*c.rank))) r.ranks_connected.push_back(*c.rank);
  }
  std::sort(r.ranks_connected.begin(), r.ranks_connected.end());
  r.ranks_connected.erase(std::unique(r.ranks_connected.begin(), r.ranks_connected.end()), r.ranks_connected.end());
  return r;
}

void TorchRendezvous::Tick() {
  std::lock_guard<std::mutex> lock(mu_);
  const auto now = Clock::now();
  for (const bootstrap::WaitReport& w : WaitsLocked(now)) {
    const std::string key = w.communicator + "|" + w.waits_for;
    auto it = logged_.find(key);
    if (it != logged_.end() && now - it->second < kRelog) continue;
    logged_[key] = now;
    if (w.communicator == "store") {
      spdlog::warn("rendezvous: waiting {:.0f} s: {}", w.seconds, w.waits_for);
    } else {
      spdlog::warn("rendezvous: {} waiting {:.0f} s: {}", w.communicator, w.seconds, w.waits_for);
    }
  }
}

}  // namespace prism::rendezvous
