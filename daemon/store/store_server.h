// A PyTorch TCPStore server hosted by prismd (tcp_store_protocol.h), so that
// prismd sees which keys the real ranks wait for and which they set: the
// NCCL unique ids of PyTorch's communicators travel through it
// (PyTorch 2.11's c10d; docs/bootstrap.md).
//
// Semantics follow PyTorch's own server: values are bytes, WAIT answers once
// every key is set, GET of an unset key answers empty, ADD keeps decimal
// text. A connection must send VALIDATE first (PyTorch does, at once);
// until then it is not a client: the observer does not hear of it, its
// process is not looked up, and it is closed after StoreLimits'
// handshake_timeout or when max_unvalidated newer ones wait. When the last
// client disconnects the store forgets every key (a new job starts clean)
// and tells the observer.
//
// A client on this host whose socket belongs to another uid than prismd's is
// refused at its VALIDATE (StoreServerOptions::same_user_only): another
// user cannot hold client slots, keys or waits.
//
// Limits (StoreLimits; another local user can reach the port): at most
// max_connections connections, and never more than a quarter of the
// process's open-file limit (then the listener pauses until one closes),
// stored keys and values together at most max_stored_bytes (what prismd
// itself Set()s does not count), requests being
// received and replies not yet read together at most max_buffered_bytes. A
// request over a limit, or an ADD whose sum leaves int64, closes its
// connection with a warning naming the limit. When accept runs out of file
// descriptors the listener pauses with back-off instead of spinning.
//
// Threading: one thread of its own (an EventLoop). Observer callbacks run on
// it, in order, and may call Set() (applied at once). ObserverFanout passes
// every callback to several observers, in order. Set(), Snapshot() and
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
#include <string>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "daemon/net/event_loop.h"
#include "daemon/store/store_table.h"
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
  // `client` reads `keys` (GET, WAIT, MULTI_GET), set or not, before the
  // store answers: a Set() from here answers this very read.
  virtual void OnRead(const ClientInfo& client, const std::vector<std::string>& keys) {}
  // The last client disconnected; the keys are forgotten after this returns.
  virtual void OnAllClientsGone() = 0;
};

// Several observers of one store, called in the order given (each must
// outlive the fan-out).
class ObserverFanout : public StoreObserver {
 public:
  explicit ObserverFanout(std::vector<StoreObserver*> observers) : observers_(std::move(observers)) {}
  void OnConnected(const ClientInfo& c) override {
    for (auto* o : observers_) o->OnConnected(c);
  }
  void OnWait(const ClientInfo& c, const std::vector<std::string>& unset) override {
    for (auto* o : observers_) o->OnWait(c, unset);
  }
  void OnSet(const ClientInfo& c, const std::string& key, const std::string& value) override {
    for (auto* o : observers_) o->OnSet(c, key, value);
  }
  void OnRead(const ClientInfo& c, const std::vector<std::string>& keys) override {
    for (auto* o : observers_) o->OnRead(c, keys);
  }
  void OnAllClientsGone() override {
    for (auto* o : observers_) o->OnAllClientsGone();
  }

 private:
  std::vector<StoreObserver*> observers_;
};

// A client blocked in WAIT.
struct BlockedWait {
  ClientInfo client;
  std::vector<std::string> keys;                 // still unset
  std::chrono::steady_clock::time_point since;
};

struct StoreSnapshot {
  size_t clients = 0;         // validated connections
  size_t unvalidated = 0;     // connections that have not sent VALIDATE yet
  uint64_t stored_bytes = 0;  // keys + values + queued items (StoreLimits::max_stored_bytes)
  uint64_t accept_pauses = 0; // times accept ran out of fds and the listener paused
  size_t keys = 0;
  std::vector<BlockedWait> waits;
};

struct StoreLimits {
  size_t max_connections = 512;     // open connections, validated or not
  size_t max_unvalidated = 64;      // beyond: the oldest connection not yet VALIDATEd is closed
  std::chrono::milliseconds handshake_timeout{10000};  // VALIDATE must come within this
  uint64_t max_stored_bytes = uint64_t{256} << 20;     // keys + values + queued items
  uint64_t max_buffered_bytes = uint64_t{256} << 20;   // unparsed requests + unsent replies, all connections
  std::chrono::milliseconds accept_backoff{100};       // first pause when accept runs out of fds
};

struct StoreServerOptions {
  std::string host = "127.0.0.1";  // address to bind
  uint16_t port = 0;               // 0: the kernel's choice
  bool identify_clients = true;    // look up each client's process and RANK (after VALIDATE)
  bool same_user_only = true;      // refuse, at VALIDATE, a client of this host running as another uid
  StoreLimits limits;
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
  void PauseListener(std::chrono::milliseconds for_how_long);
  void ResumeListener();
  bool AtCapacity() const;
  void AdmitUnvalidated(Client* c);
  bool OnValidated(Client* c);
  void OnClientIo(Client* c, uint32_t events);
  bool ReadInput(Client* c);
  bool Serve(Client* c, const Request& q);
  bool Storable(Client* c, uint64_t adding, uint64_t removing);
  void Account(Client* c);
  void Reply(Client* c, const std::string& bytes);
  void Flush(Client* c);
  void Drop(Client* c);
  void ApplySet(const std::string& key, const std::string& value, bool by_prismd = false);
  void WakeWaiters(const std::string& key);
  void Publish();
  bool OnLoopThread() const { return std::this_thread::get_id() == thread_.get_id(); }

  StoreServerOptions options_;
  StoreObserver* observer_;
  net::EventLoop loop_;
  std::thread thread_;
  std::unique_ptr<Listener> listener_;
  uint16_t port_ = 0;
  std::map<uint64_t, std::unique_ptr<Client>> clients_;  // every open connection
  uint64_t next_client_ = 1;
  size_t validated_ = 0;                    // open connections that sent VALIDATE
  std::deque<uint64_t> unvalidated_;        // ids in accept order (closed ones skipped lazily)
  size_t unvalidated_open_ = 0;
  uint64_t buffered_bytes_ = 0;             // Client::held summed
  bool listener_paused_ = false;
  bool cap_warned_ = false;                 // said the connection cap was reached (until below half)
  bool listener_exhausted_ = false;         // accept ran out of fds; said so once
  int accept_backoff_ms_ = 0;
  uint64_t accept_pauses_ = 0;
  StoreTable table_;                        // keys, values, queues and their bytes
  std::map<std::string, std::vector<uint64_t>> waiters_;  // key -> clients waiting on it
  mutable std::mutex snapshot_mu_;
  StoreSnapshot snapshot_;
};

}  // namespace prism::store

#endif  // PRISM_DAEMON_STORE_STORE_SERVER_H_
