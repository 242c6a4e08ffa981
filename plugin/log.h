// Logging through NCCL's logger only (the function NCCL passes to init).
// Every message starts with "NET/Prism ". Before init, or when NCCL passed no
// logger, messages are dropped.
//
// Thread-safety: Logger is set once (first init) and then only read; NCCL's
// logger is itself thread-safe.
#ifndef PRISM_PLUGIN_LOG_H_
#define PRISM_PLUGIN_LOG_H_

#include <atomic>

#include "plugin/nccl_net_abi.h"

namespace prism::plugin {

class Logger {
 public:
  Logger() = default;
  Logger(const Logger&) = delete;
  Logger& operator=(const Logger&) = delete;

  void Set(prism_ncclDebugLogger_t fn) { fn_.store(fn, std::memory_order_release); }
  // NCCL's logger (null before init): it lives in the libnccl that loaded us.
  prism_ncclDebugLogger_t function() const { return fn_.load(std::memory_order_acquire); }

  // printf-style; `fmt` must not include the "NET/Prism " prefix.
  void Log(prism_ncclDebugLogLevel level, unsigned long flags, const char* file, int line,
           const char* fmt, ...) const __attribute__((format(printf, 6, 7)));

 private:
  std::atomic<prism_ncclDebugLogger_t> fn_{nullptr};
};

}  // namespace prism::plugin

#define PRISM_WARN(logger, ...) \
  (logger).Log(PRISM_NCCL_LOG_WARN, ~0ul, __FILE__, __LINE__, __VA_ARGS__)  /* every subsystem: never filtered */
#define PRISM_INFO(logger, ...)                                                         \
  (logger).Log(PRISM_NCCL_LOG_INFO, kPrismNcclLogNet | kPrismNcclLogInit, __FILE__, __LINE__, \
               __VA_ARGS__)
#define PRISM_TRACE(logger, ...) \
  (logger).Log(PRISM_NCCL_LOG_TRACE, kPrismNcclLogNet, __FILE__, __LINE__, __VA_ARGS__)

#endif  // PRISM_PLUGIN_LOG_H_
