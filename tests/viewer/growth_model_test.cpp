// The Growth view's model (viewer/growth_model.h) on a synthetic trace whose every value is
// known: the layers of the stacked chart and what the table shows of each.
#include <gtest/gtest.h>

#include <memory>

#include "analysis/replay.h"
#include "analysis/symbols.h"
#include "synthetic_trace.h"
#include "viewer/growth_model.h"

namespace memtide::viewer {
namespace {

using test::kMs;

// 2 s: stack 1 (0x1000) leaks 100 B every 10 ms; stack 2 (0x2000) holds 5000 B from 1 ms on;
// stacks 3..12 (0x3000..) each hold 10 B x their number from 2 ms on.
std::vector<uint8_t> trace() {
  test::Synthetic s;
  for (uint64_t k = 1; k <= 12; ++k) s.stack(k, 0, {0x1000 * k});
  s.malloc(1 * kMs, 0x900000, 5000, 2);
  for (uint64_t k = 3; k <= 12; ++k) s.malloc(2 * kMs + k, 0x800000 + 0x100 * k, 10 * k, k);
  for (uint64_t ms = 10; ms <= 2000; ms += 10) s.malloc(ms * kMs, 0x100000 + ms * 16, 100, 1);
  return s.end(2001 * kMs);
}

TEST(GrowthModel, TheGrowingStackIsTheBottomLayerAndTheRestSumsToTheHeap) {
  analysis::ReplayOptions o;
  o.stack_history = true;
  auto r = analysis::analyze_memory(trace(), o);
  ASSERT_TRUE(r.ok()) << r.error;
  analysis::Symbolizer sym(*r.model);
  const GrowthData d = make_growth(*r.model, sym, 4);
  ASSERT_TRUE(d.problem.empty()) << d.problem;
  ASSERT_EQ(d.layers.size(), 5u) << "4 stacks and the rest";
  EXPECT_EQ(d.layers[0].stack, 1u);
  EXPECT_TRUE(d.layers[0].growing);
  EXPECT_NEAR(d.layers[0].g.bytes_per_min, 600000, 600000 * 0.02) << "100 B per 10 ms";
  // Then the largest on average: stack 2, then 12 and 11 (120 B, 110 B).
  EXPECT_EQ(d.layers[1].stack, 2u);
  EXPECT_FALSE(d.layers[1].growing);
  EXPECT_EQ(d.layers[2].stack, 12u);
  EXPECT_EQ(d.layers[3].stack, 11u);
  EXPECT_EQ(d.layers[4].stack, 0u);
  EXPECT_EQ(d.layers[4].site, "other stacks");
  const std::size_t last = d.times.size() - 1;
  EXPECT_EQ(d.layers[4].bytes[last], 10u * (3 + 4 + 5 + 6 + 7 + 8 + 9 + 10));
  EXPECT_EQ(d.layers[0].bytes[last], 200u * 100);
  EXPECT_EQ(d.layers[4].top[last], 200u * 100 + 5000 + 10 * (3 + 4 + 5 + 6 + 7 + 8 + 9 + 10 + 11 + 12));
  EXPECT_EQ(d.max_total, d.layers[4].top[last]);
  for (std::size_t i = 0; i + 1 < d.times.size(); ++i) {
    EXPECT_LT(d.times[i], d.times[i + 1]);
    uint64_t sum = 0;
    for (const GrowthLayer& l : d.layers) {
      sum += l.bytes[i];
      EXPECT_EQ(l.top[i], sum);
    }
  }
  EXPECT_EQ(d.times[last], 2001 * kMs);
  EXPECT_EQ(d.warmup, r.model->duration() / 10);
  EXPECT_EQ(d.layers[0].site, analysis::frame_label(sym.resolve(0x1000).back()));
}

TEST(GrowthModel, WithoutAHistoryThereIsNothingToDraw) {
  auto r = analysis::analyze_memory(trace());
  ASSERT_TRUE(r.ok());
  analysis::Symbolizer sym(*r.model);
  const GrowthData d = make_growth(*r.model, sym);
  EXPECT_FALSE(d.problem.empty());
  EXPECT_TRUE(d.layers.empty());
  EXPECT_TRUE(d.times.empty());
}

}  // namespace
}  // namespace memtide::viewer
