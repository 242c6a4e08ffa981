// The plugin's C ABI as NCCL sees it: exported symbols, the device table from
// PRISM_NIC_* settings, and argument errors that must not crash.
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "common/net_handles.h"
#include "plugin/profiler_abi.h"
#include "test/plugin_driver.h"
#include "test/plugin_process.h"

using prism::testing::InChild;

namespace {

std::string Exports() {
  std::string cmd = std::string("nm -D --defined-only ") + PRISM_PLUGIN_SO;
  FILE* p = popen(cmd.c_str(), "r");
  REQUIRE(p != nullptr);
  std::string out;
  char line[512];
  while (std::fgets(line, sizeof(line), p) != nullptr) out += line;
  REQUIRE(pclose(p) == 0);
  return out;
}

}  // namespace

TEST_CASE("only ncclNetPlugin_v8..v11 and ncclProfiler_v5/v4 are exported", "[plugin][abi]") {
  const std::string out = Exports();
  CHECK(out.find(" ncclNetPlugin_v11\n") != std::string::npos);
  CHECK(out.find(" ncclNetPlugin_v10\n") != std::string::npos);
  CHECK(out.find(" ncclNetPlugin_v9\n") != std::string::npos);
  CHECK(out.find(" ncclNetPlugin_v8\n") != std::string::npos);
  CHECK(out.find(" ncclProfiler_v5\n") != std::string::npos);
  CHECK(out.find(" ncclProfiler_v4\n") != std::string::npos);
  size_t lines = 0;
  size_t pos = 0;
  while (pos < out.size()) {
    size_t end = out.find('\n', pos);
    std::string line = out.substr(pos, end - pos);
    pos = end + 1;
    if (line.empty()) continue;
    ++lines;
    INFO(line);
    CHECK((line.find(" ncclNetPlugin_v") != std::string::npos || line.find(" ncclProfiler_v") != std::string::npos));
  }
  CHECK(lines == 6);
}

TEST_CASE("devices and properties come from PRISM_NIC_* settings", "[plugin][abi]") {
  const std::string msg = InChild([]() -> std::string {
    setenv("PRISM_NIC_COUNT", "3", 1);
    setenv("PRISM_NIC_NAME", "mlx5_%d", 1);
    setenv("PRISM_NIC_SPEED_MBPS", "200000", 1);
    setenv("PRISM_NIC_LATENCY_US", "2.5", 1);
    setenv("PRISM_NIC_MAX_RECVS", "4", 1);
    setenv("PRISM_NIC_PORT", "2", 1);
    prism::testing::PluginDriver drv(PRISM_PLUGIN_SO);
    if (std::string(drv.net().name) != "Prism") return "name is not Prism";
    drv.Init();
    int n = 0;
    drv.net().devices(&n);
    if (n != 3) return "devices() = " + std::to_string(n);
    prism_ncclNetProperties_v11_t p{};
    if (drv.net().getProperties(1, &p) != prism_ncclSuccess) return "getProperties failed";
    if (std::string(p.name) != "mlx5_1") return std::string("name ") + p.name;
    if (p.speed != 200000 || p.latency != 2.5f || p.maxRecvs != 4 || p.port != 2) {
      return "speed/latency/maxRecvs/port wrong";
    }
    if (p.netDeviceType != 0 || p.ptrSupport != kPrismPtrHost) return "type/ptrSupport wrong";
    if (p.maxP2pBytes != (1ull << 40) || p.maxP2pBytes == 0) return "maxP2pBytes wrong";
    if (drv.net().getProperties(3, &p) == prism_ncclSuccess) return "dev 3 accepted";
    auto* v10 = static_cast<prism_ncclNet_v10_t*>(dlsym(drv.lib(), "ncclNetPlugin_v10"));
    if (v10 == nullptr) return "no v10";
    prism_ncclNetProperties_v10_t q{};
    if (v10->getProperties(2, &q) != prism_ncclSuccess) return "v10 getProperties failed";
    if (std::string(q.name) != "mlx5_2" || q.speed != 200000 || q.maxRecvs != 4) {
      return "v10 properties wrong";
    }
    auto* v9 = static_cast<prism_ncclNet_v9_t*>(dlsym(drv.lib(), "ncclNetPlugin_v9"));
    if (v9 == nullptr) return "no v9";
    prism_ncclNetProperties_v9_t q9{};
    if (v9->getProperties(2, &q9) != prism_ncclSuccess || q9.speed != 200000 || q9.maxP2pBytes != (1ull << 40)) {
      return "v9 properties wrong";
    }
    // v8 has no forceFlush: speed sits at 32, where v9 has forceFlush.
    auto* v8 = static_cast<prism_ncclNet_v8_t*>(dlsym(drv.lib(), "ncclNetPlugin_v8"));
    if (v8 == nullptr) return "no v8";
    prism_ncclNetProperties_v8_t q8{};
    if (v8->getProperties(2, &q8) != prism_ncclSuccess) return "v8 getProperties failed";
    if (std::string(q8.name) != "mlx5_2" || q8.speed != 200000 || q8.port != 2 || q8.latency != 2.5f ||
        q8.maxRecvs != 4 || q8.netDeviceType != 0) {
      return "v8 properties wrong: speed " + std::to_string(q8.speed) + " port " + std::to_string(q8.port);
    }
    return "";
  });
  CHECK(msg == "");
}

