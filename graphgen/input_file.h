// Reading prism-graphgen's text inputs (job files, compute tables) safely.
//
// Only a regular file of at most limits::kMaxInputFileBytes (16 MiB) is read:
// a directory, a device (/dev/zero), a FIFO or a socket is refused by name
// before any byte is read, and a file with NUL bytes is refused as not text.
// Errors never contain the file's bytes. Thread-safe (no shared state).
#ifndef PRISM_GRAPHGEN_INPUT_FILE_H_
#define PRISM_GRAPHGEN_INPUT_FILE_H_

#include <string>

#include "absl/status/statusor.h"

namespace prism::graphgen {

// The whole file. `what` names it in errors ("job file", "compute table").
// NotFound when it cannot be opened; InvalidArgument for the rest.
absl::StatusOr<std::string> ReadInputFile(const std::string& path, const std::string& what);

}  // namespace prism::graphgen

#endif  // PRISM_GRAPHGEN_INPUT_FILE_H_
