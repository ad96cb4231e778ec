#include "server/malloc_policy.h"

#include <malloc.h>

#include <climits>

// GCC names a sanitizer build by __SANITIZE_*__, clang (CI's TSan build) by __has_feature.
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define ARBITER_SANITIZED_ALLOCATOR 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define ARBITER_SANITIZED_ALLOCATOR 1
#endif
#endif

namespace arbiter::server {

bool KeepFreedMemory() {
#if defined(ARBITER_SANITIZED_ALLOCATOR)
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
