// What the engine knows of a gRPC call's client (engine/call_context.h): its
// deadline, a probe for its cancellation (ServerContext::IsCancelled, which
// also turns true once the deadline passes) and its peer without the port, so
// that per-peer limits count a host, not a connection.
//
// Thread-safe: free functions; the CallContext refers to `context`, which must
// outlive every use of it (the handler's duration).
#pragma once

#include <string>
#include <string_view>

#include <grpcpp/server_context.h>

#include "engine/call_context.h"

namespace arbiter::server {

CallContext CallContextOf(const grpc::ServerContext& context);

// "ipv4:10.0.0.7:51234" -> "ipv4:10.0.0.7", "ipv6:[::1]:51234" -> "ipv6:[::1]";
// anything else (a Unix socket's "unix:/run/arbiter.sock") as it is.
std::string PeerHost(std::string_view peer);

}  // namespace arbiter::server
