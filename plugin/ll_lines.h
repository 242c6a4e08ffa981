// What a virtual peer's bytes must look like under NCCL's low-latency
// protocols. With LL and LL128 the receiving GPU kernel does not wait for
// the proxy: it polls flags inside the data, which must equal the
// connection's step + 1. So a receive from a virtual peer is filled with
// protocol lines carrying that flag (the data words stay zero), and the
// plugin tracks each connection's step counter as NCCL's proxy does.
//
// Facts from NCCL's source (2.23 .. 2.30, src/device/prims_ll*.h and
// src/transport/net.cc): an LL line is 16 bytes {data1, flag1, data2,
// flag2}, 32-bit flags = uint32(step + 1); an LL128 line is 128 bytes whose
// last 8 bytes are the 64-bit flag step + 1; an operation's proxy steps on
// a connection start at base = the connection's step rounded up to the
// operation's chunkSteps (> 1 only for Simple ring collectives), its step s
// lives in buffer slot (base + s) % NCCL_STEPS of the protocol's buffer
// (Simple p2p: a shared pool instead), and receives are posted every
// sliceSteps steps (> 1 only for Simple ring collectives; the profiler
// numbers them in slices). Consecutive receives on a connection are
// therefore 1 to 5 steps apart, so the buffer slot of each (its address)
// gives its absolute step.
//
// Pure functions and a per-connection value type; not thread-safe (one
// receive comm's owner thread).
#ifndef PRISM_PLUGIN_LL_LINES_H_
#define PRISM_PLUGIN_LL_LINES_H_

#include <cstddef>
#include <cstdint>
#include <string>

namespace prism::plugin {

inline constexpr int kNcclSteps = 8;  // NCCL_STEPS, every release
inline constexpr size_t kLlLineBytes = 16;
inline constexpr size_t kLl128LineBytes = 128;

enum class LineProtocol { kSimple, kLL, kLL128 };

// The profiler's protocol name ("LL", "LL128", "SIMPLE"; anything else:
// Simple).
LineProtocol LineProtocolOf(const std::string& proto_name);

// Without the profiler role (NCCL before 2.27, or no NCCL_PROFILER_PLUGIN)
// a receive's protocol is told by its registered buffer: NCCL registers one
// buffer per protocol and connection, of its protocol's size.
struct ProtocolBuffers {
  size_t ll = 0, ll128 = 0, simple = 0;  // bytes
  // NCCL_LL_BUFFSIZE, NCCL_LL128_BUFFSIZE, NCCL_BUFFSIZE, else NCCL's
  // defaults (512 KiB, 4800 KiB, 4 MiB). Reads the environment: call once.
  static ProtocolBuffers FromEnv();
  // The protocol of a receive into a buffer registered with this size:
  // Simple for any other size (a shared p2p pool, a user buffer).
  LineProtocol ProtocolOf(size_t registered_bytes) const;
  // True when `registered_bytes` is the size of a protocol's own buffer.
  bool IsProtocolBuffer(size_t registered_bytes) const;
};

// The buffer slot ((base + step) % NCCL_STEPS) of a receive into `data`
// inside a protocol buffer registered as [base, base + size): -1 when
// `data` is not on a step boundary of it (shared or user buffers).
int StepSlotOf(const void* base, size_t size, const void* data);

// A connection's step counter, followed receive by receive.
class ConnStepCounter {
 public:
  // The absolute step of the next receive on the connection: receive
  // `slice` (the profiler's step number) of proxy op `op_id`. `slot`: its
  // buffer slot (StepSlotOf) when the buffer is the protocol's own (LL,
  // LL128, Simple collectives); -1 for a shared Simple p2p buffer, whose op
  // then starts right after the previous receive (p2p: one step per slice,
  // chunkSteps 1). `op_id` 0 (no profiler role): every slot-less receive is
  // the step after the previous one. Receives come in posting order.
  uint64_t StepOf(uint64_t op_id, int32_t slice, int slot);

 private:
  uint64_t last_ = UINT64_MAX;  // absolute step of the previous receive (none yet)
  uint64_t op_id_ = 0;          // its op
  uint64_t base_ = 0;           // first step of that op (slot-less ops)
};

// How much of a receive buffer of `max_size` bytes to fill with lines for a
// message of `message_bytes` (0: unknown): the message rounded up to whole
// lines, at most the buffer rounded down to whole lines.
size_t LineFillBytes(uint64_t message_bytes, uint64_t max_size, size_t line_bytes);

// The most wire bytes a virtual predecessor puts into one step of a ring
// all-reduce of `op_bytes` over `nranks` ranks under `protocol`; 0 under
// Simple (no lines). A ring all-reduce's receive cannot take this rank's
// own send of the same step for its size: NCCL cuts each loop of a channel
// into nranks chunks of chunkCount elements, in the last loop chunkCount =
// alignUp(divUp(remaining, nranks), 16 / sizeof(T)), so the chunks are
// equal except the last non-empty one (shorter) and those after it (empty).
// At step s a rank sends chunk c and receives its predecessor's chunk c - 1
// (NCCL v2.28.9-1 src/device/all_reduce.h, runRing), which is the longer
// one when c is that last chunk: 57 floats over 8 ranks are chunks of 8
// and a last one of 1, and rank 0 sends that 1-element chunk (one LL line)
// at step 0 while its predecessor sends it 8 elements (four lines). Any
// chunk holds at most ceil(op_bytes / nranks) + 8 bytes (an element is at
// most 8 bytes), rounded up to 16; an LL line carries 8 of them in 16
// bytes, an LL128 slice 1792 in 2048 (prims_ll.h, prims_ll128.h: the sizes
// their waitSend posts).
inline constexpr size_t kLl128SliceBytes = 2048;
inline constexpr size_t kLl128SliceDataBytes = 1792;
uint64_t RingAllReduceStepWireBound(LineProtocol protocol, uint64_t op_bytes, int nranks);

// Fills `bytes` of `dst` (rounded down to whole lines) with zero data and
// the flag of absolute step `step`.
void WriteLlLines(char* dst, size_t bytes, uint64_t step);
void WriteLl128Lines(char* dst, size_t bytes, uint64_t step);
// Rewrites only the flags of the whole lines in `bytes` of `dst` to those of
// step `step`, keeping their data (a copy of another connection's lines).
void SetLlFlags(char* dst, size_t bytes, uint64_t step);
void SetLl128Flags(char* dst, size_t bytes, uint64_t step);

}  // namespace prism::plugin

#endif  // PRISM_PLUGIN_LL_LINES_H_
