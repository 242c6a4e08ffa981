#include "daemon/rendezvous/gloo_keys.h"

#include <algorithm>
#include <cctype>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "absl/strings/strip.h"

namespace prism::rendezvous {
namespace {

bool AllDigits(absl::string_view s) {
  return !s.empty() && s.size() <= 9 &&
         std::all_of(s.begin(), s.end(), [](char c) { return std::isdigit(static_cast<unsigned char>(c)); });
}

bool IsGroupName(absl::string_view s) {
  const bool hex40 = s.size() == 40 && std::all_of(s.begin(), s.end(), [](char c) {
                       return std::isdigit(static_cast<unsigned char>(c)) || (c >= 'a' && c <= 'f');
                     });
  return AllDigits(s) || hex40;
}

bool IsDeviceType(absl::string_view s) {
  return !s.empty() && s.size() <= 16 &&
         std::all_of(s.begin(), s.end(), [](char c) { return c >= 'a' && c <= 'z'; });
}

// From the "0//" of the default group's prefix on.
std::optional<GlooKey> ParseAt(absl::string_view s, GlooKey k) {
  absl::ConsumePrefix(&s, "default_pg/");
  if (!absl::ConsumePrefix(&s, "0//")) return std::nullopt;
  // "<group>//<device>//<index>/<rank>" or "<device>//<index>/<rank>".
  const size_t first = s.find("//");
  if (first == absl::string_view::npos) return std::nullopt;
  absl::string_view head = s.substr(0, first);
  absl::string_view rest = s.substr(first + 2);
  if (IsGroupName(head)) {
    k.group = std::string(head);
    const size_t second = rest.find("//");
    if (second == absl::string_view::npos) return std::nullopt;
    head = rest.substr(0, second);
    rest = rest.substr(second + 2);
  }
  if (!IsDeviceType(head)) return std::nullopt;
  k.device_type = std::string(head);
  const size_t slash = rest.find('/');
  if (slash == absl::string_view::npos) return std::nullopt;
  const absl::string_view index = rest.substr(0, slash), rank = rest.substr(slash + 1);
  if (!AllDigits(index) || !AllDigits(rank) || !absl::SimpleAtoi(rank, &k.rank)) return std::nullopt;
  k.context = k.key.substr(0, k.key.size() - rank.size() - 1);
  return k;
}

}  // namespace

std::optional<GlooKey> ParseGlooKey(const std::string& store_key) {
  GlooKey k;
  k.key = store_key;
  absl::string_view s = store_key;
  absl::ConsumePrefix(&s, "/");
  // Outer PrefixStores may come first: try every '/'-separated position.
  for (size_t i = 0; i < s.size(); ++i) {
    if (i > 0 && s[i - 1] != '/') continue;
    if (auto parsed = ParseAt(s.substr(i), k)) return parsed;
  }
  return std::nullopt;
}

std::string RecordKey(const std::string& context, int64_t rank) { return absl::StrCat(context, "/", rank); }

}  // namespace prism::rendezvous
