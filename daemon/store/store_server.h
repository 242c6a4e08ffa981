// A PyTorch TCPStore server hosted by prismd (tcp_store_protocol.h), so that
// prismd sees which keys the real ranks wait for and which they set: the
// NCCL unique ids of PyTorch's communicators travel through it
// (PyTorch 2.11's c10d; docs/bootstrap.md).
//
// Semantics follow PyTorch's own server: values are bytes, WAIT answers once
// every key is set, GET of an unset key answers empty, ADD keeps decimal
// text. A connection may send VALIDATE first (PyTorch does). When the last
// client disconnects the store forgets every key (a new job starts clean)
// and tells the observer.
//
// Threading: one thread of its own (an EventLoop). Observer callbacks run on
// it, in order, and may call Set() (applied at once). Set(), Snapshot() and
// Stop() may be called from any thread.
#ifndef PRISM_DAEMON_STORE_STORE_SERVER_H_
#define PRISM_DAEMON_STORE_STORE_SERVER_H_

#include <chrono>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "daemon/net/event_loop.h"
#include "daemon/store/tcp_store_protocol.h"

namespace prism::store {

// A connected store client (a real rank's TCPStore, or any other).
struct ClientInfo {
  uint64_t id = 0;
  std::string address;          // "ip:port"
  std::optional<int> pid;
  std::optional<int> rank;      // its RANK (same host only, best effort)
};

class StoreObserver {
 public:
  virtual ~StoreObserver() = default;
  virtual void OnConnected(const ClientInfo& client) = 0;
  // `client` waits for `unset` (the keys of its WAIT not set yet).
  virtual void OnWait(const ClientInfo& client, const std::vector<std::string>& unset) = 0;
  // `client` set `key` (SET, MULTI_SET, a successful COMPARE_SET).
  virtual void OnSet(const ClientInfo& client, const std::string& key, const std::string& value) = 0;
  // The last client disconnected; the keys are forgotten after this returns.
  virtual void OnAllClientsGone() = 0;
};

// A client blocked in WAIT.
struct BlockedWait {
  ClientInfo client;
  std::vector<std::string> keys;                 // still unset
  std::chrono::steady_clock::time_point since;
};

struct StoreSnapshot {
  size_t clients = 0;
  size_t keys = 0;
  std::vector<BlockedWait> waits;
};

struct StoreServerOptions {
  std::string host = "127.0.0.1";  // address to bind
  uint16_t port = 0;               // 0: the kernel's choice
  bool identify_clients = true;    // look up each client's process and RANK
};

class StoreServer {
 public:
  // Binds and starts the thread. `observer` (nullable) must outlive it.
  // Unavailable (naming host:port) when the address cannot be bound.
  static absl::StatusOr<std::unique_ptr<StoreServer>> Start(const StoreServerOptions& options,
                                                            StoreObserver* observer);
  ~StoreServer();
  StoreServer(const StoreServer&) = delete;
  StoreServer& operator=(const StoreServer&) = delete;

  uint16_t port() const { return port_; }
  // Sets `key` as a client's SET would (wakes its waiters).
  void Set(const std::string& key, const std::string& value);
  StoreSnapshot Snapshot() const;
  void Stop();

 private:
  struct Client;
  struct Listener;
  StoreServer(StoreServerOptions options, StoreObserver* observer);
  absl::Status Bind();
  void OnAccept();
  void OnClientIo(Client* c, uint32_t events);
  bool Serve(Client* c, const Request& q);
  void Reply(Client* c, const std::string& bytes);
  void Flush(Client* c);
  void Drop(Client* c);
  void ApplySet(const std::string& key, const std::string& value);
  void WakeWaiters(const std::string& key);
  bool AllSet(const std::vector<std::string>& keys) const;
  void Publish();
  bool OnLoopThread() const { return std::this_thread::get_id() == thread_.get_id(); }

  StoreServerOptions options_;
  StoreObserver* observer_;
  net::EventLoop loop_;
  std::thread thread_;
  std::unique_ptr<Listener> listener_;
  uint16_t port_ = 0;
  std::map<uint64_t, std::unique_ptr<Client>> clients_;
  uint64_t next_client_ = 1;
  std::map<std::string, std::string> kv_;
  std::map<std::string, std::deque<std::string>> queues_;
  std::map<std::string, std::vector<uint64_t>> waiters_;  // key -> clients waiting on it
  mutable std::mutex snapshot_mu_;
  StoreSnapshot snapshot_;
};

}  // namespace prism::store

#endif  // PRISM_DAEMON_STORE_STORE_SERVER_H_
