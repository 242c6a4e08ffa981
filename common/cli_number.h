// The one CLI11 validator prismd and prism-graphgen share for numeric flags.
// Header-only: include it only from targets that link CLI11::CLI11.
#ifndef PRISM_COMMON_CLI_NUMBER_H_
#define PRISM_COMMON_CLI_NUMBER_H_

#include <cstdlib>
#include <string>

#include "CLI/CLI.hpp"

namespace prism {

// Checks a flag's text before CLI11 converts it: CLI11 would wrap "-5" into
// an unsigned, and NaN would pass any later comparison. The error quotes at
// most 32 characters of the text, printable ASCII only (other bytes become
// '?'): a command line may hold anything. Stateless; thread-safe.
inline CLI::Validator NonNegativeNumber() {
  return CLI::Validator(
      [](std::string& text) -> std::string {
        char* end = nullptr;
        const double v = std::strtod(text.c_str(), &end);
        if (!text.empty() && end != nullptr && *end == '\0' && v >= 0) return "";
        std::string shown;
        for (size_t i = 0; i < text.size() && i < 32; ++i) {
          const unsigned char c = static_cast<unsigned char>(text[i]);
          shown.push_back(c >= 0x20 && c < 0x7f ? static_cast<char>(c) : '?');
        }
        if (text.size() > 32) shown += "...";
        return "must be a number, zero or more, got '" + shown + "'";
      },
      "NUMBER>=0", "NonNegativeNumber");
}

}  // namespace prism

#endif  // PRISM_COMMON_CLI_NUMBER_H_
