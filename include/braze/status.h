// Status helpers. Abseil 20220623 ships no status macros, so Braze keeps its own here.
#ifndef BRAZE_STATUS_H_
#define BRAZE_STATUS_H_

#include "absl/status/status.h"
#include "absl/status/statusor.h"

#define BRAZE_CONCAT_INNER_(a, b) a##b
#define BRAZE_CONCAT_(a, b) BRAZE_CONCAT_INNER_(a, b)

// Returns from the enclosing function when `expr` yields a non-OK absl::Status.
#define BRAZE_RETURN_IF_ERROR(expr)                \
  do {                                             \
    ::absl::Status braze_status_ = (expr);         \
    if (!braze_status_.ok()) return braze_status_; \
  } while (0)

// `BRAZE_ASSIGN_OR_RETURN(auto x, F());` unwraps a StatusOr or returns its error.
#define BRAZE_ASSIGN_OR_RETURN(lhs, expr) \
  BRAZE_ASSIGN_OR_RETURN_IMPL_(BRAZE_CONCAT_(braze_statusor_, __LINE__), lhs, expr)
#define BRAZE_ASSIGN_OR_RETURN_IMPL_(tmp, lhs, expr) \
  auto tmp = (expr);                                 \
  if (!tmp.ok()) return std::move(tmp).status();     \
  lhs = std::move(tmp).value()

#endif  // BRAZE_STATUS_H_
