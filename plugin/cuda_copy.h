// Copies between GPU and host memory through the CUDA runtime, loaded with
// dlopen on first use so that the plugin loads where no CUDA is installed.
// Only used when PRISM_GDR/PRISM_DMABUF advertise GPU pointers.
//
// Every copy and memset runs on a stream of the copier's own, created
// non-blocking, on the device that holds the GPU side of the copy (asked
// once per registered region, DeviceOf, and passed in), and returns once
// it is done. Never the legacy default stream: PyTorch's
// default stream is that stream, and once the program waits on a
// collective (ProcessGroupNCCL makes the current stream wait for the
// operation's end), anything queued there waits for the collective's
// kernel, while the kernel waits for the very send or receive that queued
// it: a deadlock. The calling thread's current device is restored after.
//
// Streams are leased from a pool per device (one per thread copying at
// once) and live until the process exits.
//
// Thread-safe: Load is idempotent and internally synchronised; Copy and
// Memset may be called from any thread once Load succeeded.
#ifndef PRISM_PLUGIN_CUDA_COPY_H_
#define PRISM_PLUGIN_CUDA_COPY_H_

#include <cstddef>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace prism::plugin {

class CudaCopier {
 public:
  // The CUDA runtime's names Load tries, in order.
  static std::vector<std::string> DefaultLibraries();

  explicit CudaCopier(std::vector<std::string> libraries = DefaultLibraries());
  ~CudaCopier();
  CudaCopier(const CudaCopier&) = delete;
  CudaCopier& operator=(const CudaCopier&) = delete;

  // Loads the first of the libraries that opens and has every function
  // used here. False with `*why` when none does.
  bool Load(std::string* why);

  // The device `ptr` lives on, or -1 for host memory (or an unknown
  // pointer). For regMr, once per region: the copies below take its answer.
  int DeviceOf(const void* ptr) const;

  // cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault) on the copier's
  // stream of `device` (the GPU side's, DeviceOf; -1: the calling thread's
  // current device), then waits for it; false with `*why`.
  bool Copy(void* dst, const void* src, size_t bytes, int device, std::string* why);
  // cudaMemsetAsync(dst, value, bytes) the same way; false with `*why`.
  bool Memset(void* dst, int value, size_t bytes, int device, std::string* why);

 private:
  struct Api;
  // Runs `work(stream)` on a leased stream of `device` (-1: the calling
  // thread's current device), then synchronises it.
  template <typename Work>
  bool OnStream(int device, const char* what, Work&& work, std::string* why);
  std::string ErrorText(const char* call, int err) const;

  const std::vector<std::string> libraries_;
  std::once_flag once_;
  bool loaded_ = false;
  std::string load_error_;
  std::unique_ptr<const Api> api_;  // set once by Load
  std::mutex mu_;
  std::map<int, std::vector<void*>> idle_streams_;  // by device; guarded by mu_
};

}  // namespace prism::plugin

#endif  // PRISM_PLUGIN_CUDA_COPY_H_
