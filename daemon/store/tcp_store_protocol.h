// PyTorch's TCPStore wire protocol (c10d, as in PyTorch 2.11's libuv
// backend), written from its public description: one request = a 1-byte
// query type and its arguments; integers are host-order (little-endian)
// fixed width, strings and values are a u64 length then the bytes. Only
// some queries get a reply. The first request of a connection is VALIDATE
// with a 32-bit magic.
//
// Pure functions; thread-safe.
#ifndef PRISM_DAEMON_STORE_TCP_STORE_PROTOCOL_H_
#define PRISM_DAEMON_STORE_TCP_STORE_PROTOCOL_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace prism::store {

enum class Query : uint8_t {
  kValidate = 0,   // u32 magic                       no reply
  kSet = 1,        // key, value                      no reply
  kCompareSet = 2, // key, expected, desired          reply: value now stored
  kGet = 3,        // key                             reply: value (empty if unset)
  kAdd = 4,        // key, i64 delta                  reply: i64 sum (stored as decimal text)
  kCheck = 5,      // u64 n, n keys                   reply: u8 CheckReply
  kWait = 6,       // u64 n, n keys                   reply: u8 kStopWaiting once all are set
  kNumKeys = 7,    //                                 reply: i64
  kDeleteKey = 8,  // key                             reply: i64 keys deleted
  kAppend = 9,     // key, value                      no reply
  kMultiGet = 10,  // u64 n, n keys                   reply: n values
  kMultiSet = 11,  // u64 n, n (key, value)           no reply
  kCancelWait = 12,//                                 reply: u8 kWaitCanceled
  kPing = 13,      // u32 nonce                       reply: u32 nonce
  kQueuePush = 14, // key, value                      no reply
  kQueuePop = 15,  // key                             reply: i64 length, then value if length > 0
  kQueueLen = 16,  // key                             reply: i64
  kListKeys = 17,  //                                 reply: i64 n, n keys
  kBarrier = 18,   // key, i64 world size             reply: u8 kStopWaiting once all arrived
};

inline constexpr uint32_t kValidationMagic = 0x3C85F7CE;
inline constexpr uint64_t kMaxKeyBytes = 8 * 1024;
inline constexpr uint64_t kMaxValueBytes = 64 * 1024 * 1024;
inline constexpr uint64_t kMaxKeysPerQuery = 128 * 1024;

enum class WaitReply : uint8_t { kStopWaiting = 0, kWaitCanceled = 1 };
enum class CheckReply : uint8_t { kReady = 0, kNotReady = 1 };

const char* QueryName(Query q);

struct Request {
  Query query = Query::kValidate;
  std::vector<std::string> keys;     // in request order
  std::vector<std::string> values;   // SET/APPEND/QUEUE_PUSH: 1; COMPARE_SET: expected, desired; MULTI_SET: n
  int64_t number = 0;                // ADD delta, BARRIER world size
  uint32_t word = 0;                 // VALIDATE magic, PING nonce
};

// Parses one request from the front of `data`. Returns the bytes it used,
// 0 if `data` holds only part of a request, InvalidArgument for an unknown
// query or a length over the limits (the connection should be closed).
absl::StatusOr<size_t> ParseRequest(const std::string& data, size_t offset, Request* out);

// The client side, for tests and tools: one encoded request.
std::string EncodeRequest(const Request& request);

// Reply builders.
void AppendU8(std::string* out, uint8_t v);
void AppendU32(std::string* out, uint32_t v);
void AppendI64(std::string* out, int64_t v);
void AppendValue(std::string* out, const std::string& bytes);  // u64 length + bytes

}  // namespace prism::store

#endif  // PRISM_DAEMON_STORE_TCP_STORE_PROTOCOL_H_
