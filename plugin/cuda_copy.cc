#include "plugin/cuda_copy.h"

#include <dlfcn.h>

namespace prism::plugin {
namespace {

constexpr int kCudaMemcpyDefault = 4;
constexpr unsigned kCudaStreamNonBlocking = 1;
constexpr int kCudaMemoryTypeDevice = 2;
constexpr int kCudaMemoryTypeManaged = 3;

// cudaPointerAttributes (CUDA 11 and later) as far as it is read here,
// with room for fields a later runtime may append.
struct PointerAttributes {
  int type;
  int device;
  void* device_pointer;
  void* host_pointer;
  char room_for_more[64];
};

}  // namespace

// The runtime's functions used here (cudaError_t is an int, a stream a pointer).
struct CudaCopier::Api {
  int (*memcpy_async)(void*, const void*, size_t, int, void*) = nullptr;
  int (*memset_async)(void*, int, size_t, void*) = nullptr;
  int (*stream_create_with_flags)(void**, unsigned) = nullptr;
  int (*stream_synchronize)(void*) = nullptr;
  int (*pointer_get_attributes)(PointerAttributes*, const void*) = nullptr;
  int (*get_device)(int*) = nullptr;
  int (*set_device)(int) = nullptr;
  int (*get_last_error)() = nullptr;
  const char* (*get_error_string)(int) = nullptr;
};

std::vector<std::string> CudaCopier::DefaultLibraries() {
  return {"libcudart.so", "libcudart.so.13", "libcudart.so.12", "libcudart.so.11.0"};
}

CudaCopier::CudaCopier(std::vector<std::string> libraries) : libraries_(std::move(libraries)) {}

CudaCopier::~CudaCopier() = default;

namespace {

template <typename Fn>
bool Bind(void* lib, const char* name, Fn* fn, std::string* missing) {
  *fn = reinterpret_cast<Fn>(dlsym(lib, name));
  if (*fn == nullptr) *missing += std::string(missing->empty() ? "" : ", ") + name;
  return *fn != nullptr;
}

}  // namespace

bool CudaCopier::Load(std::string* why) {
  std::call_once(once_, [this] {
    std::string tried;
    for (const std::string& name : libraries_) {
      void* lib = dlopen(name.c_str(), RTLD_NOW | RTLD_LOCAL);
      if (lib == nullptr) {
        tried += (tried.empty() ? "" : ", ") + name;
        continue;
      }
      auto api = std::make_unique<Api>();
      std::string missing;
      Bind(lib, "cudaMemcpyAsync", &api->memcpy_async, &missing);
      Bind(lib, "cudaMemsetAsync", &api->memset_async, &missing);
      Bind(lib, "cudaStreamCreateWithFlags", &api->stream_create_with_flags, &missing);
      Bind(lib, "cudaStreamSynchronize", &api->stream_synchronize, &missing);
      Bind(lib, "cudaPointerGetAttributes", &api->pointer_get_attributes, &missing);
      Bind(lib, "cudaGetDevice", &api->get_device, &missing);
      Bind(lib, "cudaSetDevice", &api->set_device, &missing);
      Bind(lib, "cudaGetLastError", &api->get_last_error, &missing);
      Bind(lib, "cudaGetErrorString", &api->get_error_string, &missing);
      if (!missing.empty()) {
        load_error_ = name + " lacks " + missing + " (a CUDA runtime of 11.0 or later is needed for GPU buffers)";
        return;
      }
      api_ = std::move(api);
      loaded_ = true;
      return;
    }
    load_error_ = "cannot dlopen the CUDA runtime (tried " + tried +
                  "; GPU buffers need it: put it on LD_LIBRARY_PATH or unset PRISM_GDR/PRISM_DMABUF)";
  });
  if (!loaded_ && why != nullptr) *why = load_error_;
  return loaded_;
}

int CudaCopier::DeviceOf(const void* ptr) const {
  if (!loaded_) return -1;
  PointerAttributes attr{};
  if (api_->pointer_get_attributes(&attr, ptr) != 0) {
    api_->get_last_error();  // an unknown pointer: host memory to us; leave no error behind
    return -1;
  }
  return attr.type == kCudaMemoryTypeDevice || attr.type == kCudaMemoryTypeManaged ? attr.device : -1;
}

std::string CudaCopier::ErrorText(const char* call, int err) const {
  return std::string(call) + " failed: " + api_->get_error_string(err);
}

template <typename Work>
bool CudaCopier::OnStream(int device, const char* what, Work&& work, std::string* why) {
  int current = 0;
  if (int err = api_->get_device(&current); err != 0) {
    *why = ErrorText("cudaGetDevice", err);
    return false;
  }
  if (device < 0) device = current;
  if (device != current) {
    if (int err = api_->set_device(device); err != 0) {
      *why = ErrorText("cudaSetDevice", err);
      return false;
    }
  }
  void* stream = nullptr;
  {
    std::lock_guard<std::mutex> lock(mu_);
    std::vector<void*>& idle = idle_streams_[device];
    if (!idle.empty()) {
      stream = idle.back();
      idle.pop_back();
    }
  }
  int err = stream != nullptr ? 0 : api_->stream_create_with_flags(&stream, kCudaStreamNonBlocking);
  const char* failed = "cudaStreamCreateWithFlags";
  if (err == 0) {
    err = work(stream);
    failed = what;
    if (err == 0) {
      err = api_->stream_synchronize(stream);
      failed = "cudaStreamSynchronize";
    }
    std::lock_guard<std::mutex> lock(mu_);
    idle_streams_[device].push_back(stream);
  }
  if (device != current) api_->set_device(current);  // NCCL's proxy thread keeps its device
  if (err != 0) *why = ErrorText(failed, err);
  return err == 0;
}

bool CudaCopier::Copy(void* dst, const void* src, size_t bytes, int device, std::string* why) {
  if (!loaded_) {
    *why = load_error_;
    return false;
  }
  return OnStream(device, "cudaMemcpyAsync", [&](void* stream) {
    return api_->memcpy_async(dst, src, bytes, kCudaMemcpyDefault, stream);
  }, why);
}

bool CudaCopier::Memset(void* dst, int value, size_t bytes, int device, std::string* why) {
  if (!loaded_) {
    *why = load_error_;
    return false;
  }
  return OnStream(device, "cudaMemsetAsync", [&](void* stream) {
    return api_->memset_async(dst, value, bytes, stream);
  }, why);
}

}  // namespace prism::plugin
