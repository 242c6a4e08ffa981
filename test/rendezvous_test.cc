// PyTorch 2.11's start-up variants against prismd's store + rendezvous +
// bootstrap, with fake real ranks that behave like ProcessGroupNCCL
// (PyTorch 2.11's c10d, docs/bootstrap.md): the NCCL id of each communicator
// travels through the store under PyTorch's key, the group's rank 0 makes
// and sets it, the others WAIT and GET it; eager start-up (device_id)
// splits the world for every new_group, lazy start-up makes one
// communicator per group at its first collective.
//
// Variants covered on the CPU: the key prefixes of store= ("") and of
// env:// / tcp:// / torchrun ("default_pg/") x eager / lazy x rank 0 real /
// virtual x one or two real ranks, lone send/recv pairs, a group the graph
// does not have, and real ranks that never come.
#include <catch2/catch.hpp>

#include <algorithm>
#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "daemon/bootstrap/bootstrap_service.h"
#include "daemon/rendezvous/sha1.h"
#include "daemon/rendezvous/torch_groups.h"
#include "daemon/rendezvous/torch_rendezvous.h"
#include "daemon/store/store_server.h"
#include "graphgen/split_color.h"
#include "proto/graph_file.h"
#include "test/bootstrap_fake_rank.h"
#include "test/bootstrap_test_util.h"
#include "test/graphgen_test_util.h"
#include "test/torch_store_client.h"

