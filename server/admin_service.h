// The Admin service: operators inspect candidates and verdicts and steer them
// (force, unforce, invalidate, tune, quarantine). Every action that changes
// state is logged on one line with the caller's peer address, what was done,
// and the state before and after, so the log alone explains every verdict change.
// Every call, reads included, is first checked by the AdminAuth (bearer token,
// or the loopback policy) when one is given.
//
// Does not own the Arbiter or the AdminAuth, which must outlive the service.
// Thread-safe: the Arbiter provides internal synchronization; the service's
// own fields are immutable after construction.
#pragma once

#include <string>

#include "arbiter/v1/arbiter.grpc.pb.h"
#include "engine/arbiter.h"

namespace arbiter::server {

class AdminAuth;

// What the daemon knows about itself that the engine does not.
struct ServerIdentity {
  std::string version;     // arbiterd build version
  std::string store_path;  // the verdict store's path or URI as opened, any password redacted
  std::string fd_socket;   // the fd socket's path; empty without a Unix listener
  int64_t max_message_bytes = 0;
};

class AdminService final : public v1::Admin::Service {
 public:
  // `auth` may be null: every call is allowed (tests, embedding).
  AdminService(Arbiter& arbiter, ServerIdentity identity, const AdminAuth* auth)
      : arbiter_(arbiter), identity_(std::move(identity)), auth_(auth) {}
  AdminService(const AdminService&) = delete;
  AdminService& operator=(const AdminService&) = delete;

  grpc::Status ListCandidates(grpc::ServerContext* context, const v1::ListCandidatesRequest* request,
                              v1::ListCandidatesResponse* response) override;
  grpc::Status ListVerdicts(grpc::ServerContext* context, const v1::ListVerdictsRequest* request,
                            v1::ListVerdictsResponse* response) override;
  grpc::Status Force(grpc::ServerContext* context, const v1::ForceRequest* request,
                     v1::ForceResponse* response) override;
  grpc::Status Unforce(grpc::ServerContext* context, const v1::UnforceRequest* request,
                       v1::UnforceResponse* response) override;
  grpc::Status Invalidate(grpc::ServerContext* context, const v1::InvalidateRequest* request,
                          v1::InvalidateResponse* response) override;
  grpc::Status Tune(grpc::ServerContext* context, const v1::TuneRequest* request,
                    grpc::ServerWriter<v1::TuneProgress>* writer) override;
  grpc::Status ListQuarantine(grpc::ServerContext* context, const v1::ListQuarantineRequest* request,
                              v1::ListQuarantineResponse* response) override;
  grpc::Status ClearQuarantine(grpc::ServerContext* context,
                               const v1::ClearQuarantineRequest* request,
                               v1::ClearQuarantineResponse* response) override;
  grpc::Status Quarantine(grpc::ServerContext* context, const v1::QuarantineRequest* request,
                          v1::QuarantineResponse* response) override;
  grpc::Status ServerInfo(grpc::ServerContext* context, const v1::ServerInfoRequest* request,
                          v1::ServerInfoResponse* response) override;
  // Every peer's regions and resident tensors, with their owners.
  grpc::Status ListAllRegions(grpc::ServerContext* context, const v1::ListRegionsRequest* request,
                              v1::ListRegionsResponse* response) override;
  grpc::Status ListAllTensors(grpc::ServerContext* context, const v1::ListTensorsRequest* request,
                              v1::ListTensorsResponse* response) override;

 private:
  // UNAUTHENTICATED / PERMISSION_DENIED unless the caller may use Admin.
  absl::Status Authorize(const grpc::ServerContext& context) const;
  // "ipv4:127.0.0.1:5312 (token:1a2b3c4d)": who did it, for audit lines.
  std::string Caller(const grpc::ServerContext& context) const;

  // Most handlers: Do* returns an absl::Status; the override maps it once.
  absl::Status DoListVerdicts(const v1::ListVerdictsRequest& request,
                              v1::ListVerdictsResponse* response);
  absl::Status DoForce(const std::string& peer, const v1::ForceRequest& request,
                       v1::ForceResponse* response);
  absl::Status DoUnforce(const std::string& peer, const v1::UnforceRequest& request,
                         v1::UnforceResponse* response);
  absl::Status DoInvalidate(const std::string& peer, const v1::InvalidateRequest& request,
                            v1::InvalidateResponse* response);
  absl::Status DoTune(grpc::ServerContext& context, const v1::TuneRequest& request,
                      grpc::ServerWriter<v1::TuneProgress>& writer);
  absl::Status DoClearQuarantine(const std::string& peer, const v1::ClearQuarantineRequest& request,
                                 v1::ClearQuarantineResponse* response);
  absl::Status DoQuarantine(const std::string& peer, const v1::QuarantineRequest& request);
  absl::Status DoServerInfo(v1::ServerInfoResponse* response);

  // The force on p's bucket, if any ("none" otherwise), for before/after log lines.
  std::string DescribeForce(const Problem& p) const;

  Arbiter& arbiter_;
  const ServerIdentity identity_;
  const AdminAuth* const auth_;
};

// Most problems one Tune call may carry.
inline constexpr int kMaxTuneProblems = 256;

}  // namespace arbiter::server
