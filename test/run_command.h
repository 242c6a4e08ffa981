// Runs a shell command line for a test and returns its exit status and what
// it printed (stdout and stderr together), through a scratch file `scratch`
// that it removes. For tests that run prism's binaries end to end.
#ifndef PRISM_TEST_RUN_COMMAND_H_
#define PRISM_TEST_RUN_COMMAND_H_

#include <sys/wait.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <string>
#include <utility>

namespace prism::testing {

inline std::pair<int, std::string> RunCommand(const std::string& command, const std::string& scratch) {
  const int rc = std::system((command + " >" + scratch + " 2>&1").c_str());
  std::ifstream f(scratch);
  std::string text((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  std::remove(scratch.c_str());
  return {WEXITSTATUS(rc), text};
}

}  // namespace prism::testing

#endif  // PRISM_TEST_RUN_COMMAND_H_
