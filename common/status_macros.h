// Small helpers for absl::Status plumbing. Header-only, no state.
#ifndef PRISM_COMMON_STATUS_MACROS_H_
#define PRISM_COMMON_STATUS_MACROS_H_

#include "absl/status/status.h"
#include "absl/status/statusor.h"

// Returns from the current function if `expr` (an absl::Status) is not OK.
#define PRISM_RETURN_IF_ERROR(expr)                  \
  do {                                               \
    const ::absl::Status prism_status_ = (expr);     \
    if (!prism_status_.ok()) return prism_status_;   \
  } while (0)

#define PRISM_CONCAT_INNER_(a, b) a##b
#define PRISM_CONCAT_(a, b) PRISM_CONCAT_INNER_(a, b)

// `PRISM_ASSIGN_OR_RETURN(auto x, MakeX());` declares x from an absl::StatusOr
// or returns its error.
#define PRISM_ASSIGN_OR_RETURN(lhs, rexpr) \
  PRISM_ASSIGN_OR_RETURN_IMPL_(PRISM_CONCAT_(prism_statusor_, __LINE__), lhs, rexpr)
#define PRISM_ASSIGN_OR_RETURN_IMPL_(tmp, lhs, rexpr) \
  auto tmp = (rexpr);                                 \
  if (!tmp.ok()) return tmp.status();                 \
  lhs = std::move(tmp).value()

#endif  // PRISM_COMMON_STATUS_MACROS_H_
