// Layouts of the 128-byte NCCL net handles Prism puts on the wire
// (NCCL_NET_HANDLE_MAXSIZE = 128). Both the plugin and prismd read them:
//  - a *real* listen handle, made by the plugin's listen(): real peers dial
//    its TCP address; prismd can also ask the plugin (over the session
//    stream) to accept a virtual sender on it, naming listen_id;
//  - a *virtual* handle, minted by prismd for a virtual receiver: the
//    plugin's connect() recognises the magic and opens a virtual send comm.
// All integers little-endian. Unused bytes are zero.
#ifndef PRISM_COMMON_NET_HANDLES_H_
#define PRISM_COMMON_NET_HANDLES_H_

#include <cstddef>
#include <cstdint>
#include <cstring>

namespace prism {

inline constexpr size_t kNetHandleBytes = 128;
inline constexpr uint64_t kRealHandleMagic = 0x31485250534d5250ull;     // "PRMSPRH1"
inline constexpr uint64_t kVirtualHandleMagic = 0x31485650534d5250ull;  // "PRMSPVH1"

// What the plugin's listen() writes.
struct RealListenHandle {
  uint64_t magic = kRealHandleMagic;
  uint64_t listen_id = 0;        // unique per process lifetime (random high bits)
  uint32_t ipv4_be = 0;          // TCP address real peers dial, network order
  uint16_t port_be = 0;
  uint16_t reserved = 0;
  uint32_t pid = 0;
  uint32_t dev = 0;
  // The listener's host (plugin/host_identity.h): a dialer with the same key
  // connects over the abstract Unix socket the listener also accepts on; 0:
  // TCP only.
  uint64_t host_key = 0;
};
static_assert(sizeof(RealListenHandle) <= kNetHandleBytes);

// What prismd mints for a virtual receiver. A receiver on the real sender's
// own node (in the graph's cluster) carries the node's GPU-to-GPU link: the
// plugin times sends to it on that link, not on its NIC share
// (docs/network-model.md, "Virtual peers on the real rank's node").
struct VirtualHandle {
  uint64_t magic = kVirtualHandleMagic;
  uint64_t conn_id = 0;          // daemon-wide unique connection id
  uint32_t virtual_rank = 0;     // global rank of the virtual receiver (logs)
  uint32_t reserved = 0;
  uint64_t same_node_bits_per_second = 0;  // 0: another node (the plugin's NIC link)
  int64_t same_node_latency_ns = 0;
  bool OnSenderNode() const { return same_node_bits_per_second > 0; }
};
// Where the same-node link sits in the handle (prismd's wire replay skips it).
inline constexpr size_t kVirtualHandleLinkOffset = 24;
inline constexpr size_t kVirtualHandleLinkBytes = 16;
static_assert(sizeof(VirtualHandle) <= kNetHandleBytes);
static_assert(offsetof(VirtualHandle, same_node_bits_per_second) == kVirtualHandleLinkOffset);

inline uint64_t HandleMagic(const void* handle) {
  uint64_t m;
  std::memcpy(&m, handle, sizeof(m));
  return m;
}

}  // namespace prism

#endif  // PRISM_COMMON_NET_HANDLES_H_
