#include "plugin/ll_lines.h"

#include <cstring>

namespace prism::plugin {

LineProtocol LineProtocolOf(const std::string& proto_name) {
  if (proto_name == "LL") return LineProtocol::kLL;
  if (proto_name == "LL128") return LineProtocol::kLL128;
  return LineProtocol::kSimple;
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

uint64_t ConnStepCounter::StepOf(uint64_t op_id, int32_t step, int32_t steps, int slot) {
  if (op_id != op_id_) {
    op_id_ = op_id;
    base_ = next_;
    if (slot >= 0) {  // the smallest base >= next_ with (base + step) % 8 == slot
      const int64_t want = ((slot - step) % kNcclSteps + kNcclSteps) % kNcclSteps;
      const int64_t have = static_cast<int64_t>(next_ % kNcclSteps);
      base_ = next_ + static_cast<uint64_t>((want - have + kNcclSteps) % kNcclSteps);
    }
    next_ = base_ + static_cast<uint64_t>(steps > 0 ? steps : 0);
  }
  return base_ + static_cast<uint64_t>(step > 0 ? step : 0);
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

}  // namespace prism::plugin
