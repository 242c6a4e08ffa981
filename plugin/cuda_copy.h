// Copies between GPU and host memory through the CUDA runtime, loaded with
// dlopen on first use so that the plugin loads where no CUDA is installed.
// Only used when PRISM_GDR/PRISM_DMABUF advertise GPU pointers.
//
// Thread-safe: Load is idempotent and internally synchronised; Copy may be
// called from any thread once Load succeeded.
#ifndef PRISM_PLUGIN_CUDA_COPY_H_
#define PRISM_PLUGIN_CUDA_COPY_H_

#include <cstddef>
#include <mutex>
#include <string>

namespace prism::plugin {

class CudaCopier {
 public:
  CudaCopier() = default;
  CudaCopier(const CudaCopier&) = delete;
  CudaCopier& operator=(const CudaCopier&) = delete;

  // Loads libcudart (libcudart.so, then .so.13/.12/.11). False with `*why`
  // when it cannot.
  bool Load(std::string* why);

  // cudaMemcpy(dst, src, bytes, cudaMemcpyDefault); false with `*why`.
  bool Copy(void* dst, const void* src, size_t bytes, std::string* why) const;
  // cudaMemset(dst, value, bytes); false with `*why`.
  bool Memset(void* dst, int value, size_t bytes, std::string* why) const;

 private:
  using MemcpyFn = int (*)(void*, const void*, size_t, int);
  using ErrorStringFn = const char* (*)(int);

  std::once_flag once_;
  bool loaded_ = false;
  std::string load_error_;
  MemcpyFn memcpy_ = nullptr;
  ErrorStringFn error_string_ = nullptr;
  using MemsetFn = int (*)(void*, int, size_t);
  MemsetFn memset_ = nullptr;
};

}  // namespace prism::plugin

#endif  // PRISM_PLUGIN_CUDA_COPY_H_
