// The live-set rules both replays follow (formats/live_rules.h): the writer's checkpoint and the
// readers' replay call these, so each rule is checked here once; the long-run differential tests
// (tests/longrun) check that both replays then hold the same blocks.
#include "formats/live_rules.h"

#include <gtest/gtest.h>

namespace live = memtide::fmt::live;

TEST(LiveRules, AnUnmapLeavesThePiecesOutsideIt) {
  live::Piece p[2];
  ASSERT_EQ(live::pieces_left(0x1000, 0x5000, 0x2000, 0x3000, p), 2) << "a hole in the middle";
  EXPECT_EQ(p[0].lo, 0x1000u);
  EXPECT_EQ(p[0].hi, 0x2000u);
  EXPECT_EQ(p[1].lo, 0x3000u);
  EXPECT_EQ(p[1].hi, 0x5000u);
  ASSERT_EQ(live::pieces_left(0x1000, 0x5000, 0x1000, 0x3000, p), 1) << "the head";
  EXPECT_EQ(p[0].lo, 0x3000u);
  EXPECT_EQ(p[0].hi, 0x5000u);
  ASSERT_EQ(live::pieces_left(0x1000, 0x5000, 0x4000, 0x9000, p), 1) << "the tail, past the end";
  EXPECT_EQ(p[0].lo, 0x1000u);
  EXPECT_EQ(p[0].hi, 0x4000u);
  EXPECT_EQ(live::pieces_left(0x1000, 0x5000, 0x0, 0x9000, p), 0) << "all of it";
  ASSERT_EQ(live::pieces_left(0x1000, 0x5000, 0x5000, 0x6000, p), 1) << "beside it: untouched";
  EXPECT_EQ(p[0].lo, 0x1000u);
  EXPECT_EQ(p[0].hi, 0x5000u);
}

TEST(LiveRules, MremapUnmapsToTheEndOfTheRangeThatHoldsItsOldAddress) {
  EXPECT_EQ(live::mremap_old_end(true, 0x1000, 0x5000, 0x2000), 0x5000u);
  EXPECT_EQ(live::mremap_old_end(true, 0x1000, 0x5000, 0x1000), 0x5000u);
  EXPECT_EQ(live::mremap_old_end(true, 0x1000, 0x5000, 0x5000), 0u) << "the range ends before it";
  EXPECT_EQ(live::mremap_old_end(false, 0, 0, 0x2000), 0u) << "no range at or before it";
}

TEST(LiveRules, SizesAreClampedAndASampleStandsForAtLeastItself) {
  EXPECT_EQ(live::held_size(100), 100u);
  EXPECT_EQ(live::held_size(~uint64_t{0}), live::kMaxBlockBytes);
  EXPECT_EQ(live::sample_weight(0, 100), 0u) << "exact";
  EXPECT_EQ(live::sample_weight(512 * 1024, 100), 512u * 1024);
  EXPECT_EQ(live::sample_weight(64, 4096), 4096u) << "never less than the block";
  EXPECT_EQ(live::sample_weight(~uint64_t{0}, 1), live::kMaxBlockBytes);
  EXPECT_TRUE(live::maps_nothing(0x1000, 0));
  EXPECT_TRUE(live::maps_nothing(~uint64_t{0} - 10, 100)) << "past the end of the address space";
  EXPECT_FALSE(live::maps_nothing(0x1000, 4096));
}

TEST(LiveRules, AtTheSwitchToSamplingAboutOneExactBlockInTheFactorStays) {
  unsigned stays = 0;
  const unsigned n = 1u << 16;
  for (uint64_t a = 0; a < n; ++a) stays += live::stays_at_switch(0x7f0000000000 + a * 16);
  const double share = static_cast<double>(stays) / n;
  EXPECT_NEAR(share, 1.0 / memtide::fmt::kExactKeepFactor, 0.5 / memtide::fmt::kExactKeepFactor);
  EXPECT_EQ(live::weight_after_switch(100), 100u * memtide::fmt::kExactKeepFactor);
}
