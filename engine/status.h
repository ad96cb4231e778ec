// Status handling inside the daemon: absl::Status / absl::StatusOr everywhere,
// no exceptions across module boundaries. server/status_util maps these to
// grpc::Status in one place.
#pragma once

#include "absl/status/status.h"
#include "absl/status/statusor.h"

#define ARBITER_CONCAT_INNER(a, b) a##b
#define ARBITER_CONCAT(a, b) ARBITER_CONCAT_INNER(a, b)

// Returns from the enclosing function if `expr` (an absl::Status) is not OK.
#define RETURN_IF_ERROR(expr)                    \
  do {                                           \
    ::absl::Status arbiter_status_ = (expr);     \
    if (!arbiter_status_.ok()) return arbiter_status_; \
  } while (0)

// `lhs = value of expr`, or returns its error. expr is an absl::StatusOr<T>.
#define ASSIGN_OR_RETURN(lhs, expr) \
  ASSIGN_OR_RETURN_IMPL(ARBITER_CONCAT(arbiter_statusor_, __LINE__), lhs, expr)
#define ASSIGN_OR_RETURN_IMPL(tmp, lhs, expr) \
  auto tmp = (expr);                          \
  if (!tmp.ok()) return tmp.status();         \
  lhs = std::move(tmp).value()
