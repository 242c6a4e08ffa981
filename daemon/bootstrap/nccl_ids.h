// NCCL's 64-bit hash, commHash, ncclUniqueId and socket-address encoding
// (docs/bootstrap.md). Pure functions, thread-safe.
#ifndef PRISM_DAEMON_BOOTSTRAP_NCCL_IDS_H_
#define PRISM_DAEMON_BOOTSTRAP_NCCL_IDS_H_

#include <netinet/in.h>

#include <array>
#include <cstdint>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"

namespace prism::bootstrap {

inline constexpr uint64_t kNcclMagic = 0x0280028002800280ull;  // ids from NCCL_COMM_ID
inline constexpr size_t kSockAddrBytes = 28;                   // union ncclSocketAddress
// ncclUniqueId, every release 2.21..2.30: 128 bytes, magic (8), then the
// root's address (2.29+ also put nRanks at 36, which prismd never writes).
inline constexpr size_t kUniqueIdAddrOffset = 8;
inline constexpr int32_t kSocketTypeBootstrap = 1;
inline constexpr int32_t kSocketTypeProxy = 2;  // any type but 1 is fatal on a bootstrap listener
inline constexpr int32_t kSplitNoColor = -1;                   // NCCL_SPLIT_NOCOLOR

using UniqueId = std::array<uint8_t, 128>;
using SockAddrBytes = std::array<uint8_t, kSockAddrBytes>;

// NCCL's streaming hash: two accumulators start at {1, 1}; every Eat() is one
// separate feed (feeds are not equivalent to one feed of the concatenation).
class NcclHasher {
 public:
  NcclHasher& Eat(const void* data, size_t size);
  template <typename T>
  NcclHasher& EatValue(const T& v) { return Eat(&v, sizeof(v)); }
  uint64_t Digest() const;

 private:
  uint64_t a0_ = 1, a1_ = 1;
};

inline uint64_t NcclHash(const void* data, size_t size) {
  return NcclHasher().Eat(data, size).Digest();
}

// How an NCCL release derives commHash, which is also the magic of a split
// child's bootstrap sockets (a wrong one is refused by the real rank).
enum class CommHashScheme {
  // <= 2.23: DJB2a (h = h * 33 ^ signed char) over the 128 id bytes; a split
  // child hashes the 128-byte zero-padded text "%016lx-%d" {parent, color}.
  kDjb2aColor,
  // 2.24 and 2.25: as above, the child's text "%016lx-%d-%d" {parent,
  // splitCount, color}.
  kDjb2aCountColor,
  // 2.26+: NcclHasher over the 128 id bytes; a child hashes the three values
  // {parent hash (8 B), splitCount (4 B), color (4 B)}, one feed each.
  kAccumulator,
};

// DJB2a over `size` bytes, each byte read as a signed char (x86).
uint64_t Djb2aHash(const void* data, size_t size);

// commHash of a communicator created from `id` (hash of all 128 bytes).
uint64_t CommHashOfId(const UniqueId& id, CommHashScheme scheme);
// commHash of a split child of `parent_hash` (`split_count`: the parent's
// ncclCommSplit calls so far, this one included).
uint64_t ChildCommHash(uint64_t parent_hash, int32_t split_count, int32_t color, CommHashScheme scheme);

// IPv4 endpoint in host order.
struct Ipv4Endpoint {
  uint32_t ip = 0;      // host order, e.g. 0x7f000001
  uint16_t port = 0;
  bool operator==(const Ipv4Endpoint&) const = default;
};
std::string ToString(const Ipv4Endpoint& e);
// The kernel's form of `e` (AF_INET, network order), and back.
sockaddr_in ToSockaddr(const Ipv4Endpoint& e);
Ipv4Endpoint FromSockaddr(const sockaddr_in& a);
// "host:port" with a dotted IPv4 host or a resolvable name.
absl::StatusOr<Ipv4Endpoint> ParseHostPort(std::string_view host_port);

// sockaddr_in bytes as NCCL puts them on the wire (family LE, port/addr BE).
SockAddrBytes EncodeSockAddr(const Ipv4Endpoint& e);
// InvalidArgument unless an AF_INET address.
absl::StatusOr<Ipv4Endpoint> DecodeSockAddr(const uint8_t* bytes28);
bool IsAllZero(const uint8_t* data, size_t size);

// The id NCCL builds for NCCL_COMM_ID=host:port (magic NCCL_MAGIC).
UniqueId UniqueIdForCommId(const Ipv4Endpoint& root);
uint64_t UniqueIdMagic(const UniqueId& id);
absl::StatusOr<Ipv4Endpoint> UniqueIdRoot(const UniqueId& id);

}  // namespace prism::bootstrap

#endif  // PRISM_DAEMON_BOOTSTRAP_NCCL_IDS_H_
