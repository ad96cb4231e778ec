#include "engine/host_region.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"

namespace arbiter {

absl::StatusOr<std::unique_ptr<HostRegion>> HostRegion::Map(int fd, size_t bytes) {
  struct stat st {};
  if (fd < 0 || fstat(fd, &st) != 0) {
    return absl::InvalidArgumentError(absl::StrCat("fd: not an open descriptor (", std::strerror(errno), ")"));
  }
  if (!S_ISREG(st.st_mode)) {
    return absl::FailedPreconditionError("fd: expected a memfd (memfd_create), got another kind of file");
  }
  const int seals = fcntl(fd, F_GET_SEALS);
  if (seals < 0 || (seals & F_SEAL_SHRINK) == 0) {
    return absl::FailedPreconditionError(
        "fd: expected a memfd sealed against shrinking (memfd_create with MFD_ALLOW_SEALING, then "
        "fcntl(F_ADD_SEALS, F_SEAL_SHRINK)), so it cannot be truncated under a running kernel");
  }
  if (static_cast<uint64_t>(st.st_size) < bytes) {
    return absl::InvalidArgumentError(absl::StrCat("bytes: ", bytes, " registered, the memfd holds ",
                                                   st.st_size));
  }
  void* data = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (data == MAP_FAILED) {
    return absl::FailedPreconditionError(
        absl::StrCat("fd: cannot map ", bytes, " bytes read-write shared: ", std::strerror(errno)));
  }
  return std::unique_ptr<HostRegion>(new HostRegion(data, bytes));
}

HostRegion::~HostRegion() { munmap(data_, bytes_); }

}  // namespace arbiter
