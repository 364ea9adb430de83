// Summary: the process, totals, peaks, what was not freed, warnings; with a selection, the
// selected range's numbers beside the whole trace's.
#include <imgui.h>

#include "viewer/views.h"

namespace memtide::viewer {

namespace {

void draw_sections(const SummaryData& d, const Palette& pal, float scale, const char* id, std::size_t first = 0) {
  for (std::size_t i = first; i < d.sections.size(); ++i) {
    const SummarySection& sec = d.sections[i];
    ImGui::Spacing();
    ImGui::TextUnformatted(sec.title.c_str());
    ImGui::Separator();
    const std::string tid = std::string(id) + sec.title;
    if (ImGui::BeginTable(tid.c_str(), 2, ImGuiTableFlags_SizingFixedFit)) {
      ImGui::TableSetupColumn("k", ImGuiTableColumnFlags_WidthFixed, 130 * scale);
      ImGui::TableSetupColumn("v", ImGuiTableColumnFlags_WidthStretch);
      for (const SummaryRow& r : sec.rows) {
        ImGui::TableNextRow();
        ImGui::TableNextColumn();
        ImGui::TextDisabled("%s", r.label.c_str());
        ImGui::TableNextColumn();
        if (r.emphasis)
          ImGui::TextColored(ImGui::ColorConvertU32ToFloat4(pal.warn), "%s", r.value.c_str());
        else
          ImGui::TextWrapped("%s", r.value.c_str());
      }
      ImGui::EndTable();
    }
  }
}

}  // namespace

void SummaryView::draw(Frame& f) {
  const Snapshot& s = f.snap;
  const Palette& pal = palette(f.dark);
  if (!s.summary) return;
  const bool windowed = s.view && !s.view->window.empty() && s.view->summary;
  if (windowed && ImGui::BeginTable("summary-split", 2, ImGuiTableFlags_BordersInnerV)) {
    ImGui::TableNextRow();
    ImGui::TableNextColumn();
    ImGui::TextUnformatted("Whole trace");
    draw_sections(*s.summary, pal, f.scale, "whole");
    ImGui::TableNextColumn();
    ImGui::TextUnformatted("Selected range");
    draw_sections(*s.view->summary, pal, f.scale, "window", 1);  // the process is the same: not twice
    ImGui::EndTable();
  } else {
    draw_sections(*s.summary, pal, f.scale, "whole");
  }
  const bool symbol_notes = s.symbol_problems && !s.symbol_problems->empty();
  if (!s.summary->warnings.empty() || symbol_notes) {
    ImGui::Spacing();
    ImGui::TextUnformatted("Warnings");
    ImGui::Separator();
    for (const std::string& w : s.summary->warnings)
      ImGui::TextColored(ImGui::ColorConvertU32ToFloat4(pal.warn), "! %s", w.c_str());
    if (symbol_notes)
      for (const std::string& w : *s.symbol_problems)
        ImGui::TextColored(ImGui::ColorConvertU32ToFloat4(pal.text_dim), "symbols: %s", w.c_str());
  }
}

}  // namespace memtide::viewer
