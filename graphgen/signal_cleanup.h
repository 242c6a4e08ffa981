// Removes prism-graphgen's temporary output file when a signal ends the
// process (SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGPIPE, SIGXFSZ), so that an interrupted write
// leaves nothing behind: WriteGraphFile writes "<out>.tmp.<pid>" and renames
// it, and a signal between the two would otherwise leave the temporary.
//
// InstallSignalCleanup() is called once by main() before any file is written;
// the handler removes the registered file (async-signal-safe unlink), restores
// the default action and re-raises the signal, so the exit status still says
// which signal ended the process. Register/Unregister are called by the
// thread that writes; one file is registered at a time.
#ifndef PRISM_GRAPHGEN_SIGNAL_CLEANUP_H_
#define PRISM_GRAPHGEN_SIGNAL_CLEANUP_H_

#include <string>

namespace prism::graphgen {

void InstallSignalCleanup();

// Paths longer than PATH_MAX - 1 are not registered (and not cleaned).
void RegisterTemporaryFile(const std::string& path);
void UnregisterTemporaryFile();

// Registers `path` for its lifetime.
class ScopedTemporaryFile {
 public:
  explicit ScopedTemporaryFile(const std::string& path) { RegisterTemporaryFile(path); }
  ~ScopedTemporaryFile() { UnregisterTemporaryFile(); }
  ScopedTemporaryFile(const ScopedTemporaryFile&) = delete;
  ScopedTemporaryFile& operator=(const ScopedTemporaryFile&) = delete;
};

}  // namespace prism::graphgen

#endif  // PRISM_GRAPHGEN_SIGNAL_CLEANUP_H_
