// Which local process is at the other end of an accepted TCP connection, and
// which rank it says it is (its RANK environment variable). Linux only, same
// host only, best effort: asks the kernel's socket diagnostics (netlink
// sock_diag, one lookup by 4-tuple; /proc/net/tcp if that fails) for the
// client socket's uid and inode, then reads /proc/<pid>/fd of the processes
// this user may read.
//
// Thread-safe (reads /proc and netlink only). Finding the process costs one
// pass over /proc/*/fd: call once per connection, not per request.
#ifndef PRISM_DAEMON_STORE_PEER_PROCESS_H_
#define PRISM_DAEMON_STORE_PEER_PROCESS_H_

#include <cstdint>
#include <optional>
#include <string>

namespace prism::store {

struct PeerProcess {
  int pid = 0;
  std::optional<int> rank;   // RANK=... in its environment
  std::string command;       // argv[0]
};

// `client_ip`/`client_port`: the peer's address; `server_ip`/`server_port`:
// ours (IPv4, host order). nullopt when it cannot be told (other host, other
// user, the process is gone).
std::optional<PeerProcess> FindPeerProcess(uint32_t client_ip, uint16_t client_port, uint32_t server_ip,
                                           uint16_t server_port);

// The uid owning the client's socket (any user's; from the same lookup) and,
// with `find_process`, the process as FindPeerProcess tells it. Both nullopt
// when the client is not on this host.
struct PeerInfo {
  std::optional<uint32_t> uid;
  std::optional<PeerProcess> process;
};
PeerInfo DescribePeer(uint32_t client_ip, uint16_t client_port, uint32_t server_ip, uint16_t server_port,
                      bool find_process);

}  // namespace prism::store

#endif  // PRISM_DAEMON_STORE_PEER_PROCESS_H_
