#include "analysis/growth.h"

#include <algorithm>
#include <cmath>

#include "analysis/format.h"

namespace memtide::analysis {
namespace {

constexpr double kNsPerMin = 60e9;

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  const std::size_t h = v.size() / 2;
  std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(h), v.end());
  const double hi = v[h];
  if (v.size() % 2) return hi;
  return (*std::max_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(h)) + hi) / 2;
}

struct Line {
  double slope = 0, intercept = 0;  // value = intercept + slope * t (t: ns from the first point)
};

// Tukey's resistant line through points [lo, hi): the slope joins the medians of the first and
// last thirds; the intercept is the median of what the slope leaves.
Line resistant_line(const std::vector<double>& t, const std::vector<double>& v, std::size_t lo, std::size_t hi) {
  Line l;
  const std::size_t n = hi - lo;
  if (n < 2) {
    l.intercept = n ? v[lo] : 0;
    return l;
  }
  const std::size_t k = std::max<std::size_t>(1, n / 3);
  std::vector<double> lt(t.begin() + lo, t.begin() + lo + k), lv(v.begin() + lo, v.begin() + lo + k);
  std::vector<double> rt(t.begin() + hi - k, t.begin() + hi), rv(v.begin() + hi - k, v.begin() + hi);
  const double dt = median(rt) - median(lt);
  if (dt > 0) l.slope = (median(rv) - median(lv)) / dt;
  std::vector<double> rest(n);
  for (std::size_t i = 0; i < n; ++i) rest[i] = v[lo + i] - l.slope * t[lo + i];
  l.intercept = median(std::move(rest));
  return l;
}

}  // namespace

StackGrowth stack_growth(const std::vector<uint64_t>& times, const std::vector<uint64_t>& bytes,
                         const std::vector<uint64_t>& blocks) {
  StackGrowth g;
  const std::size_t n = std::min(times.size(), bytes.size());
  if (n == 0) return g;
  g.start_bytes = bytes[0];
  g.end_bytes = bytes[n - 1];
  g.start_blocks = blocks.empty() ? 0 : blocks[0];
  g.end_blocks = blocks.empty() ? 0 : blocks[std::min(n, blocks.size()) - 1];
  std::vector<double> t(n), v(n);
  for (std::size_t i = 0; i < n; ++i) {
    t[i] = static_cast<double>(times[i] - times[0]);
    v[i] = static_cast<double>(bytes[i]);
  }
  const Line line = resistant_line(t, v, 0, n);
  std::vector<double> dev(n);
  for (std::size_t i = 0; i < n; ++i) dev[i] = std::fabs(v[i] - line.intercept - line.slope * t[i]);
  g.noise_bytes = 1.4826 * median(std::move(dev));
  g.bytes_per_min = line.slope * kNsPerMin;
  const std::size_t tail = n - std::max<std::size_t>(1, n / 3);
  g.tail_bytes_per_min = resistant_line(t, v, tail > 0 && n - tail < 2 ? tail - 1 : tail, n).slope * kNsPerMin;
  std::size_t up = 0;
  for (std::size_t i = 1; i < n; ++i) {
    if (bytes[i] <= bytes[i - 1]) continue;
    ++up;
    ++g.rises[std::min<std::size_t>(2, 3 * (i - 1) / (n - 1))];
  }
  for (std::size_t k = 0; k < 3; ++k)
    g.medians[k] = median(std::vector<double>(v.begin() + static_cast<std::ptrdiff_t>(k * n / 3),
                                              v.begin() + static_cast<std::ptrdiff_t>(std::max((k + 1) * n / 3, k * n / 3 + 1))));
  g.steadiness = n > 1 ? static_cast<double>(up) / static_cast<double>(n - 1) : 0;
  return g;
}

bool rose(const StackGrowth& g, uint64_t) {
  return g.end_bytes > g.start_bytes && static_cast<double>(g.end_bytes - g.start_bytes) > 4 * g.noise_bytes;
}

