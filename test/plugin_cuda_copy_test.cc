// CudaCopier (plugin/cuda_copy.h) against a stand-in CUDA runtime
// (test/fake_libcudart.cc): GPU copies and memsets go on a non-blocking
// stream of the plugin's own, on the device of the GPU memory, and the
// calling thread keeps its device; nothing is queued on the legacy default
// stream, where PyTorch's default stream may be waiting for the very NCCL
// operation whose send or receive is being copied.
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "plugin/cuda_copy.h"
#include "test/fake_cudart.h"

namespace pp = prism::plugin;

using prism::test::FakeCudart;

TEST_CASE("GPU copies: the plugin's own non-blocking stream on the memory's device, never the legacy one",
          "[cuda]") {
  pp::CudaCopier copier({"/nonexistent/libcudart.so", PRISM_FAKE_LIBCUDART});
  std::string why;
  REQUIRE(copier.Load(&why));
  FakeCudart fake;
  std::vector<char> gpu(4096, 0), host(4096, 'h');
  fake.set_device_range(gpu.data(), gpu.size(), 3);  // `gpu` plays device 3's memory
  fake.set_device(1);                                 // the caller (NCCL's proxy thread) is on device 1
  REQUIRE(copier.DeviceOf(gpu.data() + 100) == 3);    // regMr asks once per region
  REQUIRE(copier.DeviceOf(host.data()) == -1);
  const int device = copier.DeviceOf(gpu.data());
  fake.reset();

  SECTION("a copy into GPU memory, then one out of it: one stream, made once, synchronised after each") {
    REQUIRE(copier.Copy(gpu.data(), host.data(), 1000, device, &why));
    REQUIRE(gpu[999] == 'h');
    host.assign(host.size(), 0);
    gpu[5] = 'g';
    REQUIRE(copier.Copy(host.data(), gpu.data(), 10, device, &why));
    REQUIRE(host[5] == 'g');
    CHECK(std::string(fake.log()) ==
          "cudaSetDevice 3\n"
          "cudaStreamCreateWithFlags flags 1 -> stream 1 device 3\n"
          "cudaMemcpyAsync 1000 kind 4 stream 1 device 3\n"
          "cudaStreamSynchronize stream 1\n"
          "cudaSetDevice 1\n"
          "cudaSetDevice 3\n"
          "cudaMemcpyAsync 10 kind 4 stream 1 device 3\n"
          "cudaStreamSynchronize stream 1\n"
          "cudaSetDevice 1\n");
    CHECK(fake.Device() == 1);  // the caller's device, restored
  }
  SECTION("a memset the same way") {
    REQUIRE(copier.Memset(gpu.data(), 7, 64, device, &why));
    REQUIRE(gpu[63] == 7);
    const std::string log = fake.log();
    CHECK(log.find("cudaMemsetAsync 64 stream") != std::string::npos);
    CHECK(log.find("device 3") != std::string::npos);
    CHECK(log.find("cudaStreamSynchronize") != std::string::npos);
  }
  SECTION("a caller already on the memory's device is not moved") {
    fake.set_device(3);
    fake.reset();
    REQUIRE(copier.Copy(gpu.data(), host.data(), 8, device, &why));
    CHECK(std::string(fake.log()).find("cudaSetDevice") == std::string::npos);
    CHECK(fake.Device() == 3);
  }
  CHECK(std::string(fake.log()).find("legacy") == std::string::npos);
}

TEST_CASE("GPU copies: a missing CUDA runtime is named with the fix", "[cuda]") {
  pp::CudaCopier copier({"/nonexistent/libcudart.so"});
  std::string why;
  REQUIRE_FALSE(copier.Load(&why));
  CHECK(why == "cannot dlopen the CUDA runtime (tried /nonexistent/libcudart.so; GPU buffers need it: put it on "
               "LD_LIBRARY_PATH or unset PRISM_GDR/PRISM_DMABUF)");
  std::vector<char> a(8), b(8);
  CHECK_FALSE(copier.Copy(a.data(), b.data(), 8, -1, &why));
  CHECK(copier.DeviceOf(a.data()) == -1);
  CHECK(why.find("cannot dlopen the CUDA runtime") == 0);
}
