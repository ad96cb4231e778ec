// Host shared memory a client registers as a region with a CPU-backend daemon
// (REGION_KIND_HOST_MEMFD): a memfd sealed against shrinking (the daemon
// refuses one that could be truncated under a running kernel), mapped here
// read-write. Pass fd() over the Session, register it, and read and write
// data() directly: the daemon maps the same pages.
//
// Owns the descriptor and the mapping. Not thread-safe (one owner), though the
// memory itself may be used from any thread.
#pragma once

#include <cstddef>
#include <memory>
#include <string>

#include <grpcpp/support/status.h>

namespace arbiter::client {

class SharedMemory {
 public:
  // `bytes` of zeroed shared memory named `name` (shown in /proc, for debugging);
  // `populate`: its pages made and mapped now, not on first touch.
  static grpc::Status Create(size_t bytes, const std::string& name,
                             std::unique_ptr<SharedMemory>* out, bool populate = false);
  ~SharedMemory();
  SharedMemory(const SharedMemory&) = delete;
  SharedMemory& operator=(const SharedMemory&) = delete;

  int fd() const { return fd_; }
  void* data() const { return data_; }
  size_t bytes() const { return bytes_; }

 private:
  SharedMemory(int fd, void* data, size_t bytes) : fd_(fd), data_(data), bytes_(bytes) {}
  const int fd_;
  void* const data_;
  const size_t bytes_;
};

// Offsets in a region must keep device addresses aligned so (the daemon's
// kOperandAlignment): round each operand's offset up to it.
inline constexpr size_t kRegionAlignment = 256;
inline size_t AlignUp(size_t bytes) { return (bytes + kRegionAlignment - 1) / kRegionAlignment * kRegionAlignment; }

}  // namespace arbiter::client
