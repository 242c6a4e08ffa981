// The stand-in CUDA runtime's own functions (test/fake_libcudart.cc), from
// the copy a CudaCopier loaded: its call log, and which host memory plays
// a device's memory. Construct only after a CudaCopier loaded
// PRISM_FAKE_LIBCUDART (the test's compile definition).
#ifndef PRISM_TEST_FAKE_CUDART_H_
#define PRISM_TEST_FAKE_CUDART_H_

#include <dlfcn.h>

#include <catch2/catch.hpp>

#include <cstddef>
#include <string>

namespace prism::test {

struct FakeCudart {
  FakeCudart() {
    lib = dlopen(PRISM_FAKE_LIBCUDART, RTLD_NOW | RTLD_NOLOAD);
    REQUIRE(lib != nullptr);
    set_device_range = reinterpret_cast<void (*)(const void*, size_t, int)>(dlsym(lib, "fakeCudartSetDeviceRange"));
    log = reinterpret_cast<const char* (*)()>(dlsym(lib, "fakeCudartLog"));
    reset = reinterpret_cast<void (*)()>(dlsym(lib, "fakeCudartReset"));
    set_device = reinterpret_cast<int (*)(int)>(dlsym(lib, "cudaSetDevice"));
    get_device = reinterpret_cast<int (*)(int*)>(dlsym(lib, "cudaGetDevice"));
    REQUIRE((set_device_range && log && reset && set_device && get_device));
  }
  ~FakeCudart() { dlclose(lib); }
  FakeCudart(const FakeCudart&) = delete;
  FakeCudart& operator=(const FakeCudart&) = delete;

  int Device() const {
    int d = -1;
    get_device(&d);
    return d;
  }
  // How many lines of the log contain `call`.
  int Count(const std::string& call) const {
    const std::string text = log();
    int n = 0;
    for (size_t at = text.find(call); at != std::string::npos; at = text.find(call, at + 1)) ++n;
    return n;
  }

  void* lib;
  void (*set_device_range)(const void*, size_t, int);
  const char* (*log)();
  void (*reset)();
  int (*set_device)(int);
  int (*get_device)(int*);
};

}  // namespace prism::test

#endif  // PRISM_TEST_FAKE_CUDART_H_
