#include "daemon/gloo/gloo_ranks.h"

#include <ifaddrs.h>
#include <netinet/in.h>

#include <algorithm>
#include <cstring>
#include <numeric>

#include "absl/strings/str_cat.h"
#include "spdlog/spdlog.h"

namespace prism::gloo {

using rendezvous::GlooKey;
using rendezvous::ParseGlooKey;

namespace {

constexpr size_t kMaxErrors = 32;
constexpr auto kRelog = std::chrono::seconds(30);

bool SameIp(const sockaddr_storage& a, const sockaddr* b) {
  if (a.ss_family != b->sa_family) return false;
  if (a.ss_family == AF_INET) {
    return reinterpret_cast<const sockaddr_in*>(&a)->sin_addr.s_addr ==
           reinterpret_cast<const sockaddr_in*>(b)->sin_addr.s_addr;
  }
  return std::memcmp(&reinterpret_cast<const sockaddr_in6*>(&a)->sin6_addr,
                     &reinterpret_cast<const sockaddr_in6*>(b)->sin6_addr, sizeof(in6_addr)) == 0;
}

// Loopback, or an address of one of this host's interfaces.
bool IsOnThisHost(const sockaddr_storage& address) {
  if (address.ss_family == AF_INET &&
      (ntohl(reinterpret_cast<const sockaddr_in*>(&address)->sin_addr.s_addr) >> 24) == 127) {
    return true;
  }
  if (address.ss_family == AF_INET6 && IN6_IS_ADDR_LOOPBACK(&reinterpret_cast<const sockaddr_in6*>(&address)->sin6_addr)) {
    return true;
  }
  ifaddrs* list = nullptr;
  if (getifaddrs(&list) != 0) return false;
  bool local = false;
  for (ifaddrs* i = list; i != nullptr && !local; i = i->ifa_next) {
    local = i->ifa_addr != nullptr && SameIp(address, i->ifa_addr);
  }
  freeifaddrs(list);
  return local;
}

std::string ClientName(const store::ClientInfo& c) {
  return c.rank ? absl::StrCat("rank ", *c.rank) : absl::StrCat("the store client at ", c.address);
}

}  // namespace

GlooRanks::GlooRanks(const bootstrap::BootstrapPlan& plan, GlooOptions options)
    : plan_(plan), groups_(plan), options_(std::move(options)) {}

absl::StatusOr<std::unique_ptr<GlooRanks>> GlooRanks::Start(const bootstrap::BootstrapPlan& plan,
                                                            GlooOptions options) {
  std::unique_ptr<GlooRanks> g(new GlooRanks(plan, std::move(options)));
  GlooRanks* self = g.get();
  auto pool = PairPool::Start(g->options_.pairs, [self](const std::string& error) {
    std::lock_guard<std::mutex> lock(self->mu_);
    self->Error(error);
  });
  if (!pool.ok()) return pool.status();
  g->pool_ = std::move(*pool);
  return g;
}

GlooRanks::~GlooRanks() { Stop(); }

void GlooRanks::Stop() {
  if (pool_) pool_->Stop();
}

void GlooRanks::Error(const std::string& message) {
  if (std::find(errors_.begin(), errors_.end(), message) != errors_.end()) return;
  spdlog::error("gloo: {}", message);
  errors_.push_back(message);
  if (errors_.size() > kMaxErrors) errors_.erase(errors_.begin());
}

GlooRanks::Context& GlooRanks::ContextOf(const GlooKey& key) {
  auto [it, fresh] = contexts_.try_emplace(key.context);
  Context& c = it->second;
  if (!fresh) return c;
  c.group_name = key.group;
  c.group = groups_.Resolve(key.group);
  if (!c.group.ok()) {
    Error(absl::StrCat("Gloo group '", key.group, "' (", key.device_type, ", store key '", key.key,
                       "'): ", c.group.status().message(), ". prismd plays the virtual ranks of a Gloo group only "
                       "when the graph lists that group (in the program's creation order, Gloo groups included); "
                       "its real ranks wait in PyTorch's store until then"));
  } else {
    spdlog::info("gloo: Gloo context '{}' is {} ({} ranks)", key.context, c.group->name, c.group->members.size());
    for (size_t i = 0; i < c.group->members.size(); ++i) {
      if (!plan_.IsReal(c.group->members[i])) continue;
      c.last_real = static_cast<int64_t>(i);
      c.real_group_rank[c.group->members[i]] = static_cast<int64_t>(i);
    }
  }
  return c;
}

absl::Status GlooRanks::CheckRealRecord(const store::ClientInfo& client, const GlooKey& key, const Context& c,
                                        const RankRecord& record) const {
  const std::vector<uint32_t>& members = c.group->members;
  const std::string where = absl::StrCat(c.group->name, ", Gloo on ", key.device_type);
  if (key.rank < 0 || static_cast<size_t>(key.rank) >= members.size()) {
    return absl::OutOfRangeError(absl::StrCat(ClientName(client), " set the Gloo record of group rank ", key.rank,
                                              " of ", where, ", which has ", members.size(), " ranks in the graph: "
                                              "the program's groups differ from the graph's"));
  }
  const uint32_t global = members[key.rank];
  if (!plan_.IsReal(global)) {
    return absl::FailedPreconditionError(absl::StrCat(
        ClientName(client), " set the Gloo record of group rank ", key.rank, " of ", where, ", global rank ", global,
        " in the graph, which prismd plays virtually: start prismd with --real-ranks matching prism run's --ranks, "
        "or regenerate the graph for the program's groups"));
  }
  if (client.rank && static_cast<uint32_t>(*client.rank) != global) {
    return absl::FailedPreconditionError(absl::StrCat(
        "rank ", *client.rank, " set the Gloo record of group rank ", key.rank, " of ", where, ", which is global rank ",
        global, " in the graph: the program's groups differ from the graph's (order or members)"));
  }
  if (!record.pair_sequences.empty() && record.pair_sequences.size() != members.size()) {
    return absl::FailedPreconditionError(absl::StrCat(
        ClientName(client), "'s Gloo group of ", where, " has ", record.pair_sequences.size(),
        " ranks in the program and ", members.size(), " in the graph: the program's groups differ from the graph's"));
  }
  return absl::OkStatus();
}

void GlooRanks::OnSet(const store::ClientInfo& client, const std::string& raw, const std::string& value) {
  auto key = ParseGlooKey(raw);
  if (!key) return;
  auto record = DecodeRankRecord(value);
  std::lock_guard<std::mutex> lock(mu_);
  Context& c = ContextOf(*key);
  if (!record.ok()) {
    Error(absl::StrCat(ClientName(client), " set '", raw, "' with ", value.size(),
                       " bytes that are not a Gloo rank record (", record.status().message(),
                       "): a Gloo build prismd does not know?"));
    return;
  }
  if (!c.group.ok()) return;
  if (auto s = CheckRealRecord(client, *key, c, *record); !s.ok()) {
    Error(std::string(s.message()));
    return;
  }
  if (c.real_records.count(key->rank) != 0) {
    // The group made again (destroy_process_group, then the same name): its
    // pairs with the virtual ranks are made again too.
    std::erase_if(c.dialled, [&](const auto& pair) { return pair.second == key->rank; });
    spdlog::info("gloo: group rank {} of {} set its Gloo record again: its pairs are made again", key->rank,
                 c.group->name);
  }
  c.real_records[key->rank] = *record;
  c.client_rank[client.id] = key->rank;
  if (!IsOnThisHost(record->address)) {
    c.real_elsewhere.insert(key->rank);
  } else {
    c.real_elsewhere.erase(key->rank);
  }
}

void GlooRanks::OnRead(const store::ClientInfo& client, const std::vector<std::string>& keys) {
  for (const std::string& raw : keys) {
    if (auto key = ParseGlooKey(raw)) OnReadKey(client, *key);
  }
}

std::string GlooRanks::PairName(const GlooKey& key, const Context& c, int64_t virtual_rank, int64_t real_rank) const {
  const auto& m = c.group->members;
  return absl::StrCat(c.group->name, " (Gloo, ", key.device_type, "): virtual group rank ", virtual_rank,
                      " (global ", m[virtual_rank], ") <-> real group rank ", real_rank, " (global ", m[real_rank], ")");
}

absl::StatusOr<PairTarget> GlooRanks::TargetFor(const GlooKey& key, const Context& c, int64_t real_rank) const {
  const RankRecord& real = c.real_records.at(real_rank);
  PairTarget t;
  t.name = PairName(key, c, key.rank, real_rank);
  t.listener = real.address;
  t.sequence = real.pair_sequences.empty() ? key.rank : real.pair_sequences[key.rank];
  t.max_payload = options_.max_message_bytes;
  if (options_.loopback_only && c.real_elsewhere.count(real_rank) != 0) {
    return absl::FailedPreconditionError(absl::StrCat(
        t.name, ": the real rank's Gloo listener ", AddressText(real.address), " is not on this host, and prismd "
        "(loopback bootstrap) connects only to this host's addresses: run the real ranks on prismd's host"));
  }
  return t;
}

std::optional<int64_t> GlooRanks::ReaderRank(const store::ClientInfo& client, const Context& c) const {
  auto by_client = c.client_rank.find(client.id);
  if (by_client != c.client_rank.end()) return by_client->second;
  if (!client.rank) return std::nullopt;
  auto by_rank = c.real_group_rank.find(static_cast<uint32_t>(*client.rank));
  if (by_rank == c.real_group_rank.end() || c.real_records.count(by_rank->second) == 0) return std::nullopt;
  return by_rank->second;
}

void GlooRanks::OnReadKey(const store::ClientInfo& client, const GlooKey& key) {
  std::lock_guard<std::mutex> lock(mu_);
  Context& c = ContextOf(key);
  if (!c.group.ok()) return;
  const std::optional<int64_t> reader = ReaderRank(client, c);
  if (!reader) return;  // not a real member that published its record
  const int64_t real_rank = *reader;
  const std::vector<uint32_t>& members = c.group->members;
  if (key.rank == real_rank) return;
  if (key.rank < 0 || static_cast<size_t>(key.rank) >= members.size()) {
    Error(absl::StrCat(ClientName(client), " reads the Gloo record of group rank ", key.rank, " of ", c.group->name,
                       ", which has ", members.size(), " ranks in the graph: the program's groups differ from the "
                       "graph's"));
    return;
  }
  if (plan_.IsReal(members[key.rank])) return;  // that real rank sets it
  const RankRecord& real = c.real_records.at(real_rank);
  if (c.published.insert(key.rank).second) {
    RankRecord virt;
    virt.hostname = options_.hostname;
    virt.address = HighestAddress(real.address.ss_family);
    if (!real.pair_sequences.empty()) {
      // A real reader only looks up its own entry: up to the last real rank
      // (8 bytes per rank, 64 KiB a record in an 8192-rank group otherwise).
      virt.pair_sequences.resize(static_cast<size_t>(std::max<int64_t>(c.last_real, 0)) + 1);
      std::iota(virt.pair_sequences.begin(), virt.pair_sequences.end(), int64_t{0});
    }
    if (store_ != nullptr) store_->Set(key.key, EncodeRankRecord(virt));
    ++records_published_;
  }
  if (!c.dialled.insert({key.rank, real_rank}).second) return;
  auto target = TargetFor(key, c, real_rank);
  if (!target.ok()) {
    Error(std::string(target.status().message()));
    return;
  }
  pool_->Dial(*target);
}

void GlooRanks::OnAllClientsGone() {
  const PairPoolStats pairs = pool_->Stats();
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!contexts_.empty()) {
      spdlog::info("gloo: job ended: {} Gloo contexts, {} virtual records set, {} pairs opened ({} failed) so far",
                   contexts_.size(), records_published_, pairs.opened, pairs.failed);
    }
    contexts_.clear();
    errors_.clear();
    logged_.clear();
  }
  pool_->EndJob();
}

