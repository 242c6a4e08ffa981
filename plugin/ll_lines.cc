#include "plugin/ll_lines.h"

#include <cstdlib>
#include <cstring>

namespace prism::plugin {

LineProtocol LineProtocolOf(const std::string& proto_name) {
  if (proto_name == "LL") return LineProtocol::kLL;
  if (proto_name == "LL128") return LineProtocol::kLL128;
  return LineProtocol::kSimple;
}

namespace {

size_t BufferSize(const char* env, size_t fallback) {
  const char* v = std::getenv(env);
  if (v == nullptr || *v == '\0') return fallback;
  char* end = nullptr;
  const long long n = std::strtoll(v, &end, 0);
  return end != v && n > 0 ? static_cast<size_t>(n) : fallback;
}

}  // namespace

ProtocolBuffers ProtocolBuffers::FromEnv() {
  ProtocolBuffers b;
  b.ll = BufferSize("NCCL_LL_BUFFSIZE", 8 * 512 * kNcclSteps * kLlLineBytes);
  b.ll128 = BufferSize("NCCL_LL128_BUFFSIZE", 120 * 640 * kNcclSteps * 8);
  b.simple = BufferSize("NCCL_BUFFSIZE", size_t{1} << 22);
  return b;
}

LineProtocol ProtocolBuffers::ProtocolOf(size_t registered_bytes) const {
  if (registered_bytes == ll) return LineProtocol::kLL;
  if (registered_bytes == ll128) return LineProtocol::kLL128;
  return LineProtocol::kSimple;
}

bool ProtocolBuffers::IsProtocolBuffer(size_t registered_bytes) const {
  return registered_bytes == ll || registered_bytes == ll128 || registered_bytes == simple;
}

int StepSlotOf(const void* base, size_t size, const void* data) {
  const auto* b = static_cast<const char*>(base);
  const auto* d = static_cast<const char*>(data);
  const size_t step_bytes = size / kNcclSteps;
  if (b == nullptr || step_bytes == 0 || d < b || d >= b + step_bytes * kNcclSteps) return -1;
  const size_t off = static_cast<size_t>(d - b);
  if (off % step_bytes != 0) return -1;
  return static_cast<int>(off / step_bytes);
}

uint64_t ConnStepCounter::StepOf(uint64_t op_id, int32_t slice, int slot) {
  const uint64_t first = last_ + 1;  // wraps to 0 before the first receive
  uint64_t step;
  if (slot >= 0) {  // the first step from `first` on that sits in `slot`
    const uint64_t ahead = (static_cast<uint64_t>(slot) + kNcclSteps - first % kNcclSteps) % kNcclSteps;
    step = first + ahead;
  } else {
    if (op_id == 0 || op_id != op_id_ || last_ == UINT64_MAX) base_ = first;
    if (op_id == 0) slice = 0;
    step = base_ + static_cast<uint64_t>(slice > 0 ? slice : 0);
  }
  op_id_ = op_id;
  last_ = step;
  return step;
}

size_t LineFillBytes(uint64_t message_bytes, uint64_t max_size, size_t line_bytes) {
  const uint64_t whole = max_size / line_bytes * line_bytes;
  if (message_bytes == 0) return static_cast<size_t>(whole);
  const uint64_t lines = (message_bytes + line_bytes - 1) / line_bytes * line_bytes;
  return static_cast<size_t>(lines < whole ? lines : whole);
}

uint64_t RingAllReduceStepWireBound(LineProtocol protocol, uint64_t op_bytes, int nranks) {
  if (protocol == LineProtocol::kSimple) return 0;
  const uint64_t n = nranks > 0 ? static_cast<uint64_t>(nranks) : 1;
  const uint64_t chunk = ((op_bytes + n - 1) / n + 8 + 15) / 16 * 16;  // data bytes, whole 16-byte units
  if (protocol == LineProtocol::kLL) return chunk / 8 * kLlLineBytes;
  return (chunk + kLl128SliceDataBytes - 1) / kLl128SliceDataBytes * kLl128SliceBytes;
}

void WriteLlLines(char* dst, size_t bytes, uint64_t step) {
  const uint32_t flag = static_cast<uint32_t>(step + 1);
  const uint32_t line[4] = {0, flag, 0, flag};
  for (size_t off = 0; off + kLlLineBytes <= bytes; off += kLlLineBytes) std::memcpy(dst + off, line, kLlLineBytes);
}

void WriteLl128Lines(char* dst, size_t bytes, uint64_t step) {
  const uint64_t flag = step + 1;
  for (size_t off = 0; off + kLl128LineBytes <= bytes; off += kLl128LineBytes) {
    std::memset(dst + off, 0, kLl128LineBytes - 8);
    std::memcpy(dst + off + kLl128LineBytes - 8, &flag, 8);
  }
}

void SetLlFlags(char* dst, size_t bytes, uint64_t step) {
  const uint32_t flag = static_cast<uint32_t>(step + 1);
  for (size_t off = 0; off + kLlLineBytes <= bytes; off += kLlLineBytes) {
    std::memcpy(dst + off + 4, &flag, 4);
    std::memcpy(dst + off + 12, &flag, 4);
  }
}

void SetLl128Flags(char* dst, size_t bytes, uint64_t step) {
  const uint64_t flag = step + 1;
  for (size_t off = 0; off + kLl128LineBytes <= bytes; off += kLl128LineBytes)
    std::memcpy(dst + off + kLl128LineBytes - 8, &flag, 8);
}

}  // namespace prism::plugin
