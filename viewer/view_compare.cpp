// Compare: this trace against a baseline trace: totals side by side, a flamegraph coloured by
// the difference (red: grew, blue: shrank), and the allocation sites with both values. With a
// selection, both traces are restricted to the allocations made in the same range of times
// since their start (and the metric "live at end of selection" compares what each kept).
#include <imgui.h>
#include <imgui_stdlib.h>

#include "viewer/format.h"
#include "viewer/views.h"

namespace memtide::viewer {

using analysis::Metric;

namespace {

std::string value(uint64_t v, bool bytes) { return bytes ? format_bytes(v) : format_count(v); }
std::string delta(int64_t d, bool bytes) { return bytes ? format_bytes_delta(d) : format_count_delta(d); }

}  // namespace

void CompareView::draw(Frame& f) {
  const Snapshot& s = f.snap;
  const float sc = f.scale;
  const Palette& pal = palette(f.dark);
  const CompareData* c = s.compare.get();
  if (!c) {
    ImGui::TextWrapped("Compare this trace with a baseline (an older run of the same program): the flamegraph is "
                       "coloured by the difference and the allocation sites list both values.");
    if (ImGui::Button("Open baseline trace...")) want_browse = true;
    return;
  }
  if (!c->error.empty()) {
    ImGui::TextColored(ImGui::ColorConvertU32ToFloat4(pal.warn), "Cannot open the baseline %s: %s", c->path.c_str(),
                       c->error.c_str());
    if (ImGui::Button("Open another baseline...")) want_browse = true;
    return;
  }
  if (!c->complete || !c->model || !c->after) {
    if (c->window.empty())
      ImGui::TextDisabled("comparing with %s...", c->path.c_str());
    else
      ImGui::TextDisabled("comparing %s .. %s of both traces with %s...", format_duration(c->window.from).c_str(),
                          format_duration(c->window.to).c_str(), c->path.c_str());
    return;
  }
  const analysis::Model& a = *c->model;
  const analysis::Model& b = *c->after;
  const bool windowed = !c->window.empty();
  domain_combo(f);
  const auto dom = static_cast<unsigned>(f.domain);
  const analysis::Totals& ta = a.totals[dom];
  const analysis::Totals& tb = b.totals[dom];
  ImGui::Text("baseline %s", c->path.c_str());
  ImGui::SameLine();
  if (ImGui::SmallButton("change...")) want_browse = true;
  // What is compared, in words: the selection applies to both traces.
  if (windowed)
    ImGui::TextColored(ImGui::ColorConvertU32ToFloat4(pal.heap),
                       "Comparing the allocations made %s .. %s after the start of each trace (the selection)",
                       format_duration(c->window.from).c_str(), format_duration(c->window.to).c_str());
  else
    ImGui::TextDisabled("Comparing the whole traces (select a range on the timeline to compare that range of both)");
  if (s.view && s.view->window != c->window) {
    ImGui::SameLine();
    ImGui::TextDisabled("(following the new selection...)");
  }
  if (ImGui::BeginTable("totals", 4, ImGuiTableFlags_SizingFixedFit | ImGuiTableFlags_BordersInnerH)) {
    ImGui::TableSetupColumn("");
    ImGui::TableSetupColumn("baseline");
    ImGui::TableSetupColumn("this trace");
    ImGui::TableSetupColumn("difference");
    ImGui::TableHeadersRow();
    auto row = [&](const char* name, uint64_t x, uint64_t y, bool bytes) {
      ImGui::TableNextRow();
      ImGui::TableNextColumn();
      ImGui::TextDisabled("%s", name);
      ImGui::TableNextColumn();
      ImGui::TextUnformatted(value(x, bytes).c_str());
      ImGui::TableNextColumn();
      ImGui::TextUnformatted(value(y, bytes).c_str());
      ImGui::TableNextColumn();
      const int64_t d = static_cast<int64_t>(y) - static_cast<int64_t>(x);
      ImGui::TextColored(ImGui::ColorConvertU32ToFloat4(d > 0 ? pal.warn : d < 0 ? pal.heap : pal.text_dim), "%s",
                         delta(d, bytes).c_str());
    };
    row(f.domain == analysis::Domain::Mmap ? "mappings" : "allocations", ta.allocations, tb.allocations, false);
    row(f.domain == analysis::Domain::Mmap ? "mapped" : "allocated", ta.allocated_bytes, tb.allocated_bytes, true);
    row(f.domain == analysis::Domain::Heap ? "peak heap" : "peak", ta.peak_bytes, tb.peak_bytes, true);
    row(f.domain == analysis::Domain::Mmap ? "still mapped" : "not freed", ta.leaked_bytes, tb.leaked_bytes, true);
    if (windowed) row("live at end of selection", ta.at_bytes, tb.at_bytes, true);
    row("peak RSS (whole trace)", a.peak_rss, b.peak_rss, true);
    ImGui::EndTable();
  }

  ImGui::SetNextItemWidth(190 * sc);
  if (ImGui::BeginCombo("##cmetric", metric_name(metric))) {
    for (unsigned m = 0; m < kMetricCount; ++m) {
      const auto mm = static_cast<Metric>(m);
      const bool enabled = mm != Metric::LiveAt || windowed;  // whole traces have no selected range
      if (ImGui::Selectable(metric_name(mm), mm == metric, enabled ? 0 : ImGuiSelectableFlags_Disabled)) metric = mm;
      if (ImGui::IsItemHovered(ImGuiHoveredFlags_AllowWhenDisabled))
        ImGui::SetTooltip("%s%s", metric_description(mm), enabled ? "" : " (select a range on the timeline first)");
    }
    ImGui::EndCombo();
  }
  ImGui::SameLine(0, 16 * sc);
  ImGui::Checkbox("widths from the baseline", &shape_of_before);
  ImGui::SameLine(0, 16 * sc);
  ImGui::TextDisabled("red: grew   blue: shrank");
  const bool bytes = metric_is_bytes(metric);
  const unsigned mi = static_cast<unsigned>(metric);

  const float avail = ImGui::GetContentRegionAvail().y;
  ImGui::BeginChild("cflame", ImVec2(0, avail * 0.55f), false);
  const FlameTree* flame = c->flames[dom][mi][shape_of_before ? 1 : 0].get();
  if (!flame && f.domain != analysis::Domain::Heap)
    ImGui::TextDisabled("comparing the %s...", domain_title(f.domain));
  widget.draw(f, flame, bytes, "diffflame");
  ImGui::EndChild();

  const std::vector<DiffRow>* rows = c->sites[dom][mi].get();
  if (!rows) return;
  const uint64_t key = (c->serial * analysis::kDomainCount + dom) * kMetricCount + mi;
  if (key != rows_key_) {
    rows_key_ = key;
    dirty_ = true;
  }
  ImGui::SetNextItemWidth(260 * sc);
  ImGui::InputTextWithHint("##cfilter", "filter allocation sites", &filter_);
  if (filter_ != applied_filter_) dirty_ = true;
  if (ImGui::BeginTable("sites", 5,
                        ImGuiTableFlags_Sortable | ImGuiTableFlags_ScrollY | ImGuiTableFlags_RowBg |
                            ImGuiTableFlags_BordersOuter | ImGuiTableFlags_Resizable)) {
    ImGui::TableSetupScrollFreeze(0, 1);
    ImGui::TableSetupColumn("allocation site", ImGuiTableColumnFlags_WidthStretch, 0, static_cast<ImGuiID>(DiffColumn::Label));
    ImGui::TableSetupColumn("module", ImGuiTableColumnFlags_WidthFixed | ImGuiTableColumnFlags_NoSort, 160 * sc, 100);
    ImGui::TableSetupColumn("baseline", ImGuiTableColumnFlags_WidthFixed | ImGuiTableColumnFlags_PreferSortDescending, 100 * sc,
                            static_cast<ImGuiID>(DiffColumn::Before));
    ImGui::TableSetupColumn("this trace", ImGuiTableColumnFlags_WidthFixed | ImGuiTableColumnFlags_PreferSortDescending,
                            100 * sc, static_cast<ImGuiID>(DiffColumn::After));
    ImGui::TableSetupColumn("difference",
                            ImGuiTableColumnFlags_WidthFixed | ImGuiTableColumnFlags_DefaultSort |
                                ImGuiTableColumnFlags_PreferSortDescending,
                            110 * sc, static_cast<ImGuiID>(DiffColumn::Delta));
    ImGui::TableHeadersRow();
    if (ImGuiTableSortSpecs* sp = ImGui::TableGetSortSpecs(); sp && sp->SpecsDirty) {
      if (sp->SpecsCount > 0) {
        column_ = static_cast<DiffColumn>(sp->Specs[0].ColumnUserID);
        ascending_ = sp->Specs[0].SortDirection == ImGuiSortDirection_Ascending;
      }
      sp->SpecsDirty = false;
      dirty_ = true;
    }
    if (dirty_) {
      order_ = filter_and_sort_diff(*rows, filter_, column_, ascending_);
      applied_filter_ = filter_;
      dirty_ = false;
    }
    ImGuiListClipper clip;
    clip.Begin(static_cast<int>(order_.size()));
    while (clip.Step())
      for (int i = clip.DisplayStart; i < clip.DisplayEnd; ++i) {
        const DiffRow& r = (*rows)[order_[static_cast<std::size_t>(i)]];
        ImGui::TableNextRow();
        ImGui::TableNextColumn();
        ImGui::TextUnformatted(r.label.c_str());
        ImGui::TableNextColumn();
        ImGui::TextDisabled("%s", r.module.c_str());
        ImGui::TableNextColumn();
        ImGui::TextUnformatted(value(r.before, bytes).c_str());
        ImGui::TableNextColumn();
        ImGui::TextUnformatted(value(r.after, bytes).c_str());
        ImGui::TableNextColumn();
        const int64_t d = r.delta();
        ImGui::TextColored(ImGui::ColorConvertU32ToFloat4(d > 0 ? pal.warn : d < 0 ? pal.heap : pal.text_dim), "%s",
                           delta(d, bytes).c_str());
      }
    ImGui::EndTable();
  }
}

}  // namespace memtide::viewer
