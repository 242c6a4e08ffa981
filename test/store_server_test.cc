// prismd's PyTorch store (daemon/store) against a fake c10d TCPStore client:
// every query, WAIT semantics, forgetting keys when the job's clients are
// gone, malformed input, and telling which local process (RANK) a client is.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>
#include <catch2/catch.hpp>

#include <atomic>
#include <chrono>
#include <thread>

#include "daemon/store/peer_process.h"
#include "daemon/store/store_server.h"
#include "daemon/store/tcp_store_protocol.h"
#include "test/torch_store_client.h"
#include "test/skip.h"

namespace prism::store {
namespace {

using prism::testing::TorchStoreClient;

bool Eventually(const std::function<bool()>& pred) {
  for (int i = 0; i < 1000; ++i) {
    if (pred()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return pred();
}

class Recorder : public StoreObserver {
 public:
  void OnConnected(const ClientInfo&) override { ++connected; }
  void OnWait(const ClientInfo&, const std::vector<std::string>& unset) override {
    std::lock_guard<std::mutex> l(mu);
    for (auto& k : unset) waits.push_back(k);
  }
  void OnSet(const ClientInfo&, const std::string& key, const std::string&) override {
    std::lock_guard<std::mutex> l(mu);
    sets.push_back(key);
  }
  void OnAllClientsGone() override { ++gone; }
  std::vector<std::string> Waits() {
    std::lock_guard<std::mutex> l(mu);
    return waits;
  }
  std::atomic<int> connected{0}, gone{0};
  std::mutex mu;
  std::vector<std::string> waits, sets;
};

std::unique_ptr<StoreServer> StartStore(StoreObserver* observer) {
  StoreServerOptions o;
  o.identify_clients = false;
  auto s = StoreServer::Start(o, observer);
  REQUIRE(s.ok());
  return std::move(*s);
}

TEST_CASE("store: every query answers as c10d's server does", "[store]") {
  auto server = StartStore(nullptr);
  TorchStoreClient c(server->port());
  CHECK(c.Ping(1234) == 1234);
  c.Set("a", "alpha");
  CHECK(c.Get("a") == "alpha");
  CHECK(c.Add("n", 5) == 5);
  CHECK(c.Add("n", -2) == 3);
  CHECK(c.Get("n") == "3");
  CHECK(c.Check({"a", "n"}));
  CHECK_FALSE(c.Check({"a", "missing"}));
  CHECK(c.NumKeys() == 2);
  CHECK(c.CompareSet("a", "alpha", "beta") == "beta");
  CHECK(c.CompareSet("a", "wrong", "gamma") == "beta");
  CHECK(c.CompareSet("fresh", "", "x") == "x");
  c.MultiSet({"m1", "m2"}, {"v1", "v2"});
  CHECK(c.MultiGet({"m1", "m2", "none"}) == std::vector<std::string>{"v1", "v2", ""});
  CHECK(c.Delete("m1"));
  CHECK_FALSE(c.Delete("m1"));
  auto keys = c.ListKeys();
  std::sort(keys.begin(), keys.end());
  CHECK(keys == std::vector<std::string>{"a", "fresh", "m2", "n"});
  CHECK_FALSE(c.WaitFor({"never"}, 50));  // timed out client side: CANCEL_WAIT answered
  CHECK(c.Ping(7) == 7);                   // the connection is still in step
}

TEST_CASE("store: WAIT answers once another client sets the key, and the observer sees both", "[store]") {
  Recorder rec;
  auto server = StartStore(&rec);
  TorchStoreClient waiter(server->port()), setter(server->port());
  std::string got;
  std::thread t([&] { got = waiter.Get("0//cuda//0"); });
  REQUIRE(Eventually([&] { return rec.Waits().size() == 1; }));
  CHECK(rec.Waits()[0] == "/0//cuda//0");
  CHECK(server->Snapshot().waits.size() == 1);
  setter.Set("0//cuda//0", std::string(128, 'x'));
  t.join();
  CHECK(got == std::string(128, 'x'));
  CHECK(server->Snapshot().waits.empty());
  std::lock_guard<std::mutex> l(rec.mu);
  CHECK(rec.sets == std::vector<std::string>{"/0//cuda//0"});
}

TEST_CASE("store: a server-side Set answers the waiters (prismd publishing an id)", "[store]") {
  auto server = StartStore(nullptr);
  TorchStoreClient waiter(server->port());
  std::string got;
  std::thread t([&] { got = waiter.Get("k"); });
  REQUIRE(Eventually([&] { return server->Snapshot().waits.size() == 1; }));
  server->Set("/k", "id");
  t.join();
  CHECK(got == "id");
}

// What prismd's Gloo side relies on (daemon/gloo): every read is told to the
// observers before the store answers it, set or not, and a Set() from there
// answers that very read; ObserverFanout passes it to each observer.
class SetOnRead : public StoreObserver {
 public:
  void OnConnected(const ClientInfo&) override {}
  void OnWait(const ClientInfo&, const std::vector<std::string>&) override { ++waits; }
  void OnSet(const ClientInfo&, const std::string&, const std::string&) override {}
  void OnRead(const ClientInfo&, const std::vector<std::string>& keys) override {
    std::lock_guard<std::mutex> l(mu);
    for (const auto& k : keys) {
      reads.push_back(k);
      if (k == "/virtual" && server != nullptr) server->Set(k, "record");
    }
  }
  void OnAllClientsGone() override {}
  StoreServer* server = nullptr;
  std::atomic<int> waits{0};
  std::mutex mu;
  std::vector<std::string> reads;
};

TEST_CASE("store: observers hear of every read before it is answered and a Set from there answers it", "[store]") {
  SetOnRead gloo;
  Recorder rendezvous;
  ObserverFanout both({&rendezvous, &gloo});
  auto server = StartStore(&both);
  gloo.server = server.get();
  TorchStoreClient c(server->port(), 2000);
  CHECK(c.Get("virtual") == "record");  // WAIT + GET, answered at once
  CHECK(gloo.waits == 0);                // the WAIT found the key set
  c.Set("real", "x");
  CHECK(c.Get("real") == "x");
  CHECK(c.MultiGet({"real", "virtual"}) == std::vector<std::string>{"x", "record"});
  std::lock_guard<std::mutex> l(gloo.mu);
  CHECK(gloo.reads == std::vector<std::string>{"/virtual", "/virtual", "/real", "/real", "/real", "/virtual"});
  CHECK(rendezvous.connected == 1);
}

TEST_CASE("store: when every client has gone the keys are forgotten", "[store]") {
  Recorder rec;
  auto server = StartStore(&rec);
  {
    TorchStoreClient a(server->port()), b(server->port());
    a.Set("default_pg/0//cuda//0", "old id");
    CHECK(b.NumKeys() == 1);
  }
  REQUIRE(Eventually([&] { return rec.gone.load() == 1; }));
  TorchStoreClient next(server->port());
  CHECK(next.NumKeys() == 0);
  CHECK(rec.connected.load() == 3);
}

TEST_CASE("store: malformed requests close that connection only", "[store]") {
  auto server = StartStore(nullptr);
  TorchStoreClient good(server->port());
  const int bad = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(server->port());
  a.sin_addr.s_addr = htonl(0x7f000001);
  REQUIRE(connect(bad, reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0);
  std::string junk(1, static_cast<char>(200));  // no such query type
  REQUIRE(write(bad, junk.data(), junk.size()) == 1);
  char c;
  CHECK(read(bad, &c, 1) == 0);  // closed by the server
  close(bad);
  std::string huge(1, static_cast<char>(Query::kGet));
  const uint64_t len = uint64_t{1} << 40;
  huge.append(reinterpret_cast<const char*>(&len), 8);
  const int bad2 = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  REQUIRE(connect(bad2, reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0);
  REQUIRE(write(bad2, huge.data(), huge.size()) == static_cast<ssize_t>(huge.size()));
  CHECK(read(bad2, &c, 1) == 0);
  close(bad2);
  CHECK(good.Ping(3) == 3);
}

TEST_CASE("store: requests split at every byte boundary parse the same", "[store]") {
  Request r;
  r.query = Query::kMultiSet;
  r.keys = {"/k1", "/key-two"};
  r.values = {"v", std::string(300, 'z')};
  const std::string bytes = EncodeRequest(r);
  for (size_t cut = 0; cut < bytes.size(); ++cut) {
    Request out;
    auto used = ParseRequest(bytes.substr(0, cut), 0, &out);
    REQUIRE(used.ok());
    CHECK(*used == 0);
  }
  Request out;
  auto used = ParseRequest(bytes, 0, &out);
  REQUIRE(used.ok());
  CHECK(*used == bytes.size());
  CHECK(out.keys == r.keys);
  CHECK(out.values == r.values);
}

TEST_CASE("store: a client's process and RANK are found through /proc", "[store]") {
  if (access("/usr/bin/python3", X_OK) != 0) {
    PRISM_SKIP("no /usr/bin/python3 to play the client process: skipped");
  }
  const int listener = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(0x7f000001);
  REQUIRE(bind(listener, reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0);
  REQUIRE(listen(listener, 4) == 0);
  socklen_t len = sizeof(a);
  getsockname(listener, reinterpret_cast<sockaddr*>(&a), &len);
  const std::string port = std::to_string(ntohs(a.sin_port));
  const pid_t child = fork();
  if (child == 0) {
    const std::string code = "import socket,time; s=socket.create_connection(('127.0.0.1'," + port +
                             ")); s.recv(1)";
    char* const argv[] = {const_cast<char*>("python3"), const_cast<char*>("-c"), const_cast<char*>(code.c_str()),
                          nullptr};
    char* const envp[] = {const_cast<char*>("RANK=7"), const_cast<char*>("PATH=/usr/bin:/bin"), nullptr};
    execve("/usr/bin/python3", argv, envp);
    _exit(127);
  }
  sockaddr_in peer{}, self{};
  socklen_t plen = sizeof(peer), slen = sizeof(self);
  const int conn = accept(listener, reinterpret_cast<sockaddr*>(&peer), &plen);
  REQUIRE(conn >= 0);
  getsockname(conn, reinterpret_cast<sockaddr*>(&self), &slen);
  auto p = FindPeerProcess(ntohl(peer.sin_addr.s_addr), ntohs(peer.sin_port), ntohl(self.sin_addr.s_addr),
                           ntohs(self.sin_port));
  close(conn);
  close(listener);
  int status = 0;
  waitpid(child, &status, 0);
  REQUIRE(p.has_value());
  CHECK(p->pid == child);
  CHECK(p->rank == 7);
}

}  // namespace
}  // namespace prism::store
