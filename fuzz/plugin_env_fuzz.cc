// libFuzzer target: the plugin's reading of its PRISM_* environment
// (plugin/settings.h), which the training process's environment controls.
// The input is split at '\n' into entries "<index byte><value>": the byte
// picks one registry variable, the rest is its value (NULs cut it). Then
// LoadSettings, DescribeSettings and the NIC names from PRISM_NIC_NAME are
// computed, and every variable is unset again. A NIC name pattern that
// LoadSettings kept must format without '%' left but for "%%" escapes'
// output, else the target traps.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

#include "plugin/settings.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const auto params = prism::plugin::AllEnvParams();
  std::vector<const char*> set;
  size_t start = 0;
  const std::string text(reinterpret_cast<const char*>(data), size);
  while (start < text.size()) {
    size_t end = text.find('\n', start);
    if (end == std::string::npos) end = text.size();
    if (end > start) {
      const auto& p = params[static_cast<unsigned char>(text[start]) % params.size()];
      const std::string value = text.substr(start + 1, end - start - 1);
      setenv(p.name, value.c_str(), 1);  // c_str: a NUL ends the value, as in a real environment
      set.push_back(p.name);
    }
    start = end + 1;
  }
  std::string warnings;
  const prism::plugin::Settings s = prism::plugin::LoadSettings(&warnings);
  (void)prism::plugin::DescribeSettings();
  if (!prism::plugin::NicNamePatternProblem(s.nic.name_pattern).empty()) __builtin_trap();
  for (int d = 0; d < s.nic.count; ++d) {
    const std::string name = prism::plugin::FormatNicName(s.nic.name_pattern, d);
    if (name.size() > prism::plugin::kMaxNicNamePatternBytes * 8) __builtin_trap();
  }
  for (const char* name : set) unsetenv(name);
  return 0;
}
