// Timeline view model: heap, RSS, mapped and custom-pool series of the trace mapped onto pixel columns, the view
// range (zoom and pan), and the selected time range that the other views follow.
// Pure data and functions; the drawing is in view_timeline.cpp.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "analysis/model.h"
#include "viewer/serial.h"

namespace memtide::viewer {

// Times here are relative to the trace start (Model::time_base), in ns.
struct TimeRange {
  uint64_t from = 0, to = 0;
  uint64_t length() const { return to > from ? to - from : 0; }
  bool empty() const { return to <= from; }
  bool operator==(const TimeRange&) const = default;
};

struct SeriesSample {
  uint64_t time = 0;  // relative
  uint64_t min = 0, max = 0, last = 0;
};

struct MarkerLabel {
  uint64_t time = 0;  // relative
  std::string label;
};

inline constexpr uint64_t kMappedOffScale = 4;

// Everything the timeline draws, copied out of a Model once (immutable afterwards).
struct TimelineData {
  uint64_t duration = 0;  // relative time of the last event
  // Relative time of the first the trace holds: a kept set's range starts at its first
  // checkpoint (Model::kept_from), the recording's start is not in it.
  uint64_t start = 0;
  // The times the axis spans: [start, duration] (at least 1 ns).
  TimeRange span() const { return {std::min(start, duration), std::max<uint64_t>(duration, std::min(start, duration) + 1)}; }
  std::vector<SeriesSample> heap, rss;
  // Live bytes of anonymous mappings and of custom pool blocks: empty when the trace has none.
  std::vector<SeriesSample> mapped, custom;
  uint64_t heap_bucket_ns = 0, mapped_bucket_ns = 0, custom_bucket_ns = 0;
  uint64_t peak_bytes = 0, peak_time = 0;  // heap high-water mark (relative time)
  uint64_t peak_rss = 0;
  uint64_t max_value = 0;  // the largest value of any series on the scale: the y axis
  // The mapped line's largest value when it is left off the scale (else 0): more than
  // kMappedOffScale times the RSS peak is address space reserved rather than used (a JVM
  // reserves gigabytes for its heap and code), which would flatten every other line.
  uint64_t mapped_off_scale = 0;
  std::vector<MarkerLabel> markers;
  // Read without a replay (scan_timeline): the heap, mapped and custom lines have a point per
  // checkpoint only, and the threads' marks stop at the last checkpoint.
  bool coarse = false;
  uint64_t serial = next_serial();
};

TimelineData make_timeline(const analysis::Model& m);
// The whole run's timeline read from the trace without replaying its events, in a fraction of
// a replay's time: RSS and the process's marks from its own stream, the live heap, mapped and
// custom-pool bytes from the checkpoints (none: no heap line). duration 0: nothing to show.
// When every checkpoint holds stream 0's counters and marks (docs/FORMAT.md, section 14), only
// the file's first blocks, the heads and the blocks after the last one's replay_from are read;
// else (or with `from_heads` false) every block header. `bytes_read`: what was read.
struct TimelineScan {
  bool from_heads = true;
  uint64_t bytes_read = 0;  // (out)
  bool used_heads = false;  // (out)
};
TimelineData scan_timeline(const std::string& path, std::size_t points, TimelineScan* scan = nullptr);

// One pixel column: the smallest and largest value of the series inside it. `valid` false
// where the series has no sample (before its first one).
struct Column {
  uint64_t min = 0, max = 0;
  bool valid = false;
};

// Maps a series onto `width` columns covering `view`. A column gets the extremes of every
// sample whose bucket overlaps it; columns between samples carry the last value forward (the
// series is a step function), so a peak narrower than a pixel still shows.
std::vector<Column> downsample(const std::vector<SeriesSample>& s, uint64_t bucket_ns, TimeRange view, int width);

// The rows a column covers on screen (top <= bottom, whole pixels); `valid` false: nothing.
struct PixelSpan {
  int top = 0, bottom = 0;
  bool valid = false;
};
// Consecutive columns [first, last] that cover the same rows, drawn as one rectangle: a series
// costs a few triangles per run instead of per column (a software rasteriser such as Xvfb's
// llvmpipe pays for every triangle). Invalid columns end a run and start none.
struct PixelRun {
  int first = 0, last = 0;
  int top = 0, bottom = 0;
};
std::vector<PixelRun> merge_runs(const std::vector<PixelSpan>& spans);

// The upper edge of the area under a series, simplified: one polyline per run of valid
// columns, from the run's left edge (x = first column) to its right edge (x = last + 1), with
// every column's top (at x = column + 0.5) within `tolerance` rows of it. The area is then a
// few wide trapezoids rather than a tall thin rectangle per column: llvmpipe's cost grows with
// the screen tiles each triangle touches.
struct EdgePoint {
  float x = 0, y = 0;
  bool operator==(const EdgePoint&) const = default;
};
std::vector<std::vector<EdgePoint>> fill_edges(const std::vector<PixelSpan>& spans, float tolerance);

// Pixel <-> time for a view range drawn over `width` pixels.
uint64_t time_at(TimeRange view, int width, float x);
float x_of(TimeRange view, int width, uint64_t t);

// Zooms `view` by `factor` (< 1 zooms in) around time `pivot`, kept inside `span` (the times
// the trace holds: TimelineData::span) and no narrower than `min_len` ns.
TimeRange zoom(TimeRange view, uint64_t pivot, double factor, TimeRange span, uint64_t min_len = 1000);
// Moves `view` by `delta` ns (negative: to the left), kept inside `span`.
TimeRange pan(TimeRange view, int64_t delta, TimeRange span);

// A selection from a drag between two times (in either order), clamped to `span`. Empty when
// narrower than `min_len`.
TimeRange selection(uint64_t a, uint64_t b, TimeRange span, uint64_t min_len);

// Markers shown for a view: those inside it, at most one per `min_px` pixels (the first one
// wins); indices into `markers`.
std::vector<std::size_t> visible_markers(const std::vector<MarkerLabel>& markers, TimeRange view, int width,
                                         float min_px);

}  // namespace memtide::viewer
