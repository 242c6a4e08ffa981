// Catches what the plugin logs, the way NCCL's logger is called, for tests
// that check a warning's words. One process-wide buffer (NCCL's logger is a
// plain function pointer, so it cannot carry a `this`): a test calls
// Capture(&logger) first, which empties it, then reads Text().
// Thread-safe: the plugin may log from any of its threads.
#ifndef PRISM_TEST_PLUGIN_LOG_CAPTURE_H_
#define PRISM_TEST_PLUGIN_LOG_CAPTURE_H_

#include <cstdarg>
#include <cstdio>
#include <mutex>
#include <string>

#include "plugin/log.h"

namespace prism::plugin::testing {

class LogCapture {
 public:
  // Routes `logger` here and forgets what was caught before.
  static void Capture(Logger* logger) {
    logger->Set(&Log);
    std::lock_guard<std::mutex> lock(mu());
    text().clear();
  }
  // What was logged since Capture, one line per call.
  static std::string Text() {
    std::lock_guard<std::mutex> lock(mu());
    return text();
  }

 private:
  static void Log(prism_ncclDebugLogLevel, unsigned long, const char*, int, const char* fmt, ...) {
    char line[2048];
    va_list args;
    va_start(args, fmt);
    std::vsnprintf(line, sizeof(line), fmt, args);
    va_end(args);
    std::lock_guard<std::mutex> lock(mu());
    text() += line;
    text() += "\n";
  }
  static std::mutex& mu() {
    static std::mutex m;
    return m;
  }
  static std::string& text() {
    static std::string t;
    return t;
  }
};

}  // namespace prism::plugin::testing

#endif  // PRISM_TEST_PLUGIN_LOG_CAPTURE_H_
