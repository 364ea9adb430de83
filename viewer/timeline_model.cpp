#include "viewer/timeline_model.h"

#include <algorithm>
#include <cmath>

#include "formats/checkpoint.h"
#include "formats/decoder.h"
#include "formats/reader.h"

namespace memtide::viewer {

namespace {

std::vector<SeriesSample> relative(const analysis::Series& s, uint64_t base) {
  std::vector<SeriesSample> out;
  out.reserve(s.points().size());
  for (const analysis::SeriesPoint& p : s.points())
    out.push_back({p.time > base ? p.time - base : 0, p.min, p.max, p.last});
  return out;
}

// The y axis: the largest value of the series on the scale (the mapped line left off it when it
// is mostly reserved address space).
void scale(TimelineData& d) {
  for (const auto* s : {&d.heap, &d.rss, &d.custom})
    for (const SeriesSample& p : *s) d.max_value = std::max(d.max_value, p.max);
  d.max_value = std::max(d.max_value, d.peak_bytes);
  uint64_t mapped_max = 0;
  for (const SeriesSample& p : d.mapped) mapped_max = std::max(mapped_max, p.max);
  // Only against a known RSS: without one, mapped bytes may well be all there is to see.
  const uint64_t rss_max = std::max(d.max_value, d.peak_rss);
  if (d.peak_rss && mapped_max / kMappedOffScale > rss_max) d.mapped_off_scale = mapped_max;
  else d.max_value = std::max(d.max_value, mapped_max);
}

}  // namespace

TimelineData make_timeline(const analysis::Model& m) {
  TimelineData d;
  const uint64_t base = m.time_base;
  d.duration = m.duration();
  d.start = m.kept_from > base ? m.kept_from - base : 0;
  d.heap = relative(m.heap_series, base);
  d.rss = relative(m.rss_series, base);
  d.mapped = relative(m.mmap_series, base);
  d.custom = relative(m.custom_series, base);
  d.heap_bucket_ns = m.heap_series.bucket_ns();
  d.mapped_bucket_ns = m.mmap_series.bucket_ns();
  d.custom_bucket_ns = m.custom_series.bucket_ns();
  d.peak_bytes = m.heap().peak_bytes;
  d.peak_time = m.heap().peak_time > base ? m.heap().peak_time - base : 0;
  d.peak_rss = m.peak_rss;
  scale(d);
  d.markers.reserve(m.markers.size());
  for (const analysis::MarkerInfo& k : m.markers) d.markers.push_back({k.time > base ? k.time - base : 0, k.label});
  std::stable_sort(d.markers.begin(), d.markers.end(),
                   [](const MarkerLabel& a, const MarkerLabel& b) { return a.time < b.time; });
  return d;
}

// The process stream's blocks are decoded (its Counters, Markers, ProcessInfo and End), the
// others stepped over by their headers; the checkpoints' heads give the live bytes at their
// times and the threads' marks up to the last of them. When the heads also hold stream 0's
// counters and marks, the blocks are read only up to the process's ProcessInfo and from the
// last head's replay_from, taking there what was timed from its time on.
TimelineData scan_timeline(const std::string& path, std::size_t points, TimelineScan* scan) {
  constexpr std::size_t kMaxMarks = 100000;  // (as many as a replay keeps)
  TimelineData d;
  fmt::FileReader r;
  if (!r.open(path).ok()) return d;
  const uint64_t first = r.offset();
  const std::vector<fmt::CheckpointHead> heads = fmt::find_checkpoints(r);
  struct Stream0 : fmt::NullVisitor {
    analysis::Series rss;
    uint64_t start = 0, last = 0, peak_rss = 0;
    uint64_t since = 0, before = UINT64_MAX;  // Counters and Markers timed outside are the heads'
    std::vector<analysis::MarkerInfo> marks;
    explicit Stream0(std::size_t n) : rss(n) {}
    void on_process_info(uint32_t, const fmt::ProcessInfo& x) {
      if (!start) start = x.monotonic_start_ns;
    }
    void counter(uint64_t time, uint64_t rss_bytes) {
      rss.add(time, rss_bytes);
      peak_rss = std::max(peak_rss, rss_bytes);
      last = std::max(last, time);
    }
    void mark(uint64_t time, uint32_t stream, std::string_view label) {
      if (marks.size() < kMaxMarks) marks.push_back({time, analysis::ThreadId(stream), std::string(label)});
      last = std::max(last, time);
    }
    void on_counters(uint32_t, const fmt::Counters& x) {
      if (x.time >= since && x.time < before) counter(x.time, x.rss_bytes);
    }
    void on_marker(uint32_t s, const fmt::Marker& x) {
      if (x.time >= since && x.time < before) mark(x.time, s, x.label);
    }
    void on_end(uint32_t, const fmt::End& x) { last = std::max(last, x.time); }
  } v(points);
  fmt::DecodeScratch scratch;
  const bool use_heads = (!scan || scan->from_heads) && !heads.empty() &&
                         std::all_of(heads.begin(), heads.end(), [](const fmt::CheckpointHead& h) { return h.has_process; });
  // Reads the process stream's blocks from `at` up to `end`; stops after its ProcessInfo with
  // `to_start`.
  auto read_blocks = [&](uint64_t at, uint64_t end, bool to_start) {
    r.seek(at);
    for (;;) {
      fmt::BlockRef ref;
      if (!r.peek_header(ref).ok() || ref.offset >= end) break;
      const uint16_t f = ref.header.flags;
      const bool wanted = ref.header.stream == 0 && !(f & (fmt::kBlockFlagCheckpoint | fmt::kBlockFlagCheckpointData));
      fmt::Block b;
      if (!(wanted ? r.next(b) : r.skip(ref)).ok()) break;
      if (wanted) (void)fmt::decode_block(b, scratch, v);
      if (to_start && v.start) break;
    }
  };
  if (use_heads) {
    // A set whose first segments are gone holds the process stream from its first block on, and
    // its first head's copies may begin before that: what precedes the first head is read from
    // the blocks, up to that head.
    const bool mid_run = r.starts_mid_run();
    v.since = mid_run ? 0 : UINT64_MAX;
    v.before = heads.front().time;
    read_blocks(first, mid_run ? heads.front().offset : UINT64_MAX, !mid_run);
    for (std::size_t i = mid_run ? 1 : 0; i < heads.size(); ++i) {
      for (const fmt::CheckpointHead::CounterCopy& c : heads[i].counters) v.counter(c.time, c.rss_bytes);
      for (const fmt::CheckpointHead::MarkerCopy& m : heads[i].process_markers) v.mark(m.time, 0, m.label);
    }
    v.since = heads.back().time;
    v.before = UINT64_MAX;
    read_blocks(std::max(first, heads.back().replay_from), UINT64_MAX, false);
  } else {
    read_blocks(first, UINT64_MAX, false);
  }
  if (scan) {
    scan->bytes_read = r.bytes_read();
    scan->used_heads = use_heads;
  }
  if (!v.start) return d;
  analysis::Series heap(points), mapped(points), custom(points);
  constexpr auto kHeap = static_cast<unsigned>(fmt::CheckpointDomain::Heap),
                 kMmap = static_cast<unsigned>(fmt::CheckpointDomain::Mmap),
                 kCustom = static_cast<unsigned>(fmt::CheckpointDomain::Custom);
  for (const fmt::CheckpointHead& h : heads) {
    heap.add(h.time, h.bytes[kHeap]);
    if (h.bytes[kMmap] || !mapped.points().empty()) mapped.add(h.time, h.bytes[kMmap]);
    if (h.bytes[kCustom] || !custom.points().empty()) custom.add(h.time, h.bytes[kCustom]);
    if (h.bytes[kHeap] > d.peak_bytes) d.peak_bytes = h.bytes[kHeap], d.peak_time = h.time - std::min(h.time, v.start);
    for (const fmt::CheckpointHead::MarkerCopy& m : h.markers)
      if (v.marks.size() < kMaxMarks) v.marks.push_back({m.time, analysis::ThreadId(static_cast<uint32_t>(m.stream)), m.label});
    v.last = std::max(v.last, h.time);
  }
  d.coarse = true;
  d.duration = v.last > v.start ? v.last - v.start : 0;
  // (A set whose first segments are gone holds its range from its first checkpoint, as a replay's.)
  if (r.starts_mid_run() && !heads.empty() && heads.front().time > v.start) d.start = heads.front().time - v.start;
  d.heap = relative(heap, v.start);
  d.rss = relative(v.rss, v.start);
  d.mapped = relative(mapped, v.start);
  d.custom = relative(custom, v.start);
  d.heap_bucket_ns = heap.bucket_ns();
  d.mapped_bucket_ns = mapped.bucket_ns();
  d.custom_bucket_ns = custom.bucket_ns();
  d.peak_rss = v.peak_rss;
  scale(d);
  for (const analysis::MarkerInfo& k : v.marks) d.markers.push_back({k.time > v.start ? k.time - v.start : 0, k.label});
  std::stable_sort(d.markers.begin(), d.markers.end(),
                   [](const MarkerLabel& a, const MarkerLabel& b) { return a.time < b.time; });
  return d;
}

uint64_t time_at(TimeRange view, int width, float x) {
  if (width <= 0) return view.from;
  const double f = std::clamp(static_cast<double>(x) / width, 0.0, 1.0);
  return view.from + static_cast<uint64_t>(std::llround(f * static_cast<double>(view.length())));
}

float x_of(TimeRange view, int width, uint64_t t) {
  if (view.length() == 0) return 0;
  const double rel = static_cast<double>(t) - static_cast<double>(view.from);
  return static_cast<float>(rel / static_cast<double>(view.length()) * width);
}

std::vector<Column> downsample(const std::vector<SeriesSample>& s, uint64_t bucket_ns, TimeRange view, int width) {
  std::vector<Column> cols(width > 0 ? static_cast<std::size_t>(width) : 0);
  if (cols.empty() || view.empty() || s.empty()) return cols;
  const double ns_per_px = static_cast<double>(view.length()) / width;
  auto column_of = [&](uint64_t t) {
    const double c = (static_cast<double>(t) - static_cast<double>(view.from)) / ns_per_px;
    return static_cast<long long>(std::floor(c));
  };
  // The first sample that can touch the view: the last one starting at or before view.from.
  auto it = std::upper_bound(s.begin(), s.end(), view.from,
                             [](uint64_t t, const SeriesSample& p) { return t < p.time; });
  if (it != s.begin()) --it;
  for (; it != s.end() && it->time <= view.to; ++it) {
    // The last sample holds until the end of the view (the value does not change after it).
    const uint64_t end = std::next(it) != s.end() ? std::next(it)->time
                                                  : std::max(it->time + std::max<uint64_t>(bucket_ns, 1), view.to + 1);
    // Inside its own bucket the value ranges over [min, max]; until the next sample it stays
    // at `last`.
    const uint64_t bucket_end = std::min(end, it->time + std::max<uint64_t>(bucket_ns, 1));
    auto mark = [&](uint64_t t0, uint64_t t1, uint64_t lo, uint64_t hi) {
      long long c0 = column_of(t0), c1 = column_of(t1 > t0 ? t1 - 1 : t0);
      if (c1 < 0 || c0 >= width) return;
      c0 = std::max<long long>(c0, 0);
      c1 = std::min<long long>(c1, width - 1);
      for (long long c = c0; c <= c1; ++c) {
        Column& col = cols[static_cast<std::size_t>(c)];
        if (!col.valid) {
          col = {lo, hi, true};
        } else {
          col.min = std::min(col.min, lo);
          col.max = std::max(col.max, hi);
        }
      }
    };
    mark(it->time, bucket_end, it->min, it->max);
    if (end > bucket_end) mark(bucket_end, end, it->last, it->last);
  }
  return cols;
}

std::vector<PixelRun> merge_runs(const std::vector<PixelSpan>& spans) {
  std::vector<PixelRun> runs;
  bool open = false;
  for (int c = 0; c < static_cast<int>(spans.size()); ++c) {
    const PixelSpan& s = spans[static_cast<std::size_t>(c)];
    if (!s.valid) {
      open = false;
      continue;
    }
    if (open && runs.back().top == s.top && runs.back().bottom == s.bottom) {
      runs.back().last = c;
      continue;
    }
    runs.push_back({c, c, s.top, s.bottom});
    open = true;
  }
  return runs;
}

namespace {

// Douglas-Peucker on vertical distances: marks the points of p[a..b] needed to stay within tol.
void simplify(const std::vector<EdgePoint>& p, std::vector<uint8_t>& keep, float tol) {
  std::vector<std::pair<std::size_t, std::size_t>> todo{{0, p.size() - 1}};
  while (!todo.empty()) {
    const auto [a, b] = todo.back();
    todo.pop_back();
    if (b <= a + 1) continue;
    float worst = -1;
    std::size_t at = a;
    const float dx = p[b].x - p[a].x;
    for (std::size_t i = a + 1; i < b; ++i) {
      const float t = dx > 0 ? (p[i].x - p[a].x) / dx : 0;
      const float d = std::abs(p[i].y - (p[a].y + t * (p[b].y - p[a].y)));
      if (d > worst) worst = d, at = i;
    }
    if (worst <= tol) continue;
    keep[at] = 1;
    todo.push_back({a, at});
    todo.push_back({at, b});
  }
}

}  // namespace

std::vector<std::vector<EdgePoint>> fill_edges(const std::vector<PixelSpan>& spans, float tolerance) {
  std::vector<std::vector<EdgePoint>> out;
  const std::size_t n = spans.size();
  for (std::size_t first = 0; first < n;) {
    if (!spans[first].valid) {
      ++first;
      continue;
    }
    std::size_t last = first;
    while (last + 1 < n && spans[last + 1].valid) ++last;
    std::vector<EdgePoint> p;
    p.reserve(last - first + 3);
    p.push_back({static_cast<float>(first), static_cast<float>(spans[first].top)});
    for (std::size_t c = first; c <= last; ++c) p.push_back({static_cast<float>(c) + 0.5f, static_cast<float>(spans[c].top)});
    p.push_back({static_cast<float>(last + 1), static_cast<float>(spans[last].top)});
    std::vector<uint8_t> keep(p.size(), 0);
    keep.front() = keep.back() = 1;
    simplify(p, keep, tolerance);
    std::vector<EdgePoint> edge;
    for (std::size_t i = 0; i < p.size(); ++i)
      if (keep[i]) edge.push_back(p[i]);
    out.push_back(std::move(edge));
    first = last + 1;
  }
  return out;
}

TimeRange zoom(TimeRange view, uint64_t pivot, double factor, TimeRange span, uint64_t min_len) {
  const uint64_t total = span.length();
  if (total == 0) return {span.from, span.from};
  pivot = std::clamp(pivot, view.from, std::max(view.from, view.to));
  const double len = static_cast<double>(view.length());
  double new_len = std::clamp(len * factor, static_cast<double>(std::min(min_len, total)), static_cast<double>(total));
  const double left_share = len > 0 ? (static_cast<double>(pivot) - static_cast<double>(view.from)) / len : 0.5;
  double from = static_cast<double>(pivot) - left_share * new_len;
  from = std::clamp(from, static_cast<double>(span.from), static_cast<double>(span.to) - new_len);
  const auto f = static_cast<uint64_t>(std::llround(from));
  return {f, std::min(span.to, f + static_cast<uint64_t>(std::llround(new_len)))};
}

TimeRange pan(TimeRange view, int64_t delta, TimeRange span) {
  const uint64_t len = std::min(view.length(), span.length());
  int64_t from = static_cast<int64_t>(view.from) + delta;
  from = std::clamp<int64_t>(from, static_cast<int64_t>(span.from), static_cast<int64_t>(span.to - len));
  return {static_cast<uint64_t>(from), static_cast<uint64_t>(from) + len};
}

TimeRange selection(uint64_t a, uint64_t b, TimeRange span, uint64_t min_len) {
  TimeRange r{std::clamp(std::min(a, b), span.from, span.to), std::clamp(std::max(a, b), span.from, span.to)};
  if (r.length() < std::max<uint64_t>(min_len, 1)) return {};
  return r;
}

std::vector<std::size_t> visible_markers(const std::vector<MarkerLabel>& markers, TimeRange view, int width,
                                         float min_px) {
  std::vector<std::size_t> out;
  auto it = std::lower_bound(markers.begin(), markers.end(), view.from,
                             [](const MarkerLabel& k, uint64_t t) { return k.time < t; });
  float last_x = -1e30f;
  for (; it != markers.end() && it->time <= view.to; ++it) {
    const float x = x_of(view, width, it->time);
    if (x - last_x < min_px) continue;
    last_x = x;
    out.push_back(static_cast<std::size_t>(it - markers.begin()));
  }
  return out;
}

}  // namespace memtide::viewer
