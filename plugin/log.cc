#include "plugin/log.h"

#include <cstdarg>
#include <cstdio>

namespace prism::plugin {

void Logger::Log(prism_ncclDebugLogLevel level, unsigned long flags, const char* file, int line,
                 const char* fmt, ...) const {
  prism_ncclDebugLogger_t fn = fn_.load(std::memory_order_acquire);
  if (fn == nullptr) return;
  char text[1024];
  va_list args;
  va_start(args, fmt);
  std::vsnprintf(text, sizeof(text), fmt, args);
  va_end(args);
  fn(level, flags, file, line, "NET/Prism %s", text);
}

}  // namespace prism::plugin
