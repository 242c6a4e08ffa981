// prismd's PyTorch store against another local user's idle, careless or
// hostile connections (issue 27, items 1-3): VALIDATE first, connections
// that never validate, the connection cap, stored and buffered bytes, ADD
// overflow, and accept running out of file descriptors.
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>
#include <catch2/catch.hpp>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <limits>
#include <thread>
#include <vector>

#include "daemon/store/store_server.h"
#include "daemon/store/tcp_store_protocol.h"
#include "test/torch_store_client.h"

namespace prism::store {
namespace {

using prism::testing::TorchStoreClient;

bool Eventually(const std::function<bool()>& pred) {
  for (int i = 0; i < 3000; ++i) {
    if (pred()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return pred();
}

std::unique_ptr<StoreServer> StartStore(const StoreLimits& limits) {
  StoreServerOptions o;
  o.identify_clients = false;
  o.limits = limits;
  auto s = StoreServer::Start(o, nullptr);
  REQUIRE(s.ok());
  return std::move(*s);
}

int RawConnect(uint16_t port) {
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  a.sin_addr.s_addr = htonl(0x7f000001);
  REQUIRE(connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0);
  return fd;
}

void SendAll(int fd, const std::string& bytes) {
  size_t off = 0;
  while (off < bytes.size()) {
    const ssize_t w = send(fd, bytes.data() + off, bytes.size() - off, MSG_NOSIGNAL);
    if (w <= 0) return;  // closed by the server meanwhile
    off += static_cast<size_t>(w);
  }
}

std::string Validate() {
  Request v;
  v.query = Query::kValidate;
  v.word = kValidationMagic;
  return EncodeRequest(v);
}

std::string Encode(Query q, std::vector<std::string> keys, std::vector<std::string> values = {},
                   int64_t number = 0) {
  Request r;
  r.query = q;
  r.keys = std::move(keys);
  r.values = std::move(values);
  r.number = number;
  r.word = 7;
  return EncodeRequest(r);
}

// Whether the server closed `fd` (reads to the end, within 30 s).
bool ClosedByServer(int fd) {
  char buf[4096];
  for (int i = 0; i < 3000; ++i) {
    pollfd p{fd, POLLIN, 0};
    if (poll(&p, 1, 10) != 1) continue;
    const ssize_t r = recv(fd, buf, sizeof(buf), 0);
    if (r <= 0) return true;
  }
  return false;
}

TEST_CASE("store protocol: a key count over the limit is refused before any key arrives", "[store][limits]") {
  for (Query q : {Query::kWait, Query::kCheck, Query::kMultiGet, Query::kMultiSet}) {
    INFO(QueryName(q));
    std::string bytes(1, static_cast<char>(q));
    const uint64_t n = kMaxKeysPerQuery + 1;
    bytes.append(reinterpret_cast<const char*>(&n), 8);
    Request out;
    auto used = ParseRequest(bytes, 0, &out);
    REQUIRE_FALSE(used.ok());  // not "incomplete": 2^17 + 1 keys would be buffered first
    CHECK(std::string(used.status().message()).find("over the size limits") != std::string::npos);
    const uint64_t ok_n = kMaxKeysPerQuery;
    bytes.replace(1, 8, reinterpret_cast<const char*>(&ok_n), 8);
    auto partial = ParseRequest(bytes, 0, &out);
    REQUIRE(partial.ok());
    CHECK(*partial == 0);
  }
}

TEST_CASE("store: a request before VALIDATE closes the connection unanswered", "[store][limits]") {
  auto server = StartStore({});
  const int fd = RawConnect(server->port());
  SendAll(fd, Encode(Query::kPing, {}));
  CHECK(ClosedByServer(fd));
  close(fd);
  const int bad_magic = RawConnect(server->port());
  Request v;
  v.query = Query::kValidate;
  v.word = 0x1234;
  SendAll(bad_magic, EncodeRequest(v));
  CHECK(ClosedByServer(bad_magic));
  close(bad_magic);
  TorchStoreClient good(server->port());
  CHECK(good.Ping(5) == 5);
}

TEST_CASE("store: connections that never VALIDATE are closed, the oldest first, and are no clients",
          "[store][limits]") {
  StoreLimits limits;
  limits.max_unvalidated = 4;
  limits.handshake_timeout = std::chrono::milliseconds(60000);
  auto server = StartStore(limits);
  std::vector<int> idle;
  for (int i = 0; i < 10; ++i) idle.push_back(RawConnect(server->port()));
  // The six oldest make room for newer ones; a real client still gets in.
  for (int i = 0; i < 6; ++i) CHECK(ClosedByServer(idle[i]));
  TorchStoreClient good(server->port());
  CHECK(good.Ping(9) == 9);
  REQUIRE(Eventually([&] { return server->Snapshot().clients == 1; }));
  CHECK(server->Snapshot().unvalidated <= 4);
  for (int fd : idle) close(fd);

  StoreLimits quick;
  quick.handshake_timeout = std::chrono::milliseconds(50);
  auto server2 = StartStore(quick);
  const int silent = RawConnect(server2->port());
  CHECK(ClosedByServer(silent));
  close(silent);
}

TEST_CASE("store: connections over the cap wait in the backlog until one closes", "[store][limits]") {
  StoreLimits limits;
  limits.max_connections = 4;
  auto server = StartStore(limits);
  std::vector<std::unique_ptr<TorchStoreClient>> held;
  for (int i = 0; i < 4; ++i) {
    held.push_back(std::make_unique<TorchStoreClient>(server->port()));
    CHECK(held.back()->Ping(i) == static_cast<uint32_t>(i));
  }
  std::atomic<bool> answered{false};
  std::thread late([&] {
    TorchStoreClient fifth(server->port());
    answered = fifth.Ping(42) == 42;
  });
  REQUIRE(Eventually([&] { return server->Snapshot().clients == 4; }));
  CHECK_FALSE(answered.load());
  CHECK(server->Snapshot().clients + server->Snapshot().unvalidated == 4);
  held.front().reset();  // one goes: the fifth is accepted
  late.join();
  CHECK(answered.load());
}

TEST_CASE("store: an ADD whose sum leaves int64 closes the connection and keeps the value", "[store][limits]") {
  auto server = StartStore({});
  TorchStoreClient other(server->port());
  {
    TorchStoreClient adder(server->port());
    CHECK(adder.Add("n", std::numeric_limits<int64_t>::max()) == std::numeric_limits<int64_t>::max());
    CHECK_THROWS(adder.Add("n", 1));  // closed, not wrapped to INT64_MIN
  }
  CHECK(other.Add("n", 0) == std::numeric_limits<int64_t>::max());
  CHECK(other.Add("n", -1) == std::numeric_limits<int64_t>::max() - 1);
}

TEST_CASE("store: SETs and APPENDs past the stored-bytes limit close the connection", "[store][limits]") {
  StoreLimits limits;
  limits.max_stored_bytes = 1 << 20;
  auto server = StartStore(limits);
  TorchStoreClient keeper(server->port());  // keys are kept while a client stays
  const std::string chunk(300 << 10, 'x');
  const int fd = RawConnect(server->port());
  SendAll(fd, Validate());
  for (int i = 0; i < 4; ++i) SendAll(fd, Encode(Query::kAppend, {"/blob"}, {chunk}));
  CHECK(ClosedByServer(fd));  // the fourth APPEND would hold 1.2 MiB
  close(fd);
  CHECK(server->Snapshot().stored_bytes == 5 + 3 * chunk.size());
  TorchStoreClient other(server->port());
  other.Set("k", std::string(100 << 10, 'y'));  // still room for this
  CHECK(other.NumKeys() == 2);
  other.Set("big", std::string(600 << 10, 'z'));
  CHECK_THROWS(other.NumKeys());  // closed by the server
  CHECK(keeper.NumKeys() == 2);
}

TEST_CASE("store: what prismd sets itself takes no room from the clients' stored-bytes limit", "[store][limits]") {
  StoreLimits limits;
  limits.max_stored_bytes = 1 << 20;
  auto server = StartStore(limits);
  TorchStoreClient client(server->port());
  for (int i = 0; i < 8; ++i) server->Set("/virtual" + std::to_string(i), std::string(256 << 10, 'v'));  // 2 MiB
  // prismd's Set is posted to the store's loop: wait until all eight are in,
  // so that the client's requests below meet them.
  REQUIRE(Eventually([&] { return server->Snapshot().keys == 8; }));
  client.Set("real", std::string(100 << 10, 'r'));
  CHECK(client.NumKeys() == 9);  // still connected
  client.Set("virtual0", "now the client's");  // a client takes a key over: it counts as the client's
  client.Set("more", std::string(800 << 10, 'm'));
  CHECK(client.NumKeys() == 10);
  client.Set("over", std::string(200 << 10, 'o'));  // 100 KiB + 800 KiB + 200 KiB > 1 MiB
  CHECK_THROWS(client.NumKeys());
}

TEST_CASE("store: a request larger than the buffered-bytes limit closes its connection", "[store][limits]") {
  StoreLimits limits;
  limits.max_buffered_bytes = 1 << 20;
  auto server = StartStore(limits);
  TorchStoreClient good(server->port());
  const int fd = RawConnect(server->port());
  SendAll(fd, Validate());
  // A SET announcing a 32 MiB value (under the 64 MiB a value may have),
  // of which 2 MiB arrive: over the 1 MiB of requests in flight.
  std::string head = Encode(Query::kSet, {"/k"}, {std::string()});
  head.resize(head.size() - 8);
  const uint64_t n = uint64_t{32} << 20;
  head.append(reinterpret_cast<const char*>(&n), 8);
  SendAll(fd, head);
  SendAll(fd, std::string(2 << 20, 'v'));
  CHECK(ClosedByServer(fd));
  close(fd);
  CHECK(good.Ping(1) == 1);
}

TEST_CASE("store: accept out of file descriptors pauses the listener and recovers", "[store][limits]") {
  auto server = StartStore({});
  TorchStoreClient first(server->port());
  CHECK(first.Ping(1) == 1);
  rlimit saved{};
  REQUIRE(getrlimit(RLIMIT_NOFILE, &saved) == 0);
  // Every descriptor but one taken: the client's socket gets it, the
  // server's accept finds none (EMFILE), as when another user's idle
  // connections exhaust prismd's.
  rlimit low = saved;
  low.rlim_cur = 256;
  REQUIRE(setrlimit(RLIMIT_NOFILE, &low) == 0);
  std::vector<int> filler;
  while (true) {
    const int fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
    if (fd < 0) break;
    filler.push_back(fd);
  }
  close(filler.back());
  filler.pop_back();
  const int pending = RawConnect(server->port());
  REQUIRE(Eventually([&] { return server->Snapshot().accept_pauses > 0; }));
  for (int fd : filler) close(fd);
  REQUIRE(setrlimit(RLIMIT_NOFILE, &saved) == 0);
  SendAll(pending, Validate());
  SendAll(pending, Encode(Query::kPing, {}));
  uint32_t nonce = 0;
  pollfd p{pending, POLLIN, 0};
  REQUIRE(poll(&p, 1, 30000) == 1);
  CHECK(recv(pending, &nonce, 4, MSG_WAITALL) == 4);
  CHECK(nonce == 7);
  close(pending);
  CHECK(first.Ping(2) == 2);
}

}  // namespace
}  // namespace prism::store
