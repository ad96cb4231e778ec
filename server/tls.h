// Transport security of the gRPC listener: TLS from a certificate and key file
// (--tls-cert, --tls-key), or plaintext when neither is given. Plaintext plus
// no admin token is only allowed on loopback (see admin_auth.h).
#pragma once

#include <memory>
#include <string>

#include <grpcpp/security/server_credentials.h>

#include "engine/status.h"

namespace arbiter::server {

struct TlsOptions {
  std::string cert_file;  // PEM certificate chain; empty with key_file empty: plaintext
  std::string key_file;   // PEM private key of the certificate
};

// Server credentials for the listener. INVALID_ARGUMENT when only one of the
// two files is given or a file is not PEM; NOT_FOUND naming an unreadable file.
absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> MakeServerCredentials(
    const TlsOptions& options);

}  // namespace arbiter::server
