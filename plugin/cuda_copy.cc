#include "plugin/cuda_copy.h"

#include <dlfcn.h>

namespace prism::plugin {
namespace {
constexpr int kCudaMemcpyDefault = 4;
}  // namespace

bool CudaCopier::Load(std::string* why) {
  std::call_once(once_, [this] {
    const char* names[] = {"libcudart.so", "libcudart.so.13", "libcudart.so.12",
                           "libcudart.so.11.0"};
    void* lib = nullptr;
    for (const char* name : names) {
      lib = dlopen(name, RTLD_NOW | RTLD_LOCAL);
      if (lib != nullptr) break;
    }
    if (lib == nullptr) {
      load_error_ = "cannot dlopen libcudart.so* (GPU buffers need the CUDA runtime; "
                    "put it on LD_LIBRARY_PATH or unset PRISM_GDR/PRISM_DMABUF)";
      return;
    }
    memcpy_ = reinterpret_cast<MemcpyFn>(dlsym(lib, "cudaMemcpy"));
    error_string_ = reinterpret_cast<ErrorStringFn>(dlsym(lib, "cudaGetErrorString"));
    memset_ = reinterpret_cast<MemsetFn>(dlsym(lib, "cudaMemset"));
    if (memcpy_ == nullptr || memset_ == nullptr) {
      load_error_ = "libcudart has no cudaMemcpy/cudaMemset";
      return;
    }
    loaded_ = true;
  });
  if (!loaded_ && why != nullptr) *why = load_error_;
  return loaded_;
}

bool CudaCopier::Copy(void* dst, const void* src, size_t bytes, std::string* why) const {
  if (!loaded_) {
    if (why != nullptr) *why = load_error_;
    return false;
  }
  const int err = memcpy_(dst, src, bytes, kCudaMemcpyDefault);
  if (err == 0) return true;
  if (why != nullptr) {
    *why = std::string("cudaMemcpy failed: ") +
           (error_string_ != nullptr ? error_string_(err) : std::to_string(err));
  }
  return false;
}

bool CudaCopier::Memset(void* dst, int value, size_t bytes, std::string* why) const {
  if (!loaded_) {
    if (why != nullptr) *why = load_error_;
    return false;
  }
  const int err = memset_(dst, value, bytes);
  if (err == 0) return true;
  if (why != nullptr) {
    *why = std::string("cudaMemset failed: ") +
           (error_string_ != nullptr ? error_string_(err) : std::to_string(err));
  }
  return false;
}

}  // namespace prism::plugin