namespace prism::rendezvous {
namespace {

using bootstrap::BootstrapPlan;
using bootstrap::testing::FakeRankOptions;
using bootstrap::testing::FakeRealRank;
using prism::testing::TorchStoreClient;

bool Eventually(const std::function<bool()>& pred, int limit_ms = 20000) {
  for (int waited = 0; waited < limit_ms; waited += 10) {
    if (pred()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return pred();
}

// The program's groups in new_group order: tp groups (consecutive ranks),
// then dp groups (strided), as the GPU host's TP/DP program makes them.
std::vector<std::vector<uint32_t>> Groups(int n, int tp) {
  std::vector<std::vector<uint32_t>> groups;
  for (int s = 0; s < n; s += tp) {
    std::vector<uint32_t> g;
    for (int m = s; m < s + tp; ++m) g.push_back(m);
    groups.push_back(g);
  }
  for (int i = 0; i < tp; ++i) {
    std::vector<uint32_t> g;
    for (int m = i; m < n; m += tp) g.push_back(m);
    groups.push_back(g);
  }
  return groups;
}

BootstrapPlan PlanFor(int n, int tp, const std::vector<uint32_t>& real) {
  BootstrapPlan plan = bootstrap::WorldPlan(n, 8, real);
  const auto groups = Groups(n, tp);
  for (size_t g = 0; g < groups.size(); ++g) {
    bootstrap::AddSplit(plan, 0, groups[g], static_cast<int32_t>(100 + g), 0,
                        absl::StrCat(g < static_cast<size_t>(n / tp) ? "tp" : "dp", "[", g, "]"));
  }
  return plan;
}

std::string IdKey(const std::string& prefix, const std::string& group, const std::string& tail) {
  return absl::StrCat(prefix, "0//", group == "0" ? "" : absl::StrCat(group, "//"), "cuda//", tail);
}

// ProcessGroupNCCL making one communicator from a store id.
std::unique_ptr<FakeRealRank> CommFromStore(TorchStoreClient& store, const std::string& key, int group_rank,
                                            int group_size, int global_rank) {
  FakeRankOptions o;
  o.rank = group_rank;
  o.nranks = group_size;
  o.host_name = absl::StrCat("real-host-", global_rank);
  o.timeout_ms = 30000;
  if (group_rank == 0) {
    auto comm = std::make_unique<FakeRealRank>(o);
    const bootstrap::UniqueId id = comm->MakeUniqueId();
    store.Set(key, std::string(id.begin(), id.end()));
    comm->Init();
    return comm;
  }
  const std::string bytes = store.Get(key);
  if (bytes.size() != 128) throw std::runtime_error("id of " + std::to_string(bytes.size()) + " bytes");
  bootstrap::UniqueId id{};
  std::copy(bytes.begin(), bytes.end(), id.begin());
  o.id = id;
  auto comm = std::make_unique<FakeRealRank>(o);
  comm->Init();
  return comm;
}

struct StartupCase {
  std::string prefix;          // "" (store=) or "default_pg/" (env://, tcp://, torchrun)
  bool eager = true;           // device_id given
  std::vector<uint32_t> real = {0};
  int n = 16;
  int tp = 8;
  bool pairs = false;          // lazy: lone send/recv with both ring neighbours
  bool gloo_between = false;   // the program makes a Gloo group after each NCCL group (Megatron's dp ones)
  bool follow = false;         // prismd --follow: its plan is the world only, colors are PyTorch's
  bool split_group = false;    // eager: one split_group call makes the tp groups, one the dp groups
  bool announce = false;       // with split_group: each real rank announces its group first, as prism capture's
                               // ranks do (scripts/prism_torch/prism_group_announce.py)
};

// The calls of an eager start-up as PyTorch makes them (DeriveSplitCalls):
// with split_group the groups of each kind are one call, colored as c10d does.
void EagerCalls(const StartupCase& sc, BootstrapPlan& plan) {
  if (sc.split_group) {
    for (uint32_t c = 1; c < plan.comms.size(); ++c) {
      plan.comms[c].color = graphgen::SplitGroupColor(plan.comms[c].members);
      plan.comms[c].same_call = c != 1 && c != static_cast<uint32_t>(sc.n / sc.tp) + 1;  // tp[0], dp[0] start calls
    }
  }
  bootstrap::DeriveSplitCalls(plan);
}

// The plan's process-group list when a Gloo group with the same members
// follows each NCCL group: PyTorch group 2g+1 is communicator g+1, 2g+2 Gloo.
void AddGlooBetween(BootstrapPlan& plan) {
  plan.process_groups.push_back({});  // the default group: communicator 0
  for (uint32_t c = 1; c < plan.comms.size(); ++c) {
    bootstrap::PlanProcessGroup nccl;
    nccl.comm = c;
    plan.process_groups.push_back(nccl);
    bootstrap::PlanProcessGroup gloo;
    gloo.gloo = true;
    gloo.members = plan.comms[c].members;
    std::sort(gloo.members.begin(), gloo.members.end());
    gloo.name = absl::StrCat(plan.comms[c].name, "_gloo");
    plan.process_groups.push_back(gloo);
  }
}

// prismd's side: bootstrap without NCCL_COMM_ID, the store, the rendezvous.
struct Prismd {
  explicit Prismd(BootstrapPlan p, bool follow = false) : plan(std::move(p)) {
    bootstrap::BootstrapConfig config;
    config.follow_real_ranks = follow;
    bootstrap = std::make_unique<bootstrap::BootstrapService>(config, plan, &broker);
    REQUIRE(bootstrap->Start().ok());
    roots = std::make_unique<BootstrapRoots>(bootstrap.get());
    RendezvousOptions o;
    o.report_after = std::chrono::milliseconds(200);
    o.expect_ranks_within = std::chrono::milliseconds(200);
    o.follow_real_ranks = follow;
    rendezvous = std::make_unique<TorchRendezvous>(plan, roots.get(), o);
    store::StoreServerOptions so;
    so.identify_clients = false;
    auto s = store::StoreServer::Start(so, rendezvous.get());
    REQUIRE(s.ok());
    store = std::move(*s);
    rendezvous->SetStore(store.get());
  }
  ~Prismd() {
    store->Stop();
    bootstrap->Stop();
  }
  BootstrapPlan plan;
  bootstrap::testing::FakeBroker broker;
  std::unique_ptr<bootstrap::BootstrapService> bootstrap;
  std::unique_ptr<BootstrapRoots> roots;
  std::unique_ptr<TorchRendezvous> rendezvous;
  std::unique_ptr<store::StoreServer> store;
};

// One real rank of the TP/DP program.
void RunRealRank(const StartupCase& sc, uint16_t store_port, int rank) {
  TorchStoreClient store(store_port);
  const auto groups = Groups(sc.n, sc.tp);
  std::vector<std::unique_ptr<FakeRealRank>> comms;
  auto world = CommFromStore(store, IdKey(sc.prefix, "0", "0"), rank, sc.n, rank);
  if (sc.eager && sc.split_group) {  // split_group(split_ranks=<every group of a kind>): one call per kind
    const size_t tp_groups = static_cast<size_t>(sc.n / sc.tp);
    for (const auto& [first, end] : {std::pair<size_t, size_t>{0, tp_groups}, {tp_groups, groups.size()}}) {
      int32_t color = -1, key = static_cast<int32_t>(rank);  // c10d's NOCOLOR split passes the rank as key
      for (size_t g = first; g < end; ++g) {
        const auto it = std::find(groups[g].begin(), groups[g].end(), static_cast<uint32_t>(rank));
        if (it == groups[g].end()) continue;
        color = graphgen::SplitGroupColor(groups[g]);
        key = static_cast<int32_t>(it - groups[g].begin());
        if (sc.announce) {  // set, then read back, before the split
          const std::string k = absl::StrCat(sc.prefix, "prism/split_group/", rank, "/", first == 0 ? 0 : 1);
          store.Set(k, absl::StrCat("{\"members\": [", absl::StrJoin(groups[g], ", "), "]}"));
          store.Get(k);
        }
      }
      auto child = world->Split(color, key);
      if ((color != -1) != (child != nullptr)) throw std::runtime_error("split membership");
      if (child) comms.push_back(std::move(child));
    }
  } else if (sc.eager) {  // init_process_group(device_id=...): world now; new_group = ncclCommSplit of it
    for (size_t g = 0; g < groups.size(); ++g) {
      const auto it = std::find(groups[g].begin(), groups[g].end(), static_cast<uint32_t>(rank));
      const bool member = it != groups[g].end();
      const int32_t color = sc.follow ? graphgen::PyTorchSplitColor(groups[g]) : static_cast<int32_t>(100 + g);
      auto child = world->Split(member ? color : -1,
                                member ? static_cast<int32_t>(it - groups[g].begin()) : 0);
      if (member != (child != nullptr)) throw std::runtime_error("split membership");
      if (child) comms.push_back(std::move(child));
      // new_group(backend="gloo") after it: c10d has the non-members split the world with NOCOLOR (the
      // default group's NCCL backend is the split source), the members build Gloo only.
      if (sc.gloo_between && !member && world->Split(-1, rank) != nullptr) throw std::runtime_error("gloo split");
    }
  } else {  // lazy: one communicator per group at its first collective, keyed by the group number
    for (size_t g = 0; g < groups.size(); ++g) {
      const auto it = std::find(groups[g].begin(), groups[g].end(), static_cast<uint32_t>(rank));
      if (it == groups[g].end()) continue;
      const size_t number = sc.gloo_between ? 2 * g + 1 : g + 1;  // PyTorch's group number
      comms.push_back(CommFromStore(store, IdKey(sc.prefix, std::to_string(number), "0"),
                                    static_cast<int>(it - groups[g].begin()), static_cast<int>(groups[g].size()),
                                    rank));
    }
    if (sc.pairs) {  // dist.send to rank+1, dist.recv from rank-1: a 2-rank comm per pair, lo:hi
      for (int peer : {(rank + 1) % sc.n, (rank + sc.n - 1) % sc.n}) {
        const int lo = std::min(rank, peer), hi = std::max(rank, peer);
        comms.push_back(CommFromStore(store, IdKey(sc.prefix, "0", absl::StrCat(lo, ":", hi)), rank == lo ? 0 : 1,
                                      2, rank));
      }
    }
  }
  for (auto& c : comms) c->Destroy();
  world->Destroy();
}

// The fake real ranks got through (`errors` empty) and prismd's job ended
// without a divergence or a failure.
void CheckJobClean(const Prismd& prismd, const std::vector<std::string>& errors) {
  for (const auto& e : errors) UNSCOPED_INFO(e);
  CHECK(errors.empty());
  REQUIRE(Eventually([&] { return prismd.bootstrap->Stats().jobs_completed >= 1; }));
  const auto st = prismd.bootstrap->Stats();
  for (const auto& d : st.recent_divergences) UNSCOPED_INFO(d);
  CHECK(st.divergences == 0);
  CHECK(st.jobs_failed == 0);
}

void RunCase(const StartupCase& sc) {
  BootstrapPlan plan = sc.follow ? bootstrap::WorldPlan(sc.n, 8, sc.real) : PlanFor(sc.n, sc.tp, sc.real);
  if (sc.gloo_between) AddGlooBetween(plan);
  if (sc.eager && !sc.follow) EagerCalls(sc, plan);
  Prismd prismd(std::move(plan), sc.follow);
  std::vector<int> real(sc.real.begin(), sc.real.end());
  const auto errors = bootstrap::testing::RunRealRanks(real, [&](int rank) {
    RunRealRank(sc, prismd.store->port(), rank);
  });
  CheckJobClean(prismd, errors);
  const auto st = prismd.bootstrap->Stats();
  CHECK(st.comms_destroyed == st.comms_initialized);
  const auto reports = prismd.rendezvous->Reports();
  for (const auto& e : reports.errors) UNSCOPED_INFO(e);
  CHECK(reports.errors.empty());
}

// RunCase for each set of real ranks, eager with env:// keys unless `sc` says otherwise.
void RunForReals(StartupCase sc, const std::vector<std::vector<uint32_t>>& reals) {
  sc.prefix = "default_pg/";
  for (const std::vector<uint32_t>& real : reals) {
    sc.real = real;
    INFO("real " << real[0] << (real.size() > 1 ? "+" : ""));
    RunCase(sc);
  }
}

TEST_CASE("key grammar: PyTorch 2.11's NCCL id keys", "[rendezvous]") {
  auto k = ParseNcclIdKey("/default_pg/0//cuda//0");
  REQUIRE(k);
  CHECK(k->env_prefix);
  CHECK(k->group == "0");
  CHECK(k->kind == NcclIdKey::Kind::kCommunicator);
  k = ParseNcclIdKey("/0//12//cuda//3");
  REQUIRE(k);
  CHECK_FALSE(k->env_prefix);
  CHECK(k->group == "12");
  CHECK(k->index == 3);
  k = ParseNcclIdKey("/0//cuda//4:5");
  REQUIRE(k);
  CHECK(k->kind == NcclIdKey::Kind::kPair);
  CHECK((k->lo == 4 && k->hi == 5));
  k = ParseNcclIdKey("/default_pg/0//ad56679d49f2bae2c3e8e6a4bbe1b7b1e1e8b0aa//cuda//UniqueNCCLID:1");
  REQUIRE(k);
  CHECK(k->kind == NcclIdKey::Kind::kScalableRoot);
  k = ParseNcclIdKey("/worker/attempt_0/default_pg/0//3//cuda//0");  // an outer PrefixStore
  REQUIRE(k);
  CHECK(k->env_prefix);
  CHECK(k->group == "3");
  CHECK_FALSE(ParseNcclIdKey("/init/"));
  CHECK_FALSE(ParseNcclIdKey("/default_pg/0//cuda//x"));
  CHECK_FALSE(ParseNcclIdKey("/store_based_barrier_key:1"));
}

TEST_CASE("group rule: new_group number = graph communicator, hashed names by members", "[rendezvous]") {
  // Measured on the GPU host (notes 1.1): new_group([0,1], local sync) after two groups -> sha1("0_1_2").
  CHECK(Sha1Hex("0_1_2").substr(0, 8) == "ad56679d");
  CHECK(Sha1Hex("abc") == "a9993e364706816aba3e25717850c26c9cd0d89d");
  const BootstrapPlan plan = PlanFor(16, 8, {0});
  GroupResolver groups(plan);
  auto world = groups.Resolve("0");
  REQUIRE(world.ok());
  CHECK(world->plan_id == 0);
  auto third = groups.Resolve("3");
  REQUIRE(third.ok());
  CHECK(third->plan_id == 3);
  CHECK(third->members == plan.comms[3].members);
  auto hashed = groups.Resolve(Sha1Hex("8_9_10_11_12_13_14_15_1"));
  REQUIRE(hashed.ok());
  CHECK(hashed->plan_id == 2);
  auto beyond = groups.Resolve("11");
  REQUIRE_FALSE(beyond.ok());
  CHECK(std::string(beyond.status().message()).find("new_group call #11") != std::string::npos);
}

TEST_CASE("group rule: with a process-group list, Gloo groups take PyTorch numbers", "[rendezvous]") {
  BootstrapPlan plan = PlanFor(16, 8, {0});
  AddGlooBetween(plan);
  GroupResolver groups(plan);
  auto tp1 = groups.Resolve("3");  // world, tp[0], tp[0]_gloo, tp[1]
  REQUIRE(tp1.ok());
  CHECK_FALSE(tp1->gloo);
  CHECK(tp1->plan_id == 2);
  CHECK(tp1->name == "tp[1] (PyTorch group 3)");
  auto gloo = groups.Resolve("2");
  REQUIRE(gloo.ok());
  CHECK(gloo->gloo);
  CHECK(gloo->members == plan.comms[1].members);
  CHECK(gloo->name == "tp[0]_gloo (PyTorch group 2)");
  auto nccl_of_gloo = groups.ResolveNccl("2");
  REQUIRE_FALSE(nccl_of_gloo.ok());
  CHECK(std::string(nccl_of_gloo.status().message()).find("which is the Gloo group tp[0]_gloo") != std::string::npos);
  // Hashed names count the Gloo groups the rank made before.
  auto hashed = groups.Resolve(Sha1Hex("8_9_10_11_12_13_14_15_3"));
  REQUIRE(hashed.ok());
  CHECK(hashed->plan_id == 2);
  auto beyond = groups.Resolve("21");  // 10 NCCL groups + 10 Gloo groups after the world
  REQUIRE_FALSE(beyond.ok());
  CHECK(std::string(beyond.status().message()).find("lists only 20 groups") != std::string::npos);
}

// split_group's children are one PyTorch group number: a Gloo group after
// one split_group call making tp[0] and tp[1] is group 2, not 3.
TEST_CASE("group rule: one split_group call's groups take one PyTorch number", "[rendezvous]") {
  BootstrapPlan plan = PlanFor(16, 8, {0});
  plan.comms[2].same_call = true;  // tp[1] with tp[0]
  AddGlooBetween(plan);            // world, tp[0], tp[0]_gloo, tp[1], tp[1]_gloo, ...
  std::swap(plan.process_groups[2], plan.process_groups[3]);  // world, tp[0], tp[1], tp[0]_gloo, ...
  GroupResolver groups(plan);
  auto gloo = groups.Resolve("2");
  REQUIRE(gloo.ok());
  CHECK(gloo->gloo);
  CHECK(gloo->name == "tp[0]_gloo (PyTorch group 2)");
  auto dp0 = groups.Resolve("4");  // world, tp (one call), tp[0]_gloo, tp[1]_gloo, dp[0]
  REQUIRE(dp0.ok());
  CHECK(dp0->plan_id == 3);
}

// Every set of real ranks, with store= keys and with env:// ones.
void RunBothKeyStyles(bool eager, const std::vector<std::vector<uint32_t>>& real_sets) {
  for (const std::string prefix : {"", "default_pg/"}) {
    for (const std::vector<uint32_t>& real : real_sets) {
      SECTION(absl::StrCat(prefix.empty() ? "store=" : "env://", " real ", real[0], real.size() > 1 ? "+" : "")) {
        StartupCase sc;
        sc.prefix = prefix;
        sc.eager = eager;
        sc.real = real;
        RunCase(sc);
      }
    }
  }
}

TEST_CASE("start-up: eager (device_id), store= and env:// keys, rank 0 real or virtual", "[rendezvous][startup]") {
  RunBothKeyStyles(/*eager=*/true, {{0}, {5}, {0, 9}, {3, 12}});
}

TEST_CASE("start-up: lazy (no device_id), one id per group at its first collective", "[rendezvous][startup]") {
  RunBothKeyStyles(/*eager=*/false, {{0}, {5}, {0, 5}, {9, 13}});
}

TEST_CASE("start-up: lazy lone send/recv pairs (lo:hi keys), both ends", "[rendezvous][startup]") {
  StartupCase sc;
  sc.prefix = "default_pg/";
  sc.eager = false;
  sc.real = {5};
  sc.pairs = true;
  RunCase(sc);
}

TEST_CASE("start-up: lazy, a Gloo group after each NCCL group (group numbers skip them)", "[rendezvous][startup]") {
  for (const std::vector<uint32_t>& real : {std::vector<uint32_t>{0}, std::vector<uint32_t>{5}}) {
    StartupCase sc;
    sc.prefix = "default_pg/";
    sc.eager = false;
    sc.real = real;
    sc.gloo_between = true;
    RunCase(sc);
  }
}

// Megatron-core's Gloo twins with device_id: a rank makes one split call of
// the world per NCCL group and per Gloo group it is not in, so its k-th call
// meets other ranks' k-th calls of other groups (every rank passes NOCOLOR
// in some of them); prismd's virtual ranks must make the same calls.
TEST_CASE("start-up: eager, a Gloo group after each NCCL group (its non-members split, its members do not)",
          "[rendezvous][startup]") {
  StartupCase sc;
  sc.gloo_between = true;
  RunForReals(sc, {{0}, {5}, {3, 12}});
}

// torch.distributed.split_group (DeviceMesh on an eager default group): one
// ncclCommSplit call makes every group of a kind, each rank passing its own
// group's color (its lowest rank, as PyTorch 2.11 does); two real ranks in different
// groups of one call each get their group with its virtual members.
TEST_CASE("start-up: eager, split_group makes several groups in one split call", "[rendezvous][startup]") {
  StartupCase sc;
  sc.split_group = true;
  RunForReals(sc, {{0}, {0, 9}, {3, 12}});
}

TEST_CASE("start-up: 64 ranks, two real ranks, lazy, many communicators at once", "[rendezvous][startup]") {
  StartupCase sc;
  sc.prefix = "default_pg/";
  sc.eager = false;
  sc.n = 64;
  sc.real = {0, 13};
  RunCase(sc);
}

// Megatron-core at PP=2 makes the pipeline group {first stage, last stage}
// and then the embedding group with the same members. With both members real,
// lazy start-up makes two NCCL communicators of real ranks only, one per
// PyTorch group: prismd plays neither, but must tell the hybrid scheduler
// which graph communicator each commHash is, by PyTorch's group number (not by
// members, which both share). Eager start-up (device_id) splits the world for
// each group in creation order: the split's order names it.
TEST_CASE("lazy: two real ranks alone in twin groups (same members) are each bound to their own communicator",
          "[rendezvous][startup]") {
  BootstrapPlan plan = bootstrap::WorldPlan(16, 8, {0, 8});
  bootstrap::AddSplit(plan, 0, {0, 1, 2, 3, 4, 5, 6, 7}, 100, 0, "tp[0]");
  bootstrap::AddSplit(plan, 0, {8, 9, 10, 11, 12, 13, 14, 15}, 101, 0, "tp[1]");
  const uint32_t pp = bootstrap::AddSplit(plan, 0, {0, 8}, 102, 0, "pp[0]");
  const uint32_t embd = bootstrap::AddSplit(plan, 0, {0, 8}, 103, 0, "embd[0]");
  Prismd prismd(std::move(plan));
  std::mutex mu;
  std::map<uint32_t, uint64_t> hash_of;  // plan id -> the real ranks' commHash
  bool eager = false;
  SECTION("lazy") {}
  SECTION("eager (device_id): splits of the world") { eager = true; }
  const auto errors = bootstrap::testing::RunRealRanks({0, 8}, [&](int rank) {
    TorchStoreClient store(prismd.store->port());
    std::vector<std::unique_ptr<FakeRealRank>> comms;
    auto keep = [&](uint32_t group, std::unique_ptr<FakeRealRank> comm) {
      if (group == pp || group == embd) {
        std::lock_guard<std::mutex> lock(mu);
        hash_of[group] = comm->comm_hash();
      }
      comms.push_back(std::move(comm));
    };
    if (eager) {  // every group a split of the world, in creation order; non-members pass NOCOLOR
      auto world = CommFromStore(store, IdKey("default_pg/", "0", "0"), rank, 16, rank);
      for (uint32_t group = 1; group < prismd.plan.comms.size(); ++group) {
        const auto& members = prismd.plan.comms[group].members;
        const auto it = std::find(members.begin(), members.end(), static_cast<uint32_t>(rank));
        const bool member = it != members.end();
        auto child = world->Split(member ? prismd.plan.comms[group].color : -1,
                                  member ? static_cast<int32_t>(it - members.begin()) : 0);
        if (child) keep(group, std::move(child));
      }
      comms.push_back(std::move(world));
    } else {  // one communicator per group at its first collective (tp, the first send, the embedding's all-reduce)
      const uint32_t tp = rank == 0 ? 1 : 2;
      keep(tp, CommFromStore(store, IdKey("default_pg/", std::to_string(tp), "0"), 0, 8, rank));
      for (const uint32_t group : {pp, embd})
        keep(group, CommFromStore(store, IdKey("default_pg/", std::to_string(group), "0"), rank == 0 ? 0 : 1, 2,
                                  rank));
    }
    for (auto& c : comms) c->Destroy();
  });
  for (const auto& e : errors) UNSCOPED_INFO(e);
  REQUIRE(errors.empty());
  REQUIRE(hash_of.size() == 2);
  CHECK(hash_of[pp] != hash_of[embd]);
  const auto reports = prismd.rendezvous->Reports();
  for (const auto& e : reports.errors) UNSCOPED_INFO(e);
  CHECK(reports.errors.empty());
  std::map<uint64_t, daemon::CommDescription> told;  // commHash -> what prismd told the scheduler
  // Eager: prismd tells it when its side of the split ends, which may be after the real ranks' side.
  Eventually([&] {
    told.clear();
    for (const daemon::CommDescription& c : prismd.broker.communicators()) told[c.comm_hash] = c;
    return told.count(hash_of[pp]) == 1 && told.count(hash_of[embd]) == 1;
  });
  for (const uint32_t group : {pp, embd}) {
    INFO("plan communicator " << group);
    REQUIRE(told.count(hash_of[group]) == 1);
    const daemon::CommDescription& c = told[hash_of[group]];
    CHECK(c.graph_comm == group);
    CHECK(c.members == std::vector<uint32_t>{0, 8});
    const std::string name = group == pp ? "pp[0]" : "embd[0]";
    CHECK(c.name == (eager ? name : absl::StrCat(name, " (PyTorch group ", group, ")")));
  }
}

TEST_CASE("follow: eager start-up with groups no graph lists (prismd --follow)", "[rendezvous][startup][follow]") {
  for (const std::string prefix : {"", "default_pg/"}) {
    for (std::vector<uint32_t> real : {std::vector<uint32_t>{0}, {5}, {3, 12}}) {
      StartupCase sc;
      sc.prefix = prefix;
      sc.real = real;
      sc.follow = true;
      INFO("prefix '" << prefix << "', real " << real[0] << (real.size() > 1 ? "+" : ""));
      RunCase(sc);
    }
  }
}

// DeviceMesh's split_group on an eager default group without a graph: PyTorch
// 2.11 colors each group by its lowest rank, which does not say which ranks it
// has. prismd refuses the split at once, naming new_group and --graph, and the
// real rank's split fails instead of waiting.
TEST_CASE("follow: a split_group split is refused naming new_group and --graph", "[rendezvous][startup][follow]") {
  StartupCase sc;
  sc.prefix = "default_pg/";
  sc.follow = true;
  sc.split_group = true;
  sc.real = {0};
  Prismd prismd(bootstrap::WorldPlan(sc.n, 8, sc.real), /*follow=*/true);
  const auto errors = bootstrap::testing::RunRealRanks({0}, [&](int rank) {
    RunRealRank(sc, prismd.store->port(), rank);
  });
  CHECK_FALSE(errors.empty());
  REQUIRE(Eventually([&] { return prismd.bootstrap->Stats().jobs_failed >= 1; }));
  const auto st = prismd.bootstrap->Stats();
  REQUIRE_FALSE(st.recent_divergences.empty());
  const std::string d = st.recent_divergences.front();
  INFO(d);
  CHECK(d.find("split_group") != std::string::npos);
  CHECK(d.find("lowest rank") != std::string::npos);
  CHECK(d.find("new_group") != std::string::npos);
  CHECK(d.find("--graph") != std::string::npos);
}

// The same with each real rank announcing its group in the store first (prism
// capture's ranks do): prismd learns one call per split_group with a child per
// real rank's group, real ranks in different groups of one call included.
TEST_CASE("follow: split_group groups announced in the store are followed", "[rendezvous][startup][follow]") {
  StartupCase sc;
  sc.follow = true;
  sc.split_group = true;
  sc.announce = true;
  RunForReals(sc, {{0}, {0, 9}, {3, 12}});
}

TEST_CASE("split_group announcements: the store key and value prism capture's ranks set", "[rendezvous][follow]") {
  auto a = ParseSplitGroupAnnouncement("default_pg/prism/split_group/9/1", "{\"members\": [1, 9, 17, 25]}");
  REQUIRE(a);
  REQUIRE(a->ok());
  CHECK((*a)->rank == 9);
  CHECK((*a)->members == std::vector<uint32_t>{1, 9, 17, 25});
  a = ParseSplitGroupAnnouncement("prism/split_group/0/0", "{\"members\":[0]}");
  REQUIRE((a && a->ok()));
  CHECK((*a)->members == std::vector<uint32_t>{0});
  CHECK_FALSE(ParseSplitGroupAnnouncement("default_pg/0//cuda//0", "x"));  // not an announcement
  CHECK_FALSE(ParseSplitGroupAnnouncement("myprism/split_group/0/0", "{}"));  // another key's tail
  for (const auto& [key, value] : std::vector<std::pair<std::string, std::string>>{
           {"prism/split_group/x/0", "{\"members\": [0]}"},
           {"prism/split_group/0", "{\"members\": [0]}"},
           {"prism/split_group/0/0", "{\"ranks\": [0]}"},
           {"prism/split_group/0/0", "{\"members\": [0, a]}"},
           {"prism/split_group/3/0", "{\"members\": [0, 1]}"}}) {  // its own rank missing
    INFO(key << " " << value);
    a = ParseSplitGroupAnnouncement(key, value);
    REQUIRE(a);
    CHECK_FALSE(a->ok());
    CHECK(std::string(a->status().message()).find(key) != std::string::npos);
  }
}

TEST_CASE("follow: a split_group announcement of a rank that is not real, or malformed, is a named error",
          "[rendezvous][follow]") {
  Prismd prismd(bootstrap::WorldPlan(16, 8, {5}), /*follow=*/true);
  TorchStoreClient store(prismd.store->port());
  store.Set("default_pg/prism/split_group/7/0", "{\"members\": [0, 7]}");
  store.Get("default_pg/prism/split_group/7/0");
  store.Set("default_pg/prism/split_group/5/0", "{\"members\": [0, 1]}");
  store.Get("default_pg/prism/split_group/5/0");
  const auto errors = prismd.rendezvous->Reports().errors;
  REQUIRE(errors.size() == 2);
  CHECK(errors[0].find("rank 7 is not a real rank") != std::string::npos);
  CHECK(errors[1].find("rank 5 is not among its own group's members") != std::string::npos);
}

TEST_CASE("follow: a lazily started group is refused naming device_id, not left waiting", "[rendezvous][follow]") {
  Prismd prismd(bootstrap::WorldPlan(16, 8, {5}), /*follow=*/true);
  TorchStoreClient store(prismd.store->port());
  CHECK_FALSE(store.WaitFor({"default_pg/0//2//cuda//0"}, 100));
  REQUIRE(Eventually([&] { return !prismd.rendezvous->Reports().errors.empty(); }));
  const std::string e = prismd.rendezvous->Reports().errors.front();
  CHECK(e.find("PyTorch group '2'") != std::string::npos);
  CHECK(e.find("device_id") != std::string::npos);
}

TEST_CASE("a group the graph does not have is a named error, not a silent wait", "[rendezvous]") {
  Prismd prismd(PlanFor(16, 8, {5}));
  TorchStoreClient store(prismd.store->port());
  CHECK_FALSE(store.WaitFor({"default_pg/0//40//cuda//0"}, 100));
  REQUIRE(Eventually([&] { return !prismd.rendezvous->Reports().errors.empty(); }));
  const std::string e = prismd.rendezvous->Reports().errors.front();
  CHECK(e.find("PyTorch group '40'") != std::string::npos);
  CHECK(e.find("regenerate the graph") != std::string::npos);
}

TEST_CASE("a real rank whose group is not the graph's is refused at once, not left waiting", "[rendezvous]") {
  Prismd prismd(PlanFor(16, 8, {5}));
  TorchStoreClient store(prismd.store->port());
  // The program's group 2 has 4 ranks with rank 5 at index 1; the graph's
  // communicator 2 (tp[1]) has ranks 8..15.
  const std::string bytes = store.Get("default_pg/0//2//cuda//0");  // prismd plays its rank 0
  REQUIRE(bytes.size() == 128);
  FakeRankOptions o;
  o.rank = 1;
  o.nranks = 4;
  o.timeout_ms = 20000;
  bootstrap::UniqueId id{};
  std::copy(bytes.begin(), bytes.end(), id.begin());
  o.id = id;
  FakeRealRank rank5(o);
  CHECK_THROWS_WITH(rank5.Init(), Catch::Contains("wrong socket type"));  // NCCL: "wrong type", init fails
  const auto st = prismd.bootstrap->Stats();
  REQUIRE_FALSE(st.recent_divergences.empty());
  CHECK(st.recent_divergences.back().find("differs from the graph's communicator") != std::string::npos);
}

TEST_CASE("a real rank that never comes and an id a real rank 0 owes are reported", "[rendezvous]") {
  Prismd prismd(PlanFor(16, 8, {0, 5}));
  store::ClientInfo rank5;
  rank5.id = 1;
  rank5.rank = 5;
  rank5.address = "127.0.0.1:1";
  prismd.rendezvous->OnConnected(rank5);
  // Rank 5 waits for tp[0]'s id, which real rank 0 (its comm rank 0) owes; rank 0 never came.
  prismd.rendezvous->OnWait(rank5, {"/default_pg/0//1//cuda//0"});
  REQUIRE(Eventually([&] { return prismd.rendezvous->Reports().waiting.size() >= 2; }));
  const auto reports = prismd.rendezvous->Reports();
  bool missing = false, owed = false;
  for (const auto& w : reports.waiting) {
    missing |= w.ranks == std::vector<uint32_t>{0} && w.waits_for.find("have not connected") != std::string::npos;
    owed |= w.communicator.find("tp[0]") != std::string::npos && w.waits_for.find("global rank 0") != std::string::npos;
  }
  CHECK(missing);
  CHECK(owed);
}

TEST_CASE("bootstrap reports what a communicator's init waits for", "[rendezvous][bootstrap]") {
  bootstrap::BootstrapConfig config;
  config.stall_report_ms = 100;
  BootstrapPlan plan = PlanFor(16, 8, {0, 5});
  bootstrap::BootstrapService service(config, plan, nullptr);
  REQUIRE(service.Start().ok());
  bootstrap::CommRequest world;
  world.plan_id = 0;
  // Rank 0 makes the world's id and checks in; rank 5 never comes.
  FakeRankOptions o;
  o.rank = 0;
  o.nranks = 16;
  o.timeout_ms = 5000;  // its Init gives up after the report; nothing else waits on it
  FakeRealRank rank0(o);
  const bootstrap::UniqueId id = rank0.MakeUniqueId();
  REQUIRE(service.JoinRoot(world, id).ok());
  std::thread init([&] {
    try {
      rank0.Init();
    } catch (const std::exception&) {
    }
  });
  REQUIRE(Eventually([&] { return !service.Stats().waiting.empty(); }));
  const bootstrap::WaitReport w = service.Stats().waiting.front();
  CHECK(w.communicator == "world");
  CHECK(w.ranks == std::vector<uint32_t>{5});
  CHECK(w.waits_for.find("real rank(s) 5") != std::string::npos);
  init.join();
  service.Stop();
}

// A job graph of prism-graphgen (process_groups: megatron, Gloo groups on)
// in records form, as prismd reads it.
prism::graph::Graph MegatronRecords(const prism::graph::Graph& generated) {
  auto bytes = prism::graph::EncodeGraph(generated);
  REQUIRE(bytes.ok());
  auto graph = prism::graph::DecodeGraph(*bytes);
  REQUIRE(graph.ok());
  return *std::move(graph);
}

// What rank `rank` passes to its k-th ncclCommSplit of the world when the
// program makes the graph's process groups with device_id (PyTorch 2.11's
// c10d, one rank's view): per NCCL group its color and key if a member,
// NOCOLOR if not; per Gloo group NOCOLOR if not a member, nothing if one.
struct RankSplit {
  int32_t color = -1, key = 0;
  uint32_t comm = 0;  // the graph's communicator when a member
};
std::vector<RankSplit> EagerSplitsOf(const prism::graph::Graph& g, uint32_t rank) {
  std::vector<RankSplit> out;
  for (int k = 1; k < g.process_groups_size(); ++k) {
    const auto& pg = g.process_groups(k);
    if (pg.backend() == prism::graph::ProcessGroup::GLOO) {
      if (std::find(pg.members().begin(), pg.members().end(), rank) == pg.members().end())
        out.push_back({-1, static_cast<int32_t>(rank), 0});
      continue;
    }
    const auto& c = g.communicators(static_cast<int>(pg.communicator()));
    const auto it = std::find(c.members().begin(), c.members().end(), rank);
    if (it == c.members().end()) {
      out.push_back({-1, static_cast<int32_t>(rank), 0});
    } else {
      out.push_back({c.split().color(), c.split().key() + static_cast<int32_t>(it - c.members().begin()), c.id()});
    }
  }
  return out;
}

// prismd's split calls of the world against every listed rank's own
// sequence: the k-th call holds the rank's group exactly where the rank
// passes its color, and no group of the rank where it passes NOCOLOR.
void CheckCallsAgainstRanks(const prism::graph::Graph& g, const std::vector<uint32_t>& ranks) {
  auto plan = bootstrap::PlanFromGraph(g, {});
  REQUIRE(plan.ok());
  std::vector<const bootstrap::PlanSplitCall*> world_calls;
  for (const auto& call : plan->split_calls) {
    if (call.parent == 0) world_calls.push_back(&call);
  }
  for (uint32_t rank : ranks) {
    INFO("rank " << rank);
    const std::vector<RankSplit> splits = EagerSplitsOf(g, rank);
    REQUIRE(splits.size() == world_calls.size());
    for (size_t k = 0; k < splits.size(); ++k) {
      std::optional<uint32_t> holder;
      for (uint32_t child : world_calls[k]->children) {
        const auto& m = plan->comms[child].members;
        if (std::find(m.begin(), m.end(), rank) != m.end()) holder = child;
      }
      INFO("split call #" << k + 1);
      if (splits[k].color == -1) {
        CHECK(!holder.has_value());
      } else {
        CHECK(holder == std::optional<uint32_t>(splits[k].comm));
      }
    }
  }
}

TEST_CASE("eager Megatron-core: prismd's split calls are each rank's own (Gloo twins included) at 64 and 1024 ranks",
          "[rendezvous][startup][megatron]") {
  CheckCallsAgainstRanks(MegatronRecords(prism::graphgen::testing::GraphOf(
                             prism::graphgen::testing::SmallJobYaml("{tp: 2, pp: 2, dp: 16}"))),
                         {0, 1, 5, 32, 33, 63});
  CheckCallsAgainstRanks(MegatronRecords(prism::graphgen::testing::GraphOfFile(
                             std::string(PRISM_EXAMPLES_DIR) + "/megatron/gpt-1024.yaml")),
                         {0, 1, 511, 512, 1023});
}

TEST_CASE("eager Megatron-core at 8192 ranks: prismd's split calls are each rank's own", "[.][megatron][8192]") {
  CheckCallsAgainstRanks(MegatronRecords(prism::graphgen::testing::GraphOfFile(
                             std::string(PRISM_EXAMPLES_DIR) + "/megatron/gpt-8192.yaml")),
                         {0, 4096, 8191});
}

// Fake real ranks `real` of graph `g` make the world from the store, then
// the world splits `splits(rank)` gives (color -1: NOCOLOR), against prismd
// playing the other ranks: no error, divergence or failed job.
using WorldSplits = std::vector<std::pair<int32_t, int32_t>>;  // (color, key) per ncclCommSplit of the world
void RunGraphSplits(const prism::graph::Graph& g, const std::vector<uint32_t>& real,
                    const std::function<WorldSplits(int)>& splits) {
  INFO("real " << real[0] << (real.size() > 1 ? "+" : ""));
  auto plan = bootstrap::PlanFromGraph(g, real);
  REQUIRE(plan.ok());
  Prismd prismd(*std::move(plan));
  std::vector<int> ranks(real.begin(), real.end());
  const auto errors = bootstrap::testing::RunRealRanks(ranks, [&](int rank) {
    TorchStoreClient store(prismd.store->port());
    auto world = CommFromStore(store, IdKey("default_pg/", "0", "0"), rank, g.ranks_size(), rank);
    std::vector<std::unique_ptr<FakeRealRank>> children;
    for (const auto& [color, key] : splits(rank)) {
      auto child = world->Split(color, key);
      if ((color != -1) != (child != nullptr)) throw std::runtime_error("split membership");
      if (child) children.push_back(std::move(child));
    }
    for (auto& c : children) c->Destroy();
    world->Destroy();
  });
  CheckJobClean(prismd, errors);
}

// Megatron-core's initialize_model_parallel with device_id at 64 ranks (TP2
// PP2 DP16, Gloo groups on): the fake real ranks split the world as PyTorch
// does for every group of the graph (EagerSplitsOf).
TEST_CASE("eager Megatron-core start-up at 64 ranks against fake real ranks (Gloo groups on)",
          "[rendezvous][startup][megatron]") {
  const prism::graph::Graph g = MegatronRecords(
      prism::graphgen::testing::GraphOf(prism::graphgen::testing::SmallJobYaml("{tp: 2, pp: 2, dp: 16}")));
  REQUIRE(g.ranks_size() == 64);
  for (const std::vector<uint32_t>& real : {std::vector<uint32_t>{0}, std::vector<uint32_t>{0, 33}}) {
    RunGraphSplits(g, real, [&](int rank) {
      WorldSplits out;
      for (const RankSplit& s : EagerSplitsOf(g, static_cast<uint32_t>(rank))) out.push_back({s.color, s.key});
      return out;
    });
  }
}

// process_groups: split_group (graphgen): each kind one split_group call. The
// fake real ranks make one split of the world per call, passing their own
// group's color (the graph's) and index, NOCOLOR where no group of the call
// holds them.
TEST_CASE("eager split_group job graph at 16 ranks against fake real ranks", "[rendezvous][startup]") {
  const prism::graph::Graph g = MegatronRecords(prism::graphgen::testing::GraphOf(
      prism::graphgen::testing::SmallJobYaml("{tp: 2, pp: 2, dp: 4, process_groups: split_group}")));
  std::vector<std::vector<uint32_t>> calls;  // communicators per call
  for (int c = 1; c < g.communicators_size(); ++c) {
    if (!g.communicators(c).split().same_call()) calls.emplace_back();
    calls.back().push_back(static_cast<uint32_t>(c));
  }
  REQUIRE(calls.size() == 4);  // dp_cp, tp, pp, embd
  for (const std::vector<uint32_t>& real : {std::vector<uint32_t>{0}, std::vector<uint32_t>{0, 5}}) {
    RunGraphSplits(g, real, [&](int rank) {
      WorldSplits out;
      for (const std::vector<uint32_t>& call : calls) {
        out.push_back({-1, rank});
        for (uint32_t c : call) {
          const auto& comm = g.communicators(static_cast<int>(c));
          const auto it = std::find(comm.members().begin(), comm.members().end(), static_cast<uint32_t>(rank));
          if (it != comm.members().end())
            out.back() = {comm.split().color(), comm.split().key() + static_cast<int32_t>(it - comm.members().begin())};
        }
      }
      return out;
    });
  }
}

}  // namespace
}  // namespace prism::rendezvous
