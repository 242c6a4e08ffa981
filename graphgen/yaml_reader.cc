#include "graphgen/yaml_reader.h"

#include <cerrno>
#include <cmath>
#include <cstdlib>

#include "absl/strings/str_cat.h"

namespace prism::graphgen {

absl::Status KeyError(const std::string& path, const std::string& reason) {
  return absl::InvalidArgumentError(absl::StrCat(path, ": ", reason));
}

std::string Excerpt(const std::string& text, size_t max_chars) {
  std::string out;
  for (size_t i = 0; i < text.size() && i < max_chars; ++i) {
    const unsigned char c = static_cast<unsigned char>(text[i]);
    out.push_back(c >= 0x20 && c < 0x7f ? static_cast<char>(c) : '?');
  }
  if (text.size() > max_chars) out += "...";
  return out;
}

bool IsUtf8(const std::string& text) {
  size_t i = 0;
  while (i < text.size()) {
    const unsigned char c = static_cast<unsigned char>(text[i]);
    size_t extra = 0;
    uint32_t cp = 0;
    if (c < 0x80) { ++i; continue; }
    if ((c & 0xe0) == 0xc0) extra = 1, cp = c & 0x1f;
    else if ((c & 0xf0) == 0xe0) extra = 2, cp = c & 0x0f;
    else if ((c & 0xf8) == 0xf0) extra = 3, cp = c & 0x07;
    else return false;
    if (i + extra >= text.size()) return false;  // truncated sequence
    for (size_t k = 1; k <= extra; ++k) {
      const unsigned char d = static_cast<unsigned char>(text[i + k]);
      if ((d & 0xc0) != 0x80) return false;
      cp = (cp << 6) | (d & 0x3f);
    }
    static constexpr uint32_t kMin[] = {0, 0x80, 0x800, 0x10000};
    if (cp < kMin[extra] || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) return false;  // overlong, surrogate
    i += extra + 1;
  }
  return true;
}

namespace {

constexpr int kMaxDepth = 32;
// Nodes one document may expand to, aliases counted each time they are used:
// a job file has a few hundred; nested aliases ("billion laughs") would make
// every later walk of the document take exponential time.
constexpr size_t kMaxExpandedNodes = 100000;

std::string Join(const std::string& path, const std::string& key) {
  return path.empty() ? key : absl::StrCat(path, ".", key);
}

absl::Status CheckNode(const YAML::Node& node, const std::string& path, int depth, size_t* visited) {
  if (depth > kMaxDepth)
    return KeyError(path.empty() ? "<document>" : path, "is nested too deeply (a job file is a few levels deep)");
  if (++*visited > kMaxExpandedNodes)
    return KeyError(path.empty() ? "<document>" : path,
                    absl::StrCat("makes the document expand to over ", kMaxExpandedNodes, " nodes (aliases of ",
                                 "aliases?); a job file has a few hundred: write the values out"));
  if (node.IsSequence()) {
    for (size_t i = 0; i < node.size(); ++i)
      if (auto s = CheckNode(node[i], absl::StrCat(path, "[", i, "]"), depth + 1, visited); !s.ok()) return s;
    return absl::OkStatus();
  }
  if (!node.IsMap()) return absl::OkStatus();
  std::set<std::string> keys;
  for (const auto& kv : node) {
    const std::string key = kv.first.IsScalar() ? kv.first.Scalar() : "<complex key>";
    if (!keys.insert(key).second)
      return KeyError(Join(path, Excerpt(key)), "appears twice in one mapping; keep one of them");
    if (auto s = CheckNode(kv.second, Join(path, Excerpt(key)), depth + 1, visited); !s.ok()) return s;
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status CheckDocument(const YAML::Node& doc, const std::string& path) {
  size_t visited = 0;
  return CheckNode(doc, path, 0, &visited);
}

MapReader::MapReader(const YAML::Node& node, std::string path)
    : node_(node.IsDefined() ? node : YAML::Node()), path_(std::move(path)) {}

std::string MapReader::PathOf(const std::string& key) const {
  return path_.empty() ? key : absl::StrCat(path_, ".", key);
}

absl::Status MapReader::CheckIsMap() const {
  if (!node_.IsDefined() || node_.IsNull() || node_.IsMap()) return absl::OkStatus();
  return KeyError(path_.empty() ? "<document>" : path_, "must be a mapping of keys to values");
}

bool MapReader::Has(const std::string& key) const {
  return node_.IsMap() && node_[key].IsDefined() && !node_[key].IsNull();
}

absl::Status MapReader::Scalar(const std::string& key, YAML::Node& out) {
  consumed_.insert(key);
  const YAML::Node& map = node_;
  out = map[key];
  if (!out.IsScalar()) return KeyError(PathOf(key), "must be a single value, not a list or mapping");
  return absl::OkStatus();
}

absl::Status MapReader::GetUint(const std::string& key, uint64_t& out, uint64_t min_value) {
  if (!Has(key)) {
    consumed_.insert(key);
    return absl::OkStatus();
  }
  YAML::Node v;
  if (auto s = Scalar(key, v); !s.ok()) return s;
  const std::string text = v.Scalar();
  errno = 0;
  char* end = nullptr;
  const long long parsed = std::strtoll(text.c_str(), &end, 10);
  if (text.empty() || end == nullptr || *end != '\0' || errno == ERANGE)
    return KeyError(PathOf(key), absl::StrCat("must be a whole number, got '", Excerpt(text), "'"));
  if (parsed < 0 || static_cast<uint64_t>(parsed) < min_value)
    return KeyError(PathOf(key), absl::StrCat("must be at least ", min_value, ", got ", parsed));
  out = static_cast<uint64_t>(parsed);
  return absl::OkStatus();
}

absl::Status MapReader::GetUint32(const std::string& key, uint32_t& out, uint32_t min_value) {
  uint64_t v = out;
  if (auto s = GetUint(key, v, min_value); !s.ok()) return s;
  if (v > UINT32_MAX) return KeyError(PathOf(key), absl::StrCat("is too large (", v, ")"));
  out = static_cast<uint32_t>(v);
  return absl::OkStatus();
}

absl::Status MapReader::GetDouble(const std::string& key, double& out, double min_exclusive,
                                  double max_inclusive) {
  if (!Has(key)) {
    consumed_.insert(key);
    return absl::OkStatus();
  }
  YAML::Node v;
  if (auto s = Scalar(key, v); !s.ok()) return s;
  const std::string text = v.Scalar();
  char* end = nullptr;
  const double parsed = std::strtod(text.c_str(), &end);
  if (text.empty() || end == nullptr || *end != '\0' || !std::isfinite(parsed))
    return KeyError(PathOf(key), absl::StrCat("must be a number, got '", Excerpt(text), "'"));
  if (!(parsed > min_exclusive && parsed <= max_inclusive))
    return KeyError(PathOf(key), absl::StrCat("must be in (", min_exclusive, ", ", max_inclusive, "], got ",
                                              Excerpt(text)));
  out = parsed;
  return absl::OkStatus();
}

absl::Status MapReader::GetBool(const std::string& key, bool& out) {
  if (!Has(key)) {
    consumed_.insert(key);
    return absl::OkStatus();
  }
  YAML::Node v;
  if (auto s = Scalar(key, v); !s.ok()) return s;
  const std::string& t = v.Scalar();
  if (t == "true" || t == "True" || t == "yes" || t == "on") out = true;
  else if (t == "false" || t == "False" || t == "no" || t == "off") out = false;
  else return KeyError(PathOf(key), absl::StrCat("must be true or false, got '", Excerpt(t), "'"));
  return absl::OkStatus();
}

absl::Status MapReader::GetString(const std::string& key, std::string& out) {
  if (!Has(key)) {
    consumed_.insert(key);
    return absl::OkStatus();
  }
  YAML::Node v;
  if (auto s = Scalar(key, v); !s.ok()) return s;
  if (!IsUtf8(v.Scalar())) return KeyError(PathOf(key), "must be UTF-8 text");
  out = v.Scalar();
  return absl::OkStatus();
}

YAML::Node MapReader::Child(const std::string& key) {
  consumed_.insert(key);
  if (!node_.IsMap()) return YAML::Node();
  const YAML::Node& map = node_;
  return map[key];
}

absl::Status MapReader::Finish() const {
  if (!node_.IsMap()) return absl::OkStatus();
  for (const auto& kv : node_) {
    std::string key;
    try {
      key = kv.first.as<std::string>();
    } catch (const YAML::Exception&) {
      return KeyError(path_.empty() ? "<document>" : path_, "has a key that is not a plain string");
    }
    if (!consumed_.contains(key))
      return KeyError(PathOf(Excerpt(key)), "unknown key (check the spelling; docs/graphgen.md lists the keys)");
  }
  return absl::OkStatus();
}

}  // namespace prism::graphgen
