// A stand-in for libcudart in the plugin's GPU-copy test (CudaCopier): the
// runtime functions the plugin calls, on host memory, each call written to a
// log the test reads back (fakeCudartLog). A range of host memory can be
// declared "device memory" of a device (fakeCudartSetDeviceRange), so that
// cudaPointerGetAttributes reports it so. The legacy cudaMemcpy/cudaMemset
// are here too, and logged, so that a test sees if anything calls them.
#include <cstddef>
#include <cstring>
#include <mutex>
#include <string>

namespace {

std::mutex mu;
std::string log_text;                  // guarded by mu
const char* range_begin = nullptr;     // guarded by mu
size_t range_bytes = 0;                // guarded by mu
int range_device = 0;                  // guarded by mu
int streams_made = 0;                  // guarded by mu
thread_local int current_device = 0;

void Log(const std::string& line) {
  std::lock_guard<std::mutex> lock(mu);
  log_text += line + "\n";
}

struct Attributes {
  int type;
  int device;
  void* device_pointer;
  void* host_pointer;
};

}  // namespace

#define FAKE_EXPORT extern "C" __attribute__((visibility("default")))

FAKE_EXPORT void fakeCudartSetDeviceRange(const void* begin, size_t bytes, int device) {
  std::lock_guard<std::mutex> lock(mu);
  range_begin = static_cast<const char*>(begin);
  range_bytes = bytes;
  range_device = device;
}
FAKE_EXPORT const char* fakeCudartLog() {
  static std::string copy;
  std::lock_guard<std::mutex> lock(mu);
  copy = log_text;
  return copy.c_str();
}
// Empties the log and numbers streams from 1 again.
FAKE_EXPORT void fakeCudartReset() {
  std::lock_guard<std::mutex> lock(mu);
  log_text.clear();
  streams_made = 0;
}

FAKE_EXPORT int cudaMemcpy(void* dst, const void* src, size_t n, int) {
  std::memcpy(dst, src, n);
  Log("cudaMemcpy (legacy default stream)");
  return 0;
}
FAKE_EXPORT int cudaMemset(void* dst, int value, size_t n) {
  std::memset(dst, value, n);
  Log("cudaMemset (legacy default stream)");
  return 0;
}
FAKE_EXPORT int cudaMemcpyAsync(void* dst, const void* src, size_t n, int kind, void* stream) {
  std::memcpy(dst, src, n);
  Log("cudaMemcpyAsync " + std::to_string(n) + " kind " + std::to_string(kind) + " stream " +
      std::to_string(reinterpret_cast<size_t>(stream)) + " device " + std::to_string(current_device));
  return 0;
}
FAKE_EXPORT int cudaMemsetAsync(void* dst, int value, size_t n, void* stream) {
  std::memset(dst, value, n);
  Log("cudaMemsetAsync " + std::to_string(n) + " stream " + std::to_string(reinterpret_cast<size_t>(stream)) +
      " device " + std::to_string(current_device));
  return 0;
}
FAKE_EXPORT int cudaStreamCreateWithFlags(void** stream, unsigned flags) {
  int made;
  {
    std::lock_guard<std::mutex> lock(mu);
    made = ++streams_made;
  }
  *stream = reinterpret_cast<void*>(static_cast<size_t>(made));
  Log("cudaStreamCreateWithFlags flags " + std::to_string(flags) + " -> stream " + std::to_string(made) +
      " device " + std::to_string(current_device));
  return 0;
}
FAKE_EXPORT int cudaStreamSynchronize(void* stream) {
  Log("cudaStreamSynchronize stream " + std::to_string(reinterpret_cast<size_t>(stream)));
  return 0;
}
FAKE_EXPORT int cudaPointerGetAttributes(Attributes* attr, const void* ptr) {
  std::lock_guard<std::mutex> lock(mu);
  const char* p = static_cast<const char*>(ptr);
  const bool device = range_begin != nullptr && p >= range_begin && p < range_begin + range_bytes;
  attr->type = device ? 2 : 0;
  attr->device = device ? range_device : -2;
  attr->device_pointer = device ? const_cast<void*>(ptr) : nullptr;
  attr->host_pointer = device ? nullptr : const_cast<void*>(ptr);
  return 0;
}
FAKE_EXPORT int cudaGetDevice(int* device) {
  *device = current_device;
  return 0;
}
FAKE_EXPORT int cudaSetDevice(int device) {
  current_device = device;
  Log("cudaSetDevice " + std::to_string(device));
  return 0;
}
FAKE_EXPORT int cudaGetLastError() { return 0; }
FAKE_EXPORT const char* cudaGetErrorString(int) { return "fake error"; }
