// Larger kernel buffers for gRPC connections over a Unix socket: the client
// library's (its requests) and the daemon's (its replies). A Unix stream socket
// lets its sender have only its
// SO_SNDBUF in flight (net.core.wmem_default, 208 KiB): a 16 MiB operand then
// crosses in ~80 rounds of "write 208 KiB, sleep until the reader drains it,
// wake". The H200 host's daemon received at 3.5-4.8 GB/s; on the CI machine a
// bare Unix socket moves 16 MiB at 4-9 GB/s by default and at 8-10 GB/s with 4 MiB
// asked for (bench/results/cpu/wire-socket-buffers.md).
// TCP is left alone: its buffers grow by themselves (net.ipv4.tcp_wmem), and
// setting SO_SNDBUF would stop that.
//
// gRPC 1.51 applies socket options only through a grpc_socket_mutator
// (ChannelArguments::SetSocketMutator, public), whose definition it installs no
// header for: the .cc declares its layout as libgrpc 1.51 reads it, and refuses
// to compile against another gRPC.
//
// Thread-safe: a mutator is immutable once made.
#pragma once

#include <grpc/impl/codegen/grpc_types.h>

namespace arbiter::wire {

// What each Unix-socket connection asks for as SO_SNDBUF and SO_RCVBUF: the
// kernel books twice it; at most net.core.wmem_max / rmem_max of it is granted
// unless the process may force more (CAP_NET_ADMIN, which it then uses).
inline constexpr int kUnixSocketBufferBytes = 4 << 20;

// Sets `fd`'s SO_SNDBUF and SO_RCVBUF to `bytes` if it is a Unix socket and
// answers the send buffer the kernel now books for it (getsockopt); 0, changing
// nothing, for any other socket.
int SetUnixSocketBuffers(int fd, int bytes);

// A new mutator that does SetUnixSocketBuffers(fd, bytes) to every socket of the
// channel it is set on (on a server: its listeners and the connections they
// accept), for ChannelArguments::SetSocketMutator, which takes over its one
// reference: the arguments free it when the last of them is destroyed.
grpc_socket_mutator* NewUnixSocketBufferMutator(int bytes);

}  // namespace arbiter::wire
