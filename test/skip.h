// PRISM_SKIP(reason): ends a test case that cannot run in this environment
// (no root, no python3, no non-loopback address) so that the skip is seen.
// Under ctest (prism_discover_tests sets PRISM_TEST_SKIP_EXIT=77, the
// entries' SKIP_RETURN_CODE) it prints the reason and exits the process with
// 77, which ctest reports as "Skipped"; run by hand it WARNs and the test
// case returns. Use it only at the top of a test case, before any state that
// needs cleaning up.
#ifndef PRISM_TEST_SKIP_H_
#define PRISM_TEST_SKIP_H_

#include <cstdio>
#include <cstdlib>
#include <string>

#include <catch2/catch.hpp>

namespace prism::test {

// The exit code ctest treats as a skip, or 0 when not run by ctest.
inline int SkipExitCode() {
  const char* v = std::getenv("PRISM_TEST_SKIP_EXIT");
  return v != nullptr ? std::atoi(v) : 0;
}

}  // namespace prism::test

#define PRISM_SKIP(reason)                                              \
  do {                                                                  \
    if (const int prism_skip_code = ::prism::test::SkipExitCode()) {    \
      std::fprintf(stderr, "SKIPPED: %s\n", std::string(reason).c_str()); \
      std::fflush(nullptr);                                             \
      std::_Exit(prism_skip_code);                                      \
    }                                                                   \
    WARN(reason);                                                       \
    return;                                                             \
  } while (false)

#endif  // PRISM_TEST_SKIP_H_