std::string GlooRanks::WaitReason(const store::BlockedWait& b, const GlooKey& key,
                                  bootstrap::WaitReport* w) const {
  const std::string who = absl::StrCat(ClientName(b.client), " waits in PyTorch's store for '", key.key, "', ");
  auto it = contexts_.find(key.context);
  if (it == contexts_.end() || !it->second.group.ok()) {
    w->communicator = absl::StrCat("Gloo group '", key.group, "'");
    return absl::StrCat(who, "a Gloo record of PyTorch group '", key.group, "', which the graph does not list: ",
                        "regenerate the graph with the program's groups, Gloo groups included, in creation order");
  }
  const Context& c = it->second;
  const std::vector<uint32_t>& members = c.group->members;
  w->communicator = absl::StrCat(c.group->name, " (Gloo)");
  if (key.rank < 0 || static_cast<size_t>(key.rank) >= members.size()) {
    return absl::StrCat(who, "the Gloo record of group rank ", key.rank, ", beyond the graph's ", members.size(),
                        " ranks of ", c.group->name);
  }
  const uint32_t global = members[key.rank];
  if (plan_.IsReal(global)) {
    w->ranks = {global};
    return absl::StrCat(who, "the Gloo record of group rank ", key.rank, " (global rank ", global,
                        ", real): that rank has not made this Gloo group yet (has it started? does it make the "
                        "same groups in the same order?)");
  }
  return absl::StrCat(who, "the Gloo record of group rank ", key.rank, " (global rank ", global, ", virtual): "
                      "prismd sets it when a real member that has set its own record reads it, and this reader "
                      "has set none in this group");
}

