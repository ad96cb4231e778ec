#include "client/shared_memory.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace arbiter::client {

grpc::Status SharedMemory::Create(size_t bytes, const std::string& name,
                                  std::unique_ptr<SharedMemory>* out, bool populate) {
  auto fail = [](const std::string& what) {
    return grpc::Status(grpc::StatusCode::INTERNAL, "shared memory: " + what + ": " + std::strerror(errno));
  };
  if (bytes == 0) return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "shared memory: 0 bytes");
  const int fd = memfd_create(name.c_str(), MFD_CLOEXEC | MFD_ALLOW_SEALING);
  if (fd < 0) return fail("memfd_create");
  if (ftruncate(fd, static_cast<off_t>(bytes)) != 0 ||
      fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_SEAL) != 0) {
    grpc::Status s = fail("ftruncate or F_ADD_SEALS");
    close(fd);
    return s;
  }
  void* data = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED | (populate ? MAP_POPULATE : 0), fd, 0);
  if (data == MAP_FAILED) {
    grpc::Status s = fail("mmap");
    close(fd);
    return s;
  }
  out->reset(new SharedMemory(fd, data, bytes));
  return grpc::Status::OK;
}

SharedMemory::~SharedMemory() {
  munmap(data_, bytes_);
  close(fd_);
}

}  // namespace arbiter::client
