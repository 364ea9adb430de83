// Growth: the live heap bytes of the top stacks over time as stacked areas (the stacks that
// keep growing after the warm-up first, then the largest others, then the rest of the heap),
// the warm-up shaded; below, each stack's rate, its live bytes at the start and end of the
// window and how steadily it rose, with its flamegraph and its leaks one click away.
#include <imgui.h>

#include <algorithm>
#include <cmath>

#include "viewer/format.h"
#include "viewer/views.h"

namespace memtide::viewer {

namespace {

// Layer colours: warm for the growing stacks, cool for the others, grey for the rest.
uint32_t layer_colour(const GrowthLayer& l, std::size_t i, bool dark) {
  static const uint32_t kWarm[] = {IM_COL32(235, 80, 70, 255), IM_COL32(245, 150, 50, 255), IM_COL32(230, 200, 60, 255),
                                   IM_COL32(220, 100, 160, 255)};
  static const uint32_t kCool[] = {IM_COL32(70, 150, 230, 255), IM_COL32(80, 190, 160, 255), IM_COL32(140, 120, 220, 255),
                                   IM_COL32(110, 170, 90, 255)};
  if (l.stack == 0) return dark ? IM_COL32(95, 95, 105, 255) : IM_COL32(180, 180, 185, 255);
  return l.growing ? kWarm[i % std::size(kWarm)] : kCool[i % std::size(kCool)];
}

std::string rate(double bytes_per_min) {
  return (bytes_per_min < 0 ? "-" : "") + format_bytes(static_cast<uint64_t>(std::llround(std::fabs(bytes_per_min)))) + "/min";
}

}  // namespace

void GrowthView::draw(Frame& f) {
  const GrowthData* d = f.snap.growth.get();
  if (!d) {
    ImGui::TextDisabled("collecting the history of live bytes...");
    return;
  }
  if (d->serial != serial_) {
    serial_ = d->serial;
    selected_ = -1;
  }
  const Palette& pal = palette(f.dark);
  const float sc = f.scale;
  const char* est = d->sampled ? "~" : "";
  if (!d->problem.empty()) {
    ImGui::TextColored(ImGui::ColorConvertU32ToFloat4(pal.warn), "Growth not judged: %s", d->problem.c_str());
  } else if (d->growth.growing.empty()) {
    ImGui::Text("No stack grew steadily after the warm-up (%s)", format_duration(d->warmup).c_str());
  } else {
    ImGui::Text("%zu %s growing after the warm-up (%s): %s%s in all", d->growth.growing.size(),
                d->growth.growing.size() == 1 ? "stack" : "stacks", format_duration(d->warmup).c_str(), est,
                rate(d->growth.bytes_per_min).c_str());
  }
  if (d->growth.ok()) {
    ImGui::SameLine(0, 16 * sc);
    ImGui::TextDisabled("(window %s .. %s, %u intervals of %s%s)", format_duration(d->window_from).c_str(),
                        format_duration(d->window_to).c_str(), d->growth.intervals,
                        format_duration(d->growth.interval_ns).c_str(), d->sampled ? "; sampled: estimates" : "");
  }
  if (d->times.empty()) return;

  // The chart.
  const float axis_w = 70 * sc;
  const ImVec2 avail = ImGui::GetContentRegionAvail();
  const float chart_h = std::max(160 * sc, avail.y * 0.55f);
  const ImVec2 p0 = ImGui::GetCursorScreenPos();
  ImGui::InvisibleButton("##growth_chart", ImVec2(std::max(avail.x, 100.0f), chart_h));
  const bool hovered = ImGui::IsItemHovered();
  ImDrawList* dl = ImGui::GetWindowDrawList();
  const float x0 = p0.x + axis_w, x1 = p0.x + std::max(avail.x, 100.0f) - 8 * sc;
  const float y0 = p0.y + 6 * sc, y1 = p0.y + chart_h - ImGui::GetTextLineHeight() - 6 * sc;
  // The axis spans what the trace holds: from a kept set's start, not the recording's.
  const uint64_t tmin = std::min(d->start, d->times.front());
  const double tmax = static_cast<double>(std::max<uint64_t>(d->times.back() - tmin, 1));
  const double vmax = static_cast<double>(std::max<uint64_t>(d->max_total, 1)) * 1.08;
  auto X = [&](uint64_t t) { return x0 + static_cast<float>(static_cast<double>(t > tmin ? t - tmin : 0) / tmax) * (x1 - x0); };
  auto Y = [&](uint64_t v) { return y1 - static_cast<float>(static_cast<double>(v) / vmax) * (y1 - y0); };
  // Grid and axes.
  const uint64_t step = nice_step_bytes(static_cast<uint64_t>(vmax / 4));
  for (uint64_t v = 0; step && static_cast<double>(v) <= vmax; v += step) {
    dl->AddLine(ImVec2(x0, Y(v)), ImVec2(x1, Y(v)), pal.grid);
    const std::string label = format_bytes(v);
    dl->AddText(ImVec2(x0 - ImGui::CalcTextSize(label.c_str()).x - 6 * sc, Y(v) - ImGui::GetTextLineHeight() / 2),
                pal.text_dim, label.c_str());
  }
  const uint64_t tstep = nice_step(static_cast<uint64_t>(tmax / 8));
  for (uint64_t t = (tmin + tstep - 1) / std::max<uint64_t>(tstep, 1) * tstep; tstep && static_cast<double>(t - tmin) <= tmax; t += tstep) {
    const std::string label = format_time_tick(t, tstep);
    dl->AddText(ImVec2(X(t) - ImGui::CalcTextSize(label.c_str()).x / 2, y1 + 3 * sc), pal.text_dim, label.c_str());
  }
  // The layers, bottom up: one quad per interval between the layer below and this one.
  const std::size_t n = d->times.size();
  for (std::size_t k = 0; k < d->layers.size(); ++k) {
    const GrowthLayer& l = d->layers[k];
    const std::vector<uint64_t>* below = k ? &d->layers[k - 1].top : nullptr;
    uint32_t col = layer_colour(l, k, f.dark);
    if (selected_ >= 0 && static_cast<std::size_t>(selected_) != k && l.stack != 0) col = (col & 0x00FFFFFFu) | (150u << 24);
    for (std::size_t i = 0; i + 1 < n; ++i) {
      const float xa = X(d->times[i]), xb = X(d->times[i + 1]);
      const uint64_t la = below ? (*below)[i] : 0, lb = below ? (*below)[i + 1] : 0;
      if (l.top[i] == la && l.top[i + 1] == lb) continue;
      dl->AddQuadFilled(ImVec2(xa, Y(la)), ImVec2(xb, Y(lb)), ImVec2(xb, Y(l.top[i + 1])), ImVec2(xa, Y(l.top[i])), col);
    }
  }
  // The warm-up, not judged: shaded.
  dl->AddRectFilled(ImVec2(x0, y0), ImVec2(X(std::min<uint64_t>(d->start + d->warmup, d->times.back())), y1), pal.dim_overlay);
  dl->AddText(ImVec2(x0 + 4 * sc, y0 + 2 * sc), pal.text_dim, "warm-up");
  dl->AddRect(ImVec2(x0, y0), ImVec2(x1, y1), pal.grid);
  // Hover: the layer under the pointer at that interval; a click selects it.
  if (hovered) {
    const ImVec2 mp = ImGui::GetIO().MousePos;
    const double t = std::clamp(static_cast<double>(mp.x - x0) / (x1 - x0), 0.0, 1.0) * tmax;
    const std::size_t i = std::min<std::size_t>(
        n - 1, static_cast<std::size_t>(std::lower_bound(d->times.begin(), d->times.end(), static_cast<uint64_t>(t)) - d->times.begin()));
    const double v = (y1 - mp.y) / (y1 - y0) * vmax;
    for (std::size_t k = 0; k < d->layers.size(); ++k) {
      if (static_cast<double>(d->layers[k].top[i]) < v) continue;
      const GrowthLayer& l = d->layers[k];
      ImGui::SetTooltip("%s\n%s%s live at %s%s", l.site.c_str(), est, format_bytes(l.bytes[i]).c_str(),
                        format_duration(d->times[i]).c_str(), l.growing ? "\ngrowing" : "");
      if (ImGui::IsMouseClicked(0) && l.stack != 0) selected_ = static_cast<int>(k);
      break;
    }
  }

  // The table: one row per layer.
  const ImGuiTableFlags flags = ImGuiTableFlags_ScrollY | ImGuiTableFlags_RowBg | ImGuiTableFlags_BordersOuter |
                                ImGuiTableFlags_BordersV | ImGuiTableFlags_Resizable;
  if (!ImGui::BeginTable("growth", 7, flags, ImVec2(0, 0))) return;
  ImGui::TableSetupScrollFreeze(0, 1);
  ImGui::TableSetupColumn("stack (allocation site)", ImGuiTableColumnFlags_WidthStretch);
  ImGui::TableSetupColumn("rate", ImGuiTableColumnFlags_WidthFixed, 90 * sc);
  ImGui::TableSetupColumn("start of window", ImGuiTableColumnFlags_WidthFixed, 125 * sc);
  ImGui::TableSetupColumn("end", ImGuiTableColumnFlags_WidthFixed, 125 * sc);
  ImGui::TableSetupColumn("rose in", ImGuiTableColumnFlags_WidthFixed, 60 * sc);
  ImGui::TableSetupColumn("module", ImGuiTableColumnFlags_WidthFixed, 100 * sc);
  ImGui::TableSetupColumn("", ImGuiTableColumnFlags_WidthFixed, 130 * sc);
  ImGui::TableHeadersRow();
  buttons_.assign(d->layers.size(), {ImVec2(-1, -1), ImVec2(-1, -1)});
  for (std::size_t k = 0; k < d->layers.size(); ++k) {
    const GrowthLayer& l = d->layers[k];
    ImGui::PushID(static_cast<int>(k));
    ImGui::TableNextRow();
    ImGui::TableNextColumn();
    const ImVec2 p = ImGui::GetCursorScreenPos();
    const float h = ImGui::GetTextLineHeight();
    dl = ImGui::GetWindowDrawList();
    dl->AddRectFilled(ImVec2(p.x, p.y + h * 0.2f), ImVec2(p.x + 12 * sc, p.y + h * 0.8f), layer_colour(l, k, f.dark));
    ImGui::Dummy(ImVec2(16 * sc, h));
    ImGui::SameLine();
    const std::string label = l.growing ? l.site + "  (growing)" : l.site;
    if (ImGui::Selectable(label.c_str(), selected_ == static_cast<int>(k), ImGuiSelectableFlags_SpanAllColumns |
                                                                                ImGuiSelectableFlags_AllowItemOverlap) &&
        l.stack != 0)
      selected_ = static_cast<int>(k);
    if (ImGui::IsItemHovered() && !l.frames.empty()) {
      std::string stack;
      for (const std::string& fr : l.frames) stack += fr + "\n";
      ImGui::SetTooltip("%s", stack.c_str());
    }
    if (l.stack != 0 && d->growth.ok()) {
      ImGui::TableNextColumn();
      ImGui::Text("%s%s", est, rate(l.g.bytes_per_min).c_str());
      ImGui::TableNextColumn();
      ImGui::Text("%s%s in %s%s", est, format_bytes(l.g.start_bytes).c_str(), est, format_count(l.g.start_blocks).c_str());
      ImGui::TableNextColumn();
      ImGui::Text("%s%s in %s%s", est, format_bytes(l.g.end_bytes).c_str(), est, format_count(l.g.end_blocks).c_str());
      ImGui::TableNextColumn();
      ImGui::Text("%.0f %%", l.g.steadiness * 100);
      ImGui::TableNextColumn();
      ImGui::TextUnformatted(l.module.c_str());
      ImGui::TableNextColumn();
      if (ImGui::SmallButton("flamegraph")) go = {GoTo::Flamegraph, l.site};
      const auto centre = [] { return ImVec2((ImGui::GetItemRectMin().x + ImGui::GetItemRectMax().x) / 2,
                                             (ImGui::GetItemRectMin().y + ImGui::GetItemRectMax().y) / 2); };
      buttons_[k][0] = centre();
      ImGui::SameLine();
      if (ImGui::SmallButton("leaks")) go = {GoTo::Leaks, l.site};
      buttons_[k][1] = centre();
    } else {
      for (int c = 0; c < 6; ++c) ImGui::TableNextColumn();
    }
    ImGui::PopID();
  }
  ImGui::EndTable();
}

}  // namespace memtide::viewer
