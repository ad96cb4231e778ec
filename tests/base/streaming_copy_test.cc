#include "base/streaming_copy.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

namespace arbiter {
namespace {

// Every length from 0 to a few lines, from and to every offset within a line:
// exactly the source's bytes land, and not one byte around them changes.
TEST(StreamingCopyTest, CopiesEveryLengthAtEveryAlignmentAndNothingElse) {
  std::vector<uint8_t> src(512), dst(512);
  for (size_t i = 0; i < src.size(); ++i) src[i] = static_cast<uint8_t>(i * 37 + 11);
  for (size_t to = 0; to < 64; to += 3) {
    for (size_t from = 0; from < 64; from += 5) {
      for (size_t n = 0; n <= 300; ++n) {
        std::fill(dst.begin(), dst.end(), uint8_t{0xA5});
        StreamingCopy(dst.data() + to, src.data() + from, n);
        for (size_t i = 0; i < dst.size(); ++i) {
          const uint8_t want = i >= to && i < to + n ? src[from + i - to] : uint8_t{0xA5};
          ASSERT_EQ(dst[i], want) << "to " << to << " from " << from << " n " << n << " at " << i;
        }
      }
    }
  }
}

TEST(StreamingCopyTest, ALargeUnalignedCopyArrivesWhole) {
  std::string src(5 << 20, '\0');
  for (size_t i = 0; i < src.size(); ++i) src[i] = static_cast<char>(i * 2654435761u >> 24);
  std::string dst(src.size() + 16, 'x');
  StreamingCopy(dst.data() + 7, src.data() + 3, src.size() - 3);
  EXPECT_EQ(dst.compare(7, src.size() - 3, src, 3, src.size() - 3), 0);
  EXPECT_EQ(dst.substr(0, 7), std::string(7, 'x'));
  EXPECT_EQ(dst.substr(7 + src.size() - 3), std::string(dst.size() - 7 - (src.size() - 3), 'x'));
}

}  // namespace
}  // namespace arbiter
