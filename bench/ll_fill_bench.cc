// CPU cost of the flag lines the plugin writes for a virtual peer's LL /
// LL128 ring step (plugin/ll_lines.h), as NCCL's proxy thread pays it:
//   ll_fill_bench [--ranks N] [--bytes B] [--rounds R]
// For a ring all-reduce of B bytes over N ranks (default 8192 ranks, 4
// bytes: a loss / grad-norm all-reduce over the world), times one receive
// step's fill two ways, interleaved in one run:
//   whole: the whole step buffer (NCCL's default LL 64 KiB, LL128 600 KiB),
//          what an empty own send of the step got before 2026-12-02;
//   bound: RingAllReduceStepWireBound(B, N) rounded to whole lines.
// Prints ns per step (median of R rounds of 2 x (N - 1) steps, the receive
// steps of one operation) and the per-operation time, with whole / bound.
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "plugin/ll_lines.h"

namespace {

using prism::plugin::LineProtocol;

int64_t NowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch()).count();
}

// Fills `steps` consecutive step slots of `buffer` (kNcclSteps slots of
// `slot_bytes`) with `fill` bytes of lines each; returns the ns it took.
int64_t FillSteps(LineProtocol protocol, std::vector<char>& buffer, size_t slot_bytes, size_t fill,
                  int64_t steps) {
  const int64_t start = NowNs();
  for (int64_t s = 0; s < steps; ++s) {
    char* dst = buffer.data() + static_cast<size_t>(s % prism::plugin::kNcclSteps) * slot_bytes;
    if (protocol == LineProtocol::kLL)
      prism::plugin::WriteLlLines(dst, fill, static_cast<uint64_t>(s));
    else
      prism::plugin::WriteLl128Lines(dst, fill, static_cast<uint64_t>(s));
  }
  const int64_t took = NowNs() - start;
  // Keep the writes observable.
  volatile char sink = buffer[static_cast<size_t>(steps % prism::plugin::kNcclSteps) * slot_bytes];
  (void)sink;
  return took;
}

double Median(std::vector<int64_t> v) {
  std::sort(v.begin(), v.end());
  return static_cast<double>(v[v.size() / 2]);
}

void Bench(const char* name, LineProtocol protocol, size_t buffer_bytes, size_t line, uint64_t op_bytes,
           int ranks, int rounds) {
  const size_t slot = buffer_bytes / prism::plugin::kNcclSteps;
  const size_t whole = prism::plugin::LineFillBytes(0, slot, line);
  const uint64_t wire = prism::plugin::RingAllReduceStepWireBound(protocol, op_bytes, ranks);
  const size_t bound = prism::plugin::LineFillBytes(wire, slot, line);
  const int64_t steps = 2 * static_cast<int64_t>(ranks - 1);
  std::vector<char> buffer(buffer_bytes, 0);
  std::vector<int64_t> whole_ns, bound_ns;
  for (int r = 0; r < rounds; ++r) {  // interleaved: same cache and clock state
    whole_ns.push_back(FillSteps(protocol, buffer, slot, whole, steps));
    bound_ns.push_back(FillSteps(protocol, buffer, slot, bound, steps));
  }
  const double w = Median(whole_ns), b = Median(bound_ns);
  std::printf("%-5s %d ranks, %llu B all-reduce, %lld receive steps: whole %zu B/step %.0f ns/step "
              "%.2f ms/op | bound %zu B/step %.1f ns/step %.3f ms/op | whole/bound %.0fx\n",
              name, ranks, static_cast<unsigned long long>(op_bytes), static_cast<long long>(steps), whole,
              w / static_cast<double>(steps), w / 1e6, bound, b / static_cast<double>(steps), b / 1e6,
              b > 0 ? w / b : 0.0);
}

}  // namespace

int main(int argc, char** argv) {
  int ranks = 8192, rounds = 9;
  uint64_t bytes = 4;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--ranks")) ranks = std::atoi(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--bytes")) bytes = std::strtoull(argv[i + 1], nullptr, 0);
    else if (!std::strcmp(argv[i], "--rounds")) rounds = std::atoi(argv[i + 1]);
    else {
      std::fprintf(stderr, "unknown option %s; usage: ll_fill_bench [--ranks N] [--bytes B] [--rounds R]\n", argv[i]);
      return 2;
    }
  }
  if (ranks < 2 || rounds < 1) {
    std::fprintf(stderr, "--ranks must be >= 2 and --rounds >= 1\n");
    return 2;
  }
  // NCCL's default buffers (ProtocolBuffers::FromEnv without the variables).
  const prism::plugin::ProtocolBuffers buffers = prism::plugin::ProtocolBuffers::FromEnv();
  Bench("LL", LineProtocol::kLL, buffers.ll, prism::plugin::kLlLineBytes, bytes, ranks, rounds);
  Bench("LL128", LineProtocol::kLL128, buffers.ll128, prism::plugin::kLl128LineBytes, bytes, ranks, rounds);
  return 0;
}
