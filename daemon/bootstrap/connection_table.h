// Every socket of the bootstrap emulation (internal header): listeners,
// accepted and outbound connections, the virtual endpoints' addresses, and
// the limits that keep a hostile or broken peer from exhausting prismd.
//
// Ownership: the table owns every Conn and listener fd; a Conn* stays valid
// until the loop iteration after Close() (closed conns are reaped by a
// zero-delay timer), so callers may keep using it within one event.
// Threading: loop thread only (the EventLoop passed in).
// Events go to the ConnEvents given at construction; the table never
// interprets payload bytes.
#ifndef PRISM_DAEMON_BOOTSTRAP_CONNECTION_TABLE_H_
#define PRISM_DAEMON_BOOTSTRAP_CONNECTION_TABLE_H_

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "daemon/net/event_loop.h"
#include "daemon/bootstrap/nccl_ids.h"
#include "daemon/bootstrap/reporter.h"
#include "daemon/bootstrap/wire_recorder.h"

namespace prism::bootstrap {

enum class EndpointKind : uint8_t {
  kRootDelivery,  // a virtual rank's root listener (a real root delivers its ring info)
  kRing,          // a virtual rank's ring listener (its real predecessor connects)
  kP2p,           // a virtual rank's P2P bootstrap listener
  kRootHost,      // a root prismd hosts for one communicator (real ranks check in)
};

// What a virtual endpoint address stands for.
struct EndpointRef {
  uint32_t comm = 0;   // LiveComm::live_id
  int32_t rank = 0;    // comm rank
  EndpointKind kind = EndpointKind::kP2p;
};

enum class ConnRole : uint8_t {
  kAcceptedUnknown,  // accepted on a virtual endpoint, 12-byte header pending
  kRootIn,           // accepted on a prismd-hosted root: a real rank's check-in
  kRootDeliveryIn,   // a real root delivering "next ring info" to a virtual rank
  kRingFromRealPrev, // real R -> virtual R+1 (R's next socket)
  kRingToRealNext,   // virtual V -> real V+1 (V's next socket)
  kP2pIn,            // bootstrapSend from a real rank to a virtual rank
  kOneShotOut,       // check-in / root delivery / bootstrapSend to a real rank
};

class ConnectionTable;

struct Conn : net::IoHandler {
  ConnectionTable* table = nullptr;
  uint64_t id = 0;
  int fd = -1;
  ConnRole role = ConnRole::kAcceptedUnknown;
  bool accepted = false;        // prismd accepted it (vs connected out)
  bool identified = false;      // accepted: its header was valid
  bool connecting = false;
  bool close_after_flush = false;
  bool dead = false;
  bool eof = false;
  Ipv4Endpoint local, remote;
  uint32_t comm = 0;            // LiveComm::live_id
  int32_t rank = -1;            // virtual comm rank this conn belongs to
  uint64_t expect_magic = 0;
  std::string in;
  size_t in_off = 0;
  std::string out;
  size_t out_off = 0;
  std::string note;             // for logs and recordings ("checkin v3", ...)
  bool checkin = false;         // a virtual rank's check-in to a real root
  int attempts = 0;             // outbound connect retries
  std::chrono::steady_clock::time_point give_up;
  void OnIo(uint32_t events) override;
  size_t Available() const { return in.size() - in_off; }
};

// What the table reports; implemented by the protocol side.
class ConnEvents {
 public:
  virtual ~ConnEvents() = default;
  // New bytes arrived on `c` (also called after an outbound connect).
  virtual void OnInput(Conn& c) = 0;
  // The peer closed `c` or it broke; `c` is still open, the handler closes it.
  virtual void OnEof(Conn& c) = 0;
  // An outbound connect failed for good (`gave_up`: retried until the
  // deadline; otherwise a non-transient error). `c` is closed afterwards.
  virtual void OnConnectFailed(Conn& c, const std::string& why, bool gave_up) = 0;
  // `c` was closed (once, by anyone; not called for conns that failed to connect
  // with a non-transient error).
  virtual void OnClosed(Conn& c) = 0;
};

// Which peers and how many connections the listeners accept.
struct ConnectionLimits {
  // Peers whose IPv4 address is in one of these (address, prefix length)
  // ranges; empty = any peer.
  std::vector<std::pair<uint32_t, int>> allowed_peers;
  // Accepted connections must be dialled to a loopback address (alias mode).
  bool loopback_only = true;
  int max_unidentified = 256;      // accepted, header not yet valid
  int max_connections = 8192;      // all open connections
  std::chrono::milliseconds header_timeout{10000};
  std::chrono::milliseconds accept_backoff{100};   // first pause when accept4 fails
  std::chrono::milliseconds connect_timeout{600000};  // outbound retries
};

// "a.b.c.d/len" or "a.b.c.d"; InvalidArgument otherwise.
absl::StatusOr<std::pair<uint32_t, int>> ParseCidr(const std::string& text);

class ConnectionTable {
 public:
  enum class ListenerKind : uint8_t { kEndpoints, kRoot };

