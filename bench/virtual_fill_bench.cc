// What a receive from a virtual peer costs NCCL's proxy thread on the CPU:
//   virtual_fill_bench [--sizes 64,256,1024,4096] [--receives R] [--rounds K]
// A real rank's ring all-reduce of 2 ranks whose predecessor is virtual,
// driven like NCCL's proxy (a tag of one operation per receive, as the
// profiler role makes it; this rank's own send of the step, then the
// receive, completed by MIRROR on a link with no time of its own), into
// host buffers registered as
// NCCL's protocol buffers, receive k into step slot k % 8. Per message
// size (KiB; the Simple buffer is 8 slots of the largest) it prints the
// median ns of irecv + test() until done, per fill:
//   Simple none: no fill (the floor: request, resolve, events);
//   Simple zeros/rewrite: PRISM_RECV_FILL=zeros or own outside all-gathers
//     with PRISM_RECV_ZERO_ONCE=0 (every receive writes its zeros again,
//     as before 2026-12-03);
//   Simple zeros/once: the same with PRISM_RECV_ZERO_ONCE=1 (the default);
//   Simple pattern, LL lines, LL128 lines (LL/LL128: the message's data in
//     lines; NCCL's default LL step holds 32 KiB of data, LL128's 562 KiB).
// The fills of a size alternate in each of K rounds (same run, same
// buffers, side by side). The plugin's own isend is not counted.
#include <time.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "plugin/ll_lines.h"
#include "plugin/virtual_comms.h"
#include "test/virtual_recv_rig.h"

namespace {

using prism::plugin::LineProtocol;
using prism::plugin::MemRegion;
using prism::plugin::MessageTag;
using prism::plugin::OpAlgo;
using prism::plugin::OpInfo;
using prism::plugin::OpKind;
using prism::plugin::OpRecord;
using prism::plugin::RecvFill;
using prism::plugin::Request;
using prism::plugin::Settings;
using prism::plugin::VirtualRecvComm;
using prism::plugin::VirtualSendComm;
using prism::test::VirtualCommEnv;

constexpr uint64_t kFastBits = 1ull << 62;  // a link whose wire time is nil

int64_t NowNs() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return int64_t{ts.tv_sec} * 1'000'000'000 + ts.tv_nsec;
}

struct Fill {
  const char* name;
  LineProtocol protocol;
  RecvFill fill;
  bool zero_once;
};

const Fill kFills[] = {
    {"Simple none", LineProtocol::kSimple, RecvFill::kNone, true},
    {"Simple zeros/rewrite", LineProtocol::kSimple, RecvFill::kZeros, false},
    {"Simple zeros/once", LineProtocol::kSimple, RecvFill::kZeros, true},
    {"Simple pattern", LineProtocol::kSimple, RecvFill::kPattern, true},
    {"LL lines", LineProtocol::kLL, RecvFill::kOwn, true},
    {"LL128 lines", LineProtocol::kLL128, RecvFill::kOwn, true},
};

// One fill's comms and buffers (its own rig: settings differ per fill).
class Lane {
 public:
  Lane(const Fill& f, size_t max_bytes, uint64_t hash)
      : rig_(SettingsOf(f), kFastBits, 0),
        send_(rig_.env, rig_.session, 1, 0),
        recv_(rig_.env, rig_.session, 2, 0),
        protocol_(f.protocol),
        hash_(hash) {
    const prism::plugin::ProtocolBuffers b = prism::plugin::ProtocolBuffers::FromEnv();
    const LineProtocol p = f.protocol;
    // A registered size NCCL would give this protocol's buffer; LL/LL128 at
    // least twice the largest message (lines carry flags).
    size_t bytes = p == LineProtocol::kLL ? b.ll : p == LineProtocol::kLL128 ? b.ll128 : b.simple;
    if (bytes < 2 * max_bytes * prism::plugin::kNcclSteps) bytes = 2 * max_bytes * prism::plugin::kNcclSteps;
    if (p == LineProtocol::kSimple) bytes = b.simple;
    buffer_.assign(bytes, 0);
    mr_ = std::make_unique<MemRegion>(buffer_.data(), bytes, kPrismPtrHost);
    payload_.assign(max_bytes, 1);
  }

  // ns of irecv + test() until done for one receive of `bytes`, -1 on error.
  int64_t Receive(size_t bytes) {
    // One operation of one NCCL step per receive; the connection's step
    // (and slot) advances.
    OpInfo info;
    info.id = ++seq_;
    info.comm_hash = hash_;
    info.comm_rank = 0;
    info.comm_size = 2;
    info.kind = OpKind::kAllReduce;
    info.seq = seq_;
    info.bytes = bytes;
    info.algo = OpAlgo::kRing;
    info.protocol = protocol_;
    info.channels = 1;
    const auto op = std::make_shared<OpRecord>(info);
    MessageTag stag{op, 0, 0, 1, 1, true};
    MessageTag rtag{op, 0, 0, 1, 1, false};
    void* request = nullptr;
    int done = 0, size = -1;
    if (send_.Isend(payload_.data(), bytes, 0, nullptr, stag, &request) != prism_ncclSuccess || request == nullptr)
      return -1;
    while (!done) static_cast<Request*>(request)->Test(&done, &size);
    const size_t slot_bytes = buffer_.size() / prism::plugin::kNcclSteps;
    void* d = buffer_.data() + (seq_ % prism::plugin::kNcclSteps) * slot_bytes;
    const MemRegion* mr = mr_.get();
    const int tag = 0;
    done = 0;
    request = nullptr;
    const int64_t t0 = NowNs();
    if (recv_.Irecv(1, &d, &slot_bytes, &tag, &mr, &rtag, &request) != prism_ncclSuccess || request == nullptr)
      return -1;
    while (!done)
      if (static_cast<Request*>(request)->Test(&done, &size) != prism_ncclSuccess) return -1;
    const int64_t took = NowNs() - t0;
    return size == static_cast<int>(bytes) ? took : -1;
  }

