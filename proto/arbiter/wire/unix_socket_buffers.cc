#include "arbiter/wire/unix_socket_buffers.h"

#include <sys/socket.h>

#include <grpc/support/sync.h>
#include <grpcpp/version_info.h>

static_assert(GRPC_CPP_VERSION_MAJOR == 1 && GRPC_CPP_VERSION_MINOR == 51,
              "the socket mutator's layout below is gRPC 1.51's: check it against this gRPC's "
              "src/core/lib/iomgr/socket_mutator.h");

// gRPC 1.51's socket mutator, as libgrpc reads it (it calls mutate_fd_2, the
// fourth entry, with the fd and what it is for, whenever that entry is set).
enum grpc_fd_usage {
  GRPC_FD_CLIENT_CONNECTION_USAGE,
  GRPC_FD_SERVER_LISTENER_USAGE,
  GRPC_FD_SERVER_CONNECTION_USAGE,
};
struct grpc_mutate_socket_info {
  int fd;
  grpc_fd_usage usage;
};
struct grpc_socket_mutator_vtable {
  bool (*mutate_fd)(int fd, grpc_socket_mutator* mutator);
  int (*compare)(grpc_socket_mutator* a, grpc_socket_mutator* b);
  void (*destroy)(grpc_socket_mutator* mutator);
  bool (*mutate_fd_2)(const grpc_mutate_socket_info* info, grpc_socket_mutator* mutator);
};
struct grpc_socket_mutator {
  const grpc_socket_mutator_vtable* vtable;
  gpr_refcount refcount;
};
void grpc_socket_mutator_init(grpc_socket_mutator* mutator, const grpc_socket_mutator_vtable* vtable);

namespace arbiter::wire {
namespace {

// The mutator with the buffer size it asks for; `base` first, so gRPC's pointer is ours.
struct SizedMutator {
  grpc_socket_mutator base;
  int bytes;
};

int BytesOf(grpc_socket_mutator* m) { return reinterpret_cast<SizedMutator*>(m)->bytes; }

bool Mutate(int fd, grpc_socket_mutator* m) {
  SetUnixSocketBuffers(fd, BytesOf(m));
  return true;  // a buffer left at its default is slower, not wrong
}

const grpc_socket_mutator_vtable kVtable = {
    .mutate_fd = [](int fd, grpc_socket_mutator* m) { return Mutate(fd, m); },
    // Channels with equal arguments may share connections: equal sizes are the same settings.
    .compare = [](grpc_socket_mutator* a, grpc_socket_mutator* b) {
      return BytesOf(a) < BytesOf(b) ? -1 : (BytesOf(a) > BytesOf(b) ? 1 : 0);
    },
    .destroy = [](grpc_socket_mutator* m) { delete reinterpret_cast<SizedMutator*>(m); },
    .mutate_fd_2 = [](const grpc_mutate_socket_info* info, grpc_socket_mutator* m) {
      return Mutate(info->fd, m);
    },
};

void SetBuffer(int fd, int force, int plain, int bytes) {
  // Forced past the *mem_max cap where the process may; else as much as the cap allows.
  if (setsockopt(fd, SOL_SOCKET, force, &bytes, sizeof(bytes)) != 0) {
    setsockopt(fd, SOL_SOCKET, plain, &bytes, sizeof(bytes));
  }
}

}  // namespace

int SetUnixSocketBuffers(int fd, int bytes) {
  sockaddr_storage address{};
  socklen_t length = sizeof(address);
  if (getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length) != 0 ||
      address.ss_family != AF_UNIX) {
    return 0;
  }
  SetBuffer(fd, SO_SNDBUFFORCE, SO_SNDBUF, bytes);
  SetBuffer(fd, SO_RCVBUFFORCE, SO_RCVBUF, bytes);
  int granted = 0;
  length = sizeof(granted);
  getsockopt(fd, SOL_SOCKET, SO_SNDBUF, &granted, &length);
  return granted;
}

grpc_socket_mutator* NewUnixSocketBufferMutator(int bytes) {
  auto* m = new SizedMutator{.base = {}, .bytes = bytes};
  grpc_socket_mutator_init(&m->base, &kVtable);
  return &m->base;
}

}  // namespace arbiter::wire
