// prismd's virtual ranks in the real ranks' Gloo groups (daemon/gloo):
// fake real ranks that speak Gloo's store rendezvous and TCP pair protocol
// as PyTorch 2.11's ProcessGroupGloo does (test/gloo_fake_rank.h) against
// prismd's store + GlooRanks: eager full mesh and lazy init, one and two
// real ranks, a subgroup, and the failure cases (a group the graph does not
// list, a malformed message, a real rank gone mid-collective, a record set
// for a virtual rank), each ending in a named error, never a hang.
#include <catch2/catch.hpp>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>

#include "absl/strings/match.h"
#include "daemon/bootstrap/bootstrap_plan.h"
#include "daemon/rendezvous/gloo_keys.h"
#include "daemon/gloo/gloo_ranks.h"
#include "daemon/gloo/gloo_wire.h"
#include "daemon/store/store_server.h"
#include "test/gloo_fake_rank.h"
#include "test/torch_store_client.h"

namespace prism::gloo {
namespace {

using testing::FakeGlooOptions;
using testing::FakeGlooRank;

bool Eventually(const std::function<bool()>& pred, int limit_ms = 10000) {
  for (int waited = 0; waited < limit_ms; waited += 10) {
    if (pred()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return pred();
}

bool HasError(const GlooRanks& g, const std::string& part) {
  for (const std::string& e : g.Reports().errors) {
    if (absl::StrContains(e, part)) return true;
  }
  return false;
}

// prismd's side: the store with GlooRanks watching it.
struct Prismd {
  explicit Prismd(bootstrap::BootstrapPlan p, GlooOptions options = {}) : plan(std::move(p)) {
    auto g = GlooRanks::Start(plan, options);
    REQUIRE(g.ok());
    gloo = std::move(*g);
    store::StoreServerOptions so;
    auto s = store::StoreServer::Start(so, gloo.get());
    REQUIRE(s.ok());
    store = std::move(*s);
    gloo->SetStore(store.get());
  }
  ~Prismd() {
    store->Stop();
    gloo->Stop();
  }
  FakeGlooOptions Rank(int rank, int size, bool lazy = false, std::string context = "default_pg/0//cpu//0") const {
    FakeGlooOptions o;
    o.store_port = store->port();
    o.context = std::move(context);
    o.rank = rank;
    o.size = size;
    o.lazy = lazy;
    return o;
  }
  bootstrap::BootstrapPlan plan;
  std::unique_ptr<GlooRanks> gloo;
  std::unique_ptr<store::StoreServer> store;
};

std::vector<float> Iota(size_t n, float base) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = base + static_cast<float>(i);
  return v;
}

TEST_CASE("gloo wire: a rank record round-trips and a bad one is named", "[gloo]") {
  RankRecord r;
  r.hostname = "host-a";
  auto* in = reinterpret_cast<sockaddr_in*>(&r.address);
  in->sin_family = AF_INET;
  in->sin_port = htons(4242);
  in->sin_addr.s_addr = htonl(0x7f000001);
  r.pair_sequences = {5, 6, 7};
  const std::string bytes = EncodeRankRecord(r);
  CHECK(bytes.size() == 8 + 6 + 8 + kAddressBytes + 3 * 8);
  auto back = DecodeRankRecord(bytes);
  REQUIRE(back.ok());
  CHECK(back->hostname == "host-a");
  CHECK(AddressText(back->address) == "127.0.0.1:4242");
  CHECK(back->pair_sequences == std::vector<int64_t>{5, 6, 7});
  auto cut = DecodeRankRecord(bytes.substr(0, 30));
  REQUIRE_FALSE(cut.ok());
  CHECK(absl::StrContains(cut.status().message(), "ends inside its address"));
  auto odd = DecodeRankRecord(bytes + "x");
  REQUIRE_FALSE(odd.ok());
  CHECK(absl::StrContains(odd.status().message(), "pair sequences"));
  Preamble bad{kPreambleBytes, 9, 0, 0, 0, 0};
  CHECK(absl::StrContains(CheckPreamble(bad, 100).message(), "unknown opcode 9"));
  Preamble lying{kPreambleBytes, 1, 0, 0, 10, 0};
  CHECK(absl::StrContains(CheckPreamble(lying, 100).message(), "nbytes 48"));
  CHECK(CollectiveOfSlot(uint64_t{7} << 56 | uint64_t{3} << 24) == "barrier");
}

TEST_CASE("gloo keys: PyTorch's Gloo record keys parse and NCCL id keys do not", "[gloo]") {
  auto world = rendezvous::ParseGlooKey("/default_pg/0//cpu//0/3");
  REQUIRE(world);
  CHECK(world->group == "0");
  CHECK(world->device_type == "cpu");
  CHECK(world->rank == 3);
  CHECK(world->context == "/default_pg/0//cpu//0");
  CHECK(rendezvous::RecordKey(world->context, 5) == "/default_pg/0//cpu//0/5");
  auto sub = rendezvous::ParseGlooKey("/default_pg/0//66//cpu//0/1");  // issue 23's Megatron key
  REQUIRE(sub);
  CHECK(sub->group == "66");
  CHECK(sub->rank == 1);
  auto store_eq = rendezvous::ParseGlooKey("/0//12//cuda//0/0");  // store=, backend="gloo" on cuda
  REQUIRE(store_eq);
  CHECK(store_eq->group == "12");
  CHECK(store_eq->device_type == "cuda");
  auto hashed = rendezvous::ParseGlooKey("/worker/default_pg/0//ad56679d0d9ec5db6f1e8b5e0c6e6cc3b4a0b0e1//cpu//0/1");
  REQUIRE(hashed);
  CHECK(hashed->group == "ad56679d0d9ec5db6f1e8b5e0c6e6cc3b4a0b0e1");
  CHECK_FALSE(rendezvous::ParseGlooKey("/default_pg/0//cuda//0"));    // an NCCL id
  CHECK_FALSE(rendezvous::ParseGlooKey("/default_pg/0//3//cuda//0:1"));
  CHECK_FALSE(rendezvous::ParseGlooKey("/store_based_barrier_key:1"));
}

TEST_CASE("gloo: an eager Gloo group of 8 with one real rank forms, and a barrier and an allreduce complete", "[gloo]") {
  Prismd prismd(bootstrap::WorldPlan(8, 8, {2}));
  FakeGlooRank rank(prismd.Rank(2, 8));
  rank.Rendezvous();
  CHECK(rank.pairs_connected() == 7);
  rank.Barrier(0);
  std::vector<float> data = Iota(1000, 1.0f);
  const std::vector<float> mine = data;
  rank.Allreduce(data, 1);
  // Payload policy: virtual ranks send zeros, so the real rank keeps its own
  // contribution in the chunk it reduces last and gets zeros elsewhere.
  const size_t chunk = 125, kept = 3;  // ring: rank 2 ends owning chunk 3
  for (size_t i = 0; i < data.size(); ++i) {
    INFO("element " << i);
    CHECK(data[i] == (i / chunk == kept ? mine[i] : 0.0f));
  }
  rank.Barrier(2);
  // A virtual record carries pair sequences up to the last real rank only.
  prism::testing::TorchStoreClient look(prismd.store->port());
  auto virt = DecodeRankRecord(look.Get("default_pg/0//cpu//0/7"));
  REQUIRE(virt.ok());
  CHECK(virt->pair_sequences.size() == 3);
  CHECK(AddressText(virt->address) == "255.255.255.255:65535");
  CHECK(virt->hostname == "prism-virtual");
  const GlooReports r = prismd.gloo->Reports();
  CHECK(r.errors.empty());
  CHECK(r.records_published == 7);
  CHECK(r.pairs_opened == 7);
  CHECK(Eventually([&] { return prismd.gloo->Reports().traffic.payload_in == 2 * 7 * chunk * sizeof(float); }));
}

TEST_CASE("gloo: lazy init connects only the pairs the real rank uses", "[gloo]") {
  Prismd prismd(bootstrap::WorldPlan(16, 8, {0}));
  FakeGlooRank rank(prismd.Rank(0, 16, /*lazy=*/true));
  rank.Rendezvous();
  CHECK(rank.pairs_connected() == 0);
  rank.Barrier(0);  // dissemination: peers 15, 1, 14, 2, 12, 4, 8
  CHECK(rank.pairs_connected() == 7);
  CHECK(prismd.gloo->Reports().pairs_opened == 7);
  CHECK(prismd.gloo->Reports().records_published == 7);
  std::vector<float> data = Iota(64, 1.0f);
  rank.Allreduce(data, 1);  // adds the ring neighbour 15 (already) and 1 (already)
  CHECK(prismd.gloo->Reports().pairs_opened == 7);
  CHECK(prismd.gloo->Reports().errors.empty());
}

TEST_CASE("gloo: two real ranks and six virtual ones share one Gloo group", "[gloo]") {
  Prismd prismd(bootstrap::WorldPlan(8, 8, {0, 3}));
  std::vector<float> result0, result3;
  std::string error;
  std::mutex mu;
  auto run = [&](int r, std::vector<float>* out) {
    try {
      FakeGlooRank rank(prismd.Rank(r, 8));
      rank.Rendezvous();
      rank.Barrier(0);
      std::vector<float> data(40, 1.0f);
      rank.Allreduce(data, 1);
      rank.Barrier(2);
      *out = data;
    } catch (const std::exception& e) {
      std::lock_guard<std::mutex> lock(mu);
      error = e.what();
    }
  };
  std::thread a(run, 0, &result0), b(run, 3, &result3);
  a.join();
  b.join();
  CHECK(error.empty());
  CHECK(result0.size() == 40);
  CHECK(result3.size() == 40);
  CHECK(prismd.gloo->Reports().pairs_opened == 12);  // 6 virtual peers each; 0 <-> 3 directly
  CHECK(prismd.gloo->Reports().errors.empty());
}

TEST_CASE("gloo: a Gloo subgroup the graph lists is played, one it does not list is an error", "[gloo]") {
  bootstrap::BootstrapPlan plan = bootstrap::WorldPlan(8, 8, {4});
  bootstrap::AddSplit(plan, 0, {0, 2, 4, 6}, 100, 0, "dp[0]");
  Prismd prismd(std::move(plan));
  {
    FakeGlooRank rank(prismd.Rank(2, 4, false, "default_pg/0//1//cpu//0"));  // global 4 is dp rank 2
    rank.Rendezvous();
    rank.Barrier(0);
    CHECK(prismd.gloo->Reports().pairs_opened == 3);
  }
  // Group 2 is not in the graph: the record is not set, the error says why.
  FakeGlooOptions o = prismd.Rank(0, 4, false, "default_pg/0//2//cpu//0");
  o.timeout_ms = 300;
  FakeGlooRank lost(o);
  CHECK_THROWS(lost.Rendezvous());
  CHECK(HasError(*prismd.gloo, "Gloo group '2'"));
  CHECK(HasError(*prismd.gloo, "only when the graph lists that group"));
}

TEST_CASE("gloo: a real rank reading through another store connection is known by its RANK", "[gloo]") {
  Prismd prismd(bootstrap::WorldPlan(4, 8, {2}));
  const int listener = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);  // rank 2's Gloo device
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  REQUIRE(bind(listener, reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0);
  REQUIRE(listen(listener, 4) == 0);
  RankRecord record;
  record.hostname = "h";
  socklen_t len = sizeof(record.address);
  getsockname(listener, reinterpret_cast<sockaddr*>(&record.address), &len);
  record.pair_sequences = {10, 11, 12, 13};
  store::ClientInfo setter, reader;  // two connections of one process (a cloned store)
  setter.id = 1001;
  setter.rank = 2;
  reader.id = 1002;
  reader.rank = 2;
  prismd.gloo->OnSet(setter, "/default_pg/0//cpu//0/2", EncodeRankRecord(record));
  prismd.gloo->OnRead(reader, {"/default_pg/0//cpu//0/1"});
  pollfd p{listener, POLLIN, 0};
  REQUIRE(poll(&p, 1, 5000) == 1);  // prismd dials for virtual rank 1 ...
  const int pair = accept(listener, nullptr, nullptr);
  int64_t sequence = 0;
  CHECK(recv(pair, &sequence, sizeof(sequence), MSG_WAITALL) == static_cast<ssize_t>(sizeof(sequence)));
  CHECK(sequence == 11);  // ... with rank 2's sequence for its pair with rank 1
  CHECK(prismd.gloo->Reports().records_published == 1);
  close(pair);
  close(listener);
}

TEST_CASE("gloo: in loopback mode prismd dials no listener off this host", "[gloo]") {
  Prismd prismd(bootstrap::WorldPlan(4, 8, {0}));
  RankRecord record;
  record.hostname = "elsewhere";
  auto* in = reinterpret_cast<sockaddr_in*>(&record.address);
  in->sin_family = AF_INET;
  in->sin_port = htons(5000);
  in->sin_addr.s_addr = htonl(0xC0000201);  // 192.0.2.1 (TEST-NET-1): no host's
  record.pair_sequences = {0, 1, 2, 3};
  store::ClientInfo real;
  real.id = 7;
  prismd.gloo->OnSet(real, "/default_pg/0//cpu//0/0", EncodeRankRecord(record));
  prismd.gloo->OnRead(real, {"/default_pg/0//cpu//0/1"});
  CHECK(HasError(*prismd.gloo, "the real rank's Gloo listener 192.0.2.1:5000 is not on this host"));
  CHECK(prismd.gloo->Reports().pairs_opened == 0);
}

TEST_CASE("gloo: a real rank waiting for a Gloo record is reported with why", "[gloo]") {
  GlooOptions options;
  options.report_after = std::chrono::milliseconds(50);
  bootstrap::BootstrapPlan plan = bootstrap::WorldPlan(8, 8, {0, 5});
  Prismd prismd(std::move(plan), options);
  std::thread waiter([&] {
    FakeGlooOptions o = prismd.Rank(0, 8);
    o.timeout_ms = 1500;
    FakeGlooRank rank(o);
    CHECK_THROWS(rank.Rendezvous());  // rank 5 (real) never comes
  });
  bool named = Eventually([&] {
    for (const auto& w : prismd.gloo->Reports().waiting) {
      if (w.ranks == std::vector<uint32_t>{5} && absl::StrContains(w.waits_for, "has not made this Gloo group yet") &&
          absl::StrContains(w.waits_for, "'/default_pg/0//cpu//0/5'")) {
        return true;
      }
    }
    return false;
  });
  CHECK(named);
  prismd.gloo->Tick();  // logs it
  waiter.join();
}

TEST_CASE("gloo: a malformed message closes the pair with an error naming it", "[gloo]") {
  Prismd prismd(bootstrap::WorldPlan(8, 8, {0}));
  FakeGlooRank rank(prismd.Rank(0, 8));
  rank.Rendezvous();
  std::string bad;
  AppendPreamble(&bad, {kPreambleBytes, 7, 0, 0, 0, 0});  // opcode 7, on the pair the barrier does not use
  REQUIRE(send(rank.PairFd(3), bad.data(), bad.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(bad.size()));
  char buf[64];
  CHECK(rank.ReadSome(3, buf, sizeof(buf)) == 0);  // closed at once, not a hang
  CHECK(Eventually([&] { return HasError(*prismd.gloo, "malformed Gloo message from the real rank: unknown opcode 7"); }));
  CHECK(Eventually([&] { return prismd.gloo->Reports().pairs_failed == 1; }));
  rank.Barrier(0);  // the other pairs still serve (peers 7, 1, 6, 2, 4)
}

TEST_CASE("gloo: a real rank gone mid-collective leaves prismd serving the next job", "[gloo]") {
  Prismd prismd(bootstrap::WorldPlan(4, 8, {0}));
  {
    FakeGlooRank rank(prismd.Rank(0, 4));
    rank.Rendezvous();
    std::string half;
    AppendPreamble(&half, {kPreambleBytes + 100, 1, 0, 0, 100, 0});  // 100 bytes announced, 10 sent
    half.append(10, 'x');
    REQUIRE(send(rank.PairFd(1), half.data(), half.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(half.size()));
  }  // the process dies: its pairs and its store connection close
  // The pair's error is counted (and logged: "closed the pair inside a
  // message (90 payload bytes missing)"); the store forgot the job (its
  // last client left), so the next one starts clean.
  CHECK(Eventually([&] { return prismd.gloo->Reports().pairs_failed == 1; }));
  CHECK(Eventually([&] { return prismd.gloo->Reports().pairs_open == 0 && prismd.gloo->Reports().contexts == 0; }));
  FakeGlooRank again(prismd.Rank(0, 4));
  again.Rendezvous();
  again.Barrier(0);
  CHECK(prismd.gloo->Reports().pairs_opened == 6);
}

TEST_CASE("gloo: a real rank's hard close between messages is an orderly end", "[gloo]") {
  Prismd prismd(bootstrap::WorldPlan(4, 8, {0}));
  FakeGlooRank rank(prismd.Rank(0, 4));
  rank.Rendezvous();
  rank.Barrier(0);
  REQUIRE(prismd.gloo->Reports().pairs_open == 3);
  rank.ClosePairs(/*reset=*/true);  // the job's store connection stays
  CHECK(Eventually([&] { return prismd.gloo->Reports().pairs_open == 0; }));
  CHECK(prismd.gloo->Reports().pairs_failed == 0);
  CHECK(prismd.gloo->Reports().errors.empty());
}

TEST_CASE("gloo: a group made again under the same name gets new pairs", "[gloo]") {
  Prismd prismd(bootstrap::WorldPlan(4, 8, {0}));
  prism::testing::TorchStoreClient keeper(prismd.store->port());  // the job goes on
  {
    FakeGlooRank first(prismd.Rank(0, 4));
    first.Rendezvous();
    first.Barrier(0);
  }  // destroy_process_group: its pairs close
  FakeGlooRank again(prismd.Rank(0, 4));  // init_process_group again: the same keys
  again.Rendezvous();
  again.Barrier(0);
  CHECK(prismd.gloo->Reports().pairs_opened == 6);
}

TEST_CASE("gloo: a real rank that sets the record of a virtual rank is an error", "[gloo]") {
  Prismd prismd(bootstrap::WorldPlan(4, 8, {0}));
  FakeGlooOptions o = prismd.Rank(1, 4);  // rank 1 is virtual in the graph
  o.timeout_ms = 300;
  FakeGlooRank wrong(o);
  CHECK_THROWS(wrong.Rendezvous());  // nobody answers it
  CHECK(HasError(*prismd.gloo, "which prismd plays virtually"));
}

}  // namespace
}  // namespace prism::gloo

namespace prism::gloo {
namespace {

// By hand against a running prismd (its store): PRISM_GLOO_STORE_PORT=P
// PRISM_GLOO_RANK=R PRISM_GLOO_WORLD=N build/test/gloo_tests "[.external]",
// or as the program of `prism run` (MASTER_PORT, RANK, WORLD_SIZE).
TEST_CASE("gloo: a fake real rank against a running prismd's store", "[.external]") {
  auto env = [](const char* name, const char* fallback) {
    const char* v = std::getenv(name);
    return v != nullptr ? v : std::getenv(fallback);
  };
  const char* port = env("PRISM_GLOO_STORE_PORT", "MASTER_PORT");
  const char* rank = env("PRISM_GLOO_RANK", "RANK");
  const char* world = env("PRISM_GLOO_WORLD", "WORLD_SIZE");
  REQUIRE((port && rank && world));
  FakeGlooOptions o;
  o.store_port = static_cast<uint16_t>(std::atoi(port));
  o.rank = std::atoi(rank);
  o.size = std::atoi(world);
  o.lazy = std::getenv("PRISM_GLOO_LAZY") != nullptr;
  FakeGlooRank r(o);
  using Clock = std::chrono::steady_clock;
  auto seconds = [](Clock::time_point since) { return std::chrono::duration<double>(Clock::now() - since).count(); };
  auto t = Clock::now();
  r.Rendezvous();
  std::printf("rendezvous: %.3f s (%zu pairs)\n", seconds(t), r.pairs_connected());
  t = Clock::now();
  r.Barrier(0);
  std::printf("barrier: %.3f s\n", seconds(t));
  std::vector<float> data(1000, 1.0f);
  t = Clock::now();
  r.Allreduce(data, 1);
  std::printf("ring allreduce of 1000 floats: %.3f s\n", seconds(t));
  r.Barrier(2);
  std::printf("OK rank %d\n", o.rank);
}

}  // namespace
}  // namespace prism::gloo