TEST_CASE("PRISM_NIC_NAME is a pattern, never a printf format", "[plugin][abi]") {
  const std::string msg = InChild([]() -> std::string {
    setenv("PRISM_NIC_COUNT", "2", 1);
    setenv("PRISM_NIC_NAME", "%s%s%s%s%s%s%s%s", 1);  // as a format: SIGSEGV at init
    prism::testing::PluginDriver drv(PRISM_PLUGIN_SO);
    drv.Init();
    prism_ncclNetProperties_v11_t p{};
    if (drv.net().getProperties(1, &p) != prism_ncclSuccess) return "getProperties failed";
    if (std::string(p.name) != "prism1") return std::string("name ") + p.name + ", not the default's prism1";
    return "";
  });
  CHECK(msg == "");
}

TEST_CASE("PRISM_GDR advertises CUDA pointers only when set", "[plugin][abi]") {
  const std::string msg = InChild([]() -> std::string {
    prism::testing::PluginDriver drv(PRISM_PLUGIN_SO);
    drv.Init();
    prism_ncclNetProperties_v11_t p{};
    drv.net().getProperties(0, &p);
    return (p.ptrSupport & kPrismPtrCuda) ? "CUDA advertised without PRISM_GDR" : "";
  });
  CHECK(msg == "");
}

TEST_CASE("connect rejects a foreign handle without crashing", "[plugin][abi]") {
  const std::string msg = InChild([]() -> std::string {
    prism::testing::PluginDriver drv(PRISM_PLUGIN_SO);
    void* ctx = drv.Init();
    char handle[128];
    std::memset(handle, 0x5a, sizeof(handle));
    void* comm = nullptr;
    prism_ncclNetDeviceHandle_t* dev = nullptr;
    if (drv.net().connect(ctx, 0, handle, &comm, &dev) == prism_ncclSuccess) {
      return "foreign handle accepted";
    }
    if (comm != nullptr) return "comm set on error";
    std::vector<char> h;
    void* lc = nullptr;
    if (drv.net().listen(ctx, 7, h.data(), &lc) == prism_ncclSuccess) return "bad dev accepted";
    return "";
  });
  CHECK(msg == "");
}

TEST_CASE("a comm, listen comm or context closed twice is refused, not freed twice", "[plugin][abi]") {
  // Before LiveHandles each second call freed again: glibc aborted with
  // "double free or corruption" (the child would crash).
  const std::string msg = InChild([]() -> std::string {
    prism::testing::PluginDriver drv(PRISM_PLUGIN_SO);
    void* ctx = drv.Init();
    std::vector<char> h;
    void* lc = drv.Listen(ctx, &h);
    void* sc = nullptr;
    void* rc = nullptr;
    drv.ConnectAccept(ctx, h, lc, &sc, &rc);
    if (drv.net().closeSend(sc) != prism_ncclSuccess) return "first closeSend failed";
    if (drv.net().closeRecv(rc) != prism_ncclSuccess) return "first closeRecv failed";
    if (drv.net().closeListen(lc) != prism_ncclSuccess) return "first closeListen failed";
    if (drv.net().closeSend(sc) != prism_ncclInvalidArgument) return "second closeSend not refused";
    if (drv.net().closeRecv(rc) != prism_ncclInvalidArgument) return "second closeRecv not refused";
    if (drv.net().closeListen(lc) != prism_ncclInvalidArgument) return "second closeListen not refused";
    if (drv.net().finalize(ctx) != prism_ncclSuccess) return "first finalize failed";
    if (drv.net().finalize(ctx) != prism_ncclInvalidArgument) return "second finalize not refused";
    // A live context passed where a comm belongs is refused and stays usable.
    void* ctx2 = drv.Init();
    if (drv.net().closeSend(ctx2) != prism_ncclInvalidArgument) return "a context closed as a comm";
    if (drv.net().finalize(ctx2) != prism_ncclSuccess) return "the context was lost by a wrong close";
    return "";
  });
  CHECK(msg == "");
}

