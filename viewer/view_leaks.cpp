// Leaks: stacks with blocks not freed at the end of the trace (of the allocations in the
// selected range), sortable and filterable; the selected row's full stack below, and a button
// that copies an LSan-style suppression line for it. The heap's leaks that the suppressions
// given to the viewer match are hidden (or shown marked) and counted apart.
#include <imgui.h>
#include <imgui_stdlib.h>

#include "analysis/suppressions.h"
#include "viewer/format.h"
#include "viewer/views.h"

namespace memtide::viewer {

void LeaksView::draw(Frame& f) {
  const Snapshot& s = f.snap;
  const float sc = f.scale;
  domain_combo(f);
  const LeaksData* data = s.view ? s.view->leaks_of(f.domain) : nullptr;
  if (!data) {
    ImGui::TextDisabled("collecting the leaks...");
    return;
  }
  const bool new_data = data->serial != data_serial_;
  if (new_data) {
    data_serial_ = data->serial;
    dirty_ = true;
  }
  // Suppressions are LSan's, of heap leaks: matched once per data and list, not per frame.
  const analysis::SuppressionList* supp = f.domain == analysis::Domain::Heap ? suppressions.get() : nullptr;
  if (new_data || supp != applied_suppressions_) {
    suppressed_ = supp ? suppress_leaks(*data, *supp) : LeakSuppression{};
    applied_suppressions_ = supp;
    dirty_ = true;
  }
  if (show_suppressed != applied_show_suppressed_) dirty_ = true;
  ImGui::Text(f.domain == analysis::Domain::Mmap ? "%s still mapped at the end in %s mappings from %s stacks"
              : f.domain == analysis::Domain::Custom ? "%s of custom-pool blocks never released in %s blocks from %s stacks"
                                                     : "%s not freed in %s blocks from %s stacks",
              ((data->sampled ? "~" : "") + format_bytes(data->total_bytes)).c_str(),
              ((data->sampled ? "~" : "") + format_count(data->total_blocks)).c_str(), format_count(data->rows.size()).c_str());
  if (data->sampled) {
    uint64_t samples = 0;
    for (const LeakRow& r : data->rows) samples += r.samples;
    ImGui::SameLine();
    ImGui::TextDisabled("(estimated from %s)", (format_count(samples) + (samples == 1 ? " sample" : " samples")).c_str());
  }
  if (data->kept_range) {  // a kept trace: its leaks include blocks made before its range
    ImGui::SameLine(0, 20 * sc);
    ImGui::TextDisabled("(%s in %s allocated before the kept range)", format_bytes(data->before_range_bytes).c_str(),
                        format_count(data->before_range_blocks).c_str());
  }
  if (data->scanned) {
    ImGui::SameLine(0, 20 * sc);
    ImGui::Text("definite %s, indirect %s, still reachable %s",
                format_bytes(data->total_bytes - data->reachable_bytes - data->indirect_bytes).c_str(),
                format_bytes(data->indirect_bytes).c_str(), format_bytes(data->reachable_bytes).c_str());
    ImGui::SameLine(0, 20 * sc);
    if (ImGui::Checkbox("hide still reachable", &hide_reachable_)) dirty_ = true;
  }
  if (supp) {
    ImGui::SameLine(0, 20 * sc);
    ImGui::TextDisabled("%s (%s) suppressed", (format_count(suppressed_.blocks) + (suppressed_.blocks == 1 ? " leak" : " leaks")).c_str(),
                        format_bytes(suppressed_.bytes).c_str());
    if (ImGui::IsItemHovered()) {
      std::string used;
      for (const analysis::Suppression& x : suppressed_.items)
        if (x.stacks)
          used += "leak:" + x.pattern + " (" + x.origin + "): " + format_count(x.stacks) + (x.stacks == 1 ? " stack, " : " stacks, ") +
                  format_bytes(x.bytes) + "\n";
      if (used.empty()) used = "no suppression matched a leak\n";
      if (suppressed_.unmatched_rows)
        used += format_count(suppressed_.unmatched_rows) + " stacks beyond the frame budget were not matched\n";
      ImGui::SetTooltip("%s", used.c_str());
    }
    toolbar_next(ImGui::CalcTextSize("show suppressed").x + ImGui::GetFrameHeight() + 8 * sc, 8 * sc);
    ImGui::Checkbox("show suppressed", &show_suppressed);
  }
  ImGui::SameLine(0, 20 * sc);
  ImGui::SetNextItemWidth(260 * sc);
  ImGui::InputTextWithHint("##filter", "filter: function, file or module", &filter);
  if (filter != applied_filter_) dirty_ = true;

  const float stack_h = std::max(120 * sc, ImGui::GetContentRegionAvail().y * 0.38f);
  const ImGuiTableFlags flags = ImGuiTableFlags_Sortable | ImGuiTableFlags_ScrollY | ImGuiTableFlags_RowBg |
                                ImGuiTableFlags_BordersOuter | ImGuiTableFlags_BordersV | ImGuiTableFlags_Resizable |
                                ImGuiTableFlags_Reorderable | ImGuiTableFlags_Hideable;
  if (ImGui::BeginTable("leaks", 7, flags, ImVec2(0, -stack_h))) {
    ImGui::TableSetupScrollFreeze(0, 1);
    ImGui::TableSetupColumn("bytes", ImGuiTableColumnFlags_WidthFixed | ImGuiTableColumnFlags_DefaultSort |
                                         ImGuiTableColumnFlags_PreferSortDescending, 90 * sc, static_cast<ImGuiID>(LeakColumn::Bytes));
    ImGui::TableSetupColumn("blocks", ImGuiTableColumnFlags_WidthFixed | ImGuiTableColumnFlags_PreferSortDescending, 80 * sc,
                            static_cast<ImGuiID>(LeakColumn::Blocks));
    ImGui::TableSetupColumn("first", ImGuiTableColumnFlags_WidthFixed, 80 * sc, static_cast<ImGuiID>(LeakColumn::First));
    ImGui::TableSetupColumn("last", ImGuiTableColumnFlags_WidthFixed, 80 * sc, static_cast<ImGuiID>(LeakColumn::Last));
    ImGui::TableSetupColumn("kind", ImGuiTableColumnFlags_WidthFixed | ImGuiTableColumnFlags_NoSort |
                                        (data->scanned || data->kept_range ? 0 : ImGuiTableColumnFlags_DefaultHide),
                            110 * sc, static_cast<ImGuiID>(LeakColumn::Count_));
    ImGui::TableSetupColumn("allocation site", ImGuiTableColumnFlags_WidthStretch, 0, static_cast<ImGuiID>(LeakColumn::Site));
    ImGui::TableSetupColumn("module", ImGuiTableColumnFlags_WidthFixed, 170 * sc, static_cast<ImGuiID>(LeakColumn::Module));
    ImGui::TableHeadersRow();
    if (ImGuiTableSortSpecs* specs = ImGui::TableGetSortSpecs(); specs && (specs->SpecsDirty || dirty_)) {
      if (specs->SpecsCount > 0) {
        column_ = static_cast<LeakColumn>(specs->Specs[0].ColumnUserID);
        ascending_ = specs->Specs[0].SortDirection == ImGuiSortDirection_Ascending;
      }
      specs->SpecsDirty = false;
      dirty_ = true;
    }
    if (dirty_) {  // only when the data, the filter or the sort order changed
      order_ = filter_and_sort_leaks(*data, filter, column_, ascending_, hide_reachable_,
                                     show_suppressed ? nullptr : &suppressed_);
      applied_filter_ = filter;
      applied_show_suppressed_ = show_suppressed;
      dirty_ = false;
      if (new_data) {  // the first row listed
        selected_ = order_.empty() ? -1 : static_cast<int>(order_[0]);
        frame_ = order_.empty() ? 0 : data->rows[order_[0]].suggested;
      }
    }
    ImGuiListClipper clip;
    clip.Begin(static_cast<int>(order_.size()));
    while (clip.Step())
      for (int i = clip.DisplayStart; i < clip.DisplayEnd; ++i) {
        const uint32_t ri = order_[static_cast<std::size_t>(i)];
        const LeakRow& r = data->rows[ri];
        ImGui::TableNextRow();
        ImGui::TableNextColumn();
        ImGui::PushID(static_cast<int>(ri));
        // A sampled trace's estimates ("~"), with the samples behind them on hover.
        const bool estimate = data->sampled && r.samples;
        const std::string bytes = (estimate ? "~" : "") + format_bytes(r.bytes);
        if (ImGui::Selectable(bytes.c_str(), selected_ == static_cast<int>(ri), ImGuiSelectableFlags_SpanAllColumns)) {
          selected_ = static_cast<int>(ri);
          frame_ = r.suggested;
          copied_.clear();
        }
        if (estimate && ImGui::IsItemHovered())
          ImGui::SetTooltip("an estimate from %s of a sampled trace", (format_count(r.samples) + (r.samples == 1 ? " sample" : " samples")).c_str());
        ImGui::PopID();
        ImGui::TableNextColumn();
        ImGui::TextUnformatted(((estimate ? "~" : "") + format_count(r.blocks)).c_str());
        ImGui::TableNextColumn();
        ImGui::TextUnformatted(format_duration(r.first).c_str());
        ImGui::TableNextColumn();
        ImGui::TextUnformatted(format_duration(r.last).c_str());
        ImGui::TableNextColumn();
        ImGui::TextUnformatted(leak_kind(*data, r).c_str());
        ImGui::TableNextColumn();
        if (suppressed_.suppressed(ri)) {  // (listed with "show suppressed")
          const analysis::Suppression& x = suppressed_.items[static_cast<std::size_t>(suppressed_.by_row[ri])];
          ImGui::TextDisabled("%s  (suppressed: leak:%s)", r.site.c_str(), x.pattern.c_str());
        } else {
          ImGui::TextUnformatted(r.site.c_str());
        }
        ImGui::TableNextColumn();
        ImGui::TextDisabled("%s", r.module.c_str());
      }
    ImGui::EndTable();
  }

  // The selected row's stack.
  if (selected_ < 0 || static_cast<std::size_t>(selected_) >= data->rows.size()) {
    ImGui::TextDisabled("select a row to see its stack");
    return;
  }
  const LeakRow& r = data->rows[static_cast<std::size_t>(selected_)];
  const std::string line = suppression_line(r, frame_);
  if (ImGui::Button("Copy suppression")) {
    ImGui::SetClipboardText(line.c_str());
    copied_ = line;
  }
  ImGui::SameLine();
  ImGui::TextUnformatted(line.c_str());
  if (!copied_.empty()) {
    ImGui::SameLine();
    ImGui::TextDisabled("(copied; click a frame to name another function)");
  } else {
    ImGui::SameLine();
    ImGui::TextDisabled("(click a frame to name another function)");
  }
  // What else the line would hide: a wrapper's name hides every leak that comes later.
  const SuppressionReach reach = suppression_reach(*data, r, frame_);
  if (reach.share > analysis::FunctionSpread::kWidespread) {
    ImGui::TextColored(ImVec4(1.f, 0.6f, 0.3f, 1.f),
                       "this function is in %.0f%% of the program's allocations: the line would hide more than this leak",
                       reach.share * 100);
  } else if (reach.other_rows) {
    ImGui::TextColored(ImVec4(1.f, 0.6f, 0.3f, 1.f), "the line also matches %s other leaking stacks (%s)",
                       format_count(reach.other_rows).c_str(), format_bytes(reach.other_bytes).c_str());
  } else {
    ImGui::TextDisabled("the line matches this leak only");
  }
  if (ImGui::BeginTable("stack", 3, ImGuiTableFlags_ScrollY | ImGuiTableFlags_RowBg | ImGuiTableFlags_BordersOuter |
                                        ImGuiTableFlags_Resizable)) {
    ImGui::TableSetupScrollFreeze(0, 1);
    ImGui::TableSetupColumn("function", ImGuiTableColumnFlags_WidthStretch);
    ImGui::TableSetupColumn("location", ImGuiTableColumnFlags_WidthFixed, 200 * sc);
    ImGui::TableSetupColumn("module", ImGuiTableColumnFlags_WidthFixed, 260 * sc);
    ImGui::TableHeadersRow();
    ImGuiListClipper clip;
    clip.Begin(static_cast<int>(r.frames.size()));
    while (clip.Step())
      for (int i = clip.DisplayStart; i < clip.DisplayEnd; ++i) {
        const LeakFrame& fr = r.frames[static_cast<std::size_t>(i)];
        ImGui::TableNextRow();
        ImGui::TableNextColumn();
        char label[64];
        std::snprintf(label, sizeof label, "#%d%s##f%d", i, fr.inlined ? " (inlined)" : "", i);
        if (ImGui::Selectable(label, frame_ == static_cast<std::size_t>(i), ImGuiSelectableFlags_SpanAllColumns)) {
          frame_ = static_cast<std::size_t>(i);
          copied_.clear();
        }
        ImGui::SameLine();
        ImGui::TextUnformatted(fr.function.c_str());
        ImGui::TableNextColumn();
        ImGui::TextDisabled("%s", fr.location.c_str());
        ImGui::TableNextColumn();
        ImGui::TextDisabled("%s", fr.module.c_str());
      }
    ImGui::EndTable();
  }
}

}  // namespace memtide::viewer
