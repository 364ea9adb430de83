// The replay of sampled traces (formats/sampling.h): what each sampled block stands for, the
// samples and variances behind the estimates, frees of unsampled blocks, and a switch from exact
// to sampled recording while blocks of the exact period are live. Synthetic traces whose every
// number is known.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "analysis/replay.h"
#include "formats/sampling.h"
#include "tests/analysis/trace_builder.h"

namespace memtide {
namespace {

using analysis::Domain;

test::TraceBuilder::Options sampled(uint64_t interval) {
  test::TraceBuilder::Options o;
  o.sample_interval = interval;
  return o;
}

TEST(Sampling, WeightsAreTheHorvitzThompsonOnes) {
  EXPECT_EQ(fmt::sample_weight(100, 1000), 1051u);  // 100 / (1 - e^-0.1)
  EXPECT_EQ(fmt::sample_weight(1 << 20, 512 * 1024), 1212697u);  // 1 MiB / (1 - e^-2)
  EXPECT_EQ(fmt::sample_weight(1 << 30, 1024), uint64_t{1} << 30) << "a block far above the interval stands for itself";
  EXPECT_EQ(fmt::sample_weight(0, 1024), 0u);
  EXPECT_GE(fmt::sample_weight(1, 1 << 30), uint64_t{1} << 30) << "a byte at the largest interval";
}

TEST(Sampling, ASampledBlockStandsForItsWeightInBytesAndBlocks) {
  test::TraceBuilder b(sampled(1000));
  const uint64_t w = fmt::sample_weight(100, 1000);
  b.stack(1, 1, 0, {0x1000});
  b.sampled_malloc(1, 10, 0x10000, 100, w, 1).sampled_malloc(1, 20, 0x20000, 100, w, 1);
  b.free(1, 30, 0x10000);
  b.free(1, 31, 0x30000);  // an unsampled block's free: expected, not an anomaly
  const auto m = test::analyze(b.end(40));
  ASSERT_TRUE(m);
  EXPECT_TRUE(m->sampling.sampled());
  EXPECT_EQ(m->sampling.interval(), 1000u);
  EXPECT_EQ(m->sampling.samples, 2u);
  const analysis::Totals& h = m->heap();
  EXPECT_EQ(h.allocated_bytes, 2 * w);
  EXPECT_EQ(h.leaked_bytes, w);
  EXPECT_EQ(h.freed_bytes, w);
  // 10.51 blocks each, rounded to 10 or 11.
  EXPECT_GE(h.allocations, 20u);
  EXPECT_LE(h.allocations, 22u);
  EXPECT_GE(h.leaked_blocks, 10u);
  EXPECT_LE(h.leaked_blocks, 11u);
  EXPECT_EQ(h.temporaries, 0u) << "not known from a sample";
  EXPECT_EQ(m->anomalies.unknown_free_count[0], 0u);
  const analysis::StackMetrics* s = test::stack_metrics(*m, 1);
  ASSERT_TRUE(s);
  EXPECT_EQ(s->alloc_samples, 2u);
  EXPECT_EQ(s->leaked_samples, 1u);
  EXPECT_DOUBLE_EQ(s->alloc_var, 2.0 * w * (w - 100));
  EXPECT_DOUBLE_EQ(s->leaked_var, 1.0 * w * (w - 100));
  EXPECT_DOUBLE_EQ(m->sampling.allocated_var, 2.0 * w * (w - 100));
}

// Each block's count is its weight over its size rounded down or up at random: over many blocks
// the sum of counts is the sum of the fractions.
TEST(Sampling, BlockCountsAreUnbiased) {
  test::TraceBuilder b(sampled(4096));
  b.stack(1, 1, 0, {0x1000});
  double expected = 0;
  uint64_t addr = 0x100000;
  for (int i = 0; i < 20000; ++i) {
    const uint64_t size = 24 + static_cast<uint64_t>(i % 200);
    const uint64_t w = fmt::sample_weight(size, 4096);
    expected += static_cast<double>(w) / static_cast<double>(size);
    b.sampled_malloc(1, 10 + static_cast<uint64_t>(i), addr, size, w, 1);
    addr += 256;
  }
  const auto m = test::analyze(b.end(30000));
  ASSERT_TRUE(m);
  EXPECT_NEAR(static_cast<double>(m->heap().allocations) / expected, 1.0, 0.005);
  EXPECT_EQ(m->heap().allocations, m->heap().leaked_blocks);
  EXPECT_EQ(m->heap().peak_blocks, m->heap().leaked_blocks);
}

// Blocks of an exact period live at a switch to sampled: those with a kept address stand for
// 64 of themselves, the others leave the estimate, and none is an anomaly when freed.
TEST(Sampling, ExactBlocksLiveAtASwitchAreSampledByTheirAddress) {
  test::TraceBuilder b;
  b.stack(1, 1, 0, {0x1000});
  std::vector<uint64_t> kept, dropped;
  for (uint64_t i = 0; i < 4000; ++i) {
    const uint64_t a = 0x200000 + i * 64;
    b.malloc(1, 10, a, 48, 1);
    (fmt::kept_at_switch(a) ? kept : dropped).push_back(a);
  }
  ASSERT_GT(kept.size(), 20u);
  b.switch_sampling(20, 8192);
  // After the switch the recorder records the frees of kept addresses only: free half of them.
  for (std::size_t i = 0; i < kept.size(); i += 2) b.free(1, 30, kept[i]);
  const auto m = test::analyze(b.end(40));
  ASSERT_TRUE(m);
  EXPECT_TRUE(m->sampling.sampled());
  ASSERT_EQ(m->sampling.changes.size(), 1u);
  EXPECT_EQ(m->sampling.changes[0].interval, 8192u);
  EXPECT_EQ(m->sampling.changes[0].time, b.start() + 20);
  const uint64_t left = kept.size() / 2;  // the odd ones
  EXPECT_EQ(m->heap().leaked_bytes, left * 48 * fmt::kExactKeepFactor);
  EXPECT_EQ(m->heap().leaked_blocks, left * fmt::kExactKeepFactor);
  EXPECT_EQ(m->heap().allocated_bytes, 4000u * 48) << "the exact period's allocations stay exact";
  EXPECT_EQ(m->heap().peak_bytes, std::max<uint64_t>(4000u * 48, kept.size() * 48 * fmt::kExactKeepFactor))
      << "the exact figure before the switch, or the estimate after it";
  EXPECT_EQ(m->anomalies.unknown_free_count[0], 0u);
}

TEST(Sampling, AnExactTraceIsNotSampled) {
  test::TraceBuilder b;
  b.stack(1, 1, 0, {0x1000}).malloc(1, 10, 0x10, 48, 1).free(1, 20, 0x20);
  const auto m = test::analyze(b.end(30));
  ASSERT_TRUE(m);
  EXPECT_FALSE(m->sampling.sampled());
  EXPECT_EQ(m->anomalies.unknown_free_count[0], 1u) << "in an exact trace an unknown free is an anomaly";
  EXPECT_EQ(test::stack_metrics(*m, 1)->alloc_samples, 0u);
}

}  // namespace
}  // namespace memtide
