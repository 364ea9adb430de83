#include <gtest/gtest.h>

#include "analysis/replay.h"
#include "synthetic_trace.h"
#include "viewer/timeline_model.h"

namespace memtide::viewer {
namespace {

std::vector<SeriesSample> steps(std::initializer_list<std::pair<uint64_t, uint64_t>> tv) {
  std::vector<SeriesSample> s;
  for (auto [t, v] : tv) s.push_back({t, v, v, v});
  return s;
}

TEST(Downsample, OneColumnPerPixelCarriesTheLastValueForward) {
  const auto s = steps({{0, 10}, {50, 20}});
  const auto cols = downsample(s, 1, {0, 100}, 10);
  ASSERT_EQ(cols.size(), 10u);
  for (int c = 0; c < 5; ++c) EXPECT_EQ(cols[c].max, 10u) << c;
  for (int c = 5; c < 10; ++c) EXPECT_EQ(cols[c].max, 20u) << c;
  for (const Column& c : cols) EXPECT_TRUE(c.valid);
}

TEST(Downsample, KeepsAPeakNarrowerThanAPixel) {
  // A spike of 1 ns inside a 1000 ns-per-pixel view must still reach its column's max.
  std::vector<SeriesSample> s = steps({{0, 5}, {4321, 900}, {4322, 5}});
  const auto cols = downsample(s, 1, {0, 10'000}, 10);
  EXPECT_EQ(cols[4].max, 900u);
  EXPECT_EQ(cols[4].min, 5u);
  EXPECT_EQ(cols[3].max, 5u);
  EXPECT_EQ(cols[5].max, 5u);
}

TEST(Downsample, BucketExtremesSurvive) {
  std::vector<SeriesSample> s{{0, 1, 100, 50}, {1000, 50, 60, 60}};
  const auto cols = downsample(s, 1000, {0, 2000}, 2);
  EXPECT_EQ(cols[0].min, 1u);
  EXPECT_EQ(cols[0].max, 100u);
  EXPECT_EQ(cols[1].min, 50u);
  EXPECT_EQ(cols[1].max, 60u);
}

TEST(Downsample, ColumnsBeforeTheFirstSampleAreEmpty) {
  const auto cols = downsample(steps({{500, 7}}), 1, {0, 1000}, 10);
  EXPECT_FALSE(cols[0].valid);
  EXPECT_FALSE(cols[4].valid);
  EXPECT_TRUE(cols[5].valid);
  EXPECT_EQ(cols[9].max, 7u);
}

TEST(Downsample, ZoomedViewStartsWithThePreviousSample) {
  const auto cols = downsample(steps({{0, 3}, {100, 9}}), 1, {40, 60}, 4);
  for (const Column& c : cols) {
    EXPECT_TRUE(c.valid);
    EXPECT_EQ(c.max, 3u);
  }
}

TEST(TimelineMapping, PixelsAndTimesRoundTrip) {
  const TimeRange v{1000, 3000};
  EXPECT_EQ(time_at(v, 200, 0), 1000u);
  EXPECT_EQ(time_at(v, 200, 100), 2000u);
  EXPECT_EQ(time_at(v, 200, 500), 3000u);  // clamped
  EXPECT_FLOAT_EQ(x_of(v, 200, 2500), 150.f);
}

TEST(TimelineZoom, ZoomsAroundThePivotAndStaysInside) {
  const TimeRange z = zoom({0, 1000}, 500, 0.5, {0, 1000}, 1);
  EXPECT_EQ(z.from, 250u);
  EXPECT_EQ(z.to, 750u);
  const TimeRange edge = zoom({0, 1000}, 0, 0.5, {0, 1000}, 1);
  EXPECT_EQ(edge.from, 0u);
  EXPECT_EQ(edge.to, 500u);
  const TimeRange out = zoom({250, 750}, 500, 10, {0, 1000}, 1);
  EXPECT_EQ(out, (TimeRange{0, 1000}));
  EXPECT_EQ(zoom({0, 1000}, 500, 1e-9, {0, 1000}, 100).length(), 100u);
}

TEST(TimelinePan, ClampsAtBothEnds) {
  EXPECT_EQ(pan({100, 200}, 50, {0, 1000}), (TimeRange{150, 250}));
  EXPECT_EQ(pan({100, 200}, -500, {0, 1000}), (TimeRange{0, 100}));
  EXPECT_EQ(pan({100, 200}, 5000, {0, 1000}), (TimeRange{900, 1000}));
}

TEST(TimelineSelection, EitherDirectionClampedAndNotTooNarrow) {
  EXPECT_EQ(selection(700, 200, {0, 1000}, 10), (TimeRange{200, 700}));
  EXPECT_EQ(selection(900, 5000, {0, 1000}, 10), (TimeRange{900, 1000}));
  EXPECT_TRUE(selection(500, 505, {0, 1000}, 10).empty());
}

// A kept set's axis spans what it holds (TimelineData::span, from its first checkpoint): zoom,
// pan and a drag stay inside it, never before its start.
TEST(TimelineSpan, AKeptSetsAxisStartsWhereItsRangeDoes) {
  TimelineData d;
  d.duration = 1000;
  d.start = 600;
  EXPECT_EQ(d.span(), (TimeRange{600, 1000}));
  EXPECT_EQ(zoom({600, 1000}, 600, 10, d.span(), 1), (TimeRange{600, 1000}));
  EXPECT_EQ(zoom({600, 1000}, 700, 0.5, d.span(), 1), (TimeRange{650, 850}));
  EXPECT_EQ(pan({700, 800}, -500, d.span()), (TimeRange{600, 700}));
  EXPECT_EQ(selection(100, 700, d.span(), 10), (TimeRange{600, 700}));
  TimelineData whole;
  whole.duration = 1000;
  EXPECT_EQ(whole.span(), (TimeRange{0, 1000}));
}

TEST(TimelineMarkers, OnePerMinimumSpacing) {
  std::vector<MarkerLabel> m{{100, "a"}, {101, "b"}, {300, "c"}, {2000, "d"}};
  const auto v = visible_markers(m, {0, 1000}, 100, 5);
  ASSERT_EQ(v.size(), 2u);  // "b" is 0.1 px after "a"; "d" is outside
  EXPECT_EQ(v[0], 0u);
  EXPECT_EQ(v[1], 2u);
}

TEST(TimelineData, FromAModel) {
  test::Synthetic s;
  auto r = analysis::analyze_memory(test::standard_program(s).end(40 * test::kMs));
  ASSERT_TRUE(r.ok()) << r.error;
  const TimelineData d = make_timeline(*r.model);
  EXPECT_EQ(d.duration, 40 * test::kMs);
  EXPECT_EQ(d.peak_bytes, 1350u);
  EXPECT_EQ(d.peak_time, 20 * test::kMs);
  EXPECT_EQ(d.peak_rss, 8192u);
  EXPECT_EQ(d.max_value, 8192u);
  ASSERT_EQ(d.markers.size(), 1u);
  EXPECT_EQ(d.markers[0].label, "phase two");
  EXPECT_EQ(d.markers[0].time, 15 * test::kMs);
  ASSERT_FALSE(d.heap.empty());
  EXPECT_EQ(d.heap.back().last, 150u);  // 50 + 100 still live
}

TEST(TimelineData, NoMappingsNoMappedLine) {
  test::Synthetic s;
  auto r = analysis::analyze_memory(test::standard_program(s).end(40 * test::kMs));
  ASSERT_TRUE(r.ok()) << r.error;
  const TimelineData d = make_timeline(*r.model);
  EXPECT_TRUE(d.mapped.empty());
  EXPECT_TRUE(d.custom.empty());
}

TEST(TimelineData, MappedBytesAreALineOfTheirOwnOnTheSameAxis) {
  test::Synthetic s;
  s.stack(1, 0, {0x1000});
  s.malloc(1 * test::kMs, 0x10000, 100, 1);
  s.alloc(2 * test::kMs, fmt::Api::Mmap, 0x7f0000000000, 1 << 20, 1);  // 1 MiB
  s.release(6 * test::kMs, fmt::Api::Munmap, 0x7f0000000000, 1 << 19);  // half of it
  auto r = analysis::analyze_memory(s.end(10 * test::kMs));
  ASSERT_TRUE(r.ok()) << r.error;
  const TimelineData d = make_timeline(*r.model);
  ASSERT_FALSE(d.mapped.empty());
  EXPECT_EQ(d.mapped.front().time, 2 * test::kMs);
  EXPECT_EQ(d.mapped.back().last, uint64_t{1} << 19);
  EXPECT_EQ(d.max_value, uint64_t{1} << 20);  // the y axis makes room for the mappings
  // In pixel columns: nothing before the first mapping, 1 MiB, then half.
  const std::vector<Column> cols = downsample(d.mapped, d.mapped_bucket_ns, {0, 10 * test::kMs}, 10);
  EXPECT_FALSE(cols[1].valid);
  EXPECT_EQ(cols[3].max, uint64_t{1} << 20);
  EXPECT_EQ(cols[8].max, uint64_t{1} << 19);
}

// Mappings far beyond the RSS peak are reserved address space (a JVM's heap and code cache):
// the y axis is the other lines', the mapped line runs above it. Within the RSS they stay on it.
TEST(TimelineData, MappedBytesFarBeyondTheRssAreLeftAboveTheScale) {
  for (const uint64_t mapped : {uint64_t{1} << 30, uint64_t{16} << 10}) {
    test::Synthetic s;
    s.stack(1, 0, {0x1000});
    s.rss(1 * test::kMs, 64 << 10);  // RSS 64 KiB
    s.malloc(2 * test::kMs, 0x10000, 1000, 1);
    s.alloc(3 * test::kMs, fmt::Api::Mmap, 0x7f0000000000, mapped, 1);
    auto r = analysis::analyze_memory(s.end(10 * test::kMs));
    ASSERT_TRUE(r.ok()) << r.error;
    const TimelineData d = make_timeline(*r.model);
    ASSERT_FALSE(d.mapped.empty());
    if (mapped > (64 << 10) * kMappedOffScale) {
      EXPECT_EQ(d.mapped_off_scale, mapped);
      EXPECT_EQ(d.max_value, uint64_t{64} << 10) << "the axis is the RSS's";
    } else {
      EXPECT_EQ(d.mapped_off_scale, 0u);
      EXPECT_EQ(d.max_value, uint64_t{64} << 10);
    }
  }
}

TEST(PixelRuns, ColumnsCoveringTheSameRowsAreOneRun) {
  const std::vector<PixelSpan> spans = {{5, 9, true}, {5, 9, true}, {4, 9, true}, {}, {4, 9, true}, {4, 9, true}};
  const auto runs = merge_runs(spans);
  ASSERT_EQ(runs.size(), 3u);
  EXPECT_EQ(runs[0].first, 0);
  EXPECT_EQ(runs[0].last, 1);
  EXPECT_EQ(runs[0].top, 5);
  EXPECT_EQ(runs[1].first, 2);
  EXPECT_EQ(runs[1].last, 2);
  EXPECT_EQ(runs[2].first, 4) << "a column without a sample ends a run, even between equal ones";
  EXPECT_EQ(runs[2].last, 5);
  EXPECT_TRUE(merge_runs({}).empty());
}

TEST(FillEdges, AStraightRampIsOneSegment) {
  std::vector<PixelSpan> spans;
  for (int c = 0; c < 1000; ++c) spans.push_back({500 - c / 2, 500, true});
  const auto edges = fill_edges(spans, 0.75f);
  ASSERT_EQ(edges.size(), 1u);
  EXPECT_LE(edges[0].size(), 4u) << "a ramp needs its ends only (plus the half-column ends)";
  EXPECT_EQ(edges[0].front().x, 0.0f);
  EXPECT_EQ(edges[0].back().x, 1000.0f);
}

TEST(FillEdges, EveryColumnStaysWithinTheTolerance) {
  std::vector<PixelSpan> spans;
  for (int c = 0; c < 600; ++c) spans.push_back({300 - (c * 7919 % 13) - c / 3 - (c == 250 ? 120 : 0), 400, true});
  const float tol = 0.75f;
  const auto edges = fill_edges(spans, tol);
  ASSERT_EQ(edges.size(), 1u);
  const auto& e = edges[0];
  for (int c = 0; c < 600; ++c) {
    const float x = static_cast<float>(c) + 0.5f;
    std::size_t i = 0;
    while (i + 2 < e.size() && e[i + 1].x < x) ++i;
    const float t = (x - e[i].x) / (e[i + 1].x - e[i].x);
    const float y = e[i].y + t * (e[i + 1].y - e[i].y);
    EXPECT_LE(std::abs(y - static_cast<float>(spans[c].top)), tol) << "column " << c;
  }
  bool spike = false;
  for (const EdgePoint& p : e) spike |= p.x == 250.5f && p.y == static_cast<float>(spans[250].top);
  EXPECT_TRUE(spike) << "a one-column spike keeps its point";
}

TEST(FillEdges, ColumnsWithoutSamplesSplitTheArea) {
  std::vector<PixelSpan> spans(10, PixelSpan{3, 9, true});
  spans[0].valid = spans[1].valid = spans[6].valid = false;
  const auto edges = fill_edges(spans, 0.75f);
  ASSERT_EQ(edges.size(), 2u);
  EXPECT_EQ(edges[0].front(), (EdgePoint{2, 3}));
  EXPECT_EQ(edges[0].back(), (EdgePoint{6, 3}));
  EXPECT_EQ(edges[1].front(), (EdgePoint{7, 3}));
  EXPECT_EQ(edges[1].back(), (EdgePoint{10, 3}));
  EXPECT_EQ(edges[0].size(), 2u) << "a flat edge is one segment";
}

}  // namespace
}  // namespace memtide::viewer
