// PRISM_OP_TIMES: the profiler role asks NCCL for its kernel's channel
// stamps (KernelCh) and writes one line per operation, driven by FakeNccl
// as NCCL 2.28.9's profiler proxy reports them (op_times.h).
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "plugin/op_times.h"
#include "plugin/op_tracker.h"
#include "test/plugin_fake_nccl.h"

namespace {

using prism::plugin::KernelSpan;
using prism::plugin::OpInfo;
using prism::plugin::OpKind;
using prism::plugin::OpTimesLine;
using prism::plugin::OpTimesLog;
using prism::plugin::OpTracker;
using prism::test::FakeColl;
using prism::test::FakeNccl;
using prism::test::FakeP2p;
using prism::test::FakeSub;

constexpr uint64_t kCommHash = 0xC0FFEE0012345678ull;

// A fresh directory under TMPDIR, removed with its files at the end.
class TempDir {
 public:
  TempDir() {
    const char* base = std::getenv("TMPDIR");
    std::string pattern = std::string(base != nullptr && base[0] != '\0' ? base : "/tmp") + "/prism-op-times-XXXXXX";
    std::vector<char> buf(pattern.begin(), pattern.end());
    buf.push_back('\0');
    REQUIRE(mkdtemp(buf.data()) != nullptr);
    path_ = buf.data();
  }
  ~TempDir() { std::system(("rm -rf '" + path_ + "'").c_str()); }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

std::vector<std::string> Lines(const std::string& file) {
  std::ifstream in(file);
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

bool Has(const std::string& line, const std::string& part) { return line.find(part) != std::string::npos; }

struct Fixture {
  TempDir dir;
  OpTimesLog log{dir.path() + "/times", nullptr};  // a level the log makes itself
  OpTracker tracker{nullptr};
  Fixture() { tracker.KeepOpTimes(&log); }
};

// One collective's task event and a sub per channel (no network steps: the
// kernel stamps do not need them).
std::vector<FakeSub> CollectiveOn(FakeNccl* nccl, int channels, void** task) {
  FakeColl c;
  c.seq = 7;
  c.func = "AllReduce";
  c.count = 1 << 20;
  c.datatype = "ncclFloat32";
  c.channels = static_cast<uint8_t>(channels);
  std::vector<void*> tasks = nccl->StartTasks({c}, {});
  REQUIRE(tasks.size() == 1);
  nccl->StopTasks(tasks);
  *task = tasks[0];
  std::vector<FakeSub> subs;
  for (int ch = 0; ch < channels; ++ch) subs.push_back(nccl->Sub(tasks[0], ch, 2, 12, 2, true));
  return subs;
}

}  // namespace

TEST_CASE("operation times: a collective's line has its kernel's earliest channel start and latest stop",
          "[plugin][op_times]") {
  Fixture f;
  {
    FakeNccl nccl(&f.tracker, kCommHash, 4, 1);
    CHECK((nccl.activation_mask() & kPrismProfileKernelCh) != 0);
    void* task = nullptr;
    std::vector<FakeSub> subs = CollectiveOn(&nccl, 2, &task);
    nccl.StartKernelCh(&subs[0], 1'000'000);
    nccl.StartKernelCh(&subs[1], 1'000'200);
    nccl.StopKernelCh(&subs[1], 1'450'000);
    CHECK(f.log.lines_written() == 0);  // channel 0 still running
    nccl.StopKernelCh(&subs[0], 1'400'000);
    CHECK(f.log.lines_written() == 1);
  }  // finalize: nothing more to write
  const std::vector<std::string> lines = Lines(f.log.path());
  REQUIRE(lines.size() == 1);
  const std::string& l = lines[0];
  INFO(l);
  CHECK(Has(l, "\"comm\":\"0xc0ffee0012345678\""));
  CHECK(Has(l, "\"rank\":1,\"nranks\":4"));
  CHECK(Has(l, "\"kind\":\"allreduce\",\"seq\":7"));
  CHECK(Has(l, "\"bytes\":4194304"));
  CHECK(Has(l, "\"algo\":\"RING\",\"proto\":\"SIMPLE\",\"channels\":2"));
  CHECK(Has(l, "\"kernel_start_ns\":1000000,\"kernel_stop_ns\":1450000,\"kernel_channels\":2,\"complete\":true"));
  CHECK(Has(l, "\"pid\":" + std::to_string(getpid())));
}

TEST_CASE("operation times: a send and a receive of one group get a line each", "[plugin][op_times]") {
  Fixture f;
  {
    FakeNccl nccl(&f.tracker, kCommHash, 2, 0);
    FakeP2p send;
    send.func = "Send";
    send.count = 4096;
    send.peer = 1;
    FakeP2p recv = send;
    recv.func = "Recv";
    std::vector<void*> tasks = nccl.StartTasks({}, {send, recv});
    REQUIRE(tasks.size() == 2);
    nccl.StopTasks(tasks);
    FakeSub s = nccl.Sub(tasks[0], 0, 1, 1, 1, true);
    FakeSub r = nccl.Sub(tasks[1], 0, 1, 1, 1, false);
    nccl.StartKernelCh(&s, 5'000);
    nccl.StartKernelCh(&r, 5'010);
    nccl.StopKernelCh(&r, 9'000);
    nccl.StopKernelCh(&s, 6'000);
  }
  const std::vector<std::string> lines = Lines(f.log.path());
  REQUIRE(lines.size() == 2);
  CHECK(Has(lines[0], "\"kind\":\"recv\",\"seq\":0,\"peer\":1"));
  CHECK(Has(lines[0], "\"kernel_start_ns\":5010,\"kernel_stop_ns\":9000"));
  CHECK(Has(lines[1], "\"kind\":\"send\",\"seq\":0,\"peer\":1"));
  CHECK(Has(lines[1], "\"kernel_start_ns\":5000,\"kernel_stop_ns\":6000"));
}

TEST_CASE("operation times: an operation not every channel of which reported is written at finalize, incomplete",
          "[plugin][op_times]") {
  Fixture f;
  {
    FakeNccl nccl(&f.tracker, kCommHash, 4, 1);
    void* task = nullptr;
    std::vector<FakeSub> subs = CollectiveOn(&nccl, 2, &task);
    nccl.StartKernelCh(&subs[0], 100);
    nccl.StopKernelCh(&subs[0], 900);
    CHECK(f.log.lines_written() == 0);  // the op has 2 channels
    // A second operation whose kernel never reported at all.
    void* task2 = nullptr;
    CollectiveOn(&nccl, 1, &task2);
  }  // finalize
  const std::vector<std::string> lines = Lines(f.log.path());
  REQUIRE(lines.size() == 2);
  CHECK(Has(lines[0], "\"kernel_start_ns\":100,\"kernel_stop_ns\":900,\"kernel_channels\":1,\"complete\":false"));
  CHECK(Has(lines[1], "\"kernel_start_ns\":null,\"kernel_stop_ns\":null,\"kernel_channels\":0,\"complete\":false"));
}

TEST_CASE("operation times: off, the tracker asks for no kernel events and keeps no handle for one",
          "[plugin][op_times]") {
  OpTracker tracker(nullptr);
  FakeNccl nccl(&tracker, kCommHash, 4, 1);
  CHECK((nccl.activation_mask() & kPrismProfileKernelCh) == 0);
  void* task = nullptr;
  std::vector<FakeSub> subs = CollectiveOn(&nccl, 1, &task);
  subs[0].eActivationMask |= kPrismProfileKernelCh;  // as if NCCL sent one anyway
  nccl.StartKernelCh(&subs[0], 100);
  CHECK(subs[0].kernelEventHandle == nullptr);
  nccl.StopKernelCh(&subs[0], 900);  // nothing to stop: no crash
}

TEST_CASE("operation times: a directory that cannot be written is named with the fix, once", "[plugin][op_times]") {
  OpTimesLog log("/proc/prism-no-such-dir", nullptr);
  OpInfo info;
  info.kind = OpKind::kAllGather;
  char captured[] = "/tmp/prism-op-times-stderr-XXXXXX";
  const int fd = mkstemp(captured);
  REQUIRE(fd >= 0);
  std::fflush(stderr);
  const int saved = dup(STDERR_FILENO);
  dup2(fd, STDERR_FILENO);
  log.Append(info, KernelSpan{});
  log.Append(info, KernelSpan{});
  std::fflush(stderr);
  dup2(saved, STDERR_FILENO);
  close(saved);
  close(fd);
  const std::vector<std::string> lines = Lines(captured);
  unlink(captured);
  CHECK(log.lines_written() == 0);
  REQUIRE(lines.size() == 1);
  CHECK(Has(lines[0], "PRISM_OP_TIMES: cannot write /proc/prism-no-such-dir/prism-ops."));
  CHECK(Has(lines[0], "point PRISM_OP_TIMES at a writable directory"));
}

TEST_CASE("operation times: the line keeps NCCL's names plain", "[plugin][op_times]") {
  OpInfo info;
  info.id = 3;
  info.kind = OpKind::kReduceScatter;
  info.algo_name = "PAT\"x";
  info.proto_name = "LL128";
  info.channels = 4;
  KernelSpan span;
  span.first_start_ns = 10;
  span.last_stop_ns = 20;
  span.channels_started = span.channels_stopped = 4;
  span.complete = true;
  const std::string line = OpTimesLine(info, span, 42);
  CHECK(line.back() == '\n');
  CHECK(Has(line, "\"algo\":\"PAT?x\",\"proto\":\"LL128\",\"channels\":4"));
  CHECK(Has(line, "\"kind\":\"reducescatter\""));
  CHECK(Has(line, "\"kernel_start_ns\":10,\"kernel_stop_ns\":20,\"kernel_channels\":4,\"complete\":true}"));
}
