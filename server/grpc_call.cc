#include "server/grpc_call.h"

namespace arbiter::server {

std::string PeerHost(std::string_view peer) {
  if (peer.rfind("ipv4:", 0) == 0 || peer.rfind("ipv6:", 0) == 0) {
    const size_t colon = peer.rfind(':');
    if (colon > 4) return std::string(peer.substr(0, colon));
  }
  return std::string(peer);
}

CallContext CallContextOf(const grpc::ServerContext& context) {
  CallContext call;
  // gRPC reports a call without a deadline as time_point::max().
  if (context.deadline() != std::chrono::system_clock::time_point::max()) {
    call.deadline = context.deadline();
  }
  call.cancelled = [&context] { return context.IsCancelled(); };
  call.peer = PeerHost(context.peer());
  return call;
}

}  // namespace arbiter::server
