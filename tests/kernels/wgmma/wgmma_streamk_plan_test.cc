// The stream-K partition of the wgmma stream-K tiles (kernels/wgmma/wgmma_gemm.h),
// walked on the host with the walker the kernel runs (no device needed; CPU CI
// runs it): every unit exactly once, ranges balanced to within one unit, and the
// contributors and owners where the kernel's flags rely on them being.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "kernels/wgmma/wgmma_gemm.h"

namespace arbiter::wgmma {
namespace {

struct Partition {
  int tiles, k_blocks, ctas;
};

std::string Describe(const Partition& p) {
  return std::to_string(p.tiles) + " tiles x " + std::to_string(p.k_blocks) + " k-blocks over " +
         std::to_string(p.ctas) + " CTAs";
}

// Every CTA's segments, in the order it computes them.
std::vector<std::vector<WgmmaSegment>> Walk(const Partition& p) {
  std::vector<std::vector<WgmmaSegment>> out(static_cast<size_t>(p.ctas));
  for (int c = 0; c < p.ctas; ++c) {
    WgmmaSegmentWalk walk = WgmmaSegmentWalk::StreamK(c, p.ctas, p.tiles, p.k_blocks);
    for (WgmmaSegment s; walk.Next(&s);) out[static_cast<size_t>(c)].push_back(s);
  }
  return out;
}

// The grids the launcher builds (G = min(SMs, units)) at shapes that hit each
// case: one tile split many ways, few tiles against long K, whole tiles per CTA
// (units a multiple of G), fewer units than SMs, CTA ranges inside one tile.
std::vector<Partition> Partitions() {
  std::vector<Partition> out;
  for (const int sms : {1, 7, 16, 132}) {
    for (const auto& [tiles, k_blocks] : std::vector<std::pair<int, int>>{
             {1, 1}, {1, 64}, {1, 129}, {2, 128}, {24, 128}, {71, 71}, {112, 56}, {132, 1},
             {264, 3}, {5, 1}, {13, 7}, {1000, 1}, {40, 32}, {396, 64}}) {
      const int units = tiles * k_blocks;
      out.push_back({tiles, k_blocks, std::min(sms, units)});
    }
  }
  return out;
}

TEST(WgmmaStreamKPlanTest, EveryUnitOnceInBalancedContiguousRanges) {
  for (const Partition& p : Partitions()) {
    const int units = p.tiles * p.k_blocks;
    std::vector<int> seen(static_cast<size_t>(units), 0);
    int smallest = units, largest = 0;
    int next_unit = 0;  // ranges are contiguous and in CTA order
    const auto walks = Walk(p);
    for (int c = 0; c < p.ctas; ++c) {
      int count = 0;
      const WgmmaSegment* prev = nullptr;
      for (const WgmmaSegment& s : walks[static_cast<size_t>(c)]) {
        ASSERT_LT(s.kb_lo, s.kb_hi) << Describe(p);
        ASSERT_GE(s.kb_lo, 0);
        ASSERT_LE(s.kb_hi, p.k_blocks);
        // Segments are maximal: consecutive ones belong to different tiles.
        if (prev != nullptr) {
          EXPECT_EQ(s.tile, prev->tile + 1) << Describe(p) << " CTA " << c;
        }
        for (int kb = s.kb_lo; kb < s.kb_hi; ++kb) {
          const int u = s.tile * p.k_blocks + kb;
          EXPECT_EQ(u, next_unit++) << Describe(p) << " CTA " << c;
          ++seen[static_cast<size_t>(u)];
          EXPECT_EQ(WgmmaStreamKCtaOf(u, p.ctas, units), c) << Describe(p) << " unit " << u;
        }
        count += s.kb_hi - s.kb_lo;
        prev = &s;
      }
      EXPECT_EQ(count, WgmmaStreamKFirstUnit(c + 1, p.ctas, units) - WgmmaStreamKFirstUnit(c, p.ctas, units));
      smallest = std::min(smallest, count);
      largest = std::max(largest, count);
    }
    EXPECT_EQ(next_unit, units) << Describe(p);
    EXPECT_EQ(std::count(seen.begin(), seen.end(), 1), units) << Describe(p) << ": a unit missed or repeated";
    EXPECT_GE(smallest, 1) << Describe(p) << ": a CTA with no work";
    EXPECT_LE(largest - smallest, 1) << Describe(p) << ": ranges not balanced";
  }
}

TEST(WgmmaStreamKPlanTest, ContributorsComeFirstOwnersLastAndOwnersWaitOnTheNextCtas) {
  for (const Partition& p : Partitions()) {
    const int units = p.tiles * p.k_blocks;
    const auto walks = Walk(p);
    std::map<int, int> owner_of;                   // split tile -> its owner CTA
    std::map<int, std::vector<int>> contributors;  // split tile -> contributing CTAs, in order
    std::map<int, int> covered;                    // split tile -> k-blocks covered so far
    for (int c = 0; c < p.ctas; ++c) {
      const auto& segs = walks[static_cast<size_t>(c)];
      for (size_t i = 0; i < segs.size(); ++i) {
        const WgmmaSegment& s = segs[i];
        if (s.kb_lo > 0) {
          // A contributor: the CTA's first segment (at most one per CTA, so one
          // workspace slot and one flag per CTA suffice), and it continues the
          // tile exactly where the previous CTA stopped.
          EXPECT_EQ(i, 0u) << Describe(p) << " CTA " << c;
          EXPECT_EQ(covered[s.tile], s.kb_lo) << Describe(p) << " CTA " << c;
          contributors[s.tile].push_back(c);
          covered[s.tile] = s.kb_hi;
        } else if (s.kb_hi < p.k_blocks) {
          // An owner: the CTA's last segment, so it is the last thing it computes.
          EXPECT_EQ(i, segs.size() - 1) << Describe(p) << " CTA " << c;
          EXPECT_EQ(owner_of.count(s.tile), 0u) << Describe(p) << " tile " << s.tile;
          owner_of[s.tile] = c;
          covered[s.tile] = s.kb_hi;
        }
      }
    }
    EXPECT_EQ(owner_of.size(), contributors.size()) << Describe(p);
    for (const auto& [tile, owner] : owner_of) {
      EXPECT_EQ(covered[tile], p.k_blocks) << Describe(p) << " tile " << tile << " not finished";
      // The owner waits on CTAs owner + 1 .. the CTA of the tile's last unit,
      // exactly the contributors, in that order.
      const int last = WgmmaStreamKCtaOf(tile * p.k_blocks + p.k_blocks - 1, p.ctas, units);
      std::vector<int> expected;
      for (int q = owner + 1; q <= last; ++q) expected.push_back(q);
      EXPECT_EQ(contributors[tile], expected) << Describe(p) << " tile " << tile;
    }
  }
}

TEST(WgmmaStreamKPlanTest, GridIsOneCtaPerSmOrPerUnitWithOnePartialSlotEach) {
  for (WgmmaTile tile : kAllWgmmaTiles) {
    if (!WgmmaTileStreamK(tile)) continue;
    for (const auto& [m, n, k, sms] : std::vector<std::tuple<int64_t, int64_t, int64_t, int>>{
             {64, 18176, 4544, 132}, {96, 3080, 8200, 132}, {1, 256, 8, 132}, {300, 1000, 72, 7},
             {2048, 14336, 4096, 132}}) {
      const WgmmaGeometry g = WgmmaLaunchGeometry(tile, m, n, k, sms);
      EXPECT_TRUE(g.stream_k);
      EXPECT_EQ(g.splits, 1);
      EXPECT_EQ(g.tiles_m, (m + g.tile_m - 1) / g.tile_m);
      EXPECT_EQ(g.tiles_n, (n + g.tile_n - 1) / g.tile_n);
      EXPECT_EQ(g.k_blocks, (k + 63) / 64);
      EXPECT_EQ(g.grid_x, std::min<int64_t>(sms, g.units()));
      EXPECT_EQ(g.workspace_bytes(), size_t(g.grid_x) * g.tile_m * g.tile_n * sizeof(float));
    }
  }
  // The other tiles need no workspace.
  EXPECT_EQ(WgmmaLaunchGeometry(WgmmaTile::k128x256, 64, 18176, 4544, 132).workspace_bytes(), 0u);
  EXPECT_EQ(WgmmaLaunchGeometry(WgmmaTile::k64x256SplitK, 64, 18176, 4544, 132).workspace_bytes(), 0u);
}

TEST(WgmmaStreamKPlanTest, WalkOfWholeTilesIsThePersistentGridsStride) {
  // The same walker drives the persistent tiles: tiles first, first + step, ...
  WgmmaSegmentWalk walk = WgmmaSegmentWalk::Tiles(3, 5, 20, 0, 9);
  std::vector<int> tiles;
  for (WgmmaSegment s; walk.Next(&s);) {
    EXPECT_EQ(s.kb_lo, 0);
    EXPECT_EQ(s.kb_hi, 9);
    tiles.push_back(s.tile);
  }
  EXPECT_EQ(tiles, (std::vector<int>{3, 8, 13, 18}));
}

}  // namespace
}  // namespace arbiter::wgmma
