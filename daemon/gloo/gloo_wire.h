// Gloo's TCP transport, as PyTorch 2.11's ProcessGroupGloo uses it, written
// from a reading of Gloo's public source (docs/bootstrap.md, "Gloo groups"):
//
//  * Store rendezvous: every rank of a Gloo context SETs key "<rank>" (under
//    the context's store prefix) to its rank record: u64 hostname length,
//    hostname, u64 address length, address, then (eager full mesh only) one
//    i64 pair sequence number per rank of the context. An address is a
//    sockaddr_storage (128 bytes) followed by an i64 sequence number (-1 in
//    the record). Every rank then GETs the records it needs.
//  * Pairs: of a pair's two ends, the one whose (ip bytes, port, sequence)
//    compares greater connects to the other's listener and writes the i64
//    sequence number the listener's pair waits for: the peer record's
//    sequence for the connecting rank (eager), or the connecting rank's own
//    rank (lazy init, TORCH_GLOO_LAZY_INIT, or rank-as-sequence). Nothing is
//    answered; the socket is then the pair.
//  * Messages: a 48-byte preamble of six u64 (nbytes = preamble + payload,
//    opcode, slot, offset, length, roffset), then `length` payload bytes for
//    the two SEND opcodes. A send of n bytes on a slot is NOTIFY_SEND_READY
//    (slot, n); the receiver answers NOTIFY_RECV_READY (slot, n) when its
//    receive is posted; then the sender sends SEND_UNBOUND_BUFFER (slot, n)
//    and the bytes. A slot's top byte names the collective.
//
// Integers are host order (little-endian on every host Prism runs on).
// Pure functions and plain values; thread-safe.
#ifndef PRISM_DAEMON_GLOO_GLOO_WIRE_H_
#define PRISM_DAEMON_GLOO_GLOO_WIRE_H_

#include <sys/socket.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace prism::gloo {

inline constexpr size_t kAddressBytes = sizeof(sockaddr_storage) + sizeof(int64_t);  // 136
inline constexpr size_t kPreambleBytes = 6 * sizeof(uint64_t);                        // 48
inline constexpr size_t kSequenceBytes = sizeof(int64_t);

// One rank's record in the store.
struct RankRecord {
  std::string hostname;
  sockaddr_storage address{};           // the rank's listener (AF_INET or AF_INET6)
  std::vector<int64_t> pair_sequences;  // empty under lazy init / rank-as-sequence
};

std::string EncodeRankRecord(const RankRecord& record);
// InvalidArgument naming what is wrong (lengths, address family, size).
absl::StatusOr<RankRecord> DecodeRankRecord(const std::string& bytes);

// "ip:port" of an IPv4/IPv6 socket address, for messages.
std::string AddressText(const sockaddr_storage& address);

// The address every virtual rank publishes: the greatest address of
// `family` (all ones, port 65535), so that in every pair with a real rank
// the real rank is the listening end and prismd the connecting one.
sockaddr_storage HighestAddress(int family);

enum class Opcode : uint64_t {
  kSendBuffer = 0,         // to a bound (registered) buffer: old-style algorithms
  kSendUnboundBuffer = 1,  // the payload of a send
  kNotifySendReady = 2,    // "I have `length` bytes for slot"
  kNotifyRecvReady = 3,    // "my receive of `length` bytes on slot is posted"
};

struct Preamble {
  uint64_t nbytes = 0;
  uint64_t opcode = 0;
  uint64_t slot = 0;
  uint64_t offset = 0;
  uint64_t length = 0;
  uint64_t roffset = 0;
};

void AppendPreamble(std::string* out, const Preamble& p);
Preamble ParsePreamble(const char* bytes);  // kPreambleBytes bytes
// Checks opcode and nbytes against each other; `max_payload` bounds length.
absl::Status CheckPreamble(const Preamble& p, uint64_t max_payload);
// Payload bytes that follow this preamble on the wire.
uint64_t PayloadBytes(const Preamble& p);

// "allreduce", "barrier", ... from the slot's top byte ("slot 0x..." if unknown).
std::string CollectiveOfSlot(uint64_t slot);

}  // namespace prism::gloo

#endif  // PRISM_DAEMON_GLOO_GLOO_WIRE_H_
