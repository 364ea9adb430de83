// The history of live bytes by stack (analysis/stack_history.h) and growth (analysis/growth.h)
// on synthetic traces whose every value is known: a slow leak, a cache that fills and then
// holds, churn, a one-time allocation, sampled blocks.
#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <vector>

#include "analysis/growth.h"
#include "analysis/replay.h"
#include "formats/sampling.h"
#include "tests/analysis/trace_builder.h"

namespace memtide {
namespace {

using analysis::Growth;
using analysis::StackGrowth;
using analysis::StackHistory;

constexpr uint64_t kMs = 1'000'000;
constexpr uint64_t kLeak = 1, kCache = 2, kChurn = 3, kOnce = 4, kFastLeak = 5;

analysis::ReplayOptions with_history() {
  analysis::ReplayOptions o;
  o.stack_history = true;
  return o;
}

const StackHistory::Track* track(const StackHistory& h, uint64_t stack) {
  for (const StackHistory::Track& t : h.tracks)
    if (t.stack.value == stack) return &t;
  return nullptr;
}

const StackGrowth* find(const std::vector<StackGrowth>& v, uint64_t stack) {
  for (const StackGrowth& g : v)
    if (g.stack.value == stack) return &g;
  return nullptr;
}

// A worker's 4 seconds: stack 1 leaks 64 bytes every 10 ms; stack 2 is a cache of 100 entries
// of 256 bytes filled in the first 0.8 s (one entry every 8 ms), then each insertion evicts the
// oldest; stack 3 allocates and frees 1..4 blocks of 512 bytes every ms, freed within 3 ms;
// stack 4 allocates 1 MiB once at 3.5 s and keeps it; stack 5 (when `fast`) leaks 256 bytes
// every 10 ms.
std::vector<uint8_t> worker_trace(bool fast = false, uint64_t sample = 0) {
  test::TraceBuilder::Options opt;
  opt.sample_interval = sample;
  test::TraceBuilder b(opt);
  for (uint64_t s = 1; s <= 5; ++s) b.stack(1, s, 0, {0x1000 * s});
  std::mt19937_64 rng(7);
  uint64_t leak_addr = 0x1000000, cache_next = 0, churn_addr = 0x8000000;
  std::vector<uint64_t> cache;
  std::vector<std::pair<uint64_t, uint64_t>> churn;  // (free time, address)
  auto malloc = [&](uint64_t t, uint64_t addr, uint64_t size, uint64_t stack) {
    if (sample) {
      // Sampled like the recorder: kept with probability 1 - e^(-size/interval), weighted.
      const double p = 1 - std::exp(-static_cast<double>(size) / static_cast<double>(sample));
      if (std::uniform_real_distribution<double>(0, 1)(rng) < p)
        b.sampled_malloc(1, t, addr, size, fmt::sample_weight(size, sample), stack);
      return;
    }
    b.malloc(1, t, addr, size, stack);
  };
  for (uint64_t ms = 1; ms <= 4000; ++ms) {
    const uint64_t t = ms * kMs;
    for (auto it = churn.begin(); it != churn.end();) {
      if (it->first > t) {
        ++it;
        continue;
      }
      b.free(1, t, it->second);
      it = churn.erase(it);
    }
    if (ms % 10 == 0) malloc(t + 1, leak_addr += 64, 64, kLeak);
    if (fast && ms % 10 == 5) malloc(t + 2, leak_addr += 256, 256, kFastLeak);
    if (ms % 8 == 0) {
      if (cache.size() == 100) {
        b.free(1, t + 3, cache.front());
        cache.erase(cache.begin());
      }
      cache.push_back(0x4000000 + 256 * cache_next++);
      malloc(t + 4, cache.back(), 256, kCache);
    }
    for (uint64_t k = 0, n = 1 + rng() % 4; k < n; ++k) {
      churn.emplace_back(t + (1 + rng() % 3) * kMs, churn_addr += 512);
      malloc(t + 5 + k, churn_addr, 512, kChurn);
    }
    if (ms == 3500) malloc(t + 10, 0x20000000, 1 << 20, kOnce);
    if (ms % 20 == 0) b.watermark(t + 20);
  }
  return b.end(4001 * kMs);
}

TEST(StackHistory, OffUnlessAsked) {
  const auto m = test::analyze(worker_trace());
  ASSERT_TRUE(m);
  EXPECT_TRUE(m->stack_history.empty());
  EXPECT_EQ(analysis::analyze_growth(*m).problem, "no history of live bytes by stack (replayed without stack_history)");
}

TEST(StackHistory, HoldsEachStacksLiveBytesAtTheEndOfEveryInterval) {
  const auto m = test::analyze(worker_trace(), with_history());
  ASSERT_TRUE(m);
  const StackHistory& h = m->stack_history;
  // 4 s in intervals from 1 ms, doubled while more than 256: 16 ms wide.
  EXPECT_EQ(h.width, 16 * kMs);
  EXPECT_EQ(h.end, m->last_time);
  EXPECT_GE(h.intervals, StackHistory::kMaxIntervals / 2);
  EXPECT_LE(h.intervals, StackHistory::kMaxIntervals);
  const StackHistory::Track* leak = track(h, kLeak);
  const StackHistory::Track* cache = track(h, kCache);
  ASSERT_TRUE(leak && cache);
  std::vector<uint64_t> bytes, blocks;
  for (uint32_t i = 0; i + 1 < h.intervals; ++i) {
    // Allocations at ms*kMs + 1 (leak) and + 4 (cache) until the end of the interval.
    const uint64_t end_ms = (h.end_of(i) - test::TraceBuilder::kStart) / kMs;
    const uint64_t end_ns = h.end_of(i) - test::TraceBuilder::kStart;
    const uint64_t leaks = (end_ms - (end_ns % kMs > 1 ? 0 : 1)) / 10;
    h.dense(*leak, bytes, &blocks);
    EXPECT_EQ(bytes[i], 64 * leaks) << "interval " << i;
    EXPECT_EQ(blocks[i], leaks) << "interval " << i;
    h.dense(*cache, bytes, &blocks);
    EXPECT_EQ(blocks[i], std::min<uint64_t>(100, (end_ms - (end_ns % kMs > 4 ? 0 : 1)) / 8)) << "interval " << i;
  }
  h.dense(*leak, bytes, &blocks);
  EXPECT_EQ(bytes.back(), 400u * 64) << "the last interval ends with the trace";
  EXPECT_EQ(test::stack_metrics(*m, kLeak)->leaked_bytes, 400u * 64);
}

TEST(Growth, RanksTheSlowLeaksAndNeitherTheCacheNorChurnNorAOneTimeBlock) {
  const auto m = test::analyze(worker_trace(/*fast=*/true), with_history());
  ASSERT_TRUE(m);
  const Growth g = analysis::analyze_growth(*m);
  ASSERT_TRUE(g.ok()) << g.problem;
  ASSERT_EQ(g.growing.size(), 2u);
  EXPECT_EQ(g.growing[0].stack.value, kFastLeak) << "fastest first";
  EXPECT_EQ(g.growing[1].stack.value, kLeak);
  // 64 bytes per 10 ms: 384,000 bytes per minute.
  EXPECT_NEAR(g.growing[1].bytes_per_min, 384000, 384000 * 0.02);
  EXPECT_NEAR(g.growing[0].bytes_per_min, 4 * 384000, 4 * 384000 * 0.02);
  EXPECT_NEAR(g.bytes_per_min, 5 * 384000, 5 * 384000 * 0.02);
  // Steady: it rose in every interval (16 ms hold one or two leaks).
  EXPECT_DOUBLE_EQ(g.growing[1].steadiness, 1.0);
  // The window: from the interval that holds 0.4 s (a tenth of the run) to the end.
  EXPECT_LE(g.from, m->time_base + 416 * kMs);
  EXPECT_GE(g.from, m->time_base + 400 * kMs);
  // The process exited (End record): to the last interval end at least an interval (16 ms)
  // before the end of the trace, leaving out its teardown.
  EXPECT_LE(g.to + 16 * kMs, m->last_time);
  EXPECT_GT(g.to + 32 * kMs, m->last_time);
  EXPECT_EQ(g.growing[1].start_blocks, (g.from - m->time_base) / (10 * kMs));
  EXPECT_EQ(g.growing[1].end_blocks, (g.to - m->time_base) / (10 * kMs));
  EXPECT_EQ(g.growing[1].end_bytes, 64 * g.growing[1].end_blocks);
  EXPECT_FALSE(find(g.growing, kCache));
  EXPECT_FALSE(find(g.growing, kChurn));
  EXPECT_FALSE(find(g.growing, kOnce)) << "one step late in the window";
  // The cache rose in the window (until 0.8 s), then held.
  const StackGrowth* cache = find(g.held, kCache);
  ASSERT_TRUE(cache);
  EXPECT_EQ(cache->end_blocks, 100u);
  EXPECT_NEAR(cache->tail_bytes_per_min, 0, 1);
}

TEST(Growth, ACacheStillFillingAfterTheWarmUpIsNotGrowthOnceItHolds) {
  const auto m = test::analyze(worker_trace(), with_history());
  ASSERT_TRUE(m);
  // A warm-up of 0.1 s: the cache fills over the first fifth of the window, then holds.
  analysis::GrowthOptions o;
  o.warmup = 100 * kMs;
  const Growth g = analysis::analyze_growth(*m, o);
  ASSERT_TRUE(g.ok()) << g.problem;
  ASSERT_EQ(g.growing.size(), 1u);
  EXPECT_EQ(g.growing[0].stack.value, kLeak);
  EXPECT_TRUE(find(g.held, kCache));
  // With the warm-up past the cache's filling, it did not even rise.
  o.warmup = 1000 * kMs;
  const Growth late = analysis::analyze_growth(*m, o);
  ASSERT_EQ(late.growing.size(), 1u);
  EXPECT_FALSE(find(late.held, kCache));
}

TEST(Growth, SampledTracesUseTheWeightedEstimates) {
  // 1 in ~1 KiB: the leak's 64-byte blocks are sampled about one in 16, each standing for ~1 KiB.
  const auto m = test::analyze(worker_trace(false, 1024), with_history());
  ASSERT_TRUE(m);
  ASSERT_TRUE(m->sampling.sampled());
  const Growth g = analysis::analyze_growth(*m);
  ASSERT_TRUE(g.ok()) << g.problem;
  ASSERT_GE(g.growing.size(), 1u);
  EXPECT_EQ(g.growing[0].stack.value, kLeak);
  EXPECT_FALSE(find(g.growing, kCache));
  EXPECT_FALSE(find(g.growing, kChurn));
  // An estimate: within a factor of two of 384,000 bytes per minute.
  EXPECT_GT(g.growing[0].bytes_per_min, 384000 / 2);
  EXPECT_LT(g.growing[0].bytes_per_min, 384000 * 2);
  EXPECT_LT(g.growing[0].steadiness, 0.5) << "a staircase of samples";
}

TEST(Growth, AWarmUpAsLongAsTheRunCannotBeJudged) {
  const auto m = test::analyze(worker_trace(), with_history());
  ASSERT_TRUE(m);
  analysis::GrowthOptions o;
  o.warmup = 5000 * kMs;
  EXPECT_NE(analysis::analyze_growth(*m, o).problem.find("is not shorter than the run"), std::string::npos);
  o.warmup = 3950 * kMs;  // 3 intervals of 16 ms left
  EXPECT_NE(analysis::analyze_growth(*m, o).problem.find("fewer than 8"), std::string::npos);
}

TEST(Growth, AStackThatKeepsRisingGrowsOneThatStepsOnceDoesNot) {
  std::vector<uint64_t> t, rising, step, sawtooth;
  for (uint64_t i = 0; i < 120; ++i) {
    t.push_back(i * kMs * 100);
    rising.push_back(1000 + 50 * i);
    step.push_back(i < 100 ? 1000 : 9000);
    sawtooth.push_back(1000 + 100 * (i % 10));
  }
  const uint64_t window = t.back() - t.front();
  const StackGrowth r = analysis::stack_growth(t, rising, rising);
  EXPECT_TRUE(analysis::grows(r, window));
  EXPECT_NEAR(r.bytes_per_min, 50 * 600, 1e-6) << "50 bytes per 0.1 s";
  EXPECT_DOUBLE_EQ(r.steadiness, 1.0);
  EXPECT_EQ(r.start_bytes, 1000u);
  EXPECT_EQ(r.end_bytes, 1000u + 50 * 119);
  EXPECT_FALSE(analysis::grows(analysis::stack_growth(t, step, step), window));
  EXPECT_FALSE(analysis::grows(analysis::stack_growth(t, sawtooth, sawtooth), window));
  EXPECT_FALSE(analysis::rose(analysis::stack_growth(t, sawtooth, sawtooth), window)) << "no rise beyond its noise";
}

}  // namespace
}  // namespace memtide
