#include "plugin/host_identity.h"

#include <unistd.h>

#include <cinttypes>
#include <cstdio>
#include <fstream>

namespace prism::plugin {
namespace {

constexpr uint64_t kFnvOffset = 0xcbf29ce484222325ull;
constexpr uint64_t kFnvPrime = 0x100000001b3ull;

uint64_t Fnv1a(uint64_t h, std::string_view text) {
  for (char c : text) {
    h ^= static_cast<unsigned char>(c);
    h *= kFnvPrime;
  }
  return h;
}

std::string FirstLine(const char* path) {
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);
  return line;
}

std::string LinkTarget(const char* path) {
  char buf[256];
  const ssize_t n = readlink(path, buf, sizeof(buf));
  return n > 0 ? std::string(buf, static_cast<size_t>(n)) : std::string();
}

}  // namespace

uint64_t SameHostKeyOf(std::string_view boot_id, std::string_view netns) {
  if (boot_id.empty() || netns.empty()) return 0;
  uint64_t h = Fnv1a(kFnvOffset, boot_id);
  h = Fnv1a(h, "\n");
  h = Fnv1a(h, netns);
  return h == 0 ? 1 : h;
}

uint64_t SameHostKey() {
  return SameHostKeyOf(FirstLine("/proc/sys/kernel/random/boot_id"), LinkTarget("/proc/self/ns/net"));
}

std::string SameHostSocketName(uint64_t listen_id) {
  char name[48];
  std::snprintf(name, sizeof(name), "prism-net/%016" PRIx64, listen_id);
  return name;
}

}  // namespace prism::plugin
