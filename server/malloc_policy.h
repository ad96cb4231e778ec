// How arbiterd's heap keeps memory it frees. A Matmul's request arrives in
// gRPC read buffers of up to a few MiB each - 64 MiB of them for a 4096^3 bf16
// request - freed once the operands are on the device. Under glibc's defaults
// those pages go back to the kernel (buffers past the mmap threshold are
// unmapped; per-thread arenas trim their tops), so the next request's
// receive takes a page fault on every 4 KiB it writes: in a VM, the faults,
// not the copies, bound the receive (a profile of the Unix-socket receive had
// the kernel's copy into the read buffers faulting on most pages).
//
// KeepFreedMemory makes freed memory stay with the process for reuse: buffers
// up to 32 MiB (glibc's most) come from the heap, the heap is never trimmed,
// and every thread allocates from one arena (each arena would otherwise warm
// up its own pages, and per-thread arenas release whole heaps regardless of
// the trim threshold). The daemon's resident memory therefore stays at its
// peak: the most it ever held at once in requests, replies and buffers.
//
// Call it first in main, before any thread starts. Not thread-safe.
#pragma once

namespace arbiter::server {

// True when glibc took every setting; false, setting nothing, in a sanitizer build.
bool KeepFreedMemory();

}  // namespace arbiter::server