TEST_CASE("listen writes a real listen handle", "[plugin][abi]") {
  const std::string msg = InChild([]() -> std::string {
    prism::testing::PluginDriver drv(PRISM_PLUGIN_SO);
    void* ctx = drv.Init();
    std::vector<char> h1, h2;
    void* l1 = drv.Listen(ctx, &h1);
    void* l2 = drv.Listen(ctx, &h2);
    prism::RealListenHandle a, b;
    std::memcpy(&a, h1.data(), sizeof(a));
    std::memcpy(&b, h2.data(), sizeof(b));
    drv.net().closeListen(l1);
    drv.net().closeListen(l2);
    if (a.magic != prism::kRealHandleMagic) return "bad magic";
    if (a.listen_id == b.listen_id) return "listen ids repeat";
    if (a.port_be == 0 || a.pid != static_cast<uint32_t>(getpid())) return "port/pid missing";
    for (size_t i = sizeof(a); i < h1.size(); ++i) {
      if (h1[i] != 0) return "bytes after the handle are not zero";
    }
    return "";
  });
  CHECK(msg == "");
}

TEST_CASE("the v10 table works end to end (one process, loopback)", "[plugin][abi]") {
  const std::string msg = InChild([]() -> std::string {
    prism::testing::PluginDriver drv(PRISM_PLUGIN_SO);
    auto* v10 = static_cast<prism_ncclNet_v10_t*>(dlsym(drv.lib(), "ncclNetPlugin_v10"));
    if (v10 == nullptr) return "no v10";
    if (v10->init(prism::testing::DriverLogger, nullptr) != prism_ncclSuccess) return "init";
    std::vector<char> handle(128, 0);
    void* lc = nullptr;
    if (v10->listen(0, handle.data(), &lc) != prism_ncclSuccess) return "listen";
    void* sc = nullptr;
    void* rc = nullptr;
    prism_ncclNetDeviceHandle_t* dev = nullptr;
    prism_ncclNetCommConfig_t config{-1};
    const int64_t deadline = prism::testing::NowNs() + 10'000'000'000;
    while (sc == nullptr || rc == nullptr) {
      if (sc == nullptr && v10->connect(0, &config, handle.data(), &sc, &dev) != prism_ncclSuccess) {
        return "connect";
      }
      if (rc == nullptr && v10->accept(lc, &rc, &dev) != prism_ncclSuccess) return "accept";
      if (prism::testing::NowNs() > deadline) return "connect/accept timed out";
    }
    v10->closeListen(lc);
    std::vector<char> out(100000), in(100000, 0);
    for (size_t i = 0; i < out.size(); ++i) out[i] = static_cast<char>(i * 7);
    void* smh = nullptr;
    void* rmh = nullptr;
    v10->regMr(sc, out.data(), out.size(), kPrismPtrHost, &smh);
    v10->regMr(rc, in.data(), in.size(), kPrismPtrHost, &rmh);
    void* sreq = nullptr;
    void* rreq = nullptr;
    void* d[1] = {in.data()};
    size_t m[1] = {in.size()};
    int tag[1] = {3};
    void* mhs[1] = {rmh};
    while (rreq == nullptr) v10->irecv(rc, 1, d, m, tag, mhs, nullptr, &rreq);
    while (sreq == nullptr) v10->isend(sc, out.data(), out.size(), 3, smh, nullptr, &sreq);
    int sdone = 0, rdone = 0, size = -1;
    while (!sdone || !rdone) {
      if (!sdone && v10->test(sreq, &sdone, nullptr) != prism_ncclSuccess) return "send test";
      if (!rdone && v10->test(rreq, &rdone, &size) != prism_ncclSuccess) return "recv test";
      if (prism::testing::NowNs() > deadline) return "transfer timed out";
    }
    if (size != static_cast<int>(in.size()) || in != out) return "data differs";
    v10->deregMr(sc, smh);
    v10->deregMr(rc, rmh);
    v10->closeSend(sc);
    v10->closeRecv(rc);
    return "";
  });
  CHECK(msg == "");
}

