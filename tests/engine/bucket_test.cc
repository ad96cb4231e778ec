#include "engine/bucket.h"

#include "gtest/gtest.h"

namespace arbiter {
namespace {

TEST(BucketTest, PowerOfTwoRangesAreHalfOpenBelow) {
  EXPECT_EQ(ClassifyDim(1).log2_ceil, 0);
  EXPECT_EQ(ClassifyDim(2).log2_ceil, 1);
  EXPECT_EQ(ClassifyDim(3).log2_ceil, 2);
  EXPECT_EQ(ClassifyDim(4).log2_ceil, 2);
  EXPECT_EQ(ClassifyDim(1024).log2_ceil, 10);
  EXPECT_EQ(ClassifyDim(1025).log2_ceil, 11);
}

TEST(BucketTest, AlignmentSeparatesShapesThatBehaveDifferently) {
  // 4095^3 runs ~6x slower than 4096^3 through cuBLAS on an H200: they must not share a verdict.
  const Bucket aligned = BucketOf({DType::kBF16, 4096, 4096, 4096});
  const Bucket ragged = BucketOf({DType::kBF16, 4095, 4095, 4095});
  EXPECT_NE(aligned, ragged);
  EXPECT_EQ(ClassifyDim(4096).align, 8);
  EXPECT_EQ(ClassifyDim(4095).align, 1);
  EXPECT_EQ(ClassifyDim(4094).align, 2);
  EXPECT_EQ(ClassifyDim(4092).align, 4);
  // Same range and alignment class share a bucket.
  EXPECT_EQ(BucketOf({DType::kF32, 3000, 64, 64}), BucketOf({DType::kF32, 4096, 64, 64}));
  // Only one dim differs in class: still a different bucket.
  EXPECT_NE(BucketOf({DType::kF32, 64, 64, 64}), BucketOf({DType::kF32, 64, 64, 65}));
}

TEST(BucketTest, TextRoundTripsAndIsReadable) {
  for (const Problem& p : {Problem{DType::kF32, 1, 1, 1}, Problem{DType::kF16, 777, 333, 2049},
                           Problem{DType::kBF16, 4096, 4096, 4096}, Problem{DType::kF64, 16, 8, 65536}}) {
    const Bucket b = BucketOf(p);
    const auto parsed = ParseBucket(b.ToString());
    ASSERT_TRUE(parsed.has_value()) << b.ToString();
    EXPECT_EQ(*parsed, b);
  }
  EXPECT_EQ(BucketOf({DType::kF32, 1, 1000, 4096}).ToString(), "m[1,1]a1.n(512,1024]a8.k(2048,4096]a8");
}

TEST(BucketTest, MalformedTextIsRejected) {
  EXPECT_FALSE(ParseBucket("").has_value());
  EXPECT_FALSE(ParseBucket("m(512,1024]a8.n(512,1024]a8").has_value());
  EXPECT_FALSE(ParseBucket("m(512,1000]a8.n(512,1024]a8.k(512,1024]a8").has_value());
  EXPECT_FALSE(ParseBucket("m(512,1024]a3.n(512,1024]a8.k(512,1024]a8").has_value());
  EXPECT_FALSE(ParseBucket("m(256,1024]a8.n(512,1024]a8.k(512,1024]a8").has_value());
}

TEST(BucketTest, BucketKeyIsTheDTypeAndTheBucket) {
  const BucketKey key = BucketKeyOf({DType::kBF16, 4095, 64, 1});
  EXPECT_EQ(key.dtype, DType::kBF16);
  EXPECT_EQ(key.bucket, BucketOf({DType::kBF16, 4095, 64, 1}));
  EXPECT_EQ(key.ToString(), "bf16/m(2048,4096]a1.n(32,64]a8.k[1,1]a1");
  // Same shape, other dtype: another key.
  EXPECT_NE(key, BucketKeyOf({DType::kF16, 4095, 64, 1}));
  EXPECT_EQ(key, BucketKeyOf({DType::kBF16, 3001, 40, 1}));
}

}  // namespace
}  // namespace arbiter
