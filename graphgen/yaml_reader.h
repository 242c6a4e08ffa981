// Strict YAML map reading with full key paths in every error.
//
// A MapReader wraps one YAML mapping node at a key path ("parallel"). Each
// Get* consumes a key; Finish() reports any key that was not consumed as
// unknown. Errors are absl::Status values whose message starts with the full
// path of the key ("parallel.tp: ..."); yaml-cpp exceptions never escape.
// Not thread-safe; lives for the parse of one document.
#ifndef PRISM_GRAPHGEN_YAML_READER_H_
#define PRISM_GRAPHGEN_YAML_READER_H_

#include <cstdint>
#include <set>
#include <string>

#include "absl/status/status.h"
#include "yaml-cpp/yaml.h"

namespace prism::graphgen {

class MapReader {
 public:
  // `node` must outlive the reader. A null/absent node reads as an empty map.
  MapReader(const YAML::Node& node, std::string path);
  MapReader(const MapReader&) = delete;
  MapReader& operator=(const MapReader&) = delete;

  // OK unless the node is present but not a mapping.
  absl::Status CheckIsMap() const;
  bool Has(const std::string& key) const;

  // Each leaves `out` untouched when the key is absent. Integers must be
  // >= min_value (default 1: zero and negative values are refused).
  absl::Status GetUint(const std::string& key, uint64_t& out, uint64_t min_value = 1);
  absl::Status GetUint32(const std::string& key, uint32_t& out, uint32_t min_value = 1);
  absl::Status GetDouble(const std::string& key, double& out, double min_exclusive, double max_inclusive);
  absl::Status GetBool(const std::string& key, bool& out);
  // UTF-8 text only (it may end up in the graph).
  absl::Status GetString(const std::string& key, std::string& out);
  // A nested mapping reader; consumes the key.
  YAML::Node Child(const std::string& key);

  // Unknown keys (not consumed) → error naming the first one.
  absl::Status Finish() const;

  std::string PathOf(const std::string& key) const;

 private:
  absl::Status Scalar(const std::string& key, YAML::Node& out);

  YAML::Node node_;
  std::string path_;
  std::set<std::string> consumed_;
};

// "path: reason" as InvalidArgument.
absl::Status KeyError(const std::string& path, const std::string& reason);

// Text from an input file made safe to put in an error message: printable
// ASCII only (other bytes become '?'), at most `max_chars` characters (then
// "..."). Input files may be anything; errors must not replay their bytes.
std::string Excerpt(const std::string& text, size_t max_chars = 32);

// Whether `text` is well-formed UTF-8 (what protobuf's string fields need:
// a graph with other bytes in a name would not read back).
bool IsUtf8(const std::string& text);

// Whole-document checks yaml-cpp does not make: no mapping has the same key
// twice (yaml-cpp keeps the first silently), nesting is at most 32 deep, and
// the document expands to at most 100,000 nodes (aliases counted each use).
// `path` prefixes the key paths in errors ("" for the job document).
absl::Status CheckDocument(const YAML::Node& doc, const std::string& path = "");

}  // namespace prism::graphgen

#endif  // PRISM_GRAPHGEN_YAML_READER_H_
