// NCCL version codes (NCCL_VERSION_CODE, ncclGetVersion): names for them.
#ifndef PRISM_COMMON_NCCL_VERSION_H_
#define PRISM_COMMON_NCCL_VERSION_H_

#include <string>

namespace prism {

// "2.28.9" for 22809 (the X*10000 + Y*100 + Z codes of NCCL 2.9 and later).
inline std::string NcclVersionName(int code) {
  return std::to_string(code / 10000) + "." + std::to_string(code / 100 % 100) + "." + std::to_string(code % 100);
}

}  // namespace prism

#endif  // PRISM_COMMON_NCCL_VERSION_H_
