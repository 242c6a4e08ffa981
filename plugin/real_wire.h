// What travels on the TCP sockets between two plugin instances (real peers).
//
// Connection: the sender opens `nsocks` sockets to the listen handle's
// address and writes one SocketHello on each; the receiver groups sockets by
// `comm_nonce` and orders them by `index`. Between peers on one host with a
// ring: one socket, whose hello carries the ring's fd and kRingHelloMagic;
// its socket carries only the MessageHeaders, the ring the payloads.
// Messages: socket 0 carries, per message, a MessageHeader followed by
// chunk 0 of the payload; socket j > 0 carries chunk j of each message that
// has more than j chunks, in message order. Chunking is ChunkSpan below,
// computed identically by both sides from (size, nchunks).
#ifndef PRISM_PLUGIN_REAL_WIRE_H_
#define PRISM_PLUGIN_REAL_WIRE_H_

#include <algorithm>
#include <cstdint>

namespace prism::plugin {

// The hello of a connection whose payloads go through a shared-memory ring
// (shared_ring.h): its fd comes with this hello (SCM_RIGHTS, Unix sockets
// only). A distinct magic, so that a plugin without rings drops such a
// connection (the sender's first send then fails) instead of waiting for
// payload bytes that never come over the socket.
inline constexpr uint64_t kRingHelloMagic = 0x31475252534d5250ull;  // "PRMSRRG1"

struct SocketHello {
  uint64_t magic;       // kRealHandleMagic, or kRingHelloMagic
  uint64_t listen_id;   // from the listen handle dialled
  uint64_t comm_nonce;  // random, one per send comm
  uint32_t index;       // 0 .. nsocks-1
  uint32_t nsocks;
};
static_assert(sizeof(SocketHello) == 32);

struct MessageHeader {
  uint64_t size;         // payload bytes
  int32_t tag;
  uint32_t nchunks;      // 1 .. nsocks
  int64_t deliver_ns;    // receiver completes not before this (link model), 0: no shaping
  uint64_t seq;          // per comm, from 0 (diagnostics)
};
static_assert(sizeof(MessageHeader) == 32);

struct ChunkSpan {
  uint64_t offset;
  uint64_t length;
};

inline uint32_t ChunkCount(uint64_t size, uint64_t min_chunk, uint32_t nsocks) {
  if (size <= min_chunk) return 1;
  const uint64_t by_size = (size + min_chunk - 1) / min_chunk;
  return static_cast<uint32_t>(std::min<uint64_t>(by_size, nsocks));
}

inline ChunkSpan ChunkOf(uint64_t size, uint32_t nchunks, uint32_t j) {
  const uint64_t per = (size + nchunks - 1) / nchunks;
  const uint64_t begin = std::min<uint64_t>(size, per * j);
  const uint64_t end = std::min<uint64_t>(size, begin + per);
  return ChunkSpan{begin, end - begin};
}

}  // namespace prism::plugin

#endif  // PRISM_PLUGIN_REAL_WIRE_H_
