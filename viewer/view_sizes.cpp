// Sizes: the heap allocations by size, in power-of-two classes (the histogram of `memtide
// report --histogram`), of the whole trace or of the selected range. Each class has two bars
// side by side, its share of the allocations and its share of the bytes, so that many small
// blocks and a few large ones show apart; hovering a class tells its numbers. The classes as a
// table below.
#include <imgui.h>

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "viewer/format.h"
#include "viewer/views.h"

namespace memtide::viewer {

uint64_t SizesView::key(const Snapshot& s, TimeRange window) {
  // A live refresh, a file opened again with other contents, another range: another histogram.
  uint64_t k = 1469598103934665603ull;
  for (uint64_t v : {s.base ? s.base->file_size : 0, s.refreshes, window.from, window.to}) k = (k ^ v) * 1099511628211ull;
  return k;
}

bool SizesView::complete(const Snapshot& s, TimeRange selection) const {
  return !s.loaded() || job_.done(s.path, key(s, selection));
}

void SizesView::draw(Frame& f) {
  const Snapshot& s = f.snap;
  if (s.loaded()) job_.want(s.path, key(s, f.selection), f.selection, s.base->time_base);
  const std::shared_ptr<const HistogramData> held = job_.result();
  const HistogramData* d = held && held->path == s.path ? held.get() : nullptr;
  hovered_ = -1;
  bars_.clear();
  tooltip_.clear();
  const Palette& pal = palette(f.dark);
  const float sc = f.scale;
  if (!d) {
    ImGui::TextDisabled("reading the sizes of the allocations... %.0f %%", job_.progress() * 100);
    return;
  }
  if (!d->error.empty()) {
    ImGui::TextColored(ImGui::ColorConvertU32ToFloat4(pal.warn), "No histogram of sizes: %s", d->error.c_str());
    return;
  }
  ImGui::Text("%s heap allocations, %s in all, by size", format_count(d->allocations).c_str(), format_bytes(d->bytes).c_str());
  ImGui::SameLine(0, 16 * sc);
  if (d->window.empty())
    ImGui::TextDisabled("(the whole trace; realloc counts as an allocation)");
  else
    ImGui::TextDisabled("(made in %s .. %s; realloc counts as an allocation)", format_duration(d->window.from).c_str(),
                        format_duration(d->window.to).c_str());
  if (job_.busy()) {
    ImGui::SameLine(0, 16 * sc);
    ImGui::TextDisabled("reading again... %.0f %%", job_.progress() * 100);
  }
  // (A file still being written ends inside a block: not worth a warning.)
  if (!d->warning.empty() && !s.live) ImGui::TextColored(ImGui::ColorConvertU32ToFloat4(pal.warn), "%s", d->warning.c_str());
  if (d->classes.empty()) return;

  // The chart: the share of each class, of the allocations (left bar) and of the bytes (right).
  const float axis_w = 56 * sc;
  const ImVec2 avail = ImGui::GetContentRegionAvail();
  const float chart_w = std::max(avail.x, 100.0f), chart_h = std::max(160 * sc, avail.y * 0.55f);
  const ImVec2 p0 = ImGui::GetCursorScreenPos();
  ImGui::InvisibleButton("##sizes_chart", ImVec2(chart_w, chart_h));
  const bool hovered = ImGui::IsItemHovered();
  ImDrawList* dl = ImGui::GetWindowDrawList();
  const float line = ImGui::GetTextLineHeight();
  const float x0 = p0.x + axis_w, x1 = p0.x + chart_w - 8 * sc;
  const float y0 = p0.y + line + 10 * sc, y1 = p0.y + chart_h - line - 6 * sc;
  const double top = std::max(static_cast<double>(d->most_allocations) / static_cast<double>(std::max<uint64_t>(d->allocations, 1)),
                              static_cast<double>(d->most_bytes) / static_cast<double>(std::max<uint64_t>(d->bytes, 1)));
  const double vmax = std::min(1.0, std::max(top, 0.01) * 1.08);
  auto Y = [&](double share) { return y1 - static_cast<float>(share / vmax) * (y1 - y0); };
  // Grid: every 5, 10 or 20 %.
  const double step = vmax > 0.5 ? 0.2 : vmax > 0.2 ? 0.1 : vmax > 0.08 ? 0.05 : 0.02;
  for (double v = 0; v <= vmax + 1e-9; v += step) {
    dl->AddLine(ImVec2(x0, Y(v)), ImVec2(x1, Y(v)), pal.grid);
    char label[16];
    std::snprintf(label, sizeof label, "%.0f %%", v * 100);
    dl->AddText(ImVec2(x0 - ImGui::CalcTextSize(label).x - 6 * sc, Y(v) - line / 2), pal.text_dim, label);
  }
  // Legend.
  const uint32_t count_col = pal.heap, bytes_col = pal.rss;
  float lx = x0;
  for (const auto& [col, name] : {std::pair{count_col, "allocations"}, std::pair{bytes_col, "bytes"}}) {
    dl->AddRectFilled(ImVec2(lx, p0.y + line * 0.2f), ImVec2(lx + 12 * sc, p0.y + line * 0.8f), col);
    dl->AddText(ImVec2(lx + 16 * sc, p0.y), pal.text_dim, name);
    lx += 16 * sc + ImGui::CalcTextSize(name).x + 18 * sc;
  }
  const std::size_t n = d->classes.size();
  const float slot = (x1 - x0) / static_cast<float>(n);
  const float bar_w = std::max(1.0f, std::min(slot * 0.4f, 40 * sc));
  if (hovered) {
    const float mx = ImGui::GetIO().MousePos.x;
    if (mx >= x0 && mx < x1) hovered_ = std::min(static_cast<int>((mx - x0) / slot), static_cast<int>(n) - 1);
  }
  // Labels under the bars, as many as fit.
  float tick_w = 0;
  for (const analysis::SizeClass& c : d->classes) tick_w = std::max(tick_w, ImGui::CalcTextSize(size_class_tick(c).c_str()).x);
  const std::size_t every = std::max<std::size_t>(1, static_cast<std::size_t>(std::ceil((tick_w + 8 * sc) / slot)));
  for (std::size_t i = 0; i < n; ++i) {
    const analysis::SizeClass& c = d->classes[i];
    const float cx = x0 + slot * (static_cast<float>(i) + 0.5f);
    bars_.push_back(ImVec2(cx, (y0 + y1) / 2));
    if (static_cast<int>(i) == hovered_) dl->AddRectFilled(ImVec2(cx - slot / 2, y0), ImVec2(cx + slot / 2, y1), pal.selection);
    const double cs = static_cast<double>(c.allocations) / static_cast<double>(std::max<uint64_t>(d->allocations, 1));
    const double bs = static_cast<double>(c.bytes) / static_cast<double>(std::max<uint64_t>(d->bytes, 1));
    // A class with any allocation is at least a pixel high: it is there.
    if (c.allocations) dl->AddRectFilled(ImVec2(cx - bar_w, std::min(Y(cs), y1 - 1)), ImVec2(cx, y1), count_col);
    if (c.bytes) dl->AddRectFilled(ImVec2(cx, std::min(Y(bs), y1 - 1)), ImVec2(cx + bar_w, y1), bytes_col);
    if (i % every == 0) {
      const std::string tick = size_class_tick(c);
      dl->AddText(ImVec2(cx - ImGui::CalcTextSize(tick.c_str()).x / 2, y1 + 3 * sc), pal.text_dim, tick.c_str());
    }
  }
  dl->AddLine(ImVec2(x0, y1), ImVec2(x1, y1), pal.text_dim);
  if (hovered_ >= 0) {
    const analysis::SizeClass& c = d->classes[static_cast<std::size_t>(hovered_)];
    tooltip_ = size_class_label(c) + "\n" + format_count(c.allocations) + (c.allocations == 1 ? " allocation (" : " allocations (") +
               format_share(c.allocations, d->allocations) + ")\n" + format_bytes(c.bytes) + " (" +
               format_share(c.bytes, d->bytes) + " of the bytes)";
    if (c.allocations) tooltip_ += "\naverage " + format_bytes(c.bytes / c.allocations);
    ImGui::SetTooltip("%s", tooltip_.c_str());
  }

  // The table: one row per class.
  const ImGuiTableFlags flags = ImGuiTableFlags_ScrollY | ImGuiTableFlags_RowBg | ImGuiTableFlags_BordersOuter |
                                ImGuiTableFlags_BordersV | ImGuiTableFlags_Resizable;
  if (!ImGui::BeginTable("sizes", 5, flags, ImVec2(0, 0))) return;
  ImGui::TableSetupScrollFreeze(0, 1);
  ImGui::TableSetupColumn("size", ImGuiTableColumnFlags_WidthStretch);
  ImGui::TableSetupColumn("allocations", ImGuiTableColumnFlags_WidthFixed, 120 * sc);
  ImGui::TableSetupColumn("of all", ImGuiTableColumnFlags_WidthFixed, 80 * sc);
  ImGui::TableSetupColumn("bytes", ImGuiTableColumnFlags_WidthFixed, 120 * sc);
  ImGui::TableSetupColumn("of all bytes", ImGuiTableColumnFlags_WidthFixed, 100 * sc);
  ImGui::TableHeadersRow();
  ImGuiListClipper clip;
  clip.Begin(static_cast<int>(n));
  while (clip.Step())
    for (int i = clip.DisplayStart; i < clip.DisplayEnd; ++i) {
      const analysis::SizeClass& c = d->classes[static_cast<std::size_t>(i)];
      ImGui::TableNextRow();
      if (i == hovered_) ImGui::TableSetBgColor(ImGuiTableBgTarget_RowBg1, pal.selection);
      ImGui::TableNextColumn();
      ImGui::TextUnformatted(size_class_label(c).c_str());
      ImGui::TableNextColumn();
      ImGui::TextUnformatted(format_count(c.allocations).c_str());
      ImGui::TableNextColumn();
      ImGui::TextDisabled("%s", format_share(c.allocations, d->allocations).c_str());
      ImGui::TableNextColumn();
      ImGui::TextUnformatted(format_bytes(c.bytes).c_str());
      ImGui::TableNextColumn();
      ImGui::TextDisabled("%s", format_share(c.bytes, d->bytes).c_str());
    }
  ImGui::EndTable();
}

}  // namespace memtide::viewer
