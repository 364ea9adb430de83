// Timeline: live heap bytes, RSS, mapped bytes and custom pools over time, the high-water mark, memtide_mark labels.
// Wheel zooms around the pointer, right/middle drag pans, double-click shows everything, left
// drag selects the time range the other views follow.
#include <imgui.h>

#include <algorithm>
#include <cmath>

#include "viewer/format.h"
#include "viewer/views.h"

namespace memtide::viewer {

void TimelineView::update_columns(const TimelineData& d, int width, int height, float marker_px) {
  const TimeRange v = view_.empty() ? d.span() : view_;
  Key k{d.serial, v, width, height, marker_px};
  if (k == cache_key_) return;
  cache_key_ = k;
  heap_cols_ = downsample(d.heap, d.heap_bucket_ns, v, width);
  const std::vector<SeriesSample>* lines[kLines] = {&d.rss, &d.mapped, &d.custom};
  const uint64_t buckets[kLines] = {0, d.mapped_bucket_ns, d.custom_bucket_ns};
  for (int i = 0; i < kLines; ++i) line_cols_[i] = downsample(*lines[i], buckets[i], v, width);
  markers_ = visible_markers(d.markers, v, width, marker_px);

  // What each column covers in pixel rows from the plot's top, merged into runs of columns
  // drawn alike (a few triangles per run rather than per column).
  const double ymax = static_cast<double>(std::max<uint64_t>(d.max_value, 1)) * 1.08;
  auto row = [&](uint64_t val) { return static_cast<double>(height) - static_cast<double>(val) / ymax * height; };
  std::vector<PixelSpan> fill(static_cast<std::size_t>(width)), line(fill.size());
  const Column* prev = nullptr;
  for (std::size_t c = 0; c < fill.size(); ++c) {
    const Column& col = heap_cols_[c];
    if (!col.valid) {
      prev = nullptr;
      continue;
    }
    fill[c] = {std::clamp(static_cast<int>(std::lround(row(col.max))), 0, height), height, true};
    // The line: the column's range joined to the previous column's, at least two rows tall.
    uint64_t lo = col.min, hi = col.max;
    if (prev) {
      lo = std::min(lo, prev->max);
      hi = std::max(hi, prev->min);
    }
    line[c] = {static_cast<int>(std::floor(row(hi))) - 1, static_cast<int>(std::ceil(row(lo))) + 1, true};
    prev = &col;
  }
  for (int i = 0; i < kLines; ++i) {
    std::vector<PixelSpan> spans(fill.size());
    for (std::size_t c = 0; c < spans.size(); ++c)
      if (line_cols_[i][c].valid) {
        // (A value above the scale, the mapped line's at times, runs along the top.)
        const int y = std::max(0, static_cast<int>(std::lround(row(line_cols_[i][c].max))));
        spans[c] = {y, y, true};
      }
    series_runs_[i] = merge_runs(spans);
  }
  fill_edges_ = fill_edges(fill, 0.75f);
  line_runs_ = merge_runs(line);
}

void TimelineView::draw(Frame& f, float height, bool compact) {
  const Snapshot& s = f.snap;
  if (!s.timeline) return;
  const TimelineData& d = *s.timeline;
  const Palette& pal = palette(f.dark);
  const float sc = f.scale;


  if (!compact) {
    // Legend.
    auto swatch = [&](uint32_t col, const char* text) {
      const ImVec2 p = ImGui::GetCursorScreenPos();
      const float h = ImGui::GetTextLineHeight();
      ImGui::GetWindowDrawList()->AddRectFilled(ImVec2(p.x, p.y + h * 0.3f), ImVec2(p.x + 14 * sc, p.y + h * 0.7f), col);
      ImGui::Dummy(ImVec2(18 * sc, h));
      ImGui::SameLine();
      ImGui::TextUnformatted(text);
      ImGui::SameLine(0, 20 * sc);
    };
    swatch(pal.heap, "heap (live bytes)");
    if (!d.rss.empty()) swatch(pal.rss, "RSS");
    if (d.mapped_off_scale)
      swatch(pal.mapped, ("mapped (anonymous mmap): up to " + format_bytes(d.mapped_off_scale) +
                          ", mostly reserved address space, above the scale")
                             .c_str());
    else if (!d.mapped.empty())
      swatch(pal.mapped, "mapped (anonymous mmap)");
    if (!d.custom.empty()) swatch(pal.custom, "custom pools");
    swatch(pal.peak, ("peak " + format_bytes(d.peak_bytes) + " at " + format_duration(d.peak_time)).c_str());
    if (!d.markers.empty()) swatch(pal.marker, (format_count(d.markers.size()) + " marks").c_str());
    ImGui::NewLine();
    if (d.coarse)
      ImGui::TextDisabled("read ahead of the replay: heap and mapped bytes at the checkpoints only%s",
                          d.heap.empty() ? " (this trace has none)" : "");
    ImGui::TextDisabled("wheel: zoom   right-drag: pan   double-click: show all   left-drag: select a range");
    height = ImGui::GetContentRegionAvail().y;
  }

  const float axis_w = 72 * sc, axis_h = ImGui::GetTextLineHeight() + 4 * sc;
  const ImVec2 origin = ImGui::GetCursorScreenPos();
  const float avail_w = ImGui::GetContentRegionAvail().x;
  const ImVec2 p0(origin.x + axis_w, origin.y + (compact ? 2 : 6) * sc);
  const ImVec2 p1(origin.x + avail_w - 4 * sc, origin.y + height - axis_h);
  const int width = std::max(1, static_cast<int>(p1.x - p0.x));
  if (p1.y - p0.y < 10) {
    ImGui::Dummy(ImVec2(avail_w, height));
    return;
  }
  update_columns(d, width, static_cast<int>(p1.y - p0.y), (compact ? 3 : 6) * sc);
  plot_[0] = p0.x, plot_[1] = p0.y, plot_[2] = p1.x, plot_[3] = p1.y;
  const TimeRange view = cache_key_.view;
  const float plot_h = p1.y - p0.y;
  const double ymax = static_cast<double>(std::max<uint64_t>(d.max_value, 1)) * 1.08;
  auto y_of = [&](uint64_t v) { return p1.y - static_cast<float>(static_cast<double>(v) / ymax * plot_h); };

  ImDrawList* dl = ImGui::GetWindowDrawList();
  // The plot has no background of its own, only a frame: the window's colour comes from the
  // frame's clear, and a software rasteriser (Xvfb's llvmpipe) pays for every pixel of a quad
  // drawn over it; shading this plot's area cost more than the rest of the frame.
  dl->AddRect(ImVec2(p0.x - 1, p0.y - 1), ImVec2(p1.x + 1, p1.y + 1), ImGui::GetColorU32(ImGuiCol_Border));
  // The area under the heap: a quad per segment of its simplified upper edge (written
  // directly: no anti-aliasing fringe).
  const ImVec2 uv = ImGui::GetFontTexUvWhitePixel();
  for (const std::vector<EdgePoint>& edge : fill_edges_)
    for (std::size_t i = 0; i + 1 < edge.size(); ++i) {
      const float xa = p0.x + edge[i].x, xb = edge[i + 1].x >= static_cast<float>(width) ? p1.x : p0.x + edge[i + 1].x;
      const float ya = p0.y + edge[i].y, yb = p0.y + edge[i + 1].y;
      dl->PrimReserve(6, 4);
      dl->PrimQuadUV(ImVec2(xa, ya), ImVec2(xb, yb), ImVec2(xb, p1.y), ImVec2(xa, p1.y), uv, uv, uv, uv, pal.heap_fill);
    }

  // Grid and axes.
  const int yticks = compact ? 2 : std::max(2, static_cast<int>(plot_h / (40 * sc)));
  const uint64_t ystep = nice_step_bytes(static_cast<uint64_t>(ymax / yticks) + 1);
  for (uint64_t v = 0; static_cast<double>(v) <= ymax; v += ystep) {
    const float y = y_of(v);
    dl->AddLine(ImVec2(p0.x, y), ImVec2(p1.x, y), pal.grid);
    const std::string t = format_bytes(v);
    const ImVec2 ts = ImGui::CalcTextSize(t.c_str());
    if (y - ts.y * 0.5f >= p0.y - 2 || v == 0)
      dl->AddText(ImVec2(p0.x - ts.x - 6 * sc, std::min(y - ts.y * 0.5f, p1.y - ts.y)), pal.text_dim, t.c_str());
  }
  const uint64_t xstep = nice_step(std::max<uint64_t>(1, view.length() / std::max(1, static_cast<int>(width / (110 * sc)))));
  for (uint64_t t = (view.from + xstep - 1) / xstep * xstep; t <= view.to; t += xstep) {
    const float x = p0.x + x_of(view, width, t);
    dl->AddLine(ImVec2(x, p0.y), ImVec2(x, p1.y), pal.grid);
    const std::string lab = format_time_tick(t, xstep);
    const ImVec2 ts = ImGui::CalcTextSize(lab.c_str());
    dl->AddText(ImVec2(std::min(x - ts.x * 0.5f, p1.x - ts.x), p1.y + 2 * sc), pal.text_dim, lab.c_str());
  }

  dl->PushClipRect(p0, p1, true);
  // Selection.
  if (!f.selection.empty()) {
    const float a = p0.x + x_of(view, width, f.selection.from), b = p0.x + x_of(view, width, f.selection.to);
    dl->AddRectFilled(ImVec2(a, p0.y), ImVec2(std::max(b, a + 1), p1.y), pal.selection);
  }
  // Heap: a vertical run min..max per column joined to the previous (runs of columns that
  // cover the same pixel rows are one rectangle).
  const float half = std::max(1.0f, sc * 0.75f) - 0.5f;  // the line is 2 px wide at scale 1
  for (const PixelRun& r : line_runs_)
    dl->AddRectFilled(ImVec2(p0.x + static_cast<float>(r.first) - half, p0.y + static_cast<float>(r.top)),
                      ImVec2(p0.x + static_cast<float>(r.last + 1) + half, p0.y + static_cast<float>(r.bottom)), pal.heap);
  // RSS, mapped bytes and custom pools, each as one line through the column maxima (a
  // horizontal stretch per run).
  std::vector<ImVec2>& pts = line_points_;
  const uint32_t line_colour[kLines] = {pal.rss, pal.mapped, pal.custom};
  for (int k = 0; k < kLines; ++k) {
    const std::vector<PixelRun>& runs = series_runs_[k];
    pts.clear();
    auto flush = [&] {
      if (pts.size() >= 2)
        dl->AddPolyline(pts.data(), static_cast<int>(pts.size()), line_colour[k], ImDrawFlags_None, 1.5f * sc);
      pts.clear();
    };
    for (std::size_t i = 0; i < runs.size(); ++i) {
      const PixelRun& r = runs[i];
      if (i > 0 && runs[i - 1].last + 1 != r.first) flush();  // a gap without samples
      const float y = p0.y + static_cast<float>(r.top) + 0.5f;  // the middle of the pixel row
      pts.emplace_back(p0.x + static_cast<float>(r.first) + 0.5f, y);
      if (r.last > r.first) pts.emplace_back(p0.x + static_cast<float>(r.last) + 0.5f, y);
    }
    flush();
  }
  // High-water mark.
  if (d.peak_bytes && d.peak_time >= view.from && d.peak_time <= view.to) {
    const float x = p0.x + x_of(view, width, d.peak_time);
    for (float y = p0.y; y < p1.y; y += 8 * sc) dl->AddLine(ImVec2(x, y), ImVec2(x, std::min(p1.y, y + 4 * sc)), pal.peak, 1.5f);
    dl->AddCircleFilled(ImVec2(x, y_of(d.peak_bytes)), 4 * sc, pal.peak);
    if (!compact) {
      const std::string t = "peak " + format_bytes(d.peak_bytes);
      const ImVec2 ts = ImGui::CalcTextSize(t.c_str());
      const float tx = x + 6 * sc + ts.x > p1.x ? x - 6 * sc - ts.x : x + 6 * sc;
      // Below the row of mark labels at the top, when there are marks in view.
      const float ty = std::max(y_of(d.peak_bytes) - ts.y, p0.y + (markers_.empty() ? 0.f : ts.y + 4 * sc));
      dl->AddText(ImVec2(tx, ty), pal.peak, t.c_str());
    }
  }
  // Marks: a tick at the top each, then the labels where there is room, over the ticks. A
  // label whose text covers the ticks of later marks says how many it covers ("+2"); their
  // own labels are left out (hovering shows them all).
  for (std::size_t i : markers_) {
    const float x = p0.x + x_of(view, width, d.markers[i].time);
    dl->AddLine(ImVec2(x, p0.y), ImVec2(x, p0.y + (compact ? 6 : 12) * sc), pal.marker, 2.0f);
  }
  if (!compact) {
    float label_end = -1e9f;
    for (std::size_t k = 0; k < markers_.size(); ++k) {
      const std::size_t i = markers_[k];
      const float x = p0.x + x_of(view, width, d.markers[i].time);
      if (x <= label_end) continue;
      std::string text = d.markers[i].label;
      float end = x + 3 * sc + ImGui::CalcTextSize(text.c_str()).x;
      std::size_t covered = 0;
      while (k + covered + 1 < markers_.size() && p0.x + x_of(view, width, d.markers[markers_[k + covered + 1]].time) <= end) {
        ++covered;
        text = d.markers[i].label + " +" + std::to_string(covered);
        end = x + 3 * sc + ImGui::CalcTextSize(text.c_str()).x;
      }
      const ImVec2 at(x + 3 * sc, p0.y + 2 * sc);
      const ImVec2 ts = ImGui::CalcTextSize(text.c_str());
      dl->AddRectFilled(ImVec2(at.x - 1 * sc, at.y), ImVec2(at.x + ts.x + 1 * sc, at.y + ts.y),
                        ImGui::GetColorU32(ImGuiCol_WindowBg));
      dl->AddText(at, pal.marker, text.c_str());
      label_end = end + 12 * sc;
    }
  }
  dl->PopClipRect();

  // Interaction.
  ImGui::SetCursorScreenPos(p0);
  ImGui::InvisibleButton(compact ? "##strip" : "##timeline", ImVec2(p1.x - p0.x, plot_h),
                         ImGuiButtonFlags_MouseButtonLeft | ImGuiButtonFlags_MouseButtonRight |
                             ImGuiButtonFlags_MouseButtonMiddle);
  const ImGuiIO& io = ImGui::GetIO();
  const float mx = io.MousePos.x - p0.x;
  const uint64_t tm = time_at(view, width, mx);
  if (ImGui::IsItemHovered()) {
    if (io.MouseWheel != 0) view_ = zoom(view, tm, std::pow(0.8, io.MouseWheel), d.span());
    if (ImGui::IsMouseDoubleClicked(ImGuiMouseButton_Left)) view_ = {};
    if (ImGui::IsMouseClicked(ImGuiMouseButton_Left)) drag_from_ = tm;
    if (ImGui::IsMouseClicked(ImGuiMouseButton_Right) || ImGui::IsMouseClicked(ImGuiMouseButton_Middle)) {
      panning_ = true;
      pan_last_x_ = io.MousePos.x;
    }
    const std::size_t c = static_cast<std::size_t>(std::clamp(static_cast<int>(mx), 0, width - 1));
    ImGui::BeginTooltip();
    ImGui::Text("%s", format_duration(tm).c_str());
    if (heap_cols_[c].valid) {
      const Column& hc = heap_cols_[c];
      if (hc.min == hc.max)
        ImGui::Text("heap %s", format_bytes(hc.max).c_str());
      else
        ImGui::Text("heap %s .. %s", format_bytes(hc.min).c_str(), format_bytes(hc.max).c_str());
    }
    if (line_cols_[0][c].valid) ImGui::Text("RSS %s", format_bytes(line_cols_[0][c].max).c_str());
    if (line_cols_[1][c].valid) ImGui::Text("mapped %s", format_bytes(line_cols_[1][c].max).c_str());
    if (line_cols_[2][c].valid) ImGui::Text("custom pools %s", format_bytes(line_cols_[2][c].max).c_str());
    ImGui::EndTooltip();
  }
  if (panning_) {
    if (ImGui::IsMouseDown(ImGuiMouseButton_Right) || ImGui::IsMouseDown(ImGuiMouseButton_Middle)) {
      const double ns_per_px = static_cast<double>(view.length()) / width;
      const auto delta = static_cast<int64_t>((pan_last_x_ - io.MousePos.x) * ns_per_px);
      if (delta) view_ = pan(view, delta, d.span());
      pan_last_x_ = io.MousePos.x;
    } else {
      panning_ = false;
    }
  }
  if (drag_from_) {
    const TimeRange r = selection(*drag_from_, tm, d.span(), static_cast<uint64_t>(3.0 * view.length() / width));
    if (!r.empty()) {
      const float a = p0.x + x_of(view, width, r.from), b = p0.x + x_of(view, width, r.to);
      dl->AddRect(ImVec2(a, p0.y), ImVec2(b, p1.y), pal.heap);
    }
    if (!ImGui::IsMouseDown(ImGuiMouseButton_Left)) {
      if (!r.empty()) f.selection = r;
      drag_from_.reset();
    }
  }
  ImGui::SetCursorScreenPos(ImVec2(origin.x, origin.y + height));
  ImGui::Dummy(ImVec2(0, 0));
}

}  // namespace memtide::viewer
