// LL/LL128 lines and the connection step counter (plugin/ll_lines.h),
// against NCCL's formulas: flag = step + 1, base = the connection's step
// rounded to the op's chunkSteps, buffer slot = (base + step) % 8.
#include "plugin/ll_lines.h"

#include <catch2/catch.hpp>
#include <cstdlib>
#include <cstring>
#include <vector>

namespace prism::plugin {
namespace {

uint32_t U32At(const std::vector<char>& b, size_t off) {
  uint32_t v;
  std::memcpy(&v, b.data() + off, 4);
  return v;
}
uint64_t U64At(const std::vector<char>& b, size_t off) {
  uint64_t v;
  std::memcpy(&v, b.data() + off, 8);
  return v;
}

TEST_CASE("LL lines carry flag step+1 in both 32-bit flag words, zero data", "[ll]") {
  std::vector<char> b(72, 'x');  // 4 whole lines and 8 bytes left alone
  WriteLlLines(b.data(), b.size(), 41);
  for (size_t line = 0; line < 4; ++line) {
    CHECK(U32At(b, 16 * line) == 0);
    CHECK(U32At(b, 16 * line + 4) == 42);
    CHECK(U32At(b, 16 * line + 8) == 0);
    CHECK(U32At(b, 16 * line + 12) == 42);
  }
  CHECK(b[64] == 'x');
  WriteLlLines(b.data(), 16, (uint64_t{1} << 32) + 6);  // NCCL_LL_FLAG is uint32(step + 1)
  CHECK(U32At(b, 4) == 7);
}

TEST_CASE("LL128 lines carry the 64-bit flag step+1 in their last 8 bytes", "[ll]") {
  std::vector<char> b(256 + 100, 'x');
  WriteLl128Lines(b.data(), b.size(), (uint64_t{1} << 32) + 9);
  for (size_t line = 0; line < 2; ++line) {
    for (size_t off = 0; off < 120; off += 8) CHECK(U64At(b, 128 * line + off) == 0);
    CHECK(U64At(b, 128 * line + 120) == (uint64_t{1} << 32) + 10);
  }
  CHECK(b[256] == 'x');
}

TEST_CASE("only the message's lines are filled, within the buffer", "[ll]") {
  CHECK(LineFillBytes(4096, 65536, 16) == 4096);
  CHECK(LineFillBytes(4100, 65536, 16) == 4112);        // rounded up to a line
  CHECK(LineFillBytes(1000, 614400, 128) == 1024);
  CHECK(LineFillBytes(0, 614400, 128) == 614400);       // size unknown: the buffer
  CHECK(LineFillBytes(1 << 20, 65536, 16) == 65536);    // never past the buffer
  CHECK(LineFillBytes(100, 120, 16) == 112);            // the buffer in whole lines
}

TEST_CASE("the profiler's protocol names choose the line format", "[ll]") {
  CHECK(LineProtocolOf("LL") == LineProtocol::kLL);
  CHECK(LineProtocolOf("LL128") == LineProtocol::kLL128);
  CHECK(LineProtocolOf("SIMPLE") == LineProtocol::kSimple);
  CHECK(LineProtocolOf("") == LineProtocol::kSimple);
}

TEST_CASE("a receive's buffer slot comes from its address in the protocol buffer", "[ll]") {
  std::vector<char> buf(8 * 4096);
  CHECK(StepSlotOf(buf.data(), buf.size(), buf.data()) == 0);
  CHECK(StepSlotOf(buf.data(), buf.size(), buf.data() + 3 * 4096) == 3);
  CHECK(StepSlotOf(buf.data(), buf.size(), buf.data() + 7 * 4096) == 7);
  CHECK(StepSlotOf(buf.data(), buf.size(), buf.data() + 100) == -1);     // not a step boundary
  CHECK(StepSlotOf(buf.data(), buf.size(), buf.data() + 8 * 4096) == -1);  // outside
  CHECK(StepSlotOf(nullptr, 0, buf.data()) == -1);
}

TEST_CASE("the connection step counter follows NCCL's proxy across ops and protocols", "[ll]") {
  ConnStepCounter c;
  // A Simple ring op of 6 steps, sliceSteps 2: receives at steps 0, 2, 4
  // (the profiler's slices 0, 1, 2), slots 0, 2, 4.
  CHECK(c.StepOf(1, 0, 0) == 0);
  CHECK(c.StepOf(1, 1, 2) == 2);
  CHECK(c.StepOf(1, 2, 4) == 4);
  // An LL op of 3 steps (chunkSteps 1) starts at 6: slots 6, 7, 0.
  CHECK(c.StepOf(2, 0, 6) == 6);
  CHECK(c.StepOf(2, 1, 7) == 7);
  CHECK(c.StepOf(2, 2, 0) == 8);
  // The next Simple ring op (chunkSteps 4) is rounded up from 9 to 12: its
  // first receive sits in slot 4, which says so.
  CHECK(c.StepOf(3, 0, 4) == 12);
  CHECK(c.StepOf(3, 1, 6) == 14);
  // The whole 8 slots ahead is never a receive's distance: 16 follows 14.
  CHECK(c.StepOf(4, 0, 0) == 16);
}

TEST_CASE("shared-pool p2p receives (no slot) count one step per slice from the previous receive", "[ll]") {
  ConnStepCounter c;
  CHECK(c.StepOf(1, 0, -1) == 0);   // Simple p2p, 3 steps
  CHECK(c.StepOf(1, 1, -1) == 1);
  CHECK(c.StepOf(1, 2, -1) == 2);
  CHECK(c.StepOf(2, 0, 3) == 3);    // an LL p2p op in its own buffer: slot 3
  CHECK(c.StepOf(3, 0, -1) == 4);   // Simple again
  CHECK(c.StepOf(3, 1, -1) == 5);
  CHECK(c.StepOf(4, 0, 6) == 6);
}

TEST_CASE("without the profiler the registered buffer's size tells the protocol", "[ll]") {
  unsetenv("NCCL_LL_BUFFSIZE");
  unsetenv("NCCL_LL128_BUFFSIZE");
  unsetenv("NCCL_BUFFSIZE");
  const ProtocolBuffers defaults = ProtocolBuffers::FromEnv();
  CHECK(defaults.ProtocolOf(524288) == LineProtocol::kLL);     // 8 lines x 512 threads x 8 steps x 16 B
  CHECK(defaults.ProtocolOf(4915200) == LineProtocol::kLL128); // 120 x 640 threads x 8 steps x 8 B
  CHECK(defaults.ProtocolOf(4194304) == LineProtocol::kSimple);
  CHECK(defaults.IsProtocolBuffer(4194304));
  CHECK_FALSE(defaults.IsProtocolBuffer(128 * 1024 * 16 * 4));  // a shared p2p pool
  setenv("NCCL_LL_BUFFSIZE", "1048576", 1);
  const ProtocolBuffers set = ProtocolBuffers::FromEnv();
  CHECK(set.ProtocolOf(1048576) == LineProtocol::kLL);
  CHECK(set.ProtocolOf(524288) == LineProtocol::kSimple);
  unsetenv("NCCL_LL_BUFFSIZE");
}

TEST_CASE("without the profiler every receive is placed by its slot, or follows the previous one", "[ll]") {
  ConnStepCounter c;
  CHECK(c.StepOf(0, 0, 0) == 0);   // Simple ring, slots 0, 2
  CHECK(c.StepOf(0, 0, 2) == 2);
  CHECK(c.StepOf(0, 0, 4) == 4);   // LL
  CHECK(c.StepOf(0, 0, -1) == 5);  // a slot-less receive: the next step
  CHECK(c.StepOf(0, 0, -1) == 6);
}

}  // namespace
}  // namespace prism::plugin

