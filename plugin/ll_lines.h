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
// operation's chunkSteps (> 1 only for Simple ring collectives), and its
// step s lives in buffer slot (base + s) % NCCL_STEPS.
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

// The buffer slot ((base + step) % NCCL_STEPS) of a receive into `data`
// inside a protocol buffer registered as [base, base + size): -1 when
// `data` is not on a step boundary of it (shared or user buffers).
int StepSlotOf(const void* base, size_t size, const void* data);

// A connection's step counter (the proxy's resources->step).
class ConnStepCounter {
 public:
  // The absolute step of receive `step` of proxy op `op_id` (which has
  // `steps` steps). `slot`: its buffer slot if known (StepSlotOf), else -1
  // (the op's base is then the counter itself: chunkSteps 1). Receives of
  // one op come in order, ops one after another.
  uint64_t StepOf(uint64_t op_id, int32_t step, int32_t steps, int slot);

 private:
  uint64_t next_ = 0;     // the step the next op starts from (before rounding)
  uint64_t op_id_ = 0;    // the op being received (0: none yet)
  uint64_t base_ = 0;     // its first step
};

// Fills `bytes` of `dst` (rounded down to whole lines) with zero data and
// the flag of absolute step `step`.
void WriteLlLines(char* dst, size_t bytes, uint64_t step);
void WriteLl128Lines(char* dst, size_t bytes, uint64_t step);

}  // namespace prism::plugin

#endif  // PRISM_PLUGIN_LL_LINES_H_
