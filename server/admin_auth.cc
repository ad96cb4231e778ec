#include "server/admin_auth.h"

#include <arpa/inet.h>
#include <netinet/in.h>

#include <algorithm>
#include <cctype>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <sstream>
#include <utility>

namespace arbiter::server {
namespace {

constexpr std::string_view kWhitespace = " \t\r\n\f\v";

std::string_view Trim(std::string_view s) {
  const size_t begin = s.find_first_not_of(kWhitespace);
  if (begin == std::string_view::npos) return {};
  const size_t end = s.find_last_not_of(kWhitespace);
  return s.substr(begin, end - begin + 1);
}

bool EqualsIgnoreCase(std::string_view a, std::string_view b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
           return std::tolower(static_cast<unsigned char>(x)) ==
                  std::tolower(static_cast<unsigned char>(y));
         });
}

// FNV-1a, 64-bit: a stable short name for a token in audit lines. Not a
// secret-preserving hash; it shows which token acted, not what it is.
uint64_t Fnv1a64(std::string_view s) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (unsigned char c : s) {
    h ^= c;
    h *= 0x100000001b3ull;
  }
  return h;
}

std::string IdentityOf(std::string_view token) {
  if (token.empty()) return "loopback";
  char hex[9];
  std::snprintf(hex, sizeof(hex), "%08x", static_cast<unsigned>(Fnv1a64(token) >> 32));
  return std::string("token:") + hex;
}

// The host part of a gRPC listen address: "[::1]:50051" -> "::1",
// "127.0.0.1:50051" -> "127.0.0.1", "localhost" -> "localhost".
std::string_view HostOf(std::string_view listen) {
  if (!listen.empty() && listen.front() == '[') {
    const size_t close = listen.find(']');
    return close == std::string_view::npos ? std::string_view{} : listen.substr(1, close - 1);
  }
  const size_t colon = listen.rfind(':');
  // More than one colon without brackets is a bare IPv6 address with no port.
  if (colon != std::string_view::npos && listen.find(':') == colon) return listen.substr(0, colon);
  return listen;
}

}  // namespace

bool IsLoopbackAddress(std::string_view listen) {
  listen = Trim(listen);
  if (listen.starts_with("unix:") || listen.starts_with("unix-abstract:")) return true;
  const std::string host(HostOf(listen));
  if (host.empty()) return false;
  if (EqualsIgnoreCase(host, "localhost")) return true;
  in_addr v4{};
  if (inet_pton(AF_INET, host.c_str(), &v4) == 1) {
    return (ntohl(v4.s_addr) >> 24) == 127;  // 127.0.0.0/8
  }
  in6_addr v6{};
  if (inet_pton(AF_INET6, host.c_str(), &v6) == 1) {
    if (IN6_IS_ADDR_LOOPBACK(&v6)) return true;
    return IN6_IS_ADDR_V4MAPPED(&v6) && v6.s6_addr[12] == 127;
  }
  return false;
}

bool ConstantTimeEquals(std::string_view presented, std::string_view secret) {
  if (secret.empty()) return false;
  // The length difference is folded into the result instead of returning
  // early, and every presented byte is compared (against the secret repeated),
  // so the loop's duration depends on the presented length alone.
  uint64_t diff = static_cast<uint64_t>(presented.size() ^ secret.size());
  for (size_t i = 0; i < presented.size(); ++i) {
    diff |= static_cast<unsigned char>(presented[i]) ^
            static_cast<unsigned char>(secret[i % secret.size()]);
  }
  return diff == 0;
}

absl::StatusOr<std::string> ReadSecretFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError("cannot read the token file '" + path + "'");
  const std::string content((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (in.bad()) return absl::NotFoundError("cannot read the token file '" + path + "'");
  const std::string_view token = Trim(content);
  if (token.empty()) {
    return absl::InvalidArgumentError("the token file '" + path +
                                      "' is empty (or whitespace only); write a token into it");
  }
  return std::string(token);
}

absl::StatusOr<std::unique_ptr<AdminAuth>> AdminAuth::Create(const AdminAuthOptions& options) {
  if (options.token_file.empty()) {
    // Every listener of a comma-separated --listen must be loopback.
    std::string_view rest = options.listen;
    while (true) {
      const size_t comma = rest.find(',');
      const std::string_view listener = rest.substr(0, comma);
      if (!IsLoopbackAddress(listener)) {
        return absl::FailedPreconditionError(
            "--listen " + std::string(listener) +
            " is not a loopback address: admin RPCs there need --admin-token-file "
            "(without a token they are served on loopback listeners only)");
      }
      if (comma == std::string_view::npos) break;
      rest.remove_prefix(comma + 1);
    }
    return std::unique_ptr<AdminAuth>(new AdminAuth(""));
  }
  ASSIGN_OR_RETURN(std::string token, ReadSecretFile(options.token_file));
  return std::unique_ptr<AdminAuth>(new AdminAuth(std::move(token)));
}

std::unique_ptr<AdminAuth> AdminAuth::WithToken(std::string token) {
  return std::unique_ptr<AdminAuth>(new AdminAuth(std::move(token)));
}

AdminAuth::AdminAuth(std::string token) : token_(std::move(token)), identity_(IdentityOf(token_)) {}

absl::Status AdminAuth::Check(
    const std::multimap<grpc::string_ref, grpc::string_ref>& client_metadata) const {
  if (token_.empty()) return absl::OkStatus();
  constexpr std::string_view kScheme = "Bearer";
  auto [begin, end] = client_metadata.equal_range("authorization");
  for (auto it = begin; it != end; ++it) {
    const std::string_view value = Trim(std::string_view(it->second.data(), it->second.size()));
    // "Bearer <token>": the scheme is case-insensitive (RFC 7235), then whitespace.
    if (value.size() <= kScheme.size() || !EqualsIgnoreCase(value.substr(0, kScheme.size()), kScheme) ||
        kWhitespace.find(value[kScheme.size()]) == std::string_view::npos) {
      continue;
    }
    if (ConstantTimeEquals(Trim(value.substr(kScheme.size())), token_)) return absl::OkStatus();
    return absl::PermissionDeniedError("the bearer token does not match the daemon's admin token");
  }
  return absl::UnauthenticatedError(
      "admin RPCs need 'authorization: Bearer <token>' metadata "
      "(the token in the daemon's --admin-token-file)");
}

}  // namespace arbiter::server
