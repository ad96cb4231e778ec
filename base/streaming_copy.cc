#include "base/streaming_copy.h"

#include <algorithm>
#include <cstdint>
#include <cstring>

#if defined(__x86_64__)
#include <emmintrin.h>
#endif

namespace arbiter {

void StreamingCopy(void* dst, const void* src, size_t n) {
  char* to = static_cast<char*>(dst);
  const char* from = static_cast<const char*>(src);
#if defined(__x86_64__)
  // Up to `to`'s 16-byte alignment by memcpy, then 64 bytes (a line) per step.
  const size_t head = std::min(n, (16 - reinterpret_cast<uintptr_t>(to) % 16) % 16);
  std::memcpy(to, from, head);
  to += head, from += head, n -= head;
  for (; n >= 64; n -= 64, to += 64, from += 64) {
    const __m128i* in = reinterpret_cast<const __m128i*>(from);
    __m128i* out = reinterpret_cast<__m128i*>(to);
    const __m128i x0 = _mm_loadu_si128(in), x1 = _mm_loadu_si128(in + 1);
    const __m128i x2 = _mm_loadu_si128(in + 2), x3 = _mm_loadu_si128(in + 3);
    _mm_stream_si128(out, x0);
    _mm_stream_si128(out + 1, x1);
    _mm_stream_si128(out + 2, x2);
    _mm_stream_si128(out + 3, x3);
  }
  std::memcpy(to, from, n);
  _mm_sfence();
#else
  std::memcpy(to, from, n);
#endif
}

}  // namespace arbiter