 private:
  static Settings SettingsOf(const Fill& f) {
    Settings s;
    s.link_bits_per_second = kFastBits;
    s.daemon_timeout_ms = 600'000;
    s.ring_lockstep = false;
    s.recv_fill = f.fill;
    s.recv_zero_once = f.zero_once;
    return s;
  }
  VirtualCommEnv rig_;
  VirtualSendComm send_;
  VirtualRecvComm recv_;
  LineProtocol protocol_;
  uint64_t hash_;
  std::vector<char> buffer_;
  std::unique_ptr<MemRegion> mr_;
  std::vector<char> payload_;
  uint64_t seq_ = 0;
};

std::vector<size_t> ParseKib(const std::string& list) {
  std::vector<size_t> out;
  size_t pos = 0;
  while (pos < list.size()) {
    const size_t comma = list.find(',', pos);
    out.push_back(std::stoull(list.substr(pos, comma - pos)) * 1024);
    if (comma == std::string::npos) break;
    pos = comma + 1;
  }
  return out;
}

double Median(std::vector<int64_t> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0.0 : static_cast<double>(v[v.size() / 2]);
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<size_t> sizes = ParseKib("64,256,1024,4096");
  int receives = 64, rounds = 5;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string k = argv[i];
    if (k == "--sizes") sizes = ParseKib(argv[i + 1]);
    if (k == "--receives") receives = std::atoi(argv[i + 1]);
    if (k == "--rounds") rounds = std::atoi(argv[i + 1]);
  }
  if (sizes.empty() || receives < 1 || rounds < 1) {
    std::fprintf(stderr, "usage: virtual_fill_bench [--sizes KiB,...] [--receives R] [--rounds K]\n");
    return 2;
  }
  const size_t largest = *std::max_element(sizes.begin(), sizes.end());
  // NCCL's Simple buffer: 8 steps of the largest message (NCCL_BUFFSIZE).
  if (std::getenv("NCCL_BUFFSIZE") == nullptr)
    setenv("NCCL_BUFFSIZE", std::to_string(std::max<size_t>(largest * prism::plugin::kNcclSteps, 1 << 22)).c_str(), 1);
  std::printf("virtual receive on the proxy thread: median ns of irecv + test() until done "
              "(%d receives x %d rounds per cell; slots rotate over 8)\n", receives, rounds);
  std::printf("%-22s", "fill \\ message");
  for (size_t s : sizes) std::printf(" %11zu KiB", s / 1024);
  std::printf("\n");
  std::vector<std::vector<std::vector<int64_t>>> ns(std::size(kFills), std::vector<std::vector<int64_t>>(sizes.size()));
  std::vector<std::unique_ptr<Lane>> lanes;
  for (size_t f = 0; f < std::size(kFills); ++f)
    lanes.push_back(std::make_unique<Lane>(kFills[f], largest, 0xF000 + f));
  for (int r = 0; r < rounds; ++r) {
    for (size_t i = 0; i < sizes.size(); ++i) {
      for (size_t f = 0; f < std::size(kFills); ++f) {
        for (int k = 0; k < receives; ++k) {
          const int64_t t = lanes[f]->Receive(sizes[i]);
          if (t < 0) {
            std::fprintf(stderr, "virtual_fill_bench: a receive failed (%s, %zu B)\n", kFills[f].name, sizes[i]);
            return 1;
          }
          if (r > 0 || k >= prism::plugin::kNcclSteps) ns[f][i].push_back(t);  // not the first fill of a slot
        }
      }
    }
  }
  for (size_t f = 0; f < std::size(kFills); ++f) {
    std::printf("%-22s", kFills[f].name);
    for (size_t i = 0; i < sizes.size(); ++i) std::printf(" %12.0f ns", Median(ns[f][i]));
    std::printf("\n");
  }
  std::printf("GB/s written by a fill (message / (fill - none)):\n");
  for (size_t f = 1; f < std::size(kFills); ++f) {
    std::printf("%-22s", kFills[f].name);
    for (size_t i = 0; i < sizes.size(); ++i) {
      const double extra = Median(ns[f][i]) - Median(ns[0][i]);
      if (extra > 50) std::printf(" %15.1f", static_cast<double>(sizes[i]) / extra);
      else std::printf(" %15s", "-");
    }
    std::printf("\n");
  }
  return 0;
}
