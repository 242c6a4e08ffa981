// Reading prism-graphgen's text inputs (job files, compute tables) safely.
//
// Only a regular file of at most limits::kMaxInputFileBytes (16 MiB; or
// InputKind::max_bytes) is read:
// a directory, a device (/dev/zero), a FIFO or a socket is refused by name
// before any byte is read, and a file with NUL bytes is refused as not text.
// Errors never contain the file's bytes. Thread-safe (no shared state).
#ifndef PRISM_GRAPHGEN_INPUT_FILE_H_
#define PRISM_GRAPHGEN_INPUT_FILE_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "common/limits.h"

namespace prism::graphgen {

// What a caller accepts: at most `max_bytes`; `text` refuses NUL bytes;
// `expected` completes "give the path of ..." in errors.
struct InputKind {
  uint64_t max_bytes = limits::kMaxInputFileBytes;
  bool text = true;
  const char* expected = "a YAML file";
};

// The whole file. `what` names it in errors ("job file", "compute table").
// NotFound when it cannot be opened; InvalidArgument for the rest.
absl::StatusOr<std::string> ReadInputFile(const std::string& path, const std::string& what);
absl::StatusOr<std::string> ReadInputFile(const std::string& path, const std::string& what, const InputKind& kind);

}  // namespace prism::graphgen

#endif  // PRISM_GRAPHGEN_INPUT_FILE_H_
