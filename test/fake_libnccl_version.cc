// A stand-in for libnccl in the NCCL-version lookup test: a logger (as NCCL
// hands its ncclDebugLog to plugin init) and ncclGetVersion in one library.
#include <cstdarg>

extern "C" {
__attribute__((visibility("default"))) void fakeNcclDebugLog(int, unsigned long, const char*, int, const char*,
                                                             ...) {}
__attribute__((visibility("default"))) int ncclGetVersion(int* version) {
  *version = 22707;
  return 0;
}
}
