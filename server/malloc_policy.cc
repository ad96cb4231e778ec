#include "server/malloc_policy.h"

#include <malloc.h>

#include <climits>

namespace arbiter::server {

bool KeepFreedMemory() {
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
  // A sanitizer's allocator serves malloc; glibc's settings would take (TSan
  // does not intercept mallopt) and mean nothing.
  return false;
#endif
  // glibc refuses an mmap threshold above HEAP_MAX_SIZE / 2: 32 MiB on 64-bit.
  constexpr int kLargestHeapAllocation = 32 << 20;
  bool ok = mallopt(M_ARENA_MAX, 1) == 1;
  ok &= mallopt(M_MMAP_THRESHOLD, kLargestHeapAllocation) == 1;
  ok &= mallopt(M_TRIM_THRESHOLD, INT_MAX) == 1;
  return ok;
}

}  // namespace arbiter::server
