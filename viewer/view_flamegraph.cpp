// Flamegraph: icicle of a call tree (top-down: callers first; bottom-up: allocation sites
// first). Click a frame to zoom into it, right-click or the breadcrumb to go back out; the
// search highlights matching frames and sums their share. The widget is shared with Compare.
#include <imgui.h>
#include <imgui_stdlib.h>

#include <algorithm>

#include "viewer/format.h"
#include "viewer/views.h"

namespace memtide::viewer {

using analysis::Metric;

namespace {

std::string value_text(uint64_t v, bool bytes) { return bytes ? format_bytes(v) : format_count(v); }

uint32_t with_alpha(uint32_t c, uint32_t a) { return (c & 0x00FFFFFFu) | (a << 24); }

}  // namespace

void FlameWidget::sync(const FlameTree* tree, float width, float min_px) {
  const uint64_t serial = tree ? tree->serial : 0;
  if (serial != tree_serial_) {
    tree_serial_ = serial;
    dirty_ = true;
    search_ = FlameSearch{};
    search_.query = "\x01";  // force a new search on this tree
    // Keep the zoom across trees (metric, direction, refresh): follow the labels.
    zoom_ = 0;
    if (tree) {
      for (const std::string& label : zoom_path_) {
        const FlameNode& n = tree->nodes[zoom_];
        uint32_t found = UINT32_MAX;
        for (uint32_t k = 0; k < n.child_count; ++k)
          if (tree->nodes[tree->children[n.first_child + k]].label == label) {
            found = tree->children[n.first_child + k];
            break;
          }
        if (found == UINT32_MAX) break;
        zoom_ = found;
      }
    }
  }
  if (!tree) return;
  if (search_.query != search) {
    search_ = search_flame(*tree, search);
  }
  if (dirty_ || width != width_ || min_px != min_px_) {
    width_ = width;
    min_px_ = min_px;
    layout_ = layout_flame(*tree, zoom_, width, min_px);
    dirty_ = false;
  }
}

void FlameWidget::draw(Frame& f, const FlameTree* tree, bool bytes, const char* id) {
  const Palette& pal = palette(f.dark);
  const float sc = f.scale;
  const float width = ImGui::GetContentRegionAvail().x - ImGui::GetStyle().ScrollbarSize;
  sync(tree, std::max(1.0f, width), 4.0f * sc);
  if (!tree) {
    ImGui::TextDisabled("building the call trees...");
    return;
  }
  if (tree->total() == 0) {
    ImGui::TextDisabled("nothing to show for this metric");
    return;
  }

  // Breadcrumb: the zoomed frame's ancestors.
  const std::vector<uint32_t> path = flame_path(*tree, zoom_);
  for (std::size_t i = 0; i < path.size(); ++i) {
    const FlameNode& n = tree->nodes[path[i]];
    std::string label(n.label.substr(0, 48));
    if (n.label.size() > 48) label += "...";
    label += "##crumb" + std::to_string(i);
    if (i) {
      ImGui::SameLine(0, 2 * sc);
      ImGui::TextDisabled(">");
      ImGui::SameLine(0, 2 * sc);
    }
    if (ImGui::SmallButton(label.c_str()) && path[i] != zoom_) {
      zoom_path_.resize(i);
      zoom_ = path[i];
      dirty_ = true;
    }
  }
  if (dirty_) sync(tree, std::max(1.0f, width), 4.0f * sc);

  const float row_h = ImGui::GetTextLineHeight() + 5 * sc;
  ImGui::BeginChild(id, ImVec2(0, 0), false);
  const ImVec2 origin = ImGui::GetCursorScreenPos();
  graph_x_ = origin.x;
  graph_y_ = origin.y;
  row_h_ = row_h;
  ImGui::Dummy(ImVec2(width, row_h * static_cast<float>(layout_.rows) + 4 * sc));
  ImDrawList* dl = ImGui::GetWindowDrawList();
  const ImVec2 clip0 = ImGui::GetWindowPos();
  const float clip_y1 = clip0.y + ImGui::GetWindowHeight();
  const ImVec2 mouse = ImGui::GetIO().MousePos;
  const bool hovered_window = ImGui::IsWindowHovered();
  const bool searching = !search.empty();
  const uint32_t text_col = f.dark ? IM_COL32(240, 240, 240, 255) : IM_COL32(20, 20, 20, 255);
  const FlameRect* hover = nullptr;
  for (const FlameRect& r : layout_.rects) {
    const float y0 = origin.y + static_cast<float>(r.depth) * row_h, y1 = y0 + row_h - 1;
    if (y1 < clip0.y || y0 > clip_y1) continue;
    const ImVec2 a(origin.x + r.x0, y0), b(origin.x + std::max(r.x1 - 1, r.x0 + 1), y1);
    uint32_t col;
    bool matched = false;
    if (r.node == kMergedNode) {
      col = pal.merged;
    } else {
      const FlameNode& n = tree->nodes[r.node];
      col = tree->is_diff ? diff_colour(tree->before(n), tree->after(n), f.dark)
                          : module_colour(n.module, hash_string(n.label), f.dark);
      matched = searching && search_.matched[r.node];
    }
    if (searching && !matched) col = with_alpha(col, 70);
    dl->AddRectFilled(a, b, matched ? pal.search : col);
    if (r.node == kMergedNode) {  // hatch merged blocks so they do not read as one frame
      for (float x = a.x + 3; x < b.x; x += 6) dl->AddLine(ImVec2(x, a.y), ImVec2(x, b.y), with_alpha(col, 255) ^ 0x00202020u);
    }
    const float w = b.x - a.x;
    if (r.node != kMergedNode && w > 24 * sc) {
      const FlameNode& n = tree->nodes[r.node];
      const ImVec4 clip(a.x + 3 * sc, a.y, b.x - 2 * sc, b.y);
      dl->AddText(ImGui::GetFont(), ImGui::GetFontSize(), ImVec2(a.x + 3 * sc, a.y + 2.5f * sc),
                  searching && !matched ? with_alpha(text_col, 120) : text_col, n.label.data(),
                  n.label.data() + n.label.size(), 0, &clip);
    }
    if (hovered_window && mouse.x >= a.x && mouse.x < origin.x + r.x1 && mouse.y >= y0 && mouse.y < y0 + row_h) hover = &r;
  }

  if (hover) {
    dl->AddRect(ImVec2(origin.x + hover->x0, origin.y + static_cast<float>(hover->depth) * row_h),
                ImVec2(origin.x + hover->x1, origin.y + static_cast<float>(hover->depth + 1) * row_h - 1),
                ImGui::GetColorU32(ImGuiCol_Text));
    const uint64_t total = tree->total();
    ImGui::BeginTooltip();
    if (hover->node == kMergedNode) {
      ImGui::Text("%u frames too narrow to draw (merged)", hover->merged);
      ImGui::Text("%s, %s of all", value_text(hover->value, bytes).c_str(), format_share(hover->value, total).c_str());
      ImGui::TextDisabled("click the parent frame to zoom in");
    } else {
      const FlameNode& n = tree->nodes[hover->node];
      ImGui::PushTextWrapPos(ImGui::GetFontSize() * 40);
      ImGui::TextUnformatted(n.label.data(), n.label.data() + n.label.size());
      ImGui::PopTextWrapPos();
      if (!n.file.empty()) ImGui::TextDisabled("%.*s:%u", static_cast<int>(n.file.size()), n.file.data(), n.line);
      if (!n.module.empty()) ImGui::TextDisabled("%.*s", static_cast<int>(n.module.size()), n.module.data());
      ImGui::Separator();
      if (tree->is_diff) {
        const uint64_t before = tree->before(n), after = tree->after(n);
        ImGui::Text("baseline %s  ->  this trace %s", value_text(before, bytes).c_str(), value_text(after, bytes).c_str());
        const int64_t delta = static_cast<int64_t>(after) - static_cast<int64_t>(before);
        const std::string d = bytes ? format_bytes_delta(delta) : format_count_delta(delta);
        ImGui::Text("difference %s", d.c_str());
      } else {
        ImGui::Text("%s  (%s of all", value_text(n.value, bytes).c_str(), format_share(n.value, total).c_str());
        if (zoom_ != 0) {
          ImGui::SameLine(0, 0);
          ImGui::Text(", %s of the zoomed frame", format_share(n.value, layout_.scale_total).c_str());
        }
        ImGui::SameLine(0, 0);
        ImGui::TextUnformatted(")");
        if (n.self) ImGui::Text("self %s", value_text(n.self, bytes).c_str());
        if (bytes) ImGui::Text("%s %s", format_count(n.blocks).c_str(), n.blocks == 1 ? "block" : "blocks");
      }
      ImGui::TextDisabled("click: zoom in   right-click: zoom out");
    }
    ImGui::EndTooltip();
    if (ImGui::IsMouseClicked(ImGuiMouseButton_Left) && hover->node != kMergedNode && hover->node != zoom_) {
      for (uint32_t p : flame_path(*tree, hover->node))
        if (p != 0 && tree->nodes[p].depth > tree->nodes[zoom_].depth) zoom_path_.emplace_back(tree->nodes[p].label);
      zoom_ = hover->node;
      dirty_ = true;
    }
  }
  if (hovered_window && ImGui::IsMouseClicked(ImGuiMouseButton_Right) && zoom_ != 0) {
    zoom_ = tree->nodes[zoom_].parent;
    if (!zoom_path_.empty()) zoom_path_.pop_back();
    dirty_ = true;
  }
  ImGui::EndChild();
}

void FlamegraphView::draw(Frame& f) {
  const Snapshot& s = f.snap;
  const float sc = f.scale;
  int dir = static_cast<int>(direction);
  ImGui::RadioButton("top-down", &dir, 0);
  ImGui::SameLine();
  ImGui::RadioButton("bottom-up", &dir, 1);
  direction = static_cast<Direction>(dir);
  ImGui::SameLine(0, 16 * sc);
  domain_combo(f);
  ImGui::SetNextItemWidth(190 * sc);
  const bool windowed = s.view && !s.view->window.empty();
  if (ImGui::BeginCombo("##metric", metric_name(metric))) {
    for (unsigned m = 0; m < kMetricCount; ++m) {
      const auto mm = static_cast<Metric>(m);
      const bool enabled = mm != Metric::LiveAt || windowed;
      if (ImGui::Selectable(metric_name(mm), mm == metric, enabled ? 0 : ImGuiSelectableFlags_Disabled)) metric = mm;
      if (ImGui::IsItemHovered(ImGuiHoveredFlags_AllowWhenDisabled))
        ImGui::SetTooltip("%s%s", metric_description(mm), enabled ? "" : " (select a range on the timeline first)");
    }
    ImGui::EndCombo();
  }
  ImGui::SameLine(0, 16 * sc);
  ImGui::SetNextItemWidth(220 * sc);
  ImGui::InputTextWithHint("##search", "search function, file, module", &widget.search);
  const FlameTree* tree = s.view ? s.view->flame(f.domain, metric, direction) : nullptr;
  if (!widget.search.empty() && tree && widget.search_result().query == widget.search) {
    const FlameSearch& r = widget.search_result();
    const std::string text = std::to_string(r.matches) + (r.matches == 1 ? " frame matches, " : " frames match, ") +
                             format_share(r.matched_value, tree->total()) + " of the total";
    toolbar_next(ImGui::CalcTextSize(text.c_str()).x, ImGui::GetStyle().ItemSpacing.x);
    ImGui::TextUnformatted(text.c_str());
  }
  toolbar_next(ImGui::CalcTextSize("reset zoom").x + 2 * ImGui::GetStyle().FramePadding.x, 16 * sc);
  if (ImGui::SmallButton("reset zoom")) widget.reset_zoom();
  if (tree) {
    const bool estimate = s.summary && !s.summary->sampling_badge.empty() && f.domain != analysis::Domain::Mmap;
    const std::string total = std::string(estimate ? "total ~" : "total ") +
                              (metric_is_bytes(metric) ? format_bytes(tree->total()) : format_count(tree->total())) +
                              (estimate ? " (estimated from a sample)" : "");
    toolbar_next(ImGui::CalcTextSize(total.c_str()).x, 16 * sc);
    ImGui::TextDisabled("%s", total.c_str());
  }
  widget.draw(f, tree, metric_is_bytes(metric), "flame");
}

}  // namespace memtide::viewer
