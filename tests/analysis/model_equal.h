// Field-by-field comparison of two Models, for the tests that check that a resumed replay
// (analysis::Session) ends exactly where one replay of the whole file does.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <vector>

#include "analysis/model.h"

namespace memtide::test {

inline void expect_same_totals(const analysis::Totals& a, const analysis::Totals& b, unsigned domain) {
  SCOPED_TRACE("domain " + std::to_string(domain));
  EXPECT_EQ(a.allocations, b.allocations);
  EXPECT_EQ(a.allocated_bytes, b.allocated_bytes);
  EXPECT_EQ(a.frees, b.frees);
  EXPECT_EQ(a.freed_bytes, b.freed_bytes);
  EXPECT_EQ(a.temporaries, b.temporaries);
  EXPECT_EQ(a.temporary_bytes, b.temporary_bytes);
  EXPECT_EQ(a.peak_bytes, b.peak_bytes);
  EXPECT_EQ(a.peak_blocks, b.peak_blocks);
  EXPECT_EQ(a.peak_time, b.peak_time);
  EXPECT_EQ(a.leaked_bytes, b.leaked_bytes);
  EXPECT_EQ(a.leaked_blocks, b.leaked_blocks);
  EXPECT_EQ(a.at_bytes, b.at_bytes);
  EXPECT_EQ(a.at_blocks, b.at_blocks);
}

inline std::vector<analysis::StackStats> sorted_stacks(std::vector<analysis::StackStats> v) {
  std::sort(v.begin(), v.end(), [](const auto& x, const auto& y) { return x.stack.value < y.stack.value; });
  return v;
}

inline void expect_same_series(const analysis::Series& a, const analysis::Series& b, const char* what) {
  SCOPED_TRACE(what);
  ASSERT_EQ(a.points().size(), b.points().size());
  EXPECT_EQ(a.bucket_ns(), b.bucket_ns());
  for (std::size_t i = 0; i < a.points().size(); ++i) {
    const analysis::SeriesPoint &p = a.points()[i], &q = b.points()[i];
    EXPECT_EQ(p.time, q.time) << i;
    EXPECT_EQ(p.min, q.min) << i;
    EXPECT_EQ(p.max, q.max) << i;
    EXPECT_EQ(p.last, q.last) << i;
  }
}

// The figures every report reads, whatever the range replayed: totals and per-stack
// statistics by domain, the APIs' calls and bytes, the anomalies of the replay.
inline void expect_same_stacks_and_apis(const analysis::Model& a, const analysis::Model& b) {
  for (unsigned d = 0; d < analysis::kDomainCount; ++d) {
    expect_same_totals(a.totals[d], b.totals[d], d);
    const auto sa = sorted_stacks(a.stacks[d]), sb = sorted_stacks(b.stacks[d]);
    ASSERT_EQ(sa.size(), sb.size()) << "domain " << d;
    for (std::size_t i = 0; i < sa.size(); ++i) {
      SCOPED_TRACE("domain " + std::to_string(d) + " stack " + std::to_string(sa[i].stack.value));
      ASSERT_EQ(sa[i].stack.value, sb[i].stack.value);
      const analysis::StackMetrics &x = sa[i].m, &y = sb[i].m;
      EXPECT_EQ(x.alloc_count, y.alloc_count);
      EXPECT_EQ(x.alloc_bytes, y.alloc_bytes);
      EXPECT_EQ(x.temp_count, y.temp_count);
      EXPECT_EQ(x.leaked_blocks, y.leaked_blocks);
      EXPECT_EQ(x.leaked_bytes, y.leaked_bytes);
      EXPECT_EQ(x.peak_blocks, y.peak_blocks);
      EXPECT_EQ(x.peak_bytes, y.peak_bytes);
      EXPECT_EQ(x.at_bytes, y.at_bytes);
      EXPECT_EQ(x.first_leak_time, y.first_leak_time);
      EXPECT_EQ(x.last_leak_time, y.last_leak_time);
    }
  }
  for (std::size_t i = 0; i < a.alloc_api.size(); ++i) {
    EXPECT_EQ(a.alloc_api[i].calls, b.alloc_api[i].calls) << i;
    EXPECT_EQ(a.alloc_api[i].bytes, b.alloc_api[i].bytes) << i;
    EXPECT_EQ(a.free_api[i].calls, b.free_api[i].calls) << i;
    EXPECT_EQ(a.free_api[i].bytes, b.free_api[i].bytes) << i;
  }
  EXPECT_EQ(a.anomalies.unknown_free_count, b.anomalies.unknown_free_count);
  EXPECT_EQ(a.anomalies.mismatch_count, b.anomalies.mismatch_count);
  EXPECT_EQ(a.anomalies.double_allocs, b.anomalies.double_allocs);
}

// Everything the reports and the viewer read: totals, per-stack statistics (leaks and peak by
// stack included), APIs, anomalies, series, threads, markers, warnings.
inline void expect_same_model(const analysis::Model& a, const analysis::Model& b) {
  EXPECT_EQ(a.complete, b.complete);
  EXPECT_EQ(a.truncated, b.truncated);
  EXPECT_EQ(a.corrupt, b.corrupt);
  EXPECT_EQ(a.events, b.events);
  EXPECT_EQ(a.time_base, b.time_base);
  EXPECT_EQ(a.first_time, b.first_time);
  EXPECT_EQ(a.last_time, b.last_time);
  EXPECT_EQ(a.peak_rss, b.peak_rss);
  EXPECT_EQ(a.warnings, b.warnings);
  expect_same_stacks_and_apis(a, b);
  EXPECT_EQ(a.anomalies.undefined_stacks, b.anomalies.undefined_stacks);
  expect_same_series(a.heap_series, b.heap_series, "heap series");
  expect_same_series(a.rss_series, b.rss_series, "rss series");
  expect_same_series(a.mmap_series, b.mmap_series, "mmap series");
  expect_same_series(a.custom_series, b.custom_series, "custom series");
  ASSERT_EQ(a.threads.size(), b.threads.size());
  for (std::size_t i = 0; i < a.threads.size(); ++i) {
    EXPECT_EQ(a.threads[i].id, b.threads[i].id);
    EXPECT_EQ(a.threads[i].allocations, b.threads[i].allocations);
    EXPECT_EQ(a.threads[i].frees, b.threads[i].frees);
    EXPECT_EQ(a.threads[i].name, b.threads[i].name);
  }
  EXPECT_EQ(a.markers.size(), b.markers.size());
  EXPECT_EQ(a.modules.size(), b.modules.size());
  EXPECT_EQ(a.stack_table.size(), b.stack_table.size());
}

}  // namespace memtide::test