std::vector<bootstrap::WaitReport> GlooRanks::Waits(const std::vector<store::BlockedWait>& blocked,
                                                    std::chrono::steady_clock::time_point now) const {
  std::vector<bootstrap::WaitReport> out;
  for (const store::BlockedWait& b : blocked) {
    if (now - b.since < options_.report_after) continue;
    for (const std::string& raw : b.keys) {
      auto key = ParseGlooKey(raw);
      if (!key) continue;
      bootstrap::WaitReport w;
      w.waits_for = WaitReason(b, *key, &w);
      w.seconds = std::chrono::duration<double>(now - b.since).count();
      out.push_back(std::move(w));
    }
  }
  return out;
}

void GlooRanks::Tick() {
  const std::vector<store::BlockedWait> blocked =
      store_ != nullptr ? store_->Snapshot().waits : std::vector<store::BlockedWait>{};
  std::lock_guard<std::mutex> lock(mu_);
  const auto now = std::chrono::steady_clock::now();
  for (const bootstrap::WaitReport& w : Waits(blocked, now)) {
    auto it = logged_.find(w.waits_for);
    if (it != logged_.end() && now - it->second < kRelog) continue;
    logged_[w.waits_for] = now;
    spdlog::warn("gloo: waiting {:.0f} s: {}", w.seconds, w.waits_for);
  }
}

GlooReports GlooRanks::Reports() const {
  const std::vector<store::BlockedWait> blocked =
      store_ != nullptr ? store_->Snapshot().waits : std::vector<store::BlockedWait>{};
  const PairPoolStats pairs = pool_->Stats();
  std::lock_guard<std::mutex> lock(mu_);
  GlooReports r;
  r.waiting = Waits(blocked, std::chrono::steady_clock::now());
  r.errors = errors_;
  r.contexts = contexts_.size();
  r.records_published = records_published_;
  r.pairs_opened = pairs.opened;
  r.pairs_open = pairs.open;
  r.pairs_failed = pairs.failed;
  r.traffic = pairs.traffic;
  return r;
}

}  // namespace prism::gloo