TEST_CASE("ll lines: flags rewritten in place keep the lines' data", "[plugin][unit][ll]") {
  std::vector<char> ll(64);
  for (uint32_t i = 0; i < 4; ++i) {
    const uint32_t line[4] = {100 + i, 7, 200 + i, 7};
    std::memcpy(ll.data() + 16 * i, line, 16);
  }
  prism::plugin::SetLlFlags(ll.data(), 48, 4);  // three whole lines
  uint32_t w[4];
  for (uint32_t i = 0; i < 4; ++i) {
    std::memcpy(w, ll.data() + 16 * i, 16);
    CHECK(w[0] == 100 + i);
    CHECK(w[2] == 200 + i);
    CHECK(w[1] == (i < 3 ? 5u : 7u));
    CHECK(w[3] == (i < 3 ? 5u : 7u));
  }
  std::vector<char> ll128(256, 'd');
  prism::plugin::SetLl128Flags(ll128.data(), 256, 10);
  for (size_t line = 0; line < 2; ++line) {
    uint64_t flag = 0;
    std::memcpy(&flag, ll128.data() + 128 * line + 120, 8);
    CHECK(flag == 11);
    CHECK(ll128[128 * line] == 'd');
    CHECK(ll128[128 * line + 119] == 'd');
  }
}
