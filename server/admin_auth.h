// Who may call the Admin service. With a token file, every admin RPC must carry
// "authorization: Bearer <token>" metadata, compared in constant time. Without
// one, admin RPCs are served only when the daemon listens on loopback, and the
// daemon refuses to start on any other listener - an operator never exposes the
// verdict hatch by forgetting a flag.
//
// The token never appears in logs or errors: identity() names it by a short
// hash for audit lines.
//
// Immutable after Create; thread-safe for concurrent Check calls.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <string_view>

#include <grpcpp/support/string_ref.h>

#include "engine/status.h"

namespace arbiter::server {

struct AdminAuthOptions {
  std::string token_file;  // --admin-token-file; empty: no token, loopback listeners only
  std::string listen;      // --listen, the gRPC listeners (comma-separated) the Admin service is on
};

// True for listeners only this host can reach: 127.0.0.0/8, [::1], localhost,
// and unix-domain sockets. Anything else (0.0.0.0, [::], a hostname) is false.
bool IsLoopbackAddress(std::string_view listen);

// Compares without an early exit on the first differing byte: the time taken
// depends on the length of `presented` alone, never on the secret's contents.
bool ConstantTimeEquals(std::string_view presented, std::string_view secret);

// Reads a secret from a file, without surrounding whitespace. NOT_FOUND when it
// cannot be read, INVALID_ARGUMENT when it is empty; neither names the content.
absl::StatusOr<std::string> ReadSecretFile(const std::string& path);

class AdminAuth {
 public:
  // FAILED_PRECONDITION when there is no token file and `listen` is not
  // loopback; the errors of ReadSecretFile for a bad token file.
  static absl::StatusOr<std::unique_ptr<AdminAuth>> Create(const AdminAuthOptions& options);
  // For tests and embedding: guards with `token` (must not be empty).
  static std::unique_ptr<AdminAuth> WithToken(std::string token);

  AdminAuth(const AdminAuth&) = delete;
  AdminAuth& operator=(const AdminAuth&) = delete;

  // OK when the call may proceed. With a token: UNAUTHENTICATED when no
  // "authorization: Bearer ..." metadata is present, PERMISSION_DENIED when
  // the bearer token is wrong. Without a token (loopback only): always OK.
  absl::Status Check(
      const std::multimap<grpc::string_ref, grpc::string_ref>& client_metadata) const;

  bool requires_token() const { return !token_.empty(); }

  // For audit lines: "token:1a2b3c4d" (a hash of the token, never the token),
  // or "loopback" when no token is configured.
  const std::string& identity() const { return identity_; }

 private:
  explicit AdminAuth(std::string token);
  const std::string token_;     // empty: loopback policy
  const std::string identity_;
};

}  // namespace arbiter::server
