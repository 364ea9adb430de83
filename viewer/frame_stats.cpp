#include "viewer/frame_stats.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <utility>

namespace memtide::viewer {

void FrameRing::add(double ms) {
  buf_[count_ % buf_.size()] = ms;
  ++count_;
}

double FrameRing::percentile(double p) const {
  const std::size_t n = size();
  if (n == 0) return 0;
  std::vector<double> v(buf_.begin(), buf_.begin() + static_cast<std::ptrdiff_t>(n));
  // Nearest rank: the smallest value with at least p% of the frames at or below it.
  const double rank = std::ceil(std::clamp(p, 0.0, 100.0) / 100.0 * static_cast<double>(n));
  const std::size_t k = rank < 1 ? 0 : static_cast<std::size_t>(rank) - 1;
  std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(k), v.end());
  return v[k];
}

double FrameRing::max() const {
  const std::size_t n = size();
  return n ? *std::max_element(buf_.begin(), buf_.begin() + static_cast<std::ptrdiff_t>(n)) : 0;
}

std::string FrameStats::report() const {
  auto one = [](const char* name, const FrameRing& r) {
    char buf[160];
    std::snprintf(buf, sizeof buf, "%s: %llu frames, p50 %.2f ms, p95 %.2f ms, p99 %.2f ms, max %.2f ms", name,
                  static_cast<unsigned long long>(r.total()), r.percentile(50), r.percentile(95), r.percentile(99),
                  r.max());
    return std::string(buf);
  };
  std::string out;
  for (const auto& [name, phase] : {std::pair<const char*, const Phase*>{"while loading", &loading}, {"loaded", &loaded}}) {
    out += one((std::string("ui wall ") + name).c_str(), phase->ui) + "\n";
    out += one((std::string("ui cpu ") + name).c_str(), phase->cpu) + "\n";
    out += one((std::string("ui+render wall ") + name).c_str(), phase->total) + "\n";
  }
  for (std::size_t v = 0; v < kViews; ++v) {
    if (per_view[v].ui.total() == 0 || per_view[v].ui.total() == loaded.ui.total()) continue;
    const std::string n = view_names[v].empty() ? "view " + std::to_string(v) : view_names[v];
    out += "  " + one(("ui cpu loaded, " + n).c_str(), per_view[v].cpu) + "\n";
    out += "  " + one(("ui+render wall loaded, " + n).c_str(), per_view[v].total) + "\n";
    const DrawCounts& dc = per_view_draw[v];
    char buf[160];
    std::snprintf(buf, sizeof buf, "  drawn, %s: %llu vertices, %llu triangles, %llu draw calls, %.2f Mpixels\n",
                  n.c_str(), static_cast<unsigned long long>(dc.vertices), static_cast<unsigned long long>(dc.triangles),
                  static_cast<unsigned long long>(dc.commands), dc.pixels / 1e6);
    out += buf;
  }
  return out;
}

double thread_cpu_ms() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) * 1e3 + static_cast<double>(ts.tv_nsec) / 1e6;
}

}  // namespace memtide::viewer