bool grows(const StackGrowth& g, uint64_t window_ns) {
  const double rise = g.bytes_per_min * static_cast<double>(window_ns) / kNsPerMin;
  return g.bytes_per_min > 0 && rise > 3 * g.noise_bytes && g.medians[0] < g.medians[1] &&
         g.medians[1] < g.medians[2] && g.tail_bytes_per_min >= g.bytes_per_min / 3 && g.rises[0] && g.rises[1] &&
         g.rises[2];
}

Growth analyze_growth(const Model& m, const GrowthOptions& o) {
  Growth out;
  const StackHistory& h = m.stack_history;
  if (h.empty()) {
    out.problem = m.heap().allocations == 0 ? "the trace has no heap allocations"
                                            : "no history of live bytes by stack (replayed without stack_history)";
    return out;
  }
  // (A kept set's warm-up is measured from the start of what it holds.)
  const uint64_t base = std::max(m.time_base, m.kept_from);
  const uint64_t span = m.last_time > base ? m.last_time - base : 0;
  const uint64_t warmup = o.warmup ? *o.warmup : span / 10;
  const uint64_t from = warmup > UINT64_MAX - base ? UINT64_MAX : base + warmup;
  if (from >= h.end) {
    out.problem = "the warm-up (" + format_duration(warmup) + ") is not shorter than the " +
                  (m.kept_from ? "kept range (" : "run (") + format_duration(span) + ")";
    return out;
  }
  // The window's points: the ends of the interval that holds `from` and of every later one.
  const uint32_t i0 = from <= h.start ? 0 : static_cast<uint32_t>(std::min<uint64_t>((from - h.start) / h.width, h.intervals - 1));
  // A process that exited freed what it still held in its last moments (a cache's destructor):
  // its last interval's worth of time is its teardown, not its life, and is left out (the
  // intervals that end less than a width before the end).
  uint32_t n = h.intervals;
  if (m.complete)
    while (n > i0 + kMinGrowthIntervals && h.end_of(n - 1) + h.width > h.end) --n;
  out.from = h.end_of(i0);
  out.to = h.end_of(n - 1);
  out.interval_ns = h.width;
  out.intervals = n - i0;
  if (out.intervals < kMinGrowthIntervals) {
    out.problem = "the window after the warm-up holds " + std::to_string(out.intervals) + " of the history's intervals (" +
                  format_duration(h.width) + " each), fewer than " + std::to_string(kMinGrowthIntervals) +
                  ": a shorter warm-up or a longer run";
    return out;
  }
  std::vector<uint64_t> times(out.intervals), bytes, blocks;
  for (uint32_t i = 0; i < out.intervals; ++i) times[i] = h.end_of(i0 + i);
  const uint64_t window_ns = out.to - out.from;
  for (const StackHistory::Track& tr : h.tracks) {
    h.dense(tr, bytes, &blocks);
    bytes.resize(n);
    blocks.resize(n);
    bytes.erase(bytes.begin(), bytes.begin() + i0);
    blocks.erase(blocks.begin(), blocks.begin() + i0);
    StackGrowth g = stack_growth(times, bytes, blocks);
    g.stack = tr.stack;
    if (grows(g, window_ns)) {
      out.growing.push_back(g);
      out.bytes_per_min += g.bytes_per_min;
    } else if (rose(g, window_ns)) {
      out.held.push_back(g);
    }
  }
  const auto by_stack = [](const StackGrowth& a, const StackGrowth& b) { return a.stack < b.stack; };
  std::sort(out.growing.begin(), out.growing.end(), [&](const StackGrowth& a, const StackGrowth& b) {
    return a.bytes_per_min != b.bytes_per_min ? a.bytes_per_min > b.bytes_per_min : by_stack(a, b);
  });
  std::sort(out.held.begin(), out.held.end(), [&](const StackGrowth& a, const StackGrowth& b) {
    const uint64_t ra = a.end_bytes - a.start_bytes, rb = b.end_bytes - b.start_bytes;
    return ra != rb ? ra > rb : by_stack(a, b);
  });
  return out;
}

}  // namespace memtide::analysis
