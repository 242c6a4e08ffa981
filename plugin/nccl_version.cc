// Which NCCL loaded the plugin: the ncclGetVersion of the library that holds
// the logger NCCL passes to init (comm.h).
#include <dlfcn.h>

#include "plugin/comm.h"

namespace prism::plugin {

int NcclVersionOfLogger(prism_ncclDebugLogger_t logger) {
  if (logger == nullptr) return 0;
  Dl_info info{};
  if (dladdr(reinterpret_cast<void*>(logger), &info) == 0 || info.dli_fname == nullptr) return 0;
  // Already loaded (it called us): RTLD_NOLOAD only takes a reference.
  void* lib = dlopen(info.dli_fname, RTLD_LAZY | RTLD_NOLOAD);
  if (lib == nullptr) return 0;
  using GetVersion = int (*)(int*);  // ncclResult_t ncclGetVersion(int* version)
  int version = 0;
  if (auto* get = reinterpret_cast<GetVersion>(dlsym(lib, "ncclGetVersion")); get == nullptr || get(&version) != 0)
    version = 0;
  dlclose(lib);
  return version;
}

}  // namespace prism::plugin
