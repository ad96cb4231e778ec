// A small synchronous client for arbiterd: one channel, the Dispatch and Admin
// stubs, and the grpc.health.v1 Check. Every call carries the bearer token when
// one is configured and the per-call deadline when one is set. Errors come back
// as the daemon sent them (grpc::Status with its code and message).
//
// Depends only on the wire contract (arbiter_proto), never on the engine.
// Thread-safe: gRPC stubs and channels may be used from several threads.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include <grpcpp/channel.h>

#include "arbiter/v1/arbiter.grpc.pb.h"

namespace arbiter::client {

struct ClientOptions {
  std::string server = "127.0.0.1:50051";  // host:port of arbiterd
  std::string token;                       // sent as "authorization: Bearer <token>" when set
  int64_t max_message_bytes = 600ll << 20; // matches arbiterd's default (8192^2 f32 operands)
  double deadline_seconds = 0;             // per call; 0 = no deadline
};

// grpc.health.v1.HealthCheckResponse.ServingStatus.
enum class HealthStatus { kUnknown = 0, kServing = 1, kNotServing = 2, kServiceUnknown = 3 };
const char* HealthStatusName(HealthStatus s);

class ArbiterClient {
 public:
  explicit ArbiterClient(const ClientOptions& options);
  ArbiterClient(const ArbiterClient&) = delete;
  ArbiterClient& operator=(const ArbiterClient&) = delete;

  // Dispatch.
  grpc::Status Matmul(const v1::MatmulRequest& request, v1::MatmulResponse* response);
  grpc::Status Select(const v1::SelectRequest& request, v1::SelectResponse* response);

  // Admin.
  grpc::Status ListCandidates(v1::ListCandidatesResponse* response);
  grpc::Status ListVerdicts(const v1::ListVerdictsRequest& request,
                            v1::ListVerdictsResponse* response);
  grpc::Status Force(const v1::ForceRequest& request, v1::ForceResponse* response);
  grpc::Status Unforce(const v1::UnforceRequest& request, v1::UnforceResponse* response);
  grpc::Status Invalidate(const v1::InvalidateRequest& request, v1::InvalidateResponse* response);
  // Calls `on_progress` for each problem as the daemon finishes it.
  grpc::Status Tune(const v1::TuneRequest& request,
                    const std::function<void(const v1::TuneProgress&)>& on_progress);
  grpc::Status ListQuarantine(v1::ListQuarantineResponse* response);
  grpc::Status ClearQuarantine(const v1::ClearQuarantineRequest& request,
                               v1::ClearQuarantineResponse* response);
  grpc::Status Quarantine(const v1::QuarantineRequest& request);
  grpc::Status ServerInfo(v1::ServerInfoResponse* response);

  // grpc.health.v1.Health/Check for `service` ("" = the whole server).
  grpc::Status Health(const std::string& service, HealthStatus* status);
  // Polls Health until it says SERVING; DEADLINE_EXCEEDED (with the last
  // answer) when `timeout_seconds` pass first.
  grpc::Status WaitUntilServing(double timeout_seconds, const std::string& service = "");

  const ClientOptions& options() const { return options_; }

 private:
  // Token metadata and deadline.
  void Prepare(grpc::ClientContext* context) const;

  const ClientOptions options_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<v1::Dispatch::Stub> dispatch_;
  std::unique_ptr<v1::Admin::Stub> admin_;
};

}  // namespace arbiter::client