// NCCL 2.21 - 2.23 bind v8: int sizes, no config, no phandles.
TEST_CASE("the v8 table works end to end (one process, loopback)", "[plugin][abi]") {
  const std::string msg = InChild([]() -> std::string {
    prism::testing::PluginDriver drv(PRISM_PLUGIN_SO);
    auto* v8 = static_cast<prism_ncclNet_v8_t*>(dlsym(drv.lib(), "ncclNetPlugin_v8"));
    if (v8 == nullptr) return "no v8";
    if (v8->init(prism::testing::DriverLogger) != prism_ncclSuccess) return "init";
    std::vector<char> handle(128, 0);
    void* lc = nullptr;
    if (v8->listen(0, handle.data(), &lc) != prism_ncclSuccess) return "listen";
    void* sc = nullptr;
    void* rc = nullptr;
    prism_ncclNetDeviceHandle_t* dev = nullptr;
    const int64_t deadline = prism::testing::NowNs() + 10'000'000'000;
    while (sc == nullptr || rc == nullptr) {
      if (sc == nullptr && v8->connect(0, handle.data(), &sc, &dev) != prism_ncclSuccess) return "connect";
      if (rc == nullptr && v8->accept(lc, &rc, &dev) != prism_ncclSuccess) return "accept";
      if (prism::testing::NowNs() > deadline) return "connect/accept timed out";
    }
    v8->closeListen(lc);
    std::vector<char> out(70000), in(100000, 0);
    for (size_t i = 0; i < out.size(); ++i) out[i] = static_cast<char>(i * 5);
    void* smh = nullptr;
    void* rmh = nullptr;
    v8->regMr(sc, out.data(), out.size(), kPrismPtrHost, &smh);
    v8->regMr(rc, in.data(), in.size(), kPrismPtrHost, &rmh);
    void* sreq = nullptr;
    void* rreq = nullptr;
    void* d[1] = {in.data()};
    int m[1] = {static_cast<int>(in.size())};
    int tag[1] = {3};
    void* mhs[1] = {rmh};
    int too_many[9] = {};
    if (v8->irecv(rc, 9, d, too_many, tag, mhs, &rreq) == prism_ncclSuccess) return "9 receives accepted";
    while (rreq == nullptr) v8->irecv(rc, 1, d, m, tag, mhs, &rreq);
    while (sreq == nullptr) v8->isend(sc, out.data(), static_cast<int>(out.size()), 3, smh, &sreq);
    int sdone = 0, rdone = 0, size = -1;
    while (!sdone || !rdone) {
      if (!sdone && v8->test(sreq, &sdone, nullptr) != prism_ncclSuccess) return "send test";
      if (!rdone && v8->test(rreq, &rdone, &size) != prism_ncclSuccess) return "recv test";
      if (prism::testing::NowNs() > deadline) return "transfer timed out";
    }
    if (size != static_cast<int>(out.size())) return "received " + std::to_string(size) + " bytes";
    if (!std::equal(out.begin(), out.end(), in.begin())) return "data differs";
    v8->deregMr(sc, smh);
    v8->deregMr(rc, rmh);
    v8->closeSend(sc);
    v8->closeRecv(rc);
    return "";
  });
  CHECK(msg == "");
}

