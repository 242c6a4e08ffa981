// Bytes of one receive comm's buffers (host or GPU memory) that the plugin
// zeroed and has not written since, so that a zero fill
// (PRISM_RECV_FILL=zeros, and own outside all-gathers) need not write them
// again. Host memory is zeroed here (Zero); GPU memory by the caller, gap by
// gap (Gaps, then Remember).
//
// Why that is sound: NCCL's kernel only reads a net receive buffer (NCCL
// v2.28.9-1 src/transport/net.cc: a receive connection's buffers are
// written by the net plugin's irecv and read by the kernel, which reports
// consumption through the head counter, elsewhere), and a virtual peer's
// bytes are the plugin's own. Bytes the plugin zeroed therefore stay zero
// until the plugin itself writes them -- as long as no other comm writes
// the same memory. The caller keeps that premise (VirtualRecvComm, the
// "Zero once" paragraph of docs/plugin.md): only the
// Simple protocol's own buffer of a collective's connection (a shared p2p
// pool is written by other comms), and every other write of the plugin into
// a tracked buffer (pattern, own payload, LL/LL128 lines) calls Written
// first, as does deregMr of the region (the memory may be freed and reused).
//
// Not thread-safe: one comm's calls come from one thread (comm.h).
#ifndef PRISM_PLUGIN_ZEROED_RANGES_H_
#define PRISM_PLUGIN_ZEROED_RANGES_H_

#include <cstddef>
#include <cstdint>
#include <map>
#include <utility>
#include <vector>

namespace prism::plugin {

class ZeroedRanges {
 public:
  // Zeroes the bytes of [p, p + n) not already known to be zero and
  // remembers the whole range as zero; the bytes it wrote (0: none).
  uint64_t Zero(char* p, uint64_t n);
  // The parts of [p, p + n) not known to be zero, as (offset from p,
  // length), lowest first.
  std::vector<std::pair<uint64_t, uint64_t>> Gaps(const char* p, uint64_t n) const;
  // [p, p + n) holds zeros now (the caller wrote its gaps): remembered.
  void Remember(const char* p, uint64_t n);
  // [p, p + n) is about to hold other bytes (or to be freed): forgotten.
  void Written(const char* p, uint64_t n);
  // True when every byte of [p, p + n) is known to be zero.
  bool Covers(const char* p, uint64_t n) const;
  // Disjoint, non-adjacent ranges known to be zero.
  size_t ranges() const { return ranges_.size(); }

 private:
  std::map<uintptr_t, uintptr_t> ranges_;  // start -> end (exclusive)
};

}  // namespace prism::plugin

#endif  // PRISM_PLUGIN_ZEROED_RANGES_H_