  ConnectionTable(net::EventLoop& loop, Reporter& reporter, ConnEvents& events);
  ~ConnectionTable();
  ConnectionTable(const ConnectionTable&) = delete;
  ConnectionTable& operator=(const ConnectionTable&) = delete;

  void set_limits(ConnectionLimits limits) { limits_ = std::move(limits); }
  void set_recorder(WireRecorder* recorder) { recorder_ = recorder; }

  // Binds and registers a listener. kEndpoints: connections are matched to
  // virtual endpoints by the address they were dialled to; kRoot: they are
  // check-ins to a prismd-hosted root (role kRootIn). Returns the bound
  // address (port chosen by the kernel when `at.port` is 0).
  absl::StatusOr<Ipv4Endpoint> Listen(const Ipv4Endpoint& at, ListenerKind kind);
  // Sets how endpoint addresses are allocated: aliases 127.64/10 on
  // `shared_port` (one listener), or one listener per endpoint on `ip`.
  void UseAliasEndpoints(uint16_t shared_port);
  void UsePortPerEndpoint(uint32_t ip);

  absl::StatusOr<Ipv4Endpoint> AllocEndpoint(const EndpointRef& ref);
  void FreeEndpoint(const Ipv4Endpoint& e);
  // Points an allocated endpoint at another (comm, rank, kind).
  void Retarget(const Ipv4Endpoint& e, const EndpointRef& ref);
  const EndpointRef* FindEndpoint(const Ipv4Endpoint& local) const;
  // True if prismd may dial `ip` for a real rank (same policy as accepting).
  bool DialAllowed(uint32_t ip) const;

  // Connects to `to`, writes the 12-byte bootstrap header then `payload`;
  // refused connects are retried until connect_timeout. kOneShotOut
  // connections close once everything is written.
  Conn* ConnectOut(const Ipv4Endpoint& to, ConnRole role, uint64_t magic, std::string payload,
                   uint32_t comm, int32_t rank, const std::string& note,
                   int32_t socket_type = kSocketTypeBootstrap);
  void Send(Conn* c, const std::string& bytes);
  // Marks an accepted connection as a real rank's (its header was valid).
  void Identify(Conn* c);
  void Close(Conn* c);
  void CloseAll();
  Conn* Find(uint64_t id);  // nullptr when closed

  size_t open_connections() const { return conns_.size(); }

 private:
  struct Listener : net::IoHandler {
    ConnectionTable* table = nullptr;
    int fd = -1;
    ListenerKind kind = ListenerKind::kEndpoints;
    bool paused = false;
    bool exhausted = false;  // accept4 ran out of fds/memory; said so once
    int backoff_ms = 0;
    void OnIo(uint32_t) override { table->OnAccept(this); }
  };
  friend struct Conn;

  void OnAccept(Listener* l);
  void OnAcceptExhausted(Listener* l, int err);
  bool AtCapacity() const;
  void Pause(Listener* l, std::chrono::milliseconds for_how_long);
  void ResumeAll();
  bool PeerAllowed(const Ipv4Endpoint& local, const Ipv4Endpoint& remote) const;
  void ArmHeaderTimeout(uint64_t id);
  Conn* NewConn(int fd, ConnRole role, const std::string& note);
  void StartConnect(Conn* c);
  void RetryConnect(Conn* c);
  void Flush(Conn* c);
  void OnConnIo(Conn* c, uint32_t events);
  void ReadAll(Conn* c, bool* eof);

  net::EventLoop& loop_;
  Reporter& reporter_;
  ConnEvents& events_;
  WireRecorder* recorder_ = nullptr;
  ConnectionLimits limits_;
  std::vector<std::unique_ptr<Listener>> listeners_;
  std::map<std::pair<uint32_t, uint16_t>, std::unique_ptr<Listener>> endpoint_listeners_;
  std::map<std::pair<uint32_t, uint16_t>, EndpointRef> endpoints_;
  bool alias_mode_ = true;
  uint16_t shared_port_ = 0;
  uint32_t endpoint_ip_ = 0;
  uint32_t next_alias_ = 1;
  std::map<uint64_t, std::unique_ptr<Conn>> conns_;
  std::vector<std::unique_ptr<Conn>> graveyard_;
  bool reap_scheduled_ = false;
  uint64_t next_conn_id_ = 1;
  int unidentified_ = 0;
  int paused_ = 0;  // listeners out of epoll
  bool cap_warned_ = false;
};

}  // namespace prism::bootstrap

#endif  // PRISM_DAEMON_BOOTSTRAP_CONNECTION_TABLE_H_