// NCCL 2.27 loads profiler v4: commHash after the mask in init.
TEST_CASE("the v4 profiler table initialises like v5", "[plugin][abi]") {
  const std::string msg = InChild([]() -> std::string {
    prism::testing::PluginDriver drv(PRISM_PLUGIN_SO);
    auto* v4 = static_cast<prism_ncclProfiler_v4_t*>(dlsym(drv.lib(), "ncclProfiler_v4"));
    if (v4 == nullptr) return "no ncclProfiler_v4";
    void* ctx = nullptr;
    int mask = 0;
    if (v4->init(&ctx, &mask, "c", 0x1234, 1, 8, 0, prism::testing::DriverLogger) != prism_ncclSuccess)
      return "init failed";
    if (ctx == nullptr) return "no context";
    const int want = kPrismProfileColl | kPrismProfileP2p | kPrismProfileProxyOp | kPrismProfileProxyStep |
                     kPrismProfileNetPlugin;
    if ((mask & want) != want) return "mask " + std::to_string(mask);
    prism_ncclProfilerEventDescr_v4_t d{};
    std::memset(&d, 0xab, sizeof(d));  // NCCL leaves the padding as it was
    d.type = kPrismProfileColl;
    d.parentObj = nullptr;
    void* handle = nullptr;
    if (v4->startEvent(ctx, &handle, nullptr) == prism_ncclSuccess) return "null descriptor accepted";
    v4->finalize(ctx);
    return "";
  });
  CHECK(msg == "");
}

// PRISM_OP_TIMES through the exported v5 table: the kernel-channel mask, the
// stop stamp through recordEventState, the line in the directory.
TEST_CASE("PRISM_OP_TIMES: the v5 table times an operation by NCCL's kernel stamps", "[plugin][abi]") {
  char dir[] = "/tmp/prism-abi-op-times-XXXXXX";
  REQUIRE(mkdtemp(dir) != nullptr);
  const std::string msg = InChild([&dir]() -> std::string {
    setenv("PRISM_OP_TIMES", dir, 1);
    prism::testing::PluginDriver drv(PRISM_PLUGIN_SO);
    auto* v5 = static_cast<prism_ncclProfiler_v5_t*>(dlsym(drv.lib(), "ncclProfiler_v5"));
    if (v5 == nullptr) return "no ncclProfiler_v5";
    void* ctx = nullptr;
    int mask = 0;
    if (v5->init(&ctx, 0xabc, &mask, "c", 1, 8, 3, prism::testing::DriverLogger) != prism_ncclSuccess)
      return "init failed";
    if ((mask & kPrismProfileKernelCh) == 0) return "no kernel events asked for: mask " + std::to_string(mask);
    prism_ncclProfilerEventDescr_v5_t d{};
    d.type = kPrismProfileColl;
    d.rank = 3;
    d.coll.func = "AllGather";
    d.coll.count = 1 << 20;
    d.coll.datatype = "ncclInt8";
    d.coll.nChannels = 1;
    d.coll.algo = "RING";
    d.coll.proto = "SIMPLE";
    void* op = nullptr;
    v5->startEvent(ctx, &op, &d);
    if (op == nullptr) return "no operation handle";
    v5->stopEvent(op);
    prism_ncclProfilerEventDescr_v5_t k{};
    k.type = kPrismProfileKernelCh;
    k.parentObj = op;
    k.kernelCh.pTimer = 7'000;
    void* kernel = nullptr;
    v5->startEvent(ctx, &kernel, &k);
    if (kernel == nullptr) return "no kernel handle";
    prism_ncclProfilerEventStateArgs_v5_t a{};
    a.kernelCh.pTimer = 19'000;
    v5->recordEventState(kernel, kPrismProfilerKernelChStop, &a);
    v5->stopEvent(kernel);
    v5->finalize(ctx);
    const std::string file = std::string(dir) + "/prism-ops." + std::to_string(getpid()) + ".jsonl";
    FILE* f = std::fopen(file.c_str(), "r");
    if (f == nullptr) return "no " + file;
    char line[1024] = {0};
    const bool got = std::fgets(line, sizeof(line), f) != nullptr;
    std::fclose(f);
    const std::string l = got ? line : "";
    if (l.find("\"kind\":\"allgather\"") == std::string::npos ||
        l.find("\"kernel_start_ns\":7000,\"kernel_stop_ns\":19000,\"kernel_channels\":1,\"complete\":true") ==
            std::string::npos)
      return "line: " + l;
    return "";
  });
  std::system((std::string("rm -rf '") + dir + "'").c_str());
  CHECK(msg == "");
}
