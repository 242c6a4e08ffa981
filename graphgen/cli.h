// The prism-graphgen command line, as a library function so tests can run it.
//
//   prism-graphgen job JOB.yaml -o G
//   prism-graphgen collective --op OP --bytes SIZE --ranks N [...] -o G
//   prism-graphgen inspect G [--json]
//   prism-graphgen chakra-export G -o DIR [--name NAME]
//   prism-graphgen chakra-import DIR [--name NAME] -o G
//   prism-graphgen capture-from-graph G --ranks LIST -o DIR
//   prism-graphgen extrapolate RECORDING... [--cluster FILE] [--name NAME] -o G
//
// Exit codes: 0 success; 2 bad input (job file, flags, unreadable graph, a
// graph beyond prismd's limits (common/limits.h), or more than this machine's
// memory holds: std::bad_alloc is caught and reported); 1 failure to write
// the output. On any failure no output file is created (graph files are
// written atomically, and only after validation passes); a signal handler
// that main() installs (graphgen/signal_cleanup.h) removes the temporary file
// of a write that a signal interrupts. Input files are read only when they
// are regular files of at most 16 MiB (graphgen/input_file.h), and errors
// never replay their bytes. Writes only to `out`/`err` and the output file.
// Thread-compatible.
#ifndef PRISM_GRAPHGEN_CLI_H_
#define PRISM_GRAPHGEN_CLI_H_

#include <ostream>
#include <string>
#include <vector>

namespace prism::graphgen {

inline constexpr int kExitOk = 0;
inline constexpr int kExitWriteFailed = 1;
inline constexpr int kExitBadInput = 2;

// args[0] is the program name.
int RunGraphgenCli(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);

}  // namespace prism::graphgen

#endif  // PRISM_GRAPHGEN_CLI_H_
