// memcpy whose stores bypass the CPU's caches (x86-64 non-temporal stores; a
// plain memcpy elsewhere), for host memory a device reads next by DMA. Written
// with ordinary stores, the lines sit dirty in the writing cores' caches and
// the DMA snoops each one out of them: on the H200 host a 4 MiB copy to the GPU
// from memory just written that way took 210-290 us, from memory 50-70 us
// (bench/results/h200/README.md, session 18).
//
// The stores are fenced before it returns: a DMA issued afterwards, from any
// thread, reads them. Thread-safe (no state).
#pragma once

#include <cstddef>

namespace arbiter {

void StreamingCopy(void* to, const void* from, size_t bytes);

}  // namespace arbiter
