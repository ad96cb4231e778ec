#include "engine/host_gather.h"

#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <vector>

namespace arbiter {
namespace {

constexpr unsigned char kPoison = 0xEE;

// `bytes` random bytes cut into pieces of 0..max_piece bytes (empty ones included), as a
// message's slices come.
struct Pieces {
  Pieces(size_t bytes, size_t max_piece, uint32_t seed) : data(bytes) {
    std::mt19937 rng(seed);
    for (auto& v : data) v = static_cast<unsigned char>(rng());
    for (size_t at = 0; at < bytes;) {
      const size_t n = std::min<size_t>(bytes - at, rng() % (max_piece + 1));
      pieces.push_back(HostPiece{data.data() + at, n});
      at += n;
    }
  }
  std::vector<unsigned char> data;
  std::vector<HostPiece> pieces;
};

// Copies [offset, offset + n) into a poisoned buffer with a guard byte each side and checks
// every byte, and that nothing outside was written.
void ExpectRangeCopied(const Pieces& in, const HostGather& gather, size_t offset, size_t n,
                       ForkJoinPool* pool) {
  std::vector<unsigned char> out(n + 2, kPoison);
  gather.Copy(offset, n, out.data() + 1, pool);
  EXPECT_EQ(std::memcmp(out.data() + 1, in.data.data() + offset, n), 0)
      << "bytes [" << offset << ", " << offset + n << ") differ with "
      << (pool == nullptr ? 1 : pool->threads()) << " threads";
  EXPECT_EQ(out.front(), kPoison) << "written before the destination";
  EXPECT_EQ(out.back(), kPoison) << "written past the destination";
}

TEST(HostGatherTest, WholeRunOfRaggedPiecesComesOutInOrderOnAnyThreadCount) {
  const Pieces in((5 << 20) + 333, 40000, 1);  // parts of 512 KiB+ for up to 4 threads
  const HostGather gather(in.pieces);
  ASSERT_EQ(gather.bytes(), in.data.size());
  ExpectRangeCopied(in, gather, 0, in.data.size(), nullptr);
  for (int threads : {1, 2, 3, 4, 7}) {
    ForkJoinPool pool(threads);
    ExpectRangeCopied(in, gather, 0, in.data.size(), &pool);
  }
}

// A staged copy takes the run a chunk at a time: ranges start and end mid-piece, on an
// empty piece's boundary, and at the very end.
TEST(HostGatherTest, RangesStartingAndEndingMidPieceAreExact) {
  const Pieces in((3 << 20) + 4097, 3 << 20 >> 3, 2);  // pieces up to 384 KiB, parts cross them
  const HostGather gather(in.pieces);
  ForkJoinPool pool(4);
  std::mt19937 rng(3);
  for (int i = 0; i < 50; ++i) {
    const size_t offset = rng() % in.data.size();
    const size_t n = rng() % (in.data.size() - offset + 1);
    ExpectRangeCopied(in, gather, offset, n, &pool);
    ExpectRangeCopied(in, gather, offset, n, nullptr);
  }
  ExpectRangeCopied(in, gather, in.data.size(), 0, &pool);
  const size_t chunk = 1 << 20;  // CudaStream's way: consecutive chunks, the last short
  for (size_t at = 0; at < in.data.size(); at += chunk) {
    ExpectRangeCopied(in, gather, at, std::min(chunk, in.data.size() - at), &pool);
  }
}

TEST(HostGatherTest, NoPiecesIsAnEmptyRun) {
  const HostGather gather({});
  EXPECT_EQ(gather.bytes(), 0u);
  ForkJoinPool pool(3);
  unsigned char guard = kPoison;
  gather.Copy(0, 0, &guard, &pool);
  EXPECT_EQ(guard, kPoison);
}

}  // namespace
}  // namespace arbiter
