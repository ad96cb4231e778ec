// The one place internal statuses become gRPC statuses. Handlers return
// ToGrpcStatus(...) and never build a grpc::Status by hand, so every error a
// client sees carries the engine's code and message unchanged.
//
// Thread-safe: pure functions.
#pragma once

#include <grpcpp/support/status.h>

#include "absl/status/status.h"

namespace arbiter::server {

// Exhaustive: every absl code has its gRPC counterpart (they share numbering
// by design, but the switch makes a future divergence a compile warning).
grpc::StatusCode ToGrpcCode(absl::StatusCode code);

grpc::Status ToGrpcStatus(const absl::Status& status);

}  // namespace arbiter::server
