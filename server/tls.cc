#include "server/tls.h"

#include <fstream>
#include <iterator>

#include <grpcpp/security/server_credentials.h>

namespace arbiter::server {
namespace {

// Reads a PEM file whole. A file without a PEM block (a DER key, a path mixed
// up with another) is refused here, where the message can name it, rather than
// as an opaque handshake failure at the first connection.
absl::StatusOr<std::string> ReadPem(const std::string& path, const char* flag) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(std::string(flag) + ": cannot read '" + path + "'");
  std::string pem((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (pem.find("-----BEGIN ") == std::string::npos) {
    return absl::InvalidArgumentError(std::string(flag) + ": '" + path + "' holds no PEM block");
  }
  return pem;
}

}  // namespace

absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> MakeServerCredentials(
    const TlsOptions& options) {
  if (options.cert_file.empty() && options.key_file.empty()) {
    return grpc::InsecureServerCredentials();
  }
  if (options.cert_file.empty() || options.key_file.empty()) {
    return absl::InvalidArgumentError("TLS needs both --tls-cert and --tls-key");
  }
  grpc::SslServerCredentialsOptions::PemKeyCertPair pair;
  ASSIGN_OR_RETURN(pair.cert_chain, ReadPem(options.cert_file, "--tls-cert"));
  ASSIGN_OR_RETURN(pair.private_key, ReadPem(options.key_file, "--tls-key"));
  grpc::SslServerCredentialsOptions ssl;
  ssl.pem_key_cert_pairs.push_back(std::move(pair));
  return grpc::SslServerCredentials(ssl);
}

}  // namespace arbiter::server
