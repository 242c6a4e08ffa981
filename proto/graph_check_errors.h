// The two errors the graph checks return (internal to proto/: graph_file.cc,
// graph_validate.cc, graph_membership.cc, graph_point_to_point.cc). Every
// message names the problem and the fix. Pure functions; thread-safe.
#ifndef PRISM_PROTO_GRAPH_CHECK_ERRORS_H_
#define PRISM_PROTO_GRAPH_CHECK_ERRORS_H_

#include <cstdint>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace prism::graph::check {

// InvalidArgument: a broken structure ("invalid graph: <what> (regenerate it
// with prism-graphgen)").
inline absl::Status Invalid(std::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat("invalid graph: ", std::string(what),
                                                 " (regenerate it with prism-graphgen)"));
}

// OutOfRange: `what` is "<thing> is <value>"; the limit is common/limits.h's.
inline absl::Status OverLimit(const std::string& what, uint64_t limit, const std::string& unit = "") {
  return absl::OutOfRangeError(absl::StrCat("graph beyond Prism's limits: ", what, ", the limit is ",
                                            limit, unit,
                                            " (common/limits.h); make the graph smaller or its figures realistic"));
}

}  // namespace prism::graph::check

#endif  // PRISM_PROTO_GRAPH_CHECK_ERRORS_H_
