#include "server/malloc_policy.h"

#include <sys/resource.h>

#include <cstdlib>
#include <cstring>

#include <gtest/gtest.h>

namespace arbiter::server {
namespace {

long MinorFaults() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return usage.ru_minflt;
}

// Allocates `bytes`, writes every byte, frees it; the page faults that took.
long FaultsToFill(size_t bytes) {
  const long before = MinorFaults();
  void* volatile buffer = std::malloc(bytes);
  std::memset(buffer, 1, bytes);
  asm volatile("" : : "r"(buffer) : "memory");  // the stores happen: not elided before free
  std::free(buffer);
  return MinorFaults() - before;
}

// A request's read buffers, freed after one call, are the next call's without
// a page fault per 4 KiB (glibc's defaults give the pages back to the kernel).
TEST(MallocPolicyTest, FreedBufferIsRefilledWithoutPageFaults) {
  if (!KeepFreedMemory()) GTEST_SKIP() << "a sanitizer's allocator serves malloc, not glibc's";
  constexpr size_t kBytes = 24 << 20;  // a few read buffers' worth, under the 32 MiB heap limit
  constexpr long kPages = kBytes / 4096;
  // Under glibc's defaults the first buffer is mapped and unmapped, the second
  // grows the heap afresh: both fault on every page. Kept, only the first does.
  FaultsToFill(kBytes);
  const long again = FaultsToFill(kBytes);
  EXPECT_LT(again, kPages / 10) << "refilling a freed " << kBytes << "-byte buffer faulted " << again
                                << " of its " << kPages << " pages in afresh";
}

}  // namespace
}  // namespace arbiter::server
