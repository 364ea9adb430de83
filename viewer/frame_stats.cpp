#include "viewer/frame_stats.h"

#include <imgui.h>

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

// What a frame hands to OpenGL: vertices, triangles, draw calls, and the area of the
// triangles inside their clip rectangles (an estimate of the pixels shaded, overdraw included).
FrameStats::DrawCounts count_draws(const ImDrawData* dd) {
  FrameStats::DrawCounts c;
  if (!dd) return c;
  for (int l = 0; l < dd->CmdListsCount; ++l) {
    const ImDrawList* list = dd->CmdLists[l];
    c.vertices += static_cast<uint64_t>(list->VtxBuffer.Size);
    for (const ImDrawCmd& cmd : list->CmdBuffer) {
      if (cmd.UserCallback || cmd.ElemCount == 0) continue;
      ++c.commands;
      c.triangles += cmd.ElemCount / 3;
      const ImVec4 r = cmd.ClipRect;
      for (unsigned i = 0; i + 2 < cmd.ElemCount; i += 3) {
        const ImDrawVert* v[3];
        for (int k = 0; k < 3; ++k) v[k] = &list->VtxBuffer[static_cast<int>(cmd.VtxOffset + list->IdxBuffer[static_cast<int>(cmd.IdxOffset + i + k)])];
        const float area = std::abs((v[1]->pos.x - v[0]->pos.x) * (v[2]->pos.y - v[0]->pos.y) -
                                    (v[2]->pos.x - v[0]->pos.x) * (v[1]->pos.y - v[0]->pos.y)) * 0.5f;
        // Scale by the share of the triangle's bounding box that lies inside the clip rectangle.
        const float x0 = std::min({v[0]->pos.x, v[1]->pos.x, v[2]->pos.x}), x1 = std::max({v[0]->pos.x, v[1]->pos.x, v[2]->pos.x});
        const float y0 = std::min({v[0]->pos.y, v[1]->pos.y, v[2]->pos.y}), y1 = std::max({v[0]->pos.y, v[1]->pos.y, v[2]->pos.y});
        const float box = (x1 - x0) * (y1 - y0);
        const float in = std::max(0.0f, std::min(x1, r.z) - std::max(x0, r.x)) * std::max(0.0f, std::min(y1, r.w) - std::max(y0, r.y));
        c.pixels += box > 0 ? area * in / box : 0;
      }
    }
  }
  return c;
}

double thread_cpu_ms() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) * 1e3 + static_cast<double>(ts.tv_nsec) / 1e6;
}

}  // namespace memtide::viewer
