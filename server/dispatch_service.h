// The Dispatch service: clients run matmuls (Matmul) or ask which kernel would
// run (Select). Every request is validated - dtype, dimensions against the
// engine's limits, operand byte counts - before any compute or allocation, and
// engine errors reach the client through status_util unchanged. A bad request
// is answered with an error; it never takes the daemon down. A Matmul whose
// gRPC deadline passes before its kernel starts (queued behind other work) is
// not run: DEADLINE_EXCEEDED; a call whose client went away leaves every queue
// at once (its waits poll ServerContext::IsCancelled).
//
// Does not own the Arbiter, which must outlive the service.
// Thread-safe: the Arbiter provides internal synchronization; the service has no state.
#pragma once

#include <chrono>
#include <optional>

#include "arbiter/v1/arbiter.grpc.pb.h"
#include "engine/arbiter.h"

namespace arbiter::server {

class DispatchService final : public v1::Dispatch::Service {
 public:
  explicit DispatchService(Arbiter& arbiter) : arbiter_(arbiter) {}
  DispatchService(const DispatchService&) = delete;
  DispatchService& operator=(const DispatchService&) = delete;

  grpc::Status Matmul(grpc::ServerContext* context, const v1::MatmulRequest* request,
                      v1::MatmulResponse* response) override;
  grpc::Status Select(grpc::ServerContext* context, const v1::SelectRequest* request,
                      v1::SelectResponse* response) override;

 private:
  absl::Status DoMatmul(const v1::MatmulRequest& request, const CallContext& call,
                        v1::MatmulResponse* response);
  absl::Status DoSelect(const v1::SelectRequest& request, const CallContext& call,
                        v1::SelectResponse* response);

  Arbiter& arbiter_;
};

// The engine's deadline for a call whose gRPC deadline is `rpc_deadline`:
// unset for a call without one (gRPC reports that as time_point::max()).
std::optional<std::chrono::system_clock::time_point> WorkDeadline(
    std::chrono::system_clock::time_point rpc_deadline);

// INVALID_ARGUMENT "a: expected 16384 bytes (m*k*size = 64*64*4), got 100", or OK.
// `operand` is "a" (m x k) or "b" (k x n).
absl::Status CheckOperandBytes(std::string_view operand, const Problem& p, size_t got);

}  // namespace arbiter::server
