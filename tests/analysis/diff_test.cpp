// analysis/diff.h: what `memtide diff` and the viewer's Compare view share.
#include <gtest/gtest.h>

#include "analysis/diff.h"

namespace memtide::analysis {
namespace {

// Every field with a value of its own, so that a field left out of the sum shows.
StackMetrics numbered(uint64_t base) {
  StackMetrics m;
  m.alloc_count = base + 1;
  m.alloc_bytes = base + 2;
  m.temp_count = base + 3;
  m.temp_bytes = base + 4;
  m.leaked_blocks = base + 5;
  m.leaked_bytes = base + 60;
  m.peak_blocks = base + 7;
  m.peak_bytes = base + 8;
  m.at_blocks = base + 9;
  m.at_bytes = base + 10;
  m.first_leak_time = base + 11;
  m.last_leak_time = base + 12;
  m.reachable_blocks = base + 2;
  m.reachable_bytes = base + 13;
  m.indirect_blocks = base + 1;
  m.indirect_bytes = base + 14;
  m.alloc_samples = base + 15;
  m.leaked_samples = base + 16;
  m.alloc_var = static_cast<double>(base) + 0.5;
  m.leaked_var = static_cast<double>(base) + 0.25;
  return m;
}

TEST(Diff, StacksMergedByFramesSumEveryMetric) {
  StackMetrics sum = numbered(100);
  add_metrics(sum, numbered(1000));
  EXPECT_EQ(sum.alloc_count, 101u + 1001u);
  EXPECT_EQ(sum.alloc_bytes, 102u + 1002u);
  EXPECT_EQ(sum.temp_count, 103u + 1003u);
  EXPECT_EQ(sum.temp_bytes, 104u + 1004u);
  EXPECT_EQ(sum.leaked_blocks, 105u + 1005u);
  EXPECT_EQ(sum.leaked_bytes, 160u + 1060u);
  EXPECT_EQ(sum.peak_blocks, 107u + 1007u);
  EXPECT_EQ(sum.peak_bytes, 108u + 1008u);
  EXPECT_EQ(sum.at_blocks, 109u + 1009u);
  EXPECT_EQ(sum.at_bytes, 110u + 1010u);
  EXPECT_EQ(sum.reachable_blocks, 102u + 1002u);
  EXPECT_EQ(sum.reachable_bytes, 113u + 1013u);
  EXPECT_EQ(sum.indirect_blocks, 101u + 1001u);
  EXPECT_EQ(sum.indirect_bytes, 114u + 1014u);
  EXPECT_EQ(sum.alloc_samples, 115u + 1015u);
  EXPECT_EQ(sum.leaked_samples, 116u + 1016u);
  EXPECT_DOUBLE_EQ(sum.alloc_var, 1101.0);
  EXPECT_DOUBLE_EQ(sum.leaked_var, 1100.5);
  // The definite leaks come out of the sums: wrong when only some of them are added.
  EXPECT_EQ(sum.definite_bytes(), numbered(100).definite_bytes() + numbered(1000).definite_bytes());
  // The leaks' allocation times span both.
  EXPECT_EQ(sum.first_leak_time, 111u);
  EXPECT_EQ(sum.last_leak_time, 1012u);
}

TEST(Diff, LeakTimesComeOnlyFromStacksThatLeak) {
  StackMetrics sum;
  StackMetrics none = numbered(5);
  none.leaked_blocks = 0;
  add_metrics(sum, none);
  EXPECT_EQ(sum.first_leak_time, 0u);
  EXPECT_EQ(sum.last_leak_time, 0u);
  add_metrics(sum, numbered(50));
  EXPECT_EQ(sum.first_leak_time, 61u);
  EXPECT_EQ(sum.last_leak_time, 62u);
}

TEST(Diff, TheLargestChangeComesFirstEitherWay) {
  EXPECT_TRUE(larger_change(-10, 5));
  EXPECT_TRUE(larger_change(10, -5));
  EXPECT_FALSE(larger_change(5, -10));
  EXPECT_FALSE(larger_change(-7, 7));
}

}  // namespace
}  // namespace memtide::analysis
